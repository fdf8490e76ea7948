// Hand-built runs for the GPU-free tests of the timeline analysis and its outputs: the real layer
// graph of a small scenario, and CUPTI-like records placed where a test wants them.
#pragma once
#include <unistd.h>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/model/layer_graph.hpp"
#include "core/model/scenario.hpp"
#include "core/numerics/router.hpp"
#include "core/records/run_data.hpp"

namespace tpgraph::testing {

// An arbitrary CUPTI-like clock origin: far from zero, like the real time base.
inline constexpr std::uint64_t kClock0 = 1'700'000'000'000'000'000ULL;

inline bool leaves_record(const Node& n) {
  const CudaNodeType t = cuda_node_type(n.kind);
  return t == CudaNodeType::kernel || t == CudaNodeType::memcpy;
}

inline Scenario small_scenario(std::string name, int replays) {
  Scenario s;
  s.name = std::move(name);
  s.geometry.tokens = 43;
  s.replays = replays;
  s.warmup = 2;
  return s;
}

inline RunEnvironment test_environment() {
  RunEnvironment env;
  env.tool_version = "0.1.0";
  env.git_revision = "testrevision";
  env.driver_version = 13000;
  env.runtime_version = 13000;
  env.cupti_version = 130001;
  env.devices.push_back(DeviceInfo{0, "NVIDIA H200", 132, 150'000'000'000, "0000:19:00.0"});
  env.hostname = "testhost";
  env.started_at = "2026-12-02T10:15:00Z";
  return env;
}

// A variant whose ranks each run their chain back to back: rank r's recorded nodes start at
// replay_begin + rank_start_ns[r], each op_ns long with gap_ns between them. Replays are
// `period_ns` apart. Every recorded node gets exactly one record per replay.
inline VariantRun scheduled_variant(const Scenario& s, std::vector<std::uint64_t> rank_start_ns,
                                    std::uint64_t op_ns = 10'000, std::uint64_t gap_ns = 0,
                                    std::uint64_t period_ns = 1'000'000) {
  VariantRun v;
  v.scenario = s;
  v.visible_devices = 1;
  v.graph = build_layer_graph(s, build_routing(s.geometry), 1);
  v.ranks_share_gpu = s.geometry.ranks > 1;
  for (int replay = 0; replay < s.replays; ++replay) {
    const std::uint64_t begin = kClock0 + static_cast<std::uint64_t>(replay) * period_ns;
    for (int r = 0; r < v.graph.ranks; ++r) {
      std::uint64_t cursor = begin + rank_start_ns[static_cast<std::size_t>(r)];
      for (const auto& n : v.graph.nodes) {
        if (n.rank != r || !leaves_record(n)) continue;
        ActivityRecord a;
        a.kind = n.kind == NodeKind::copy ? ActivityKind::memcpy : ActivityKind::kernel;
        a.start_ns = cursor;
        a.end_ns = cursor + op_ns;
        a.device = static_cast<std::int16_t>(n.device);
        a.stream_id = static_cast<std::uint32_t>(13 + r);
        a.correlation_id = static_cast<std::uint32_t>(100 + replay);
        a.graph_id = 1;
        a.graph_node_id = static_cast<std::uint64_t>(1000 + n.id);
        a.bytes = n.kind == NodeKind::copy ? n.bytes : 0;
        a.name = n.kind == NodeKind::copy ? "" : "tpgraph_" + std::string(to_string(n.role));
        a.node = n.id;
        a.replay = replay;
        v.records.push_back(a);
        cursor = a.end_ns + gap_ns;
      }
      const double span_us = static_cast<double>(cursor - gap_ns - begin - rank_start_ns[static_cast<std::size_t>(r)]);
      v.event_spans.push_back(EventSpan{replay, r, (span_us + 2'000.0) / 1e6});  // events sit 2 µs outside
    }
    v.host_launch_us.push_back(10.0 + replay);
  }
  v.replay_us_untraced = 100.0;
  v.replay_us_traced = 103.0;
  return v;
}

// A variant built node by node, for timelines where every part of every wait is known by
// construction: kernel nodes of NodeKind::kernel / Role::traced (as a traced program's graph has),
// and records placed in µs from kClock0 plus `replay` * 10 ms.
struct HandBuilt {
  VariantRun v;

  explicit HandBuilt(int ranks, int replays = 1) {
    v.scenario = small_scenario("hand-built", replays);
    v.graph.ranks = ranks;
    v.graph.layers = 1;
  }
  int node(int rank, int device, std::string label) {
    Node n;
    n.id = static_cast<int>(v.graph.nodes.size());
    n.rank = rank;
    n.stream = rank;
    n.device = device;
    n.kind = NodeKind::kernel;
    n.role = Role::traced;
    n.label = std::move(label);
    n.name = "kernel_" + n.label;
    v.graph.nodes.push_back(n);
    return n.id;
  }
  void edge(int from, int to) { v.graph.edges.push_back({from, to}); }
  void record(int node, double start_us, double end_us, int replay = 0) {
    ActivityRecord r;
    const std::uint64_t base = kClock0 + static_cast<std::uint64_t>(replay) * 10'000'000ULL;
    r.start_ns = base + static_cast<std::uint64_t>(start_us * 1000.0);
    r.end_ns = base + static_cast<std::uint64_t>(end_us * 1000.0);
    r.node = node;
    r.replay = replay;
    r.device = static_cast<std::int16_t>(v.graph.nodes[static_cast<std::size_t>(node)].device);
    r.stream_id = static_cast<std::uint32_t>(7 + v.graph.nodes[static_cast<std::size_t>(node)].rank);
    r.name = v.graph.nodes[static_cast<std::size_t>(node)].name;
    v.records.push_back(r);
  }
};

inline RunData single_variant_run(VariantRun v) {
  RunData run;
  run.env = test_environment();
  run.variants.push_back(std::move(v));
  return run;
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A fresh, empty folder under the system's temporary directory.
inline std::filesystem::path fresh_temp_dir(const std::string& tag) {
  static int counter = 0;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tpgraph-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace tpgraph::testing
