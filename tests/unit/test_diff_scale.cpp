// The scale of `tpgraph diff` on trace folders: a hidden test ([.scale], run by name) that writes two
// trace folders of 10 million kernel records each under $TPGRAPH_SCALE_DIR (a chain of 20 kernels of 30 µs
// launched 500,000 times; B's k7 3% slower), for `/usr/bin/time -v tpgraph diff A B` (docs/diff.md).
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "catch.hpp"
#include "core/records/trace_file.hpp"

using namespace tpgraph;
using namespace tpgraph::tracefile;
using nlohmann::json;

namespace {

constexpr int kKernels = 20;
constexpr int kLaunches = 500'000;

void write_trace_folder(const std::filesystem::path& dir, double k7_factor, std::uint64_t seed) {
  std::filesystem::create_directories(dir / kProcsFolder);
  std::ofstream out(dir / kProcsFolder / "p100.tpgt", std::ios::binary);
  const std::uint64_t t0 = 1'700'000'000'000'000'000ULL;
  out << file_header();
  out << chunk(ChunkType::meta, json{{"host", "node1"},
                                     {"boot_id", "boot-a"},
                                     {"pid", 100},
                                     {"ppid", 1},
                                     {"exe", "/bin/fake"},
                                     {"cupti_version", 130001},
                                     {"started_ns", t0 - 1000},
                                     {"env", json::object()}}
                                    .dump());
  out << chunk(ChunkType::device, json{{"ordinal", 0}, {"name", "NVIDIA H200"}, {"uuid", "GPU-aaaa"}}.dump());
  json nodes = json::array(), edges = json::array(), clones = json::array();
  for (int k = 0; k < kKernels; ++k) {
    const std::string name = "void k" + std::to_string(k) + "(float*)";
    out << name_chunk(static_cast<std::uint32_t>(k + 1), name);
    nodes.push_back({{"id", 1000 + k}, {"type", "kernel"}, {"name", name}});
    clones.push_back(json::array({1100 + k, k}));
    if (k > 0) edges.push_back(json::array({k - 1, k}));
  }
  out << chunk(ChunkType::graph,
               json{{"exec", 1}, {"graph_id", 7}, {"nodes", nodes}, {"edges", edges}, {"clones", clones}}.dump());
  std::uint64_t state = seed;
  const auto noise_ns = [&] {  // 0..199 ns
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (state >> 33) % 200;
  };
  std::vector<WireRecord> records;
  std::vector<WireLaunch> launches;
  for (int i = 0; i < kLaunches; ++i) {
    const std::uint64_t begin = t0 + static_cast<std::uint64_t>(i) * 700'000;
    const auto corr = static_cast<std::uint32_t>(10 + i);
    std::uint64_t cursor = begin;
    for (int k = 0; k < kKernels; ++k) {
      WireRecord w;
      w.start_ns = cursor + 1000 + noise_ns();
      const double us = k == 7 ? 30.0 * k7_factor : 30.0;
      w.end_ns = w.start_ns + static_cast<std::uint64_t>(us * 1000) + noise_ns();
      w.correlation_id = corr;
      w.graph_id = 8;
      w.graph_node_id = static_cast<std::uint64_t>(1100 + k);
      w.name_id = static_cast<std::uint32_t>(k + 1);
      w.stream_id = 7;
      records.push_back(w);
      cursor = w.end_ns;
    }
    launches.push_back(WireLaunch{corr, 1, begin - 5'000, begin - 2'000, 0, 0});
    if (records.size() >= 20'000) {
      out << records_chunk(records) << launches_chunk(launches);
      records.clear();
      launches.clear();
    }
  }
  if (!records.empty()) out << records_chunk(records) << launches_chunk(launches);
  out << chunk(ChunkType::footer, json{{"records", std::uint64_t{kKernels} * kLaunches},
                                       {"dropped", 0},
                                       {"end_ns", t0 + 400'000'000'000ULL}}
                                      .dump());
}

}  // namespace

TEST_CASE("scale: two trace folders of ten million records for tpgraph diff", "[.scale]") {
  const char* where = std::getenv("TPGRAPH_SCALE_DIR");
  INFO("TPGRAPH_SCALE_DIR names the folder to write them into");
  REQUIRE(where != nullptr);
  write_trace_folder(std::filesystem::path(where) / "a", 1.0, 1);
  write_trace_folder(std::filesystem::path(where) / "b", 1.03, 2);
  CHECK(std::filesystem::file_size(std::filesystem::path(where) / "a" / kProcsFolder / "p100.tpgt") > 500'000'000);
}
