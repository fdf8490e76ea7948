// The pieces `tpgraph check` and `bench` drive, on a real GPU: a throw inside capture_graph leaves
// the stream usable; the one error type keeps the API and status of every failed call; the scenario
// runner's poison / launch / wait / rank_output give the layer output the join reduce sums, the
// same bits every replay, and a variant prepared apart has buffers of its own.
#include <cuda_runtime_api.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "catch.hpp"
#include "core/base/stats.hpp"
#include "core/model/scenario.hpp"
#include "cuda/capture.hpp"
#include "cuda/owners.hpp"
#include "cuda/scenario_runner.hpp"
#include "cuda_error/error.hpp"
#include "cuda_error/error_cublas.hpp"
#include "cupti/error.hpp"

namespace cuda = tpgraph::cuda;
using tpgraph::Scenario;

namespace {

Scenario tiny(tpgraph::JoinKind join) {
  Scenario s = tpgraph::resolve_scenario("baseline", std::filesystem::path(TPGRAPH_SOURCE_DIR) / "graphs");
  s.geometry.experts = 8;
  s.geometry.top_k = 2;
  s.geometry.hidden = 128;
  s.geometry.ff = 128;
  s.geometry.tokens = 64;
  s.geometry.ranks = 2;
  s.devices = {0, 0};
  s.join = join;
  tpgraph::validate(s);
  return s;
}

cuda::RunnerSettings untraced() {
  cuda::RunnerSettings settings;
  settings.trace = false;
  settings.check_tokens = 16;
  return settings;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<float> run_once(cuda::PreparedVariant& v) {
  v.poison();
  v.launch();
  v.wait();
  return v.rank_output(0);
}

}  // namespace

TEST_CASE("a throw inside capture_graph ends the capture and leaves the stream usable", "[capture][errors]") {
  const cuda::DeviceScope scope(0);
  const cuda::Stream stream = cuda::make_stream(0);
  const cuda::DeviceBuffer<float> buffer(0, 256);
  CHECK_THROWS_AS(cuda::capture_graph(stream.get(), 0,
                                      [&] {
                                        TPG_CUDA(cudaMemsetAsync(buffer.get(), 0, buffer.bytes(), stream.get()));
                                        throw std::runtime_error("inside the capture");
                                      }),
                  std::runtime_error);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusActive;
  TPG_CUDA(cudaStreamIsCapturing(stream.get(), &status));
  CHECK(status == cudaStreamCaptureStatusNone);
  // The stream takes ordinary work again, and a second capture on it succeeds.
  TPG_CUDA(cudaMemsetAsync(buffer.get(), 0, buffer.bytes(), stream.get()));
  TPG_CUDA(cudaStreamSynchronize(stream.get()));
  const cuda::Graph graph = cuda::capture_graph(stream.get(), 0, [&] {
    TPG_CUDA(cudaMemsetAsync(buffer.get(), 1, buffer.bytes(), stream.get()));
  });
  std::size_t nodes = 0;
  TPG_CUDA(cudaGraphGetNodes(graph.get(), nullptr, &nodes));
  CHECK(nodes == 1);
}

TEST_CASE("every API's failure is one CudaError with its API, status and one message format", "[errors]") {
  const auto message_of = [](auto&& call) {
    try {
      call();
    } catch (const cuda::CudaError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  SECTION("runtime") {
    try {
      cuda::check(cudaErrorInvalidValue, "cudaMemcpy(test)");
      FAIL("no throw");
    } catch (const cuda::CudaError& e) {
      CHECK(e.api() == cuda::Api::runtime);
      CHECK(e.status() == static_cast<int>(cudaErrorInvalidValue));
      const std::string what = e.what();
      CHECK(what.rfind("cudaMemcpy(test) failed: ", 0) == 0);
      CHECK(what.find("(cudaErrorInvalidValue) at ") != std::string::npos);
      CHECK(what.find('\n') == std::string::npos);
    }
    // A real failure is recorded as the runtime's last error; the check clears it, so the next
    // launch check does not report it a second time.
    int device = 0;
    TPG_CUDA(cudaGetDevice(&device));
    CHECK_THROWS_AS(TPG_CUDA(cudaSetDevice(1 << 20)), cuda::CudaError);
    CHECK(cudaGetLastError() == cudaSuccess);
    TPG_CUDA(cudaSetDevice(device));
  }
  SECTION("driver") {
    const std::string what = message_of([] { cuda::check(CUDA_ERROR_INVALID_VALUE, "cuTest"); });
    CHECK(what.rfind("cuTest failed: ", 0) == 0);
    CHECK(what.find("CUDA_ERROR_INVALID_VALUE") != std::string::npos);
  }
  SECTION("cuBLAS") {
    const std::string what = message_of([] { cuda::check(CUBLAS_STATUS_INVALID_VALUE, "cublasTest"); });
    CHECK(what.find("cublasTest failed: ") == 0);
    CHECK(what.find("CUBLAS_STATUS_INVALID_VALUE") != std::string::npos);
  }
  SECTION("CUPTI") {
    const std::string what = message_of([] { tpgraph::cupti::check(CUPTI_ERROR_INVALID_PARAMETER, "cuptiTest"); });
    CHECK(what.find("cuptiTest failed: ") == 0);
    CHECK(what.find("CUPTI_ERROR_INVALID_PARAMETER") != std::string::npos);
  }
  SECTION("driver entry points") {
    CHECK(cuda::driver_entry_point("cuCtxSynchronize") != nullptr);
    CHECK(cuda::find_driver_entry_point("cuNoSuchFunction") == nullptr);
    const std::string what = message_of([] { (void)cuda::driver_entry_point("cuNoSuchFunction"); });
    CHECK(what.find("cuNoSuchFunction") != std::string::npos);
  }
}

TEST_CASE("check's layer through the runner: the join reduce sums the ranks' outputs, bit for bit, every replay",
          "[runner][check]") {
  cuda::ScenarioRunner runner(nullptr, untraced(), {});
  std::vector<float> rank0, rank1;
  {
    const auto ranks = runner.prepare(tiny(tpgraph::JoinKind::none));
    (void)run_once(*ranks);
    rank0 = ranks->rank_output(0);
    rank1 = ranks->rank_output(1);
  }
  REQUIRE_FALSE(tpgraph::stats::guard_of(rank0).vacuous());
  REQUIRE(tpgraph::stats::guard_of(rank0).nan_count == 0);
  std::vector<float> sum(rank0.size());
  for (std::size_t i = 0; i < sum.size(); ++i) sum[i] = rank0[i] + rank1[i];

  const auto layer = runner.prepare(tiny(tpgraph::JoinKind::reduce));
  const std::vector<float> first = run_once(*layer);
  CHECK(same_bits(first, sum));
  CHECK(same_bits(run_once(*layer), first));
  CHECK(layer->check_output().passed());

  // Poison alone leaves NaN where the layer output was: the replay is what wrote it.
  layer->poison();
  CHECK(tpgraph::stats::guard_of(layer->rank_output(0)).nan_count == static_cast<std::int64_t>(first.size()));

  // A variant prepared apart runs beside the first on buffers of its own.
  const auto noise = runner.prepare_apart(tiny(tpgraph::JoinKind::reduce));
  layer->poison();
  noise->launch();
  layer->launch();
  noise->launch();
  layer->wait();
  noise->wait();
  CHECK(same_bits(layer->rank_output(0), first));
  CHECK(same_bits(noise->rank_output(0), first));
}
