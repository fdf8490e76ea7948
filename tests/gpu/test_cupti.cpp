// The CUPTI collector on a real GPU: every record of a replayed graph comes back once, tied to the
// node that issued it and the replay it belongs to, with clean collection health.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "core/records/records.hpp"
#include "cuda/capture.hpp"
#include "cuda/owners.hpp"
#include "cupti/collector.hpp"
#include "kernels/kernels.hpp"

using tpgraph::ActivityKind;
using tpgraph::ActivityRecord;
using tpgraph::CollectionHealth;
using tpgraph::cupti::Collector;
namespace cuda = tpgraph::cuda;

namespace {

constexpr int kDevice = 0;
constexpr std::size_t kBytes = std::size_t{1} << 20;
constexpr int kFloats = static_cast<int>(kBytes / sizeof(float));

// The node just added to `stream`'s capture: its only dependency for the next node.
cudaGraphNode_t last_captured(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaGraphNode_t* deps = nullptr;
  std::size_t count = 0;
  TPG_CUDA(cudaStreamGetCaptureInfo(stream, &status, nullptr, nullptr, &deps, nullptr, &count));
  REQUIRE(status == cudaStreamCaptureStatusActive);
  REQUIRE(count == 1);
  return deps[0];
}

class Cublas {
 public:
  Cublas() { REQUIRE(cublasCreate(&handle_) == CUBLAS_STATUS_SUCCESS); }
  ~Cublas() { (void)cublasDestroy(handle_); }
  Cublas(const Cublas&) = delete;
  Cublas& operator=(const Cublas&) = delete;
  [[nodiscard]] cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// Two streams, forked and joined by events, with memset, memcpy and kernel nodes (ours and cuBLAS's):
//   s0: memset a (0) -> fork -> memcpy a->c (2) -> swiglu(a, c) -> e (3) -> join -> memset c (6)
//   s1:                  memset b (1) -> memcpy b->d (4) -> saxpy d += b/2 (5) -> join
struct TwoStreamGraph {
  static constexpr int kNodes = 7;
  static constexpr int kSwigluNode = 3;
  static constexpr std::array<ActivityKind, kNodes> kind = {ActivityKind::memset, ActivityKind::memset,
                                                            ActivityKind::memcpy, ActivityKind::kernel,
                                                            ActivityKind::memcpy, ActivityKind::kernel,
                                                            ActivityKind::memset};

  cuda::Stream s0 = cuda::make_stream(kDevice);
  cuda::Stream s1 = cuda::make_stream(kDevice);
  cuda::Event fork = cuda::make_event(kDevice, false);
  cuda::Event join = cuda::make_event(kDevice, false);
  cuda::DeviceBuffer<float> a{kDevice, kFloats}, b{kDevice, kFloats}, c{kDevice, kFloats}, d{kDevice, kFloats},
      e{kDevice, kFloats};
  Cublas blas;
  cuda::Graph graph;

  // Setup (allocations, the cuBLAS handle) happens before the caller's begin_variant; only the
  // capture after it.
  void capture(Collector& cupti) {
    cuda::DeviceScope scope(kDevice);
    REQUIRE(cublasSetStream(blas.get(), s1.get()) == CUBLAS_STATUS_SUCCESS);
    const float alpha = 0.5f;
    cudaStream_t t0 = s0.get();
    cudaStream_t t1 = s1.get();
    graph = cuda::capture_graph(t0, kDevice, [&] {
      TPG_CUDA(cudaMemsetAsync(a.get(), 1, kBytes, t0));
      cupti.map_node(last_captured(t0), 0);
      TPG_CUDA(cudaEventRecord(fork.get(), t0));
      TPG_CUDA(cudaStreamWaitEvent(t1, fork.get()));
      TPG_CUDA(cudaMemsetAsync(b.get(), 0, kBytes, t1));
      cupti.map_node(last_captured(t1), 1);
      TPG_CUDA(cudaMemcpyAsync(c.get(), a.get(), kBytes, cudaMemcpyDefault, t0));
      cupti.map_node(last_captured(t0), 2);
      tpgraph::kernels::swiglu(a.get(), c.get(), kFloats, e.get(), t0);
      cupti.map_node(last_captured(t0), kSwigluNode);
      TPG_CUDA(cudaMemcpyAsync(d.get(), b.get(), kBytes, cudaMemcpyDefault, t1));
      cupti.map_node(last_captured(t1), 4);
      REQUIRE(cublasSaxpy(blas.get(), kFloats, &alpha, b.get(), 1, d.get(), 1) == CUBLAS_STATUS_SUCCESS);
      cupti.map_node(last_captured(t1), 5);
      TPG_CUDA(cudaEventRecord(join.get(), t1));
      TPG_CUDA(cudaStreamWaitEvent(t0, join.get()));
      TPG_CUDA(cudaMemsetAsync(c.get(), 2, kBytes, t0));
      cupti.map_node(last_captured(t0), 6);
    });
  }
};

using NodeReplay = std::pair<int, int>;

std::map<NodeReplay, int> count_by_node_and_replay(const std::vector<ActivityRecord>& records) {
  std::map<NodeReplay, int> counts;
  for (const ActivityRecord& r : records) ++counts[{r.node, r.replay}];
  return counts;
}

}  // namespace

TEST_CASE("a replayed graph gives one record per node per replay, tied to node and replay", "[cupti][gpu]") {
  Collector cupti;  // before any capture
  TwoStreamGraph g;
  cupti.begin_variant();
  g.capture(cupti);
  cuda::GraphExec exec = cuda::instantiate(g.graph);

  constexpr int kReplays = 20;
  {
    const auto warm_up = cupti.tag(-1);
    TPG_CUDA(cudaGraphLaunch(exec.get(), g.s0.get()));
  }
  for (int replay = 0; replay < kReplays; ++replay) {
    const auto tag = cupti.tag(replay);
    TPG_CUDA(cudaGraphLaunch(exec.get(), g.s0.get()));
  }
  CollectionHealth health;
  const std::vector<ActivityRecord> records = cupti.collect(health);

  INFO("dropped " << health.dropped << ", no timestamp " << health.no_timestamp << ", unmatched " << health.unmatched
                  << ", records " << records.size());
  CHECK(health.clean());
  CHECK(records.size() == std::size_t{TwoStreamGraph::kNodes} * (kReplays + 1));
  const auto counts = count_by_node_and_replay(records);
  for (int node = 0; node < TwoStreamGraph::kNodes; ++node) {
    for (int replay = -1; replay < kReplays; ++replay) {
      const auto found = counts.find({node, replay});
      INFO("node " << node << " replay " << replay);
      CHECK((found != counts.end() && found->second == 1));
    }
  }
  for (const ActivityRecord& r : records) {
    INFO("node " << r.node << " replay " << r.replay << " " << r.name);
    CHECK(r.start_ns <= r.end_ns);
    CHECK(r.graph_node_id != 0);
    CHECK(r.device == kDevice);
    if (r.node >= 0 && r.node < TwoStreamGraph::kNodes) {
      CHECK(r.kind == TwoStreamGraph::kind[static_cast<std::size_t>(r.node)]);
      if (r.kind != ActivityKind::kernel) CHECK(r.bytes == static_cast<std::int64_t>(kBytes));
      if (r.node == TwoStreamGraph::kSwigluNode) CHECK(r.name.str().find("swiglu") != std::string::npos);
    }
  }
}

TEST_CASE("eager work is tied to the node and replay of its tag", "[cupti][gpu]") {
  Collector cupti;
  cuda::DeviceScope scope(kDevice);
  cuda::Stream stream = cuda::make_stream(kDevice);
  cuda::DeviceBuffer<float> a(kDevice, kFloats), c(kDevice, kFloats);
  cupti.begin_variant();

  constexpr int kReplays = 10;
  constexpr int kMemsetNode = 7;
  constexpr int kCopyNode = 8;
  for (int replay = 0; replay < kReplays; ++replay) {
    {
      const auto tag = cupti.tag(replay, kMemsetNode);
      TPG_CUDA(cudaMemsetAsync(a.get(), 3, kBytes, stream.get()));
    }
    const auto tag = cupti.tag(replay, kCopyNode);
    TPG_CUDA(cudaMemcpyAsync(c.get(), a.get(), kBytes, cudaMemcpyDefault, stream.get()));
  }
  CollectionHealth health;
  const std::vector<ActivityRecord> records = cupti.collect(health);

  INFO("unmatched " << health.unmatched << ", records " << records.size());
  CHECK(health.clean());
  CHECK(records.size() == std::size_t{2} * kReplays);
  const auto counts = count_by_node_and_replay(records);
  for (int replay = 0; replay < kReplays; ++replay) {
    INFO("replay " << replay);
    CHECK(counts.count({kMemsetNode, replay}) == 1);
    CHECK(counts.count({kCopyNode, replay}) == 1);
  }
  for (const ActivityRecord& r : records) {
    CHECK(r.graph_node_id == 0);
    CHECK(r.kind == (r.node == kMemsetNode ? ActivityKind::memset : ActivityKind::memcpy));
  }
}

TEST_CASE("records lie between CUPTI timestamps taken on the host around the work", "[cupti][gpu]") {
  Collector cupti;
  cuda::DeviceScope scope(kDevice);
  cuda::Stream stream = cuda::make_stream(kDevice);
  cuda::DeviceBuffer<float> a(kDevice, kFloats);
  cupti.begin_variant();

  const std::uint64_t before = Collector::timestamp_ns();
  {
    const auto tag = cupti.tag(0, 0);
    TPG_CUDA(cudaMemsetAsync(a.get(), 0, kBytes, stream.get()));
  }
  TPG_CUDA(cudaStreamSynchronize(stream.get()));
  const std::uint64_t after = Collector::timestamp_ns();
  CollectionHealth health;
  const std::vector<ActivityRecord> records = cupti.collect(health);

  REQUIRE(before > 0);
  REQUIRE(records.size() == 1);
  CHECK(records[0].start_ns >= before);
  CHECK(records[0].end_ns <= after);
}

TEST_CASE("with tracing off a replay leaves no record; back on, every replay is recorded", "[cupti][gpu]") {
  Collector cupti;
  TwoStreamGraph g;
  cupti.begin_variant();
  g.capture(cupti);
  cuda::GraphExec exec = cuda::instantiate(g.graph);

  cupti.set_tracing(false);
  for (int i = 0; i < 5; ++i) {
    const auto tag = cupti.tag(-2);
    TPG_CUDA(cudaGraphLaunch(exec.get(), g.s0.get()));
  }
  TPG_CUDA(cudaStreamSynchronize(g.s0.get()));
  cupti.set_tracing(true);
  constexpr int kReplays = 5;
  for (int replay = 0; replay < kReplays; ++replay) {
    const auto tag = cupti.tag(replay);
    TPG_CUDA(cudaGraphLaunch(exec.get(), g.s0.get()));
  }
  CollectionHealth health;
  const std::vector<ActivityRecord> records = cupti.collect(health);

  INFO("records " << records.size() << ", unmatched " << health.unmatched);
  CHECK(health.clean());
  CHECK(records.size() == std::size_t{TwoStreamGraph::kNodes} * kReplays);
  for (const ActivityRecord& r : records) CHECK(r.replay >= 0);
}

TEST_CASE("a second collector in the process is refused", "[cupti][gpu]") {
  const Collector first;
  CHECK_THROWS_AS(Collector(), std::logic_error);
  CHECK(Collector::cupti_version() >= 130000);
}
