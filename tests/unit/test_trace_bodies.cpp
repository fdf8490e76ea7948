// Records of the nodes inside conditional bodies and child graphs, as CUPTI writes them (seen on an
// H100, CUDA 13.0, driver 580): their graph node id is the executable's graph id << 32 | the node's
// index in the flattened topology (not the id the clone callback named), and the kernels a while
// or if node launches from the device carry correlation id 0. The merge must place both.
#include <fmt/core.h>

#include <algorithm>
#include <string>
#include <vector>

#include "catch.hpp"
#include "core/analysis/timeline.hpp"
#include "core/records/trace_recording.hpp"
#include "core/records/traced_run.hpp"
#include "crafted_trace.hpp"

using namespace tpgraph;
using namespace tpgraph::testing;

namespace {

constexpr std::uint64_t kExecGraph = 7;  // CUPTI's id of the executable graph
std::uint64_t exec_id(std::uint64_t i) { return kExecGraph << 32 | i; }

// prologue -> while (body: loop_body) -> tail; the body's clone named by its own graph (8).
json while_graph() {
  json nodes = json::array();
  nodes.push_back({{"id", 1ull << 32}, {"type", "kernel"}, {"name", "prologue"}});
  nodes.push_back({{"id", (1ull << 32) + 1}, {"type", "conditional"}, {"cond", {{"kind", "while"}, {"bodies", 1}}}});
  nodes.push_back({{"id", (1ull << 32) + 2}, {"type", "kernel"}, {"name", "tail"}});
  nodes.push_back({{"id", 2ull << 32}, {"type", "kernel"}, {"name", "loop_body"}, {"parent", 1}, {"body", 0}});
  json clones = json::array({json::array({exec_id(0), 0}), json::array({8ull << 32, 3}), json::array({exec_id(1), 1}),
                             json::array({exec_id(2), 2})});
  return json{{"exec", 1},
              {"graph_id", 1},
              {"nodes", nodes},
              {"edges", json::array({json::array({0, 1}), json::array({1, 2})})},
              {"clones", clones}};
}

WireRecord at(std::uint64_t node, std::uint32_t corr, std::uint64_t start) {
  WireRecord r = kernel_record(node, corr, start, start + 1'000);
  r.graph_id = kExecGraph;
  return r;
}

}  // namespace

TEST_CASE("trace: body records are placed by the executable's node index and their launch's time", "[trace][graph]") {
  Crafted c;
  c.graphs.push_back(while_graph());
  // Launch k (correlation 10 + k) runs the loop body k + 1 times between prologue and tail.
  for (std::uint32_t k = 0; k < 4; ++k) {
    const std::uint64_t t = 1'000'000 + 100'000ull * k;
    c.launches.push_back(WireLaunch{10 + k, 1, t - 2'000, t - 1'000, 0, 0});
    c.records.push_back(at(exec_id(0), 10 + k, t));
    for (std::uint32_t i = 0; i <= k; ++i) c.records.push_back(at(exec_id(3), 0, t + 2'000 + 2'000ull * i));
    c.records.push_back(at(exec_id(2), 10 + k, t + 20'000));
  }
  std::vector<tracefile::ProcessFile> files;
  files.push_back(tracefile::parse_process_file(c.bytes(), "bodies.tpgt"));
  const TracedRun t = merge_traces(std::move(files), {});
  REQUIRE(t.run.trace.has_value());
  CHECK(t.run.trace->unmatched == 0);
  const RunAnalysis a = analyze_run(t.run);
  REQUIRE(a.variants.size() == 1);
  CHECK(a.variants[0].health.clean());
  REQUIRE(a.variants[0].conditionals.size() == 1);
  const Stats& it = a.variants[0].conditionals[0].iterations;
  CHECK(it.count == 4);
  CHECK(it.min == 1);
  CHECK(it.max == 4);
}

TEST_CASE("trace: body ids are not guessed when the top level's clones do not follow the index", "[trace][graph]") {
  Crafted c;
  json g = while_graph();
  g["clones"][0][0] = exec_id(5);  // the prologue's clone is not (G << 32 | 0): no rule to rely on
  c.graphs.push_back(g);
  c.launches.push_back(WireLaunch{10, 1, 998'000, 999'000, 0, 0});
  c.records.push_back(at(exec_id(5), 10, 1'000'000));
  c.records.push_back(at(exec_id(3), 0, 1'002'000));
  c.records.push_back(at(exec_id(2), 10, 1'020'000));
  std::vector<tracefile::ProcessFile> files;
  files.push_back(tracefile::parse_process_file(c.bytes(), "bodies.tpgt"));
  const TracedRun t = merge_traces(std::move(files), {});
  REQUIRE(t.run.trace.has_value());
  CHECK(t.run.trace->unmatched == 1);  // the body's record: said, not placed on a guess
}

TEST_CASE("trace: a first line never calls a trace with nothing recorded clean", "[trace][graph]") {
  Crafted launched;
  launched.graphs.push_back(chain_graph(2, 1, 10));
  for (std::uint32_t k = 1; k <= 3; ++k) launched.launches.push_back(WireLaunch{k, 1, 1'000 * k, 1'000 * k + 10, 0, 0});
  std::vector<tracefile::ProcessFile> files;
  files.push_back(tracefile::parse_process_file(launched.bytes(), "launched.tpgt"));
  const TracedRun a = merge_traces(std::move(files), {});
  REQUIRE(a.run.trace.has_value());
  CHECK_FALSE(a.run.trace->clean());
  CHECK(a.run.trace->line().rfind("NOT CLEAN: 3 graph launches and no record of their work", 0) == 0);

  Crafted eager;
  WireRecord r = kernel_record(0, 5, 2'000, 3'000);
  eager.records.push_back(r);
  files.clear();
  files.push_back(tracefile::parse_process_file(eager.bytes(), "eager.tpgt"));
  const TracedRun b = merge_traces(std::move(files), {});
  REQUIRE(b.run.trace.has_value());
  CHECK(b.run.trace->line() == "NO GRAPHS: the program launched no CUDA graph; 1 record of work outside graphs");
}

TEST_CASE("trace: the first line says when tpgraph yielded to the program's profiler or recorded in part",
          "[trace][graph]") {
  Crafted yielded;
  std::string bytes = yielded.bytes();
  const std::string footer = tracefile::chunk(tracefile::ChunkType::footer, json{{"records", 0}}.dump());
  bytes.resize(bytes.size() - footer.size());
  bytes += tracefile::chunk(tracefile::ChunkType::note, std::string(tracefile::kYieldedNote) +
                                                            " (--yield-to-profiler): this process was not recorded");
  bytes += footer;
  std::vector<tracefile::ProcessFile> files;
  files.push_back(tracefile::parse_process_file(bytes, "yielded.tpgt"));
  const TracedRun t = merge_traces(std::move(files), {});
  REQUIRE(t.run.trace.has_value());
  CHECK(t.run.trace->line() == "NOTHING RECORDED: tpgraph left CUPTI to the program's own profiler in 1 process");

  TraceCompleteness partial;
  partial.records = 10;
  partial.launches = 5;
  partial.recording.push_back("pid 1: RECORDING STOPPED at 0.4 s");
  CHECK(partial.line().starts_with("CLEAN: all 10 graph records"));
  CHECK(partial.line().ends_with(" — RECORDED IN PART: see the recording lines"));
}

TEST_CASE("trace: launches after the size limit stopped recording are left out, with a note", "[trace][graph]") {
  Crafted c;
  c.graphs.push_back(chain_graph(2, 1, 10));
  for (std::uint32_t k = 0; k < 5; ++k) {
    const std::uint64_t t = 1'000'000 + 100'000ull * k;
    c.launches.push_back(WireLaunch{10 + k, 1, t - 2'000, t - 1'000, 0, 0});
    if (k >= 3) continue;  // the last two launches' records were refused at the limit
    c.records.push_back(kernel_record(10, 10 + k, t, t + 1'000));
    c.records.push_back(kernel_record(11, 10 + k, t + 2'000, t + 3'000));
  }
  std::string bytes = c.bytes();
  const std::string footer = tracefile::chunk(tracefile::ChunkType::footer, json{{"records", 6}}.dump());
  bytes.resize(bytes.size() - footer.size());
  const std::string limit = tracefile::recording_event_chunk("limit", 1'250'000, "--max-file-size");
  std::vector<tracefile::ProcessFile> files;
  files.push_back(tracefile::parse_process_file(bytes + limit + footer, "limit.tpgt"));
  const TracedRun t = merge_traces(std::move(files), {});
  REQUIRE(t.run.variants.size() == 1);
  CHECK(t.run.variants[0].scenario.replays == 3);
  CHECK(analyze_run(t.run).variants[0].health.clean());
  CHECK(std::any_of(t.notes.begin(), t.notes.end(),
                    [](const std::string& n) { return n.find("2 graph launches after the last one") != n.npos; }));
  // Without the limit event the same launches are missing records: not clean.
  files.clear();
  files.push_back(tracefile::parse_process_file(c.bytes(), "nolimit.tpgt"));
  const TracedRun u = merge_traces(std::move(files), {});
  CHECK_FALSE(analyze_run(u.run).variants[0].health.clean());
}
