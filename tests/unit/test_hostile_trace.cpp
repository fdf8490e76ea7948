// Hostile trace folders and records (issue 33's reader, merge and analysis items): bounded device
// ordinals, grouping on the full graph shape, linear JSON parsing, a linear wait walk, the cgroup's
// memory limit. Each input is crafted with the record-file writer.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "core/analysis/timeline.hpp"
#include "core/base/error.hpp"
#include "core/base/host_memory.hpp"
#include "core/base/json_input.hpp"
#include "core/records/trace_file.hpp"
#include "core/records/traced_run.hpp"
#include "crafted_trace.hpp"

using namespace tpgraph;
using namespace tpgraph::tracefile;
using namespace tpgraph::testing;
using nlohmann::json;

namespace {

std::uint64_t same_hash(const TracedGraph&) { return 42; }

}  // namespace

TEST_CASE("hostile trace: device ordinals beyond GPU 1023 are not taken", "[trace][hostile]") {
  Crafted c;
  c.devices.push_back(json{{"ordinal", 2147483647}, {"name", "huge"}}.dump());
  c.devices.push_back(json{{"ordinal", 1}, {"name", "fine"}}.dump());
  json g = chain_graph(2, 1, 10);
  g["nodes"][0]["device"] = 2147483647;
  g["nodes"][1]["device"] = 1023;
  c.graphs.push_back(g);
  WireRecord r = kernel_record(10, 5, 2000, 3000);
  r.device = 1u << 30;
  c.records.push_back(r);
  c.records.push_back(kernel_record(11, 5, 3000, 4000));
  c.launches.push_back(WireLaunch{5, 1, 1500, 1600, 0, 0});
  ProcessFile f = parse_process_file(c.bytes(), "big.tpgt");
  REQUIRE(f.devices.size() == 1);
  CHECK(f.devices[0].ordinal == 1);
  REQUIRE(f.graphs.size() == 1);
  CHECK(f.graphs[0].nodes[0].device == -1);
  CHECK(f.graphs[0].nodes[1].device == 1023);
  CHECK(f.records[0].device == -1);
  const auto noted = [&](std::string_view what) {
    return std::any_of(f.notes.begin(), f.notes.end(), [&](const std::string& n) { return n.find(what) != n.npos; });
  };
  CHECK(noted("a device chunk with an ordinal outside 0 to 1023"));
  CHECK(noted("node devices outside 0 to 1023"));
  CHECK(noted("record devices outside 0 to 1023"));
  std::vector<ProcessFile> files;
  files.push_back(std::move(f));
  const TracedRun t = merge_traces(std::move(files), {});
  CHECK(t.run.env.devices.size() <= 3);
}

TEST_CASE("hostile trace: graphs whose hashes collide are grouped on their full shape", "[trace][hostile]") {
  // Two graphs of one process with different node counts (and one pair equal in shape), every
  // hash forced equal: a grouping on the hash alone would lay the 3-node graph's records onto the
  // 2-node graph's arrays.
  set_graph_hash_for_testing(&same_hash);
  Crafted c;
  c.graphs.push_back(chain_graph(2, 1, 100));
  c.graphs.push_back(chain_graph(3, 2, 200));
  c.graphs.push_back(chain_graph(3, 3, 300, "other"));
  for (std::uint32_t g = 0; g < 3; ++g) {
    const std::uint64_t base = 100 * (g + 1);
    const std::uint32_t corr = 10 + g;
    const int n = g == 0 ? 2 : 3;
    for (int i = 0; i < n; ++i)
      c.records.push_back(kernel_record(base + static_cast<std::uint64_t>(i), corr, 10'000 * (g + 1) + 100 * i,
                                        10'000 * (g + 1) + 100 * i + 50));
    c.launches.push_back(WireLaunch{corr, g + 1, 1, 2, 0, 0});
  }
  std::vector<ProcessFile> files;
  files.push_back(parse_process_file(c.bytes(), "a.tpgt"));
  ProcessFile second = files.front();
  second.pid = 101;
  files.push_back(std::move(second));
  // The two processes are made ranks of one replay (as a collective or --ranks-together would),
  // so the grouping across processes is what is tested.
  TraceMergeOptions together;
  together.ranks_together = true;
  const TracedRun t = merge_traces(std::move(files), together);
  set_graph_hash_for_testing(nullptr);
  REQUIRE(t.run.variants.size() == 3);
  for (const auto& v : t.run.variants) {
    CHECK(v.graph.ranks == 2);
    for (const auto& a : v.records) {
      REQUIRE(a.node >= 0);
      REQUIRE(static_cast<std::size_t>(a.node) < v.graph.nodes.size());
      // Each record lands on the node of its own kernel name.
      CHECK(v.graph.nodes[static_cast<std::size_t>(a.node)].name.size() > 0);
    }
  }
  CHECK(t.run.variants[0].graph.nodes.size() == 4);
  CHECK(t.run.variants[1].graph.nodes.size() == 6);
  CHECK(t.run.variants[2].graph.nodes.size() == 6);
  CHECK(t.run.variants[2].graph.nodes[0].name == "other0");
  CHECK_NOTHROW(analyze_run(t.run));
}

TEST_CASE("hostile trace: a streaming JSON parse of many objects is linear and drops what it is told", "[hostile]") {
  std::string text = "{\"keep\":[";
  constexpr int kObjects = 300'000;
  for (int i = 0; i < kObjects; ++i) text += fmt::format("{}{{\"i\":{},\"drop\":[1,2]}}", i ? "," : "", i);
  text += "],\"tail\":true}";
  const double t0 = cpu_seconds();
  int dropped = 0;
  const json doc = parse_json_streaming(text, [&](int, JsonEvent e, json& v) {
    if (e == JsonEvent::array_end && v.size() == 2) {
      ++dropped;
      return false;  // every "drop" member
    }
    return true;
  });
  const double s = seconds_since(t0);
  INFO("parsed in " << s << " s");
  CHECK(s < 10.0);  // nlohmann's callback parser takes minutes here (a scan of the array per object)
  CHECK(dropped == kObjects);
  REQUIRE(doc["keep"].size() == kObjects);
  CHECK(doc["keep"][kObjects - 1]["i"] == kObjects - 1);
  CHECK_FALSE(doc["keep"][0].contains("drop"));
  CHECK(doc["tail"] == true);
  CHECK_THROWS_AS(parse_json_streaming("[1,", [](int, JsonEvent, json&) { return true; }), json::parse_error);
}

TEST_CASE("hostile trace: a graph of a million nodes is read, merged and analysed in under 30 s of CPU",
          "[trace][hostile]") {
  constexpr int kNodes = 1'000'000;
  Crafted c;
  // Written by hand: a json value of a million nodes would take longer to build than to read.
  std::string g = "{\"exec\":1,\"nodes\":[";
  for (int i = 0; i < kNodes; ++i)
    g += fmt::format("{}{{\"id\":{},\"type\":\"kernel\",\"name\":\"k\"}}", i ? "," : "", 10 + i);
  g += "],\"edges\":[";
  for (int i = 1; i < kNodes; ++i) g += fmt::format("{}[{},{}]", i > 1 ? "," : "", i - 1, i);
  g += "]}";
  for (int i = 0; i < kNodes; ++i)
    c.records.push_back(
        kernel_record(10 + static_cast<std::uint64_t>(i), 7, 1'000'000 + 100ull * i, 1'000'050 + 100ull * i));
  c.launches.push_back(WireLaunch{7, 1, 1, 2, 0, 0});
  std::string bytes = file_header();
  bytes += chunk(ChunkType::meta, c.meta.dump());
  bytes += chunk(ChunkType::graph, g);
  bytes += records_chunk(c.records);
  bytes += launches_chunk(c.launches);
  g.clear();
  c.records.clear();
  const double t0 = cpu_seconds();
  std::vector<ProcessFile> files;
  files.push_back(parse_process_file(bytes, "wide.tpgt"));
  REQUIRE(files[0].graphs.size() == 1);
  REQUIRE(files[0].graphs[0].nodes.size() == kNodes);
  const double read_s = seconds_since(t0);
  const TracedRun t = merge_traces(std::move(files), {});
  const RunAnalysis a = analyze_run(t.run);
  const double s = seconds_since(t0);
  INFO("read in " << read_s << " s, read + merge + analysis in " << s << " s");
  CHECK(s < 30.0);
  REQUIRE(a.variants.size() == 1);
  CHECK(a.variants[0].health.missing == 0);
}

namespace {

// 2-node graph "a -> b" launched `replays` times on one GPU; a runs at 10 µs steps, b `lag` later,
// so b's wait spans the records of the replays launched in between.
TracedRun spanning_waits(int replays, std::uint64_t lag) {
  Crafted c;
  c.graphs.push_back(chain_graph(2, 1, 10));
  for (int r = 0; r < replays; ++r) {
    const std::uint64_t t = 1'000'000 + 10'000ull * static_cast<std::uint64_t>(r);
    const auto corr = static_cast<std::uint32_t>(100 + r);
    c.records.push_back(kernel_record(10, corr, t, t + 4'000));
    c.records.push_back(kernel_record(11, corr, t + lag, t + lag + 1'000));
    c.launches.push_back(WireLaunch{corr, 1, t - 10, t - 5, 0, 0});
  }
  std::vector<ProcessFile> files;
  files.push_back(parse_process_file(c.bytes(), "waits.tpgt"));
  return merge_traces(std::move(files), {});
}

}  // namespace

TEST_CASE("hostile trace: waits spanning other replays give the same figures in full detail and in totals",
          "[timeline][hostile]") {
  const TracedRun t = spanning_waits(300, 1'000'000 + 5'000);
  AnalysisOptions all;
  all.detail_replays = -1;
  const VariantTimeline fast = analyze_variant(t.run.variants[0]);
  const VariantTimeline full = analyze_variant(t.run.variants[0], all);
  REQUIRE(fast.waits.size() == full.waits.size());
  for (std::size_t i = 0; i < fast.waits.size(); ++i) {
    CHECK(fast.waits[i].node == full.waits[i].node);
    CHECK(fast.waits[i].contention_us.median == Approx(full.waits[i].contention_us.median));
    CHECK(fast.waits[i].idle_us.median == Approx(full.waits[i].idle_us.median));
  }
  // b waits 1,001 µs after a, over the a's of the next 100 replays (4 µs each) and the b's of earlier ones.
  REQUIRE(fast.wait_of(1) != nullptr);
  CHECK(fast.wait_of(1)->contention_us.max > 400.0);
  REQUIRE(fast.critical_path.nodes.size() == full.critical_path.nodes.size());
  for (std::size_t i = 0; i < fast.critical_path.nodes.size(); ++i) {
    CHECK(fast.critical_path.nodes[i].node == full.critical_path.nodes[i].node);
    CHECK(fast.critical_path.nodes[i].replays_on_path == full.critical_path.nodes[i].replays_on_path);
    CHECK(fast.critical_path.nodes[i].run_us.median == Approx(full.critical_path.nodes[i].run_us.median));
    CHECK(fast.critical_path.nodes[i].wait_us.median == Approx(full.critical_path.nodes[i].wait_us.median));
  }
}

TEST_CASE("hostile trace: 100 000 replays whose waits span other replays are analysed in under 10 s of CPU",
          "[timeline][hostile]") {
  // Each b waits 1 s: over the records of the 100,000 replays launched meanwhile. A walk through
  // them one by one takes some 10^10 steps.
  const TracedRun t = spanning_waits(100'000, 1'000'000'000);
  const double t0 = cpu_seconds();
  const RunAnalysis a = analyze_run(t.run);
  const double s = seconds_since(t0);
  INFO("analysed in " << s << " s");
  CHECK(s < 10.0);
  REQUIRE(a.variants.size() == 1);
  CHECK(a.variants[0].replay_count == 100'000);
  REQUIRE(a.variants[0].wait_of(1) != nullptr);
  CHECK(a.variants[0].wait_of(1)->contention_us.median > 0);
}

TEST_CASE("hostile trace: the memory check takes the cgroup's limit where it is smaller", "[hostile]") {
  CHECK(mem_available_from("MemTotal: 100 kB\nMemAvailable:    2048 kB\n") == 2048 * 1024);
  CHECK(mem_available_from("MemTotal: 100 kB\n") == -1);
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / fmt::format("tpgraph-cgroup-{}", ::getpid());
  fs::remove_all(root);
  const auto put = [](const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  };
  // v2: a limit on the job's slice binds its child group, which has none of its own.
  put(root / "v2" / "cgroup.controllers", "memory\n");
  put(root / "v2" / "job" / "memory.max", "2147483648\n");
  put(root / "v2" / "job" / "memory.current", "536870912\n");
  put(root / "v2" / "job" / "step" / "memory.max", "max\n");
  put(root / "v2" / "job" / "step" / "memory.current", "1000\n");
  CHECK(cgroup_memory_headroom("0::/job/step\n", root / "v2") == 2147483648 - 536870912);
  CHECK(cgroup_memory_headroom("0::/\n", root / "v2") == -1);
  // v1: the memory controller's hierarchy; "no limit" is a number near 2^63.
  put(root / "v1" / "memory" / "memory.limit_in_bytes", "9223372036854771712\n");
  put(root / "v1" / "memory" / "box" / "memory.limit_in_bytes", "1073741824\n");
  put(root / "v1" / "memory" / "box" / "memory.usage_in_bytes", "1073741900\n");
  CHECK(cgroup_memory_headroom("4:memory:/box\n3:cpu:/box\n", root / "v1") == 0);  // over: no headroom
  CHECK(cgroup_memory_headroom("4:memory:/elsewhere\n", root / "v1") == -1);
  fs::remove_all(root);
  const std::int64_t available = available_host_memory();
  CHECK(available > 0);
}

TEST_CASE("hostile trace: launches of a wide graph beyond what the records justify are refused", "[trace][hostile]") {
  // 2,000 nodes launched 2,000 times with one record: 4 million slots (~200 MB of analysis) from
  // about 100 KB of file. The model's size is bounded, not measured: slots <= 4 per record + 16 per
  // node + 2^20, the rule records.json has.
  Crafted c;
  c.graphs.push_back(chain_graph(2'000, 1, 10));
  c.records.push_back(kernel_record(10, 1, 5'000, 6'000));
  for (std::uint32_t k = 1; k <= 2'000; ++k) c.launches.push_back(WireLaunch{k, 1, 1, 2, 0, 0});
  std::vector<ProcessFile> files;
  files.push_back(parse_process_file(c.bytes(), "wide.tpgt"));
  try {
    (void)merge_traces(std::move(files), {});
    FAIL("accepted");
  } catch (const InputError& e) {
    const std::string what = e.what();
    CHECK(what.find("graph-1: 2000 launches of a graph of 2000 nodes") != std::string::npos);
    CHECK(what.find("accepted: at most 4 per record + 16 per node") != std::string::npos);
  }
  // 500 launches of it fit the floor.
  c.launches.resize(500);
  files.clear();
  files.push_back(parse_process_file(c.bytes(), "wide.tpgt"));
  const TracedRun ok = merge_traces(std::move(files), {});
  CHECK(ok.run.variants.at(0).scenario.replays == 500);
}

TEST_CASE("hostile trace: notes are copied into every graph up to 64 KiB", "[trace][hostile]") {
  Crafted c;
  for (std::uint32_t g = 1; g <= 20; ++g) {
    c.graphs.push_back(chain_graph(1, g, 100 * g, fmt::format("g{}_", g)));
    c.records.push_back(kernel_record(100 * g, g, 1'000'000 * g, 1'000'000 * g + 10));
    c.launches.push_back(WireLaunch{g, g, 1, 2, 0, 0});
  }
  std::string bytes = c.bytes();
  const std::string footer = bytes.substr(bytes.rfind(chunk(ChunkType::footer, json{{"records", 20}}.dump())));
  bytes.resize(bytes.size() - footer.size());
  for (int i = 0; i < 200; ++i) bytes += chunk(ChunkType::note, fmt::format("note {} {}", i, std::string(1000, 'x')));
  bytes += footer;
  std::vector<ProcessFile> files;
  files.push_back(parse_process_file(bytes, "notes.tpgt"));
  const TracedRun t = merge_traces(std::move(files), {});
  REQUIRE(t.run.variants.size() == 20);
  CHECK(t.notes.size() >= 200);  // every note stays in the trace's own section
  for (const auto& v : t.run.variants) {
    std::size_t held = 0;
    for (const auto& n : v.notes) held += n.size();
    CHECK(held < 70'000);
    CHECK(std::any_of(v.notes.begin(), v.notes.end(),
                      [](const std::string& n) { return n.find("more whole-trace notes") != n.npos; }));
  }
}

TEST_CASE("hostile trace: a stray record is set aside, not made the time base", "[trace][hostile]") {
  constexpr std::uint64_t t0 = 1'700'000'000'000'000'000ull;
  Crafted c;
  c.graphs.push_back(chain_graph(2, 1, 10));
  for (std::uint32_t k = 0; k < 4; ++k) {
    const std::uint64_t b = t0 + 100'000ull * k;
    c.records.push_back(kernel_record(10, 100 + k, k == 2 ? 1 : b, k == 2 ? 2 : b + 1'000));
    c.records.push_back(kernel_record(11, 100 + k, b + 2'000, b + 3'000));
    c.launches.push_back(WireLaunch{100 + k, 1, 1, 2, 0, 0});
  }
  std::vector<ProcessFile> files;
  files.push_back(parse_process_file(c.bytes(), "stray.tpgt"));
  const TracedRun t = merge_traces(std::move(files), {});
  REQUIRE(t.run.variants.size() == 1);
  CHECK(t.run.variants[0].records.size() == 7);
  CHECK(std::any_of(t.notes.begin(), t.notes.end(), [](const std::string& n) {
    return n.find("graph-1: 1 record set aside: they start more than an hour") != n.npos;
  }));
  const RunAnalysis a = analyze_run(t.run);
  CHECK(a.base_ns == t0);
}

namespace {

struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / fmt::format("tpgraph-{}-{}", name, ::getpid())) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  void write(const std::string& name, const std::string& bytes) const {
    std::ofstream(path / name, std::ios::binary) << bytes;
  }
};

Crafted one_graph_process(std::int64_t pid) {
  Crafted c;
  c.meta["pid"] = pid;
  c.graphs.push_back(chain_graph(2, 1, 10));
  c.records.push_back(kernel_record(10, 1, 5'000, 6'000));
  c.records.push_back(kernel_record(11, 1, 6'000, 7'000));
  c.launches.push_back(WireLaunch{1, 1, 1, 2, 0, 0});
  return c;
}

bool has_note(const std::vector<std::string>& notes, std::string_view what) {
  return std::any_of(notes.begin(), notes.end(), [&](const std::string& n) { return n.find(what) != n.npos; });
}

}  // namespace

TEST_CASE("hostile trace: empty and header-only files are listed and skipped; a file without meta is named",
          "[trace][hostile]") {
  TempDir dir("empty-files");
  dir.write("a.tpgt", one_graph_process(1).bytes());
  dir.write("b.tpgt", "");
  dir.write("c.tpgt", "TPGT");
  TraceFolder folder = read_process_files(dir.path);
  CHECK(folder.files.size() == 1);
  CHECK(has_note(folder.notes, "b.tpgt: empty (the process ended before writing its header; skipped)"));
  CHECK(has_note(folder.notes, "c.tpgt: 4 bytes (the process ended before writing its header; skipped)"));
  const TracedRun t = merge_trace_folder(std::move(folder), {});
  CHECK(has_note(t.notes, "b.tpgt: empty"));
  REQUIRE(t.run.variants.size() == 1);
  CHECK(has_note(t.run.variants[0].notes, "c.tpgt: 4 bytes"));

  Crafted no_meta = one_graph_process(2);
  std::string bytes = no_meta.bytes();
  const std::string meta = chunk(ChunkType::meta, no_meta.meta.dump());
  bytes.erase(bytes.find(meta), meta.size());
  dir.write("d.tpgt", bytes);
  try {
    (void)read_process_files(dir.path);
    FAIL("accepted");
  } catch (const InputError& e) {
    const std::string what = e.what();
    CHECK(what.find("d.tpgt: no meta chunk") != std::string::npos);
    CHECK(what.find("hosts") == std::string::npos);
  }
}

TEST_CASE("hostile trace: entries that are not record files are skipped with a note, in any order",
          "[trace][hostile]") {
  TempDir dir("entries");
  dir.write("m.tpgt", one_graph_process(1).bytes());
  std::filesystem::create_symlink(dir.path / "gone", dir.path / "a-dangling.tpgt");
  std::filesystem::create_symlink(dir.path / "gone", dir.path / "z-dangling.tpgt");
  std::filesystem::create_directory(dir.path / "folder.tpgt");
  REQUIRE(::mkfifo((dir.path / "pipe.tpgt").c_str(), 0600) == 0);
  const TraceFolder folder = read_process_files(dir.path);
  CHECK(folder.files.size() == 1);
  CHECK(has_note(folder.notes, "a-dangling.tpgt: a symbolic link to nothing, not a record file (skipped)"));
  CHECK(has_note(folder.notes, "z-dangling.tpgt: a symbolic link to nothing"));
  CHECK(has_note(folder.notes, "folder.tpgt: a folder"));
  CHECK(has_note(folder.notes, "pipe.tpgt: a FIFO"));
}

TEST_CASE("hostile trace: record file names reach messages and notes printable", "[trace][hostile]") {
  TempDir dir("names");
  const std::string evil = "p\x1b[31mred\x07.tpgt";
  dir.write(evil, "");
  dir.write("x\x1b]0;title\x07.tpgt", "NOTATRACEFILE");
  try {
    (void)read_process_files(dir.path);
    FAIL("accepted");
  } catch (const InputError& e) {
    const std::string what = e.what();
    CHECK(what.find('\x1b') == std::string::npos);
    CHECK(what.find("x?]0;title?.tpgt: not a tpgraph trace record file") != std::string::npos);
  }
  std::filesystem::remove(dir.path / "x\x1b]0;title\x07.tpgt");
  dir.write("q.tpgt", one_graph_process(1).bytes());
  const TracedRun t = merge_trace_folder(read_process_files(dir.path), {});
  for (const auto& n : t.notes) CHECK(n.find('\x1b') == std::string::npos);
  CHECK(has_note(t.notes, "p?[31mred?.tpgt: empty"));
  for (const auto& p : t.processes) CHECK(p.file.find('\x1b') == std::string::npos);
}

TEST_CASE("hostile trace: a cycle in one process's graph skips that graph and names the file", "[trace][hostile]") {
  Crafted c = one_graph_process(1);
  json cyclic = chain_graph(3, 2, 50);
  cyclic["edges"].push_back(json::array({2, 0}));
  c.graphs.push_back(cyclic);
  c.records.push_back(kernel_record(50, 2, 8'000, 9'000));
  c.launches.push_back(WireLaunch{2, 2, 1, 2, 0, 0});
  std::vector<ProcessFile> files;
  files.push_back(parse_process_file(c.bytes(), "procs/cyc.tpgt"));
  const TracedRun t = merge_traces(std::move(files), {});
  CHECK(has_note(t.notes, "procs/cyc.tpgt: graph exec 2 (version 0) has a cycle in its edges"));
  // The set-aside graph's launch keeps its record, shown without a topology; the trace is not clean.
  REQUIRE(t.run.variants.size() == 2);
  CHECK(t.run.variants[0].topology_error.empty());
  CHECK_FALSE(t.run.variants[1].topology_error.empty());
  CHECK(t.run.variants[1].records.size() == 1);
  CHECK(t.processes.at(0).unmatched == 0);
  REQUIRE(t.run.trace.has_value());
  CHECK_FALSE(t.run.trace->clean());
  CHECK_NOTHROW(analyze_run(t.run));
}
