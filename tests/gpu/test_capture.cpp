// Capture and replay of the layer graph on a real GPU, two ranks sharing GPU 0 on their own streams:
// every built-in variant captures as the layer graph says, replays, and computes the CPU reference's
// output; the checks refuse what they must; and replaying a graph 100,000 times grows neither device
// nor host memory.
#include <cuda_runtime_api.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "catch.hpp"
#include "core/base/error.hpp"
#include "core/model/layer_graph.hpp"
#include "core/model/scenario.hpp"
#include "core/numerics/router.hpp"
#include "cuda/capture.hpp"
#include "cuda/owners.hpp"
#include "cuda/scenario_runner.hpp"
#include "cuda_error/error.hpp"

namespace cuda = tpgraph::cuda;
using tpgraph::CudaNodeType;
using tpgraph::Scenario;

namespace {

// Small enough to replay fast, large enough for every code path: tile-misaligned expert groups
// (64 tokens x top-2 over 8 experts), several GEMM row blocks, two ranks on one GPU.
Scenario small(const std::string& name) {
  Scenario s = tpgraph::resolve_scenario(name, std::filesystem::path(TPGRAPH_SOURCE_DIR) / "graphs");
  s.geometry.experts = 8;
  s.geometry.top_k = 2;
  s.geometry.hidden = 128;
  s.geometry.ff = 128;
  s.geometry.tokens = 64;
  s.geometry.ranks = 2;
  s.devices = {0, 0};
  s.replays = 3;
  s.warmup = 1;
  tpgraph::validate(s);
  return s;
}

cuda::RunnerSettings untraced() {
  cuda::RunnerSettings settings;
  settings.trace = false;
  settings.check_tokens = 16;
  return settings;
}

std::string_view type_name(cudaGraphNodeType t) {
  switch (t) {
    case cudaGraphNodeTypeKernel: return "kernel";
    case cudaGraphNodeTypeMemcpy: return "memcpy";
    case cudaGraphNodeTypeMemAlloc: return "mem_alloc";
    case cudaGraphNodeTypeMemFree: return "mem_free";
    case cudaGraphNodeTypeEventRecord: return "event_record";
    default: return "other";
  }
}

std::int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<std::int64_t>(::sysconf(_SC_PAGESIZE));
}

std::int64_t device_free_bytes() { return static_cast<std::int64_t>(cuda::memory_info(0).free); }

}  // namespace

TEST_CASE("every built-in variant captures, replays and matches the CPU reference with two ranks on one GPU",
          "[capture]") {
  cuda::ScenarioRunner runner(nullptr, untraced(), {});
  for (const std::string& name : tpgraph::builtin_scenario_names()) {
    CAPTURE(name);
    const Scenario s = small(name);
    tpgraph::VariantRun v;
    REQUIRE_NOTHROW(v = runner.run(s));  // includes the captured-graph check
    REQUIRE(v.output_check.has_value());
    CAPTURE(v.output_check->max_rel_err, v.output_check->mismatches, v.output_check->nan_count);
    CHECK(v.output_check->passed());
    CHECK_FALSE(v.output_check->vacuous());
    CHECK(v.ranks_share_gpu);
    CHECK(v.host_launch_us.size() == static_cast<std::size_t>(s.replays));
    REQUIRE(v.event_spans.size() == static_cast<std::size_t>(s.replays * s.geometry.ranks));
    for (const auto& span : v.event_spans) CHECK(span.span_ms > 0);
    CHECK(v.replay_us_untraced > 0);
    CHECK(v.cuda_graph_dot.empty() == (s.issue == tpgraph::IssueKind::eager));
  }
}

TEST_CASE("the captured graph has the layer graph's nodes by CUDA type, per rank, and its edges", "[capture]") {
  // server-shape has every node kind: busy kernels, peer copies, alloc/free, join copies, reduce.
  const Scenario s = small("server-shape");
  cuda::ScenarioRunner runner(nullptr, untraced(), {});
  const auto prepared = runner.prepare(s);
  const cuda::CapturedGraph* captured = prepared->captured();
  REQUIRE(captured != nullptr);

  std::size_t count = 0;
  TPG_CUDA(cudaGraphGetNodes(captured->graph.get(), nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  TPG_CUDA(cudaGraphGetNodes(captured->graph.get(), nodes.data(), &count));
  std::map<std::string, int> got;
  std::unordered_map<cudaGraphNode_t, std::string> type_of;
  for (const cudaGraphNode_t n : nodes) {
    cudaGraphNodeType t{};
    TPG_CUDA(cudaGraphNodeGetType(n, &t));
    type_of[n] = std::string(type_name(t));
    ++got[type_of[n]];
  }
  std::map<std::string, int> want;
  std::map<std::pair<int, std::string>, int> want_rank, got_rank;
  for (const auto& [key, c] : prepared->graph().cuda_node_counts()) {
    want[std::string(tpgraph::to_string(key.second))] += c;
    want_rank[{key.first, std::string(tpgraph::to_string(key.second))}] = c;
  }
  for (std::size_t i = 0; i < captured->node_of.size(); ++i) {
    ++got_rank[{prepared->graph().nodes[i].rank, type_of.at(captured->node_of[i])}];
  }
  CHECK(got == want);
  CHECK(got_rank == want_rank);
  CHECK(want.at("mem_alloc") == 2 * s.layers);
  CHECK(want.at("memcpy") == 2 * s.layers);  // one peer copy and one join copy per layer

  std::size_t edges = 0;
  TPG_CUDA(cudaGraphGetEdges(captured->graph.get(), nullptr, nullptr, nullptr, &edges));
  CHECK(edges == prepared->graph().edges.size());
}

TEST_CASE("the captured-graph check refuses a graph that differs from the layer graph", "[capture]") {
  const Scenario baseline = small("baseline");
  cuda::ScenarioRunner runner(nullptr, untraced(), {});
  const auto prepared = runner.prepare(baseline);
  const Scenario peer = small("peer-copy");
  const tpgraph::LayerGraph other = tpgraph::build_layer_graph(peer, tpgraph::build_routing(peer.geometry), 1);
  std::string message;
  try {
    cuda::check_captured_graph(other, *prepared->captured());
  } catch (const std::runtime_error& e) {
    message = e.what();
  }
  CAPTURE(message);
  REQUIRE_FALSE(message.empty());
  CHECK(message.find("memcpy nodes: captured 0, layer graph 1") != std::string::npos);
  CHECK_NOTHROW(cuda::check_captured_graph(prepared->graph(), *prepared->captured()));
}

TEST_CASE("a rank on a GPU that is not visible is refused before anything is built", "[capture]") {
  Scenario s = small("baseline");
  s.devices = {0, cuda::visible_device_count()};
  cuda::ScenarioRunner runner(nullptr, untraced(), {});
  CHECK_THROWS_AS(runner.prepare(s), tpgraph::NoDeviceError);
}

TEST_CASE("a scenario that does not fit in GPU memory is refused before anything is built", "[capture]") {
  Scenario s = small("baseline");
  s.geometry.experts = 4096;
  s.geometry.hidden = 16384;
  s.geometry.ff = 16384;  // ~1.7 TiB of weights per rank
  s.geometry.tokens = 1;
  s.geometry.top_k = 1;
  cuda::ScenarioRunner runner(nullptr, untraced(), {});
  std::string message;
  try {
    (void)runner.prepare(s);
  } catch (const tpgraph::InputError& e) {
    message = e.what();
  }
  CAPTURE(message);
  CHECK(message.find("free but the scenario needs") != std::string::npos);
}

TEST_CASE("100,000 replays grow neither device nor host memory", "[capture][memory]") {
  // Every node type: peer copy, in-graph alloc and free, join copy, reduce.
  Scenario s = small("fresh-alloc");
  s.peer_copy = tpgraph::PeerCopy::per_rank;
  s.join = tpgraph::JoinKind::reduce;
  cuda::ScenarioRunner runner(nullptr, untraced(), {});
  const auto prepared = runner.prepare(s);
  constexpr int kChunk = 10'000;
  constexpr int kReplays = 100'000;
  (void)prepared->replay(0, kChunk, false);  // settle: pools, graph memory, the chunk's own vectors
  const std::int64_t device_before = device_free_bytes();
  const std::int64_t host_before = resident_bytes();
  for (int first = 0; first < kReplays; first += kChunk) (void)prepared->replay(first, kChunk, false);
  const std::int64_t device_growth = device_before - device_free_bytes();
  const std::int64_t host_growth = resident_bytes() - host_before;
  std::printf("100000 replays: device memory growth %lld bytes, host RSS growth %lld bytes\n",
              static_cast<long long>(device_growth), static_cast<long long>(host_growth));
  CAPTURE(device_growth, host_growth);
  // A leak of 21 bytes per replay or more would cross these.
  CHECK(device_growth <= 2 << 20);
  CHECK(host_growth <= 2 << 20);
  CHECK(prepared->check_output().passed());
}
