// Analysis memory is bounded by the input's size (issue 33): `tpgraph analyze` runs as a child
// process on crafted inputs under 10 MB, the wide-graph, many-replay and large-ordinal shapes of
// both formats, and its peak resident set (wait4's ru_maxrss) must stay under 1 GB and under the
// documented estimate the memory pre-check uses (trace_analysis_memory, run_analysis_memory).
#include <fcntl.h>
#include <fmt/core.h>
#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "catch.hpp"
#include "core/records/analysis_memory.hpp"
#include "core/records/run_data.hpp"
#include "core/records/trace_file.hpp"
#include "crafted_trace.hpp"
#include "run_fixture.hpp"

using namespace tpgraph;
using namespace tpgraph::testing;
namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kTenMegabytes = 10'000'000;
constexpr std::int64_t kOneGigabyte = std::int64_t{1} << 30;

struct Peak {
  int code = -1;
  std::int64_t bytes = 0;  // the child's peak resident set
  std::string log;
};

// Runs `tpgraph analyze FROM --out FROM/analysis` in a child and reads its peak resident set. The
// forked image counts too until exec, so the figure is an upper bound of analyze's own peak: the
// test process keeps itself small (its inputs are freed before the fork).
Peak analyze_peak(const fs::path& from) {
  ::malloc_trim(0);
  const fs::path log = from / "analyze.log";
  const std::string out = (from / "analysis").string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::creat(log.c_str(), 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execl(TPGRAPH_BINARY, TPGRAPH_BINARY, "analyze", from.c_str(), "--out", out.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  Peak p;
  REQUIRE(pid > 0);
  int status = 0;
  rusage usage{};
  REQUIRE(::wait4(pid, &status, 0, &usage) == pid);
  p.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  p.bytes = static_cast<std::int64_t>(usage.ru_maxrss) * 1024;
  std::ifstream in(log);
  p.log.assign(std::istreambuf_iterator<char>(in), {});
  return p;
}

struct Folder {
  fs::path path;
  explicit Folder(const std::string& tag) : path(fresh_temp_dir("membound-" + tag)) {}
  ~Folder() { fs::remove_all(path); }
};

// Writes one process's record file into a fresh trace folder; returns the file's size.
std::int64_t write_trace(const Folder& f, const Crafted& c) {
  fs::create_directories(f.path / tracefile::kProcsFolder);
  const std::string bytes = c.bytes();
  std::ofstream(f.path / tracefile::kProcsFolder / fmt::format("node1.100.1{}", tracefile::kSuffix), std::ios::binary)
      << bytes;
  return static_cast<std::int64_t>(bytes.size());
}

void check_peak(const Peak& p, std::int64_t input_bytes, std::int64_t estimate, int code = 0) {
  INFO(fmt::format("input {} bytes, peak {:.1f} MiB, estimate {:.1f} MiB\n{}", input_bytes,
                   static_cast<double>(p.bytes) / (1 << 20), static_cast<double>(estimate) / (1 << 20), p.log));
  CHECK(p.code == code);
  CHECK(input_bytes < kTenMegabytes);
  CHECK(p.bytes > 0);
  CHECK(p.bytes < kOneGigabyte);
  CHECK(p.bytes <= estimate);
}

// Many replays: a two-kernel chain launched `replays` times, every record present.
Crafted many_replays(std::uint32_t replays, std::uint32_t device) {
  Crafted c;
  c.devices.push_back(json{{"ordinal", device}, {"name", "NVIDIA H200"}}.dump());
  c.graphs.push_back(chain_graph(2, 1, 10));
  c.graphs.back()["nodes"][0]["device"] = device;
  c.graphs.back()["nodes"][1]["device"] = device;
  for (std::uint32_t k = 0; k < replays; ++k) {
    const std::uint64_t t = 1'000'000 + 50'000ull * k;
    WireRecord a = kernel_record(10, k + 1, t, t + 4'000);
    WireRecord b = kernel_record(11, k + 1, t + 5'000, t + 9'000);
    a.device = b.device = device;
    c.records.push_back(a);
    c.records.push_back(b);
    c.launches.push_back(WireLaunch{k + 1, 1, t - 2'000, t - 1'000, device, 0});
  }
  return c;
}

}  // namespace

TEST_CASE("memory bound: a trace of many replays analyses within its estimate", "[hostile][memory]") {
  Folder f("replays");
  const std::int64_t bytes = write_trace(f, many_replays(64'000, 0));
  check_peak(analyze_peak(f.path), bytes, trace_analysis_memory(bytes));
}

TEST_CASE("memory bound: a trace on GPU 1023 analyses within its estimate", "[hostile][memory]") {
  Folder f("ordinal");
  const std::int64_t bytes = write_trace(f, many_replays(30'000, 1023));
  check_peak(analyze_peak(f.path), bytes, trace_analysis_memory(bytes));
}

TEST_CASE("memory bound: a trace of a wide graph launched as often as its records allow", "[hostile][memory]") {
  // 2,000 nodes: 80 launches recorded in full (160,000 records, 9 MB) and as many more launches
  // as the slot rule admits (4 per record + 16 per node + 2^20 slots), each without records.
  constexpr int kNodes = 2'000;
  Crafted c;
  c.graphs.push_back(chain_graph(kNodes, 1, 10));
  constexpr std::uint32_t kRecorded = 80;
  const std::uint64_t slots = 4ull * kRecorded * kNodes + 16ull * kNodes + (1ull << 20);
  const auto launches = static_cast<std::uint32_t>(slots / kNodes);
  for (std::uint32_t k = 0; k < launches; ++k) {
    const std::uint64_t t = 1'000'000 + 100'000'000ull * k;
    c.launches.push_back(WireLaunch{k + 1, 1, t - 2'000, t - 1'000, 0, 0});
    if (k >= kRecorded) continue;
    for (int i = 0; i < kNodes; ++i) {
      const std::uint64_t s = t + 10'000ull * static_cast<std::uint64_t>(i);
      c.records.push_back(kernel_record(10 + static_cast<std::uint64_t>(i), k + 1, s, s + 9'000));
    }
  }
  Folder f("wide");
  const std::int64_t bytes = write_trace(f, c);
  const auto unrecorded = static_cast<std::int64_t>(launches) * kNodes - static_cast<std::int64_t>(c.records.size());
  c = Crafted{};
  check_peak(analyze_peak(f.path), bytes, trace_analysis_memory(bytes, unrecorded));
}

TEST_CASE("memory bound: a trace of a graph of 150,000 nodes launched as often as the rule admits",
          "[hostile][memory]") {
  // The most slots bytes can buy: nodes of some 45 bytes each, 16 slots per node, no record.
  constexpr int kNodes = 150'000;
  Crafted c;
  c.graphs.push_back(chain_graph(kNodes, 1, 10));
  const auto launches = static_cast<std::uint32_t>((16ull * kNodes + (1ull << 20)) / kNodes);
  for (std::uint32_t k = 0; k < launches; ++k) {
    const std::uint64_t t = 1'000'000 + 100'000'000ull * k;
    c.launches.push_back(WireLaunch{k + 1, 1, t - 2'000, t - 1'000, 0, 0});
  }
  Folder f("nodes");
  const std::int64_t bytes = write_trace(f, c);
  c = Crafted{};
  check_peak(analyze_peak(f.path), bytes, trace_analysis_memory(bytes, std::int64_t{launches} * kNodes));
}

TEST_CASE("memory bound: a records.json of many replays analyses within its estimate", "[hostile][memory]") {
  Folder f("records-json");
  {
    HandBuilt h(2, 12'000);
    const int a = h.node(0, 0, "a");
    const int b = h.node(0, 0, "b");
    const int c = h.node(1, 0, "c");
    const int d = h.node(1, 0, "d");
    h.edge(a, b);
    h.edge(c, d);
    h.edge(a, d);
    for (int r = 0; r < 12'000; ++r) {
      h.record(a, 0, 4, r);
      h.record(b, 5, 9, r);
      h.record(c, 1, 3, r);
      h.record(d, 6, 8, r);
    }
    save_raw_records(f.path / "records.json", single_variant_run(std::move(h.v)));
  }
  const auto bytes = static_cast<std::int64_t>(fs::file_size(f.path / "records.json"));
  check_peak(analyze_peak(f.path), bytes, run_analysis_memory(bytes));
}

TEST_CASE("memory bound: many graphs launched at the floor each are refused, not analysed", "[hostile][memory]") {
  // 40 graphs of 500 nodes, each launched 2,100 times without a record: a million slots each, 42
  // million in all (some 2.5 GB of analysis) from 3 MB. The floor is for the whole input.
  Crafted c;
  for (std::uint32_t g = 1; g <= 40; ++g) {
    c.graphs.push_back(chain_graph(500, g, 1'000 * g, fmt::format("g{}_", g)));
    for (std::uint32_t k = 0; k < 2'100; ++k) {
      const std::uint64_t t = 1'000'000'000ull * g + 100'000ull * k;
      c.launches.push_back(WireLaunch{g * 10'000 + k, g, t, t + 1'000, 0, 0});
    }
  }
  Folder f("floors");
  const std::int64_t bytes = write_trace(f, c);
  c = Crafted{};
  const Peak p = analyze_peak(f.path);
  check_peak(p, bytes, trace_analysis_memory(bytes), 2);
  CHECK(p.log.find("over 40 graphs") != std::string::npos);
  CHECK(p.log.find("accepted: at most 4 per record + 16 per node + 1048576 slots over all graphs") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(f.path / "analysis" / "report.md"));
}
