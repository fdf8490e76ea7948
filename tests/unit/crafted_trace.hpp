// Crafted trace record files for the GPU-free tests of the trace readers, the merge and the
// analysis's bounds: a process's file built chunk by chunk with the record-file writer.
#pragma once
#include <nlohmann/json.hpp>

#include <time.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/records/trace_file.hpp"

namespace tpgraph::testing {

using nlohmann::json;
using tracefile::WireLaunch;
using tracefile::WireRecord;

// CPU seconds of the process (every thread): the time bounds are about the work done, which wall
// time on a machine shared with other builds would overstate several times.
inline double cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}
inline double seconds_since(double t0) { return cpu_seconds() - t0; }

// A record file of one process: `graphs` (graph chunk JSON), then records and launches.
struct Crafted {
  json meta{{"host", "node1"}, {"boot_id", "boot-a"}, {"pid", 100}, {"started_ns", 1000}};
  std::vector<std::string> devices;  // device chunk payloads
  std::vector<json> graphs;
  std::vector<WireRecord> records;
  std::vector<WireLaunch> launches;
  std::vector<std::string> chunks;  // more chunks, ready-made, after the launches
  bool footer = true;

  [[nodiscard]] std::string bytes() const {
    using tracefile::chunk;
    using tracefile::ChunkType;
    std::string out = tracefile::file_header();
    out += chunk(ChunkType::meta, meta.dump());
    for (const auto& d : devices) out += chunk(ChunkType::device, d);
    for (const auto& g : graphs) out += chunk(ChunkType::graph, g.dump());
    if (!records.empty()) out += tracefile::records_chunk(records);
    if (!launches.empty()) out += tracefile::launches_chunk(launches);
    for (const auto& c : chunks) out += c;
    if (footer) out += chunk(ChunkType::footer, json{{"records", records.size()}}.dump());
    return out;
  }
};

// A chain graph of `n` kernels named k<i>, exec `exec`, captured ids base + i.
inline nlohmann::json chain_graph(int n, std::uint32_t exec, std::uint64_t base, const std::string& prefix = "k") {
  json nodes = json::array();
  json edges = json::array();
  for (int i = 0; i < n; ++i) {
    nodes.push_back(
        {{"id", base + static_cast<std::uint64_t>(i)}, {"type", "kernel"}, {"name", prefix + std::to_string(i)}});
    if (i > 0) edges.push_back(json::array({i - 1, i}));
  }
  return json{{"exec", exec}, {"nodes", nodes}, {"edges", edges}};
}

inline WireRecord kernel_record(std::uint64_t node_id, std::uint32_t corr, std::uint64_t start, std::uint64_t end) {
  WireRecord w;
  w.kind = 0;
  w.start_ns = start;
  w.end_ns = end;
  w.correlation_id = corr;
  w.graph_node_id = node_id;
  return w;
}

}  // namespace tpgraph::testing
