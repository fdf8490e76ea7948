// The trace side, without a GPU: the per-process record file (writer helpers and reader), the record
// join, and the merge of several processes into the model the timeline analysis reads.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "catch.hpp"
#include "core/analysis/timeline.hpp"
#include "core/base/error.hpp"
#include "core/records/analysis_memory.hpp"
#include "core/records/record_join.hpp"
#include "core/records/trace_file.hpp"
#include "core/records/traced_run.hpp"
#include "core/report/trace.hpp"

using namespace tpgraph;
using namespace tpgraph::tracefile;
using nlohmann::json;

namespace {

// A synthetic process: one graph "k1 -> {k2, memcpy} -> k3" (a fork and a join inside the graph)
// instantiated once, launched `launches` times; every launch's records start at `t0 + i * period`.
struct FakeProcess {
  std::string host = "node1";
  std::string boot_id = "boot-a";
  std::int64_t pid = 100;
  std::optional<int> rank;
  std::string uuid = "GPU-aaaa";
  int launches = 3;
  std::uint64_t t0 = 1'700'000'000'000'000'000ull;
  std::uint64_t period = 100'000;  // 100 µs
  std::uint64_t shift = 0;         // added to every timestamp (another host's clock)
  std::string k2_name = "void k2<float>(int)";
  bool footer = true;
  bool reverse_records = false;  // deliver the records chunks in reverse order
  std::uint64_t node_id_base = 1000;

  [[nodiscard]] std::string bytes() const {
    std::string out = file_header();
    json meta{{"host", host},
              {"boot_id", boot_id},
              {"pid", pid},
              {"ppid", 1},
              {"exe", "/bin/fake"},
              {"cupti_version", 130001},
              {"started_ns", t0 - 1000}};
    meta["env"] = json::object();
    if (rank) meta["env"]["RANK"] = std::to_string(*rank);
    out += chunk(ChunkType::meta, meta.dump());
    out += chunk(ChunkType::device, json{{"ordinal", 0}, {"name", "NVIDIA H200"}, {"uuid", uuid}}.dump());
    out += name_chunk(1, "void k1(float*)");
    out += name_chunk(2, k2_name);
    out += name_chunk(3, "ns::k3(int)");
    // Captured node ids base+0..3; instantiated (clone) ids base+100..103.
    json nodes = json::array();
    nodes.push_back({{"id", node_id_base + 0}, {"type", "kernel"}, {"name", "void k1(float*)"}});
    nodes.push_back({{"id", node_id_base + 1}, {"type", "kernel"}, {"name", k2_name}});
    nodes.push_back({{"id", node_id_base + 2}, {"type", "memcpy"}, {"name", "memcpy DtoD"}, {"bytes", 4096}});
    nodes.push_back({{"id", node_id_base + 3}, {"type", "kernel"}, {"name", "ns::k3(int)"}});
    json graph{{"exec", 1},
               {"graph_id", 7},
               {"nodes", nodes},
               {"edges",
                json::array({json::array({0, 1}), json::array({0, 2}), json::array({1, 3}), json::array({2, 3})})},
               {"clones", json::array({json::array({node_id_base + 100, 0}), json::array({node_id_base + 101, 1}),
                                       json::array({node_id_base + 102, 2}), json::array({node_id_base + 103, 3})})}};
    out += chunk(ChunkType::graph, graph.dump());
    std::vector<std::string> record_chunks;
    std::vector<WireLaunch> launches_out;
    for (int i = 0; i < launches; ++i) {
      const std::uint64_t b = t0 + shift + static_cast<std::uint64_t>(i) * period;
      const auto corr = static_cast<std::uint32_t>(10 + 5 * i);
      std::vector<WireRecord> rs;
      const auto rec = [&](std::uint8_t kind, std::uint64_t s, std::uint64_t e, std::uint64_t node,
                           std::uint32_t name) {
        WireRecord w;
        w.kind = kind;
        w.start_ns = s;
        w.end_ns = e;
        w.correlation_id = corr;
        w.graph_id = 8;
        w.graph_node_id = node;
        w.name_id = name;
        w.stream_id = 7;
        rs.push_back(w);
      };
      rec(0, b + 0, b + 10'000, node_id_base + 100, 1);       // k1: 0-10 µs
      rec(0, b + 12'000, b + 30'000, node_id_base + 101, 2);  // k2: 12-30
      rec(1, b + 11'000, b + 15'000, node_id_base + 102, 0);  // memcpy: 11-15
      rec(0, b + 31'000, b + 40'000, node_id_base + 103, 3);  // k3: 31-40
      record_chunks.push_back(records_chunk(rs));
      launches_out.push_back(WireLaunch{corr, 1, b - 5'000, b - 2'000, 0, 0});
    }
    // Eager work: one kernel outside any graph.
    WireRecord eager;
    eager.kind = 0;
    eager.start_ns = t0 + shift - 50'000;
    eager.end_ns = t0 + shift - 40'000;
    eager.correlation_id = 3;
    eager.name_id = 1;
    record_chunks.push_back(records_chunk({eager}));
    if (reverse_records) std::reverse(record_chunks.begin(), record_chunks.end());
    for (const auto& c : record_chunks) out += c;
    out += launches_chunk(launches_out);
    if (footer)
      out += chunk(ChunkType::footer,
                   json{{"records", 4 * launches + 1}, {"dropped", 0}, {"end_ns", t0 + 10'000'000}}.dump());
    return out;
  }

  [[nodiscard]] ProcessFile parsed(const std::string& name = "p.tpgt") const {
    return parse_process_file(bytes(), name);
  }
};

const Node* node_by_label(const LayerGraph& g, std::string_view label) { return g.find(label); }

}  // namespace

TEST_CASE("trace file: a complete file reads back every chunk", "[trace]") {
  FakeProcess fp;
  fp.rank = 3;
  const ProcessFile f = fp.parsed();
  CHECK(f.complete);
  CHECK(f.truncation.empty());
  CHECK(f.host == "node1");
  CHECK(f.pid == 100);
  REQUIRE(f.rank);
  CHECK(*f.rank == 3);
  CHECK(f.cupti_version == 130001);
  REQUIRE(f.devices.size() == 1);
  CHECK(f.devices[0].uuid == "GPU-aaaa");
  REQUIRE(f.graphs.size() == 1);
  CHECK(f.graphs[0].nodes.size() == 4);
  CHECK(f.graphs[0].edges.size() == 4);
  CHECK(f.graphs[0].clones.size() == 4);
  CHECK(f.records.size() == 13);
  CHECK(f.launches.size() == 3);
  // Every record keeps its name: a graph record's node may be unknown (a graph without topology).
  CHECK(f.records.back().name == "void k1(float*)");
  CHECK(f.records.front().name == "void k1(float*)");
}

TEST_CASE("trace file: a file cut anywhere keeps every complete chunk and says it is truncated", "[trace]") {
  const std::string full = FakeProcess{}.bytes();
  std::size_t previous_records = 0;
  for (std::size_t cut = 12; cut < full.size(); cut += 7) {
    const ProcessFile f = parse_process_file(std::string_view(full).substr(0, cut), "cut.tpgt");
    CHECK_FALSE(f.complete);
    CHECK_FALSE(f.truncation.empty());
    CHECK(f.records.size() >= previous_records);  // never fewer records from a longer prefix
    previous_records = f.records.size();
  }
  CHECK(previous_records >= 12);
}

TEST_CASE("trace file: wrong magic or version is refused with the file's name", "[trace]") {
  CHECK_THROWS_AS(parse_process_file("NOTATRACE...", "x.tpgt"), InputError);
  std::string bad = FakeProcess{}.bytes();
  bad[8] = 9;  // version 9
  try {
    (void)parse_process_file(bad, "v9.tpgt");
    FAIL("accepted version 9");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("v9.tpgt") != std::string::npos);
    CHECK(std::string(e.what()).find("version") != std::string::npos);
  }
}

TEST_CASE("trace file: hostile chunks are bounded and skipped, never trusted", "[trace]") {
  std::string s = file_header();
  // Nested 100k deep: refused by the depth limit, no recursion blow-up.
  s += chunk(ChunkType::meta, std::string(100000, '[') + std::string(100000, ']'));
  // A graph whose edges and clones name nodes that do not exist.
  s += chunk(
      ChunkType::graph,
      R"({"exec":1,"nodes":[{"id":5,"type":"kernel","name":"k"}],"edges":[[0,7],[-1,0],[0,0]],"clones":[[9,3]]})");
  // A graph without an exec number.
  s += chunk(ChunkType::graph, R"({"nodes":[]})");
  // A chunk that claims 4 GB.
  s += std::string("\x05\x00\x00\x00\xff\xff\xff\xff", 8);
  const ProcessFile f = parse_process_file(s, "hostile.tpgt");
  CHECK_FALSE(f.has_meta);
  REQUIRE(f.graphs.size() == 1);
  CHECK(f.graphs[0].edges.empty());
  CHECK(f.graphs[0].clones.empty());
  CHECK_FALSE(f.complete);
  CHECK(f.truncation.find("more than") != std::string::npos);
  CHECK(f.notes.size() >= 3);
}

TEST_CASE("record join: clone chains resolve, cycles and strangers do not", "[trace]") {
  NodeResolver r;
  r.map_node(1, 7);
  r.add_clone(2, 1);
  r.add_clone(3, 2);
  r.add_clone(10, 11);
  r.add_clone(11, 10);  // a cycle: bounded, unresolved
  CHECK(r.resolve(1) == 7);
  CHECK(r.resolve(3) == 7);
  CHECK(r.resolve(10) == -1);
  CHECK(r.resolve(99) == -1);

  std::vector<ActivityRecord> records(4);
  records[0].graph_node_id = 3;  // graph work
  records[0].correlation_id = 50;
  records[0].start_ns = 1;
  records[0].end_ns = 2;
  records[1].correlation_id = 51;  // eager work, node-tagged
  records[1].start_ns = 1;
  records[1].end_ns = 2;
  records[2].graph_node_id = 99;  // unknown node
  records[2].start_ns = 1;
  records[2].end_ns = 2;
  records[3].correlation_id = 52;  // no tag, no timestamp
  CorrelationTags tags;
  tags.replay[50] = 4;
  tags.replay[51] = -2;  // a warm-up
  tags.node[51] = 5;
  CollectionHealth h;
  join_records(records, r, tags, h);
  CHECK(records[0].node == 7);
  CHECK(records[0].replay == 4);
  CHECK(records[1].node == 5);
  CHECK(records[1].replay == -2);
  CHECK(records[2].node == -1);
  CHECK(records[3].node == -1);
  CHECK(h.unmatched == 2);
  CHECK(h.no_timestamp == 1);
}

TEST_CASE("short kernel names drop return type, namespaces, templates and parameters", "[trace]") {
  CHECK(short_kernel_name("void at::native::vectorized_elementwise_kernel<4, at::native::X<float>>(int, float*)") ==
        "vectorized_elementwise_kernel");
  CHECK(short_kernel_name("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096>)") ==
        "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
  CHECK(short_kernel_name("k3") == "k3");
  CHECK(short_kernel_name("") == "kernel");
  CHECK(short_kernel_name("void (anonymous namespace)::f<(operator)1>(x)") == "f");
}

TEST_CASE("merge: one process becomes one rank, replays by launch, the analysis reads it", "[trace]") {
  TracedRun t = merge_traces({FakeProcess{}.parsed()}, {});
  REQUIRE(t.run.variants.size() == 1);
  const VariantRun& v = t.run.variants[0];
  CHECK(v.graph.ranks == 1);
  CHECK(v.graph.nodes.size() == 4);
  CHECK(v.graph.edges.size() == 4);
  CHECK(v.scenario.replays == 3);
  CHECK(v.records.size() == 12);  // the eager kernel is not a graph record
  REQUIRE(node_by_label(v.graph, "r0.k2") != nullptr);
  CHECK(node_by_label(v.graph, "r0.k2")->name == "void k2<float>(int)");
  CHECK(node_by_label(v.graph, "r0.memcpy_DtoD") == nullptr);
  CHECK(v.host_launch_us.size() == 3);
  CHECK(v.host_launch_us[0] == Approx(3.0));
  REQUIRE(t.processes.size() == 1);
  CHECK(t.processes[0].eager_records == 1);
  CHECK(t.processes[0].graph_records == 12);
  CHECK(t.processes[0].unmatched == 0);

  const VariantTimeline a = analyze_variant(v);
  CHECK(a.health.clean());
  CHECK(a.verdict == Verdict::single_rank);
  // k3 joins k2 (ends 30) and the copy (ends 15): ready at 30, starts at 31: waited 1 µs on k2.
  const Node* k3 = node_by_label(v.graph, "r0.k3");
  REQUIRE(k3 != nullptr);
  for (const auto& replay : a.timings) {
    const NodeTiming& t3 = replay[static_cast<std::size_t>(k3->id)];
    REQUIRE(t3.recorded);
    CHECK(t3.wait_us == Approx(1.0));
    CHECK(t3.ready_from == node_by_label(v.graph, "r0.k2")->id);
    for (const auto& n : replay)
      if (n.recorded) CHECK(n.wait_us >= 0);
  }
}

TEST_CASE("merge: two processes on one GPU, ranks by --ranks-together, match by graph and launch ordinal", "[trace]") {
  FakeProcess a;
  a.pid = 200;
  a.rank = 1;
  FakeProcess b;
  b.pid = 100;
  b.rank = 0;
  b.shift = 5'000;  // rank 0 starts 5 µs later than rank 1
  b.node_id_base = 5000;
  b.reverse_records = true;  // buffers out of order
  TraceMergeOptions together;
  together.ranks_together = true;
  TracedRun t = merge_traces({a.parsed("a.tpgt"), b.parsed("b.tpgt")}, together);
  REQUIRE(t.run.variants.size() == 1);
  const VariantRun& v = t.run.variants[0];
  CHECK(v.graph.ranks == 2);
  CHECK(v.ranks_share_gpu);  // same host, same UUID
  CHECK(t.run.env.devices.size() == 1);
  // RANK order: rank 0 is pid 100.
  CHECK(t.processes[0].pid == 100);
  const VariantTimeline an = analyze_variant(v);
  CHECK(an.health.clean());
  CHECK(an.replay_count == 3);
  REQUIRE(an.rank_summaries.size() == 2);
  // r1 (pid 200) started 5 µs before r0: r0's offset is 5 µs, r1's 0.
  CHECK(an.rank_summaries[0].offset_us.median == Approx(5.0));
  CHECK(an.rank_summaries[1].offset_us.median == Approx(0.0));
  CHECK(an.overlap.median > 0.8);
}

TEST_CASE("merge: different GPUs are not shared; UUIDs decide, not ordinals", "[trace]") {
  FakeProcess a;
  a.rank = 0;
  FakeProcess b;
  b.rank = 1;
  b.pid = 101;
  b.uuid = "GPU-bbbb";  // ordinal 0 in its own process (CUDA_VISIBLE_DEVICES), another GPU
  TraceMergeOptions together;
  together.ranks_together = true;
  TracedRun t = merge_traces({a.parsed(), b.parsed()}, together);
  REQUIRE(t.run.variants.size() == 1);
  CHECK_FALSE(t.run.variants[0].ranks_share_gpu);
  CHECK(t.run.env.devices.size() == 2);
}

TEST_CASE("merge: graphs of different shapes are separate variants", "[trace]") {
  FakeProcess a;
  FakeProcess b;
  b.pid = 101;
  b.k2_name = "void other_kernel(int)";
  TracedRun t = merge_traces({a.parsed(), b.parsed()}, {});
  CHECK(t.run.variants.size() == 2);
  for (const auto& v : t.run.variants) CHECK(v.graph.ranks == 1);
}

TEST_CASE("merge: two hosts are refused unless synced or aligned on collectives", "[trace]") {
  FakeProcess a;
  a.rank = 0;
  a.k2_name = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(x)";
  FakeProcess b = a;
  b.rank = 1;
  b.pid = 300;
  b.host = "node2";
  b.boot_id = "boot-b";
  b.uuid = "GPU-cccc";
  b.shift = 2'000'000;  // its clock runs 2 ms ahead
  CHECK_THROWS_AS(merge_traces({a.parsed(), b.parsed()}, {}), InputError);

  TraceMergeOptions synced;
  synced.clocks = ClockPolicy::assume_synced;
  const TracedRun s = merge_traces({a.parsed(), b.parsed()}, synced);
  REQUIRE(s.run.variants.size() == 1);
  CHECK(s.clock_text.find("not checked") != std::string::npos);

  TraceMergeOptions align;
  align.clocks = ClockPolicy::align_collectives;
  const TracedRun al = merge_traces({a.parsed(), b.parsed()}, align);
  CHECK(al.processes[1].clock_offset_us == Approx(-2000.0));
  CHECK(al.clock_text.find("residual 0.00") != std::string::npos);
  const VariantTimeline an = analyze_variant(al.run.variants[0]);
  CHECK(an.rank_summaries[1].offset_us.median == Approx(0.0));
  REQUIRE(al.collectives.size() == 1);
  CHECK(al.collectives[0].node_index == 1);
  CHECK(al.collectives[0].arrival_skew_us.size() == 2);
  CHECK(al.collectives[0].transfer_us == Approx(18.0));
}

TEST_CASE("merge: a truncated file is analysed and named as truncated", "[trace]") {
  FakeProcess a;
  a.footer = false;
  TracedRun t = merge_traces({a.parsed()}, {});
  REQUIRE(t.run.variants.size() == 1);
  CHECK_FALSE(t.processes[0].complete);
  const auto& notes = t.run.variants[0].notes;
  CHECK(std::any_of(notes.begin(), notes.end(),
                    [](const std::string& n) { return n.find("truncated") != std::string::npos; }));
  CHECK(render_trace_summary(t).find("TRUNCATED") != std::string::npos);
}

TEST_CASE("merge: no files means no CUDA work was seen", "[trace]") {
  const TracedRun t = merge_traces({}, {});
  CHECK(t.run.variants.empty());
  CHECK(render_trace_summary(t).find("no CUDA work was seen") != std::string::npos);
}

TEST_CASE("the Chrome trace of a long run keeps the first replays and the outliers", "[trace]") {
  FakeProcess fp;
  fp.launches = 30;
  const TracedRun t = merge_traces({fp.parsed()}, {});
  const RunAnalysis a = analyze_run(t.run);
  const auto slices = [](const std::string& text) {
    const json doc = json::parse(text);
    int n = 0;
    for (const auto& e : doc.at("traceEvents"))
      if (e.at("ph") == "X") ++n;
    return std::make_pair(n, doc.at("otherData").at("replays_shown").get<std::string>());
  };
  ChromeTraceOptions ten;
  ten.max_replays = 10;
  const auto [shown, text] = slices(render_chrome_trace(t.run, a, 0, ten));
  CHECK(shown == static_cast<int>(4 * (10 + std::count_if(a.variants[0].outliers.begin(), a.variants[0].outliers.end(),
                                                          [](const OutlierReplay& o) { return o.replay >= 10; }))));
  CHECK(text.starts_with(fmt::format("{} of 30", shown / 4)));
  ChromeTraceOptions all;
  all.max_replays = 0;
  CHECK(slices(render_chrome_trace(t.run, a, 0, all)).first == 4 * 30);
}

TEST_CASE("trace file: control characters in a traced program's names never reach the report", "[trace]") {
  FakeProcess fp;
  fp.k2_name = "void k2\x1b[31m\nred(int)";
  fp.host = "node\r1";
  const TracedRun t = merge_traces({fp.parsed()}, {});
  REQUIRE(t.run.variants.size() == 1);
  for (const auto& n : t.run.variants[0].graph.nodes) {
    for (const char c : n.name) CHECK(static_cast<unsigned char>(c) >= 0x20);
    for (const char c : n.label) CHECK(static_cast<unsigned char>(c) >= 0x20);
  }
  CHECK(t.processes[0].host == "node?1");
}

TEST_CASE("the Chrome trace of a long chain of record-less nodes is linear", "[trace]") {
  // 60,000 event nodes between two kernels: the flow from the first kernel to the last must be found
  // without walking the chain once per node.
  VariantRun v;
  v.scenario.name = "chain";
  v.scenario.replays = 1;
  v.scenario.warmup = 0;
  v.graph.ranks = 2;
  v.graph.layers = 1;
  const int n = 60'002;
  for (int i = 0; i < n; ++i) {
    Node node;
    node.id = i;
    node.rank = i == n - 1 ? 1 : 0;
    node.stream = node.rank;
    node.kind = (i == 0 || i == n - 1) ? NodeKind::kernel : NodeKind::other;
    node.role = Role::traced;
    node.label = fmt::format("r{}.n{}", node.rank, i);
    v.graph.nodes.push_back(node);
    if (i > 0) v.graph.edges.push_back(Edge{i - 1, i});
  }
  for (const int id : {0, n - 1}) {
    ActivityRecord a;
    a.node = id;
    a.replay = 0;
    a.start_ns = 1'000'000 + static_cast<std::uint64_t>(id == 0 ? 0 : 20'000);
    a.end_ns = a.start_ns + 10'000;
    a.stream_id = static_cast<std::uint32_t>(id == 0 ? 0 : 1);
    v.records.push_back(a);
  }
  RunData run;
  run.variants.push_back(v);
  const RunAnalysis a = analyze_run(run);
  const json doc = json::parse(render_chrome_trace(run, a, 0));
  int flows = 0;
  for (const auto& e : doc.at("traceEvents"))
    if (e.at("ph") == "s" && e.at("cat") == "cross-rank") ++flows;
  CHECK(flows == 1);
}

TEST_CASE("analyze writes a trace folder as it writes a run folder: in place, new, never over another",
          "[trace][cli]") {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("tpgraph-trace-folder-" + std::to_string(::getpid()));
  fs::remove_all(root);
  const fs::path traced = root / "traced";
  fs::create_directories(traced / "procs");
  FakeProcess fp;
  fp.launches = 5;
  {
    std::ofstream out(traced / "procs" / "node1-100.tpgt", std::ios::binary);
    out << fp.bytes();
  }
  const auto analyze = [&](const std::string& args) {
    const fs::path log = root / "log.txt";
    const std::string command =
        std::string("'") + TPGRAPH_BINARY + "' analyze " + args + " >'" + log.string() + "' 2>&1";
    const int raw = std::system(command.c_str());
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    return std::make_pair(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, text);
  };
  const auto read = [](const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), {});
  };

  // In place, twice: the same report, no staging left, no records.json (procs/ is the raw data).
  const auto first = analyze("'" + traced.string() + "'");
  INFO(first.second);
  REQUIRE(first.first == 0);
  const std::string report = read(traced / "report.md");
  CHECK(report.find("## Traced processes") != std::string::npos);
  CHECK(fs::exists(traced / "report.json"));
  CHECK_FALSE(fs::exists(traced / "records.json"));
  REQUIRE(analyze("'" + traced.string() + "'").first == 0);
  CHECK(read(traced / "report.md") == report);
  for (const auto& e : fs::directory_iterator(traced))
    CHECK_FALSE(e.path().filename().string().starts_with(".tpgraph-staging"));

  // Into a new folder: the same report.
  REQUIRE(analyze("'" + traced.string() + "' --out '" + (root / "copy").string() + "'").first == 0);
  CHECK(read(root / "copy" / "report.md") == report);

  // Into a folder that holds something else: refused, with nothing written there.
  fs::create_directories(root / "other");
  { std::ofstream(root / "other" / "notes.txt") << "mine\n"; }
  const auto refused = analyze("'" + traced.string() + "' --out '" + (root / "other").string() + "'");
  CHECK(refused.first != 0);
  CHECK(refused.second.find("not empty") != std::string::npos);
  CHECK(std::distance(fs::directory_iterator(root / "other"), fs::directory_iterator{}) == 1);
  fs::remove_all(root);
}

TEST_CASE("trace file: names become well-formed UTF-8 without control characters", "[trace]") {
  CHECK(printable("void k<float>(int)") == "void k<float>(int)");
  CHECK(printable("t \xc2\xb5s \xe2\x86\x92 \xf0\x9f\x9a\x80") ==
        "t \xc2\xb5s \xe2\x86\x92 \xf0\x9f\x9a\x80");  // µ → 🚀
  CHECK(printable("a\x1b[31mb\nc") == "a?[31mb?c");
  CHECK(printable("del\x7f c1\xc2\x85.") == "del? c1?.");  // DEL, NEL (C1) as one '?'
  CHECK(printable("cut \xc8") == "cut ?");                 // a lead byte at the end
  CHECK(printable("over\xc0\xaf") == "over??");            // overlong '/'
  CHECK(printable("sur\xed\xa0\x80") == "sur???");         // a UTF-16 surrogate
  CHECK(printable("big\xf4\x90\x80\x80") == "big????");    // past U+10FFFF
  CHECK(printable("lone\x80\xbf") == "lone??");            // continuation bytes alone
  CHECK(printable(std::string("nul\0x", 5)) == "nul?x");
  // At most 4096 bytes, never cutting a two-byte character in half.
  const std::string long_name = "a" + [] {
    std::string s;
    for (int i = 0; i < 3000; ++i) s += "\xc2\xb5";
    return s;
  }();
  const std::string p = printable(long_name);
  CHECK(p.size() == 4095);
  CHECK(p == printable(p));  // already clean: unchanged
  // What the report writers need: every output string parses as JSON text.
  const std::string hostile = "k\xc8\xff\xfe\xed\xa0\x80\xe2\x82";
  CHECK_NOTHROW(json(printable(hostile)).dump());
  CHECK_THROWS(json(hostile).dump());
}

TEST_CASE("trace folder: record files whose analysis cannot fit in memory are refused before reading", "[trace]") {
  const std::int64_t gib = std::int64_t{1} << 30;
  // 10 million records are a 560 MB file and took 1.88 GB: the estimate is above, not far above.
  const std::int64_t ten_million = 560 * (std::int64_t{1} << 20);
  CHECK(trace_analysis_memory(ten_million) >= 188 * gib / 100);
  CHECK(trace_analysis_memory(ten_million) <= 3 * gib);
  CHECK_NOTHROW(check_trace_analysis_fits("procs", 2, ten_million, 4 * gib));
  CHECK_NOTHROW(check_trace_analysis_fits("procs", 2, 100 * gib, -1));  // MemAvailable unknown
  try {
    check_trace_analysis_fits("run/procs", 3, 10 * gib, 8 * gib);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    const std::string what = e.what();
    CHECK(what.find("run/procs: 3 record files of 10.0 GiB") != std::string::npos);
    CHECK(what.find("about 35.2 GiB of host memory and 8.00 GiB is available") != std::string::npos);
    CHECK(what.find("accepted:") != std::string::npos);
  }
}

TEST_CASE("trace file: a GPU's UUID is written in nvidia-smi's form", "[trace]") {
  const char bytes[16] = {0x12,
                          0x34,
                          0x56,
                          0x78,
                          static_cast<char>(0x9a),
                          static_cast<char>(0xbc),
                          0x0d,
                          0x0e,
                          static_cast<char>(0xf0),
                          0x01,
                          0x23,
                          0x45,
                          0x67,
                          static_cast<char>(0x89),
                          static_cast<char>(0xab),
                          static_cast<char>(0xcd)};
  CHECK(tpgraph::tracefile::uuid_text(bytes) == "GPU-12345678-9abc-0d0e-f001-23456789abcd");
}
