// The merge of record files beyond one graph per process: completeness (unmatched records, graphs
// without topology, truncated files), conditional and child-graph bodies, updated executables,
// independent processes against ranks tied by a collective, and the report's first line.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "catch.hpp"
#include "core/analysis/timeline.hpp"
#include "core/records/trace_file.hpp"
#include "core/records/traced_run.hpp"
#include "core/report/report.hpp"

using namespace tpgraph;
using namespace tpgraph::tracefile;
using nlohmann::json;

namespace {

constexpr std::uint64_t kT0 = 1'700'000'000'000'000'000ull;
std::uint64_t at_us(double us) { return kT0 + static_cast<std::uint64_t>(us * 1000.0); }

// One process's record file, chunk by chunk: graphs as JSON, records and launches by hand.
struct Proc {
  std::int64_t pid = 100;
  std::string uuid = "GPU-aaaa";
  std::vector<json> graphs;
  std::vector<WireRecord> records;
  std::vector<WireLaunch> launches;
  std::vector<std::string> notes;
  std::map<std::string, std::uint32_t> names;
  bool footer = true;

  std::uint32_t name_id(const std::string& name) { return names.emplace(name, names.size() + 1).first->second; }

  // A graph of kernels in a chain; instantiated ids first.., captured ids first - 100..
  json& chain(const std::vector<std::string>& kernels, std::uint32_t exec = 1, std::uint32_t version = 0,
              std::uint64_t first = 101) {
    json nodes = json::array(), edges = json::array(), clones = json::array();
    for (std::size_t i = 0; i < kernels.size(); ++i) {
      nodes.push_back({{"id", first - 100 + i}, {"type", "kernel"}, {"name", kernels[i]}});
      clones.push_back(json::array({first + i, i}));
      if (i > 0) edges.push_back(json::array({i - 1, i}));
    }
    graphs.push_back({{"exec", exec},
                      {"version", version},
                      {"graph_id", 7},
                      {"nodes", nodes},
                      {"edges", edges},
                      {"clones", clones}});
    return graphs.back();
  }

  // One record of instantiated node `node_id` in the launch `corr`, named `name`.
  void record(std::uint32_t corr, std::uint64_t node_id, const std::string& name, double start_us, double end_us,
              std::uint32_t stream = 7) {
    WireRecord w;
    w.start_ns = at_us(start_us);
    w.end_ns = at_us(end_us);
    w.correlation_id = corr;
    w.graph_id = 8;
    w.graph_node_id = node_id;
    w.name_id = name_id(name);
    w.stream_id = stream;
    records.push_back(w);
  }

  void launch(std::uint32_t corr, std::uint32_t exec, double at, std::uint32_t version = 0) {
    launches.push_back(WireLaunch{corr, exec, at_us(at) - 3000, at_us(at) - 1000, 0, version});
  }

  [[nodiscard]] std::string bytes() const {
    std::string out = file_header();
    json meta{{"host", "node1"},         {"boot_id", "boot-a"},     {"pid", pid}, {"ppid", 1}, {"exe", "/bin/fake"},
              {"cupti_version", 130001}, {"started_ns", kT0 - 1000}};
    meta["env"] = json::object();
    out += chunk(ChunkType::meta, meta.dump());
    out += chunk(ChunkType::device, json{{"ordinal", 0}, {"name", "NVIDIA H200"}, {"uuid", uuid}}.dump());
    for (const auto& [name, id] : names) out += name_chunk(id, name);
    for (const auto& g : graphs) out += chunk(ChunkType::graph, g.dump());
    out += records_chunk(records);
    out += launches_chunk(launches);
    for (const auto& n : notes) out += chunk(ChunkType::note, n);
    if (footer)
      out += chunk(ChunkType::footer, json{{"records", records.size()}, {"dropped", 0}, {"end_ns", kT0 + 1}}.dump());
    return out;
  }
  [[nodiscard]] ProcessFile parsed() const { return parse_process_file(bytes(), fmt::format("{}.tpgt", pid)); }
};

// Two processes on one GPU: A runs a1 then a2 (its own chain), B runs b1 in A's gap, twice.
std::pair<Proc, Proc> two_processes(const std::string& a2 = "a2", const std::string& b1 = "b1") {
  Proc a, b;
  b.pid = 200;
  a.chain({"a1", a2});
  b.chain({b1});
  for (int i = 0; i < 2; ++i) {
    const double t = 1000.0 * i;
    const auto corr = static_cast<std::uint32_t>(10 + 10 * i);
    a.record(corr, 101, "a1", t + 0, t + 10);
    a.record(corr, 102, a2, t + 30, t + 40);
    a.launch(corr, 1, t);
    b.record(corr, 101, b1, t + 12, t + 28);
    b.launch(corr, 1, t + 12);
  }
  return {a, b};
}

const VariantRun* variant(const TracedRun& t, std::string_view name) {
  for (const auto& v : t.run.variants)
    if (v.scenario.name == name) return &v;
  return nullptr;
}

}  // namespace

TEST_CASE("merge: independent processes are analysed each on its own, the other's work named as contention",
          "[trace]") {
  const auto [a, b] = two_processes();
  const TracedRun t = merge_traces({a.parsed(), b.parsed()}, {});
  REQUIRE(t.run.variants.size() == 2);
  for (const auto& v : t.run.variants) CHECK(v.graph.ranks == 1);
  REQUIRE(t.run.trace);
  CHECK(t.run.trace->rank_rule.find("only where their graphs hold a collective") != std::string::npos);
  const VariantRun* va = variant(t, "graph-1");  // A's records start first
  REQUIRE(va != nullptr);
  CHECK(va->graph.nodes.front().label == "r0.a1");
  const VariantTimeline an = analyze_variant(*va);
  const NodeWaitSummary* w = an.wait_of(1);
  REQUIRE(w != nullptr);
  // a2 became ready at 10 µs and started at 30: B's b1 held the GPU from 12 to 28.
  CHECK(w->wait_us.median == Approx(20.0));
  CHECK(w->contention_us.median == Approx(16.0));
  REQUIRE_FALSE(w->typical.occupants.empty());
  CHECK(occupant_name(va->graph, w->typical.occupants.front()) == "pid 200: b1 (graph-2)");
  // No offset or verdict between the processes: each variant has one rank.
  CHECK(an.rank_summaries.size() == 1);
  CHECK(an.verdict == Verdict::single_rank);
}

TEST_CASE("merge: processes are ranks of one replay when a collective ties them or the user says so", "[trace]") {
  SECTION("an nccl kernel in both graphs") {
    const auto [a, b] = two_processes("ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", "b1");
    Proc b2 = a;  // the same graph in a second process
    b2.pid = 200;
    const TracedRun t = merge_traces({a.parsed(), b2.parsed()}, {});
    REQUIRE(t.run.variants.size() == 1);
    CHECK(t.run.variants[0].graph.ranks == 2);
    CHECK(t.collectives.size() == 1);
  }
  SECTION("--ranks-together") {
    const auto [a, b] = two_processes();
    Proc b2 = a;
    b2.pid = 200;
    TraceMergeOptions together;
    together.ranks_together = true;
    const TracedRun t = merge_traces({a.parsed(), b2.parsed()}, together);
    REQUIRE(t.run.variants.size() == 1);
    CHECK(t.run.variants[0].graph.ranks == 2);
    CHECK(t.run.trace->rank_rule.find("--ranks-together") != std::string::npos);
    // Without it the same two processes stay apart.
    CHECK(merge_traces({a.parsed(), b2.parsed()}, {}).run.variants.size() == 2);
  }
}

TEST_CASE("merge: two executables of one shape in one process are two variants; tied ranks pair them in order",
          "[trace]") {
  // A server's graphs for two batch sizes whose kernels are the same: exec 1 runs 10 µs kernels,
  // exec 2 40 µs ones, launched alternately. One variant of both would mix their spans.
  const auto server = [](const std::string& kernel, std::int64_t pid) {
    Proc p;
    p.pid = pid;
    p.chain({kernel, "k2"}, 1, 0, 101);
    p.chain({kernel, "k2"}, 2, 0, 301);  // node ids are unique in a process: captured 201.., instantiated 301..
    for (int i = 0; i < 4; ++i) {
      const double t = 1000.0 * i;
      const auto corr = static_cast<std::uint32_t>(10 + 10 * i);
      const bool second = i % 2 == 1;
      const double d = second ? 40.0 : 10.0;
      p.record(corr, second ? 301 : 101, kernel, t, t + d);
      p.record(corr, second ? 302 : 102, "k2", t + d, t + 2 * d);
      p.launch(corr, second ? 2 : 1, t);
    }
    return p;
  };
  SECTION("one process") {
    const TracedRun t = merge_traces({server("k1", 100).parsed()}, {});
    REQUIRE(t.run.variants.size() == 2);
    for (const auto& v : t.run.variants) {
      CHECK(v.scenario.replays == 2);
      CHECK(v.graph.ranks == 1);
      CHECK(v.identity.find("2 nodes, first kernel k1, last k2") != std::string::npos);  // what diff pairs by
      CHECK(std::find(v.notes.begin(), v.notes.end(), "traced " + v.scenario.name + " is " + v.identity) !=
            v.notes.end());
    }
    const VariantTimeline first = analyze_variant(t.run.variants[0]);
    const VariantTimeline second = analyze_variant(t.run.variants[1]);
    CHECK(first.span_us.median == Approx(20.0));
    CHECK(second.span_us.median == Approx(80.0));
  }
  SECTION("two processes tied by a collective: the n-th executable of a shape pairs with the n-th") {
    const std::string nccl = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)";
    const TracedRun t = merge_traces({server(nccl, 100).parsed(), server(nccl, 200).parsed()}, {});
    REQUIRE(t.run.variants.size() == 2);
    for (const auto& v : t.run.variants) {
      CHECK(v.graph.ranks == 2);
      CHECK(v.scenario.replays == 2);
    }
    CHECK(analyze_variant(t.run.variants[1]).span_us.median == Approx(80.0));
  }
}

namespace {

// Exec 1: x1 -> x2 whose edges could not be read; exec 2 launched without a graph chunk; exec 3 a
// known graph with one record that matches none of its nodes.
Proc lossy_process() {
  Proc p;
  p.pid = 300;
  json& g = p.chain({"x1", "x2"});
  g["edges"] = json::array();
  g["topology_error"] = "cuGraphGetEdges: CUDA_ERROR_LOSSY_QUERY";
  for (int i = 0; i < 2; ++i) {
    const double t = 1000.0 * i;
    const auto corr = static_cast<std::uint32_t>(10 + 10 * i);
    p.record(corr, 101, "x1", t + 0, t + 10);
    p.record(corr, 102, "x2", t + 15, t + 25);
    p.record(corr, 101, "x1", t + 30, t + 35);  // x1 again in one launch: its second occurrence
    p.launch(corr, 1, t);
  }
  p.record(30, 900, "z", 2000, 2010, 8);
  p.launch(30, 2, 2000);
  p.chain({"y"}, 3, 0, 501);
  p.record(40, 501, "y", 3000, 3005);
  p.record(40, 999, "y?", 3010, 3012);
  p.launch(40, 3, 3000);
  p.notes.push_back("profiler: the program's profiler was refused CUPTI (tpgraph holds it)");
  json& never = p.chain({"w"}, 4, 0, 1901);  // never launched, its edges unread: still counted
  never["topology_error"] = "cuGraphGetEdges failed";
  return p;
}

}  // namespace

TEST_CASE("merge: records of a graph without topology are kept per stream, and the trace is NOT CLEAN", "[trace]") {
  const Proc p = lossy_process();
  const TracedRun t = merge_traces({p.parsed()}, {});
  REQUIRE(t.run.trace);
  const TraceCompleteness& c = *t.run.trace;
  CHECK_FALSE(c.clean());
  CHECK(c.unmatched == 1);
  REQUIRE(c.no_topology.size() == 3);
  CHECK(c.no_topology[0].find("CUDA_ERROR_LOSSY_QUERY") != std::string::npos);
  CHECK(c.no_topology[1].find("no graph chunk for executable 2") != std::string::npos);
  CHECK(c.line().starts_with("NOT CLEAN: 1 of 9 graph records matched no node; 3 graphs without topology"));
  CHECK(c.no_topology[2] == "pid 300: cuGraphGetEdges failed (never launched)");
  CHECK(t.run.variants.size() == 3);  // the graph never launched has nothing to show
  REQUIRE(c.profiler.size() == 1);

  const VariantRun* lossy = variant(t, "graph-1");
  REQUIRE(lossy != nullptr);
  CHECK(lossy->topology_error == "cuGraphGetEdges: CUDA_ERROR_LOSSY_QUERY");
  REQUIRE(lossy->graph.nodes.size() == 3);
  CHECK(lossy->graph.nodes[2].label == "r0.s7.x1#2");
  CHECK(lossy->graph.edges.empty());
  CHECK(lossy->records.size() == 6);
  const VariantTimeline an = analyze_variant(*lossy);
  CHECK(an.health.clean());
  CHECK(an.waits.empty());  // no dependency known: no wait, no cause
  CHECK(an.critical_path.typical_replay == -1);
  CHECK(an.no_topology == lossy->topology_error);
  REQUIRE(an.stream_nodes.size() == 3);
  CHECK(an.stream_nodes[1].gap_us.median == Approx(5.0));  // x2 started 5 µs after x1 ended
  CHECK(an.stream_nodes[2].duration_us.median == Approx(5.0));
  for (const auto& n : an.timings[0]) CHECK(n.wait_us == 0.0);

  const VariantRun* missing = variant(t, "graph-2");
  REQUIRE(missing != nullptr);
  CHECK(missing->records.size() == 1);
  CHECK(missing->graph.nodes[0].label == "r0.s8.z");

  // The first line of every output says it; report.json carries it at the top level.
  const RunAnalysis analysis = analyze_run(t.run);
  const std::string md = render_report_markdown(t.run, analysis);
  CHECK(md.substr(0, md.find('\n')) == c.line());
  CHECK(md.find("CUPTI SHARED WITH ANOTHER PROFILER: pid 300: profiler:") != std::string::npos);
  CHECK(md.find("**no topology: cuGraphGetEdges: CUDA_ERROR_LOSSY_QUERY**") != std::string::npos);
  CHECK(md.find("stream 7 (medians): r0.s7.x1 10.0 µs → (gap 5.0) r0.s7.x2 10.0 µs") != std::string::npos);
  const json report = json::parse(render_report_json(t.run, analysis));
  CHECK(report["trace"]["clean"] == false);
  CHECK(report["trace"]["unmatched"] == 1);
  CHECK(report["variants"][0]["no_topology"] == "cuGraphGetEdges: CUDA_ERROR_LOSSY_QUERY");
}

TEST_CASE("merge: a truncated file makes the trace NOT CLEAN; a complete one is CLEAN", "[trace]") {
  auto [a, b] = two_processes();
  CHECK(merge_traces({a.parsed()}, {}).run.trace->line().starts_with("CLEAN: all 4 graph records matched"));
  a.footer = false;
  const TraceCompleteness c = *merge_traces({a.parsed()}, {}).run.trace;
  CHECK(c.truncated.size() == 1);
  CHECK(c.line() == "NOT CLEAN: 1 process file truncated");
}

TEST_CASE("merge: a graph instantiated for launch from the device makes the trace NOT CLEAN, naming it", "[trace]") {
  auto [a, b] = two_processes();
  json& device_graph = a.chain({"d_first", "d_second"}, 9, 0, 1901);  // never launched from the host
  device_graph["device_launch"] = true;
  const TraceCompleteness c = *merge_traces({a.parsed()}, {}).run.trace;
  REQUIRE(c.unseen.size() == 1);
  CHECK(c.unseen[0] == "pid " + std::to_string(a.pid) + " exec 9 (2 nodes)");
  CHECK(c.line() ==
        "NOT CLEAN: 1 graph instantiated for launch from the device, whose device launches leave no record");
  CHECK_FALSE(c.clean());
  // The flag is read only where it is true.
  device_graph["device_launch"] = "yes";
  CHECK(merge_traces({a.parsed()}, {}).run.trace->clean());
}

namespace {

// pre -> while{body_a -> body_b} -> if{then_k | else_k} -> child{child_k} -> post =prog=> pdl.
// Launch 0 loops 3 times and takes the then branch; launch 1 loops 5 times and takes the else.
Proc bodies_process() {
  Proc p;
  json nodes = json::array();
  const auto kernel = [&](int id, const char* name, int parent = -1, int body = 0) {
    json n{{"id", id}, {"type", "kernel"}, {"name", name}};
    if (parent >= 0) n["parent"] = parent, n["body"] = body;
    nodes.push_back(n);
  };
  kernel(1, "pre");
  nodes.push_back({{"id", 2}, {"type", "conditional"}, {"cond", {{"kind", "while"}, {"bodies", 1}}}});
  kernel(3, "body_a", 1);
  kernel(4, "body_b", 1);
  nodes.push_back({{"id", 5}, {"type", "conditional"}, {"cond", {{"kind", "if"}, {"bodies", 2}}}});
  kernel(6, "then_k", 4, 0);
  kernel(7, "else_k", 4, 1);
  nodes.push_back({{"id", 8}, {"type", "graph"}});
  kernel(9, "child_k", 7);
  kernel(10, "post");
  kernel(11, "pdl");
  json clones = json::array();
  for (int i = 0; i < 11; ++i) clones.push_back(json::array({101 + i, i}));
  p.graphs.push_back({{"exec", 1},
                      {"graph_id", 7},
                      {"nodes", nodes},
                      {"edges", json::array({json::array({0, 1}), json::array({2, 3}), json::array({1, 4}),
                                             json::array({4, 7}), json::array({7, 9}), json::array({9, 10, 1, 0, 0})})},
                      {"clones", clones}});
  for (int l = 0; l < 2; ++l) {
    const double t = 1000.0 * l;
    const auto corr = static_cast<std::uint32_t>(10 + 10 * l);
    const int iterations = l == 0 ? 3 : 5;
    p.record(corr, 101, "pre", t + 0, t + 10);
    double at = t + 12;
    for (int k = 0; k < iterations; ++k, at += 8) {
      p.record(corr, 103, "body_a", at, at + 3);
      p.record(corr, 104, "body_b", at + 4, at + 7);
    }
    p.record(corr, l == 0 ? 106 : 107, l == 0 ? "then_k" : "else_k", at + 5, at + 10);
    p.record(corr, 109, "child_k", at + 15, at + 20);
    p.record(corr, 110, "post", at + 25, at + 35);
    p.record(corr, 111, "pdl", at + 30, at + 40);  // programmatic: starts before post ends
    p.launch(corr, 1, t);
  }
  return p;
}

}  // namespace

TEST_CASE("merge: body nodes map, a while body's records are iterations, waits run through the owners", "[trace]") {
  const TracedRun t = merge_traces({bodies_process().parsed()}, {});
  REQUIRE(t.run.trace);
  CHECK(t.run.trace->clean());
  REQUIRE(t.run.variants.size() == 1);
  const VariantRun& v = t.run.variants[0];
  REQUIRE(v.nesting.size() == 11);
  CHECK(v.nesting[2].repeats);
  CHECK_FALSE(v.nesting[5].repeats);
  CHECK(v.nesting[5].optional);
  CHECK_FALSE(v.nesting[8].optional);  // a child graph always runs
  const VariantTimeline an = analyze_variant(v);
  CHECK(an.health.duplicate == 0);  // iterations, not duplicates
  CHECK(an.health.missing == 0);    // the branch not taken is not missing
  CHECK(an.health.clean());
  REQUIRE(an.conditionals.size() == 2);
  CHECK(an.conditionals[0].kind == NestedNode::Conditional::while_);
  CHECK(an.conditionals[0].iterations.min == 3);
  CHECK(an.conditionals[0].iterations.max == 5);
  CHECK(an.conditionals[1].kind == NestedNode::Conditional::if_);
  CHECK(an.conditionals[1].ran_in == std::vector<int>{1, 1});

  const auto& r0 = an.timings[0];
  CHECK(r0[2].ready_from == 0);  // body_a's first iteration waits on pre, through the while node
  CHECK(r0[2].start_ns == at_us(12));
  CHECK(r0[3].end_ns == at_us(35));  // body_b spans its three iterations
  CHECK(r0[5].ready_from == 3);      // then_k waits on the loop's last body_b
  CHECK(r0[5].wait_us == Approx(6.0));
  CHECK(r0[9].ready_from == 8);  // post waits on child_k, through the child-graph node
  CHECK(r0[10].ready_from == 9);
  CHECK(r0[10].wait_us == Approx(0.0));  // pdl overlaps post: allowed, not a negative wait

  const std::string md = render_report_markdown(t.run, analyze_run(t.run));
  CHECK(md.find("while r0.conditional#1: iterations per launch min 3, median 4.0, max 5 (2 launches)") !=
        std::string::npos);
  CHECK(md.find("if r0.conditional#2: ran body 0 in 1, body 1 in 1 of 2 launches") != std::string::npos);
}

TEST_CASE("merge: launches before and after an exec update are separate variants", "[trace]") {
  Proc p;
  p.chain({"k1", "k2"}, 1, 0);
  p.chain({"k1", "k2"}, 1, 1);  // updated: same nodes, same instantiated ids
  for (int l = 0; l < 4; ++l) {
    const double t = 1000.0 * l;
    const auto corr = static_cast<std::uint32_t>(10 + 10 * l);
    const std::uint32_t version = l < 2 ? 0 : 1;
    p.record(corr, 101, "k1", t, t + 10);
    p.record(corr, 102, "k2", t + 10, t + (version == 0 ? 20 : 60));
    p.launch(corr, 1, t, version);
  }
  const TracedRun t = merge_traces({p.parsed()}, {});
  REQUIRE(t.run.variants.size() == 2);
  CHECK(t.run.variants[0].scenario.name == "graph-1");
  CHECK(t.run.variants[1].scenario.name == "graph-2.v1");
  const VariantTimeline before = analyze_variant(t.run.variants[0]);
  const VariantTimeline after = analyze_variant(t.run.variants[1]);
  CHECK(before.replay_count == 2);
  CHECK(after.replay_count == 2);
  CHECK(before.wait_of(1)->duration_us.max == Approx(10.0));
  CHECK(after.wait_of(1)->duration_us.min == Approx(50.0));
}

TEST_CASE("analyze --strict exits 4 on a trace that is not clean; the first line says why", "[trace][cli]") {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("tpgraph-strict-" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "procs");
  { std::ofstream(root / "procs" / "node1.300.tpgt", std::ios::binary) << lossy_process().bytes(); }
  const auto analyze = [&](const std::string& flags) {
    const fs::path log = root / "log.txt";
    const std::string command =
        fmt::format("'{}' analyze {} '{}' >'{}' 2>&1", TPGRAPH_BINARY, flags, root.string(), log.string());
    const int raw = std::system(command.c_str());
    std::ifstream in(log);
    return std::make_pair(WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, std::string(std::istreambuf_iterator<char>(in), {}));
  };
  const auto plain = analyze("");
  INFO(plain.second);
  CHECK(plain.first == 0);
  CHECK(plain.second.starts_with("NOT CLEAN: 1 of 9 graph records matched no node"));
  CHECK(plain.second.find("\nCUPTI SHARED WITH ANOTHER PROFILER: pid 300") != std::string::npos);
  CHECK(analyze("--strict").first == 4);
  std::ifstream md(root / "report.md");
  std::string first;
  std::getline(md, first);
  CHECK(first.starts_with("NOT CLEAN"));
  fs::remove_all(root);
}
