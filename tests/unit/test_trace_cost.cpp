// The cost of tracing in a trace's report, without a GPU: the record file's cost chunk written and
// read (and an older file without one), the trace folder's cost.json, the calibration's arithmetic,
// each process's and each graph's figures, and the lines report.md, the terminal and report.json
// carry, from fabricated figures whose results can be checked by hand.
#include <fmt/core.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "catch.hpp"
#include "core/analysis/timeline.hpp"
#include "core/analysis/tracing_cost.hpp"
#include "core/records/trace_cost.hpp"
#include "core/records/trace_file.hpp"
#include "core/records/traced_run.hpp"
#include "core/report/report.hpp"
#include "core/report/report_common.hpp"
#include "crafted_trace.hpp"

using namespace tpgraph;
using namespace tpgraph::tracefile;
using namespace tpgraph::testing;
using nlohmann::json;

namespace {

constexpr std::uint64_t kT0 = 1'700'000'000'000'000'000ull;
std::uint64_t at_us(double us) { return kT0 + static_cast<std::uint64_t>(us * 1000.0); }

bool has(const std::string& text, std::string_view part) { return text.find(part) != std::string::npos; }

// 10,000 launches whose callbacks took 2 ms (0.2 µs each) of 5 ms in all; 60,000 records processed
// in 6 ms (0.1 µs each).
SelfCost fabricated_self_cost() {
  SelfCost c;
  c.present = true;
  c.callbacks = 40'010;
  c.callback_ns = 5'000'000;
  c.launch_callback_ns = 2'000'000;
  c.launches = 10'000;
  c.buffers = 12;
  c.buffer_records = 60'000;
  c.buffer_ns = 6'000'000;
  return c;
}

// A process launching a chain of six kernels four times: each launch 20 µs from its first start to
// its last end (kernels of 3 µs, 0.4 µs apart), with or without a cost chunk.
Crafted six_node_process(bool with_cost) {
  Crafted c;
  c.graphs.push_back(chain_graph(6, 1, 10));
  for (std::uint32_t i = 0; i < 4; ++i) {
    const double t = 100.0 * i;
    const std::uint32_t corr = 20 + i;
    c.launches.push_back(WireLaunch{corr, 1, at_us(t), at_us(t + 5), 0, 0});
    for (int k = 0; k < 6; ++k) {
      const double start = t + 10 + (k == 5 ? 17.0 : 3.4 * k);
      c.records.push_back(kernel_record(10 + static_cast<std::uint64_t>(k), corr, at_us(start), at_us(start + 3)));
    }
  }
  if (with_cost) c.chunks.push_back(self_cost_chunk(fabricated_self_cost()));
  return c;
}

CostCalibration fabricated_calibration() {
  CostCalibration c;
  c.measured = true;
  c.gpu = "NVIDIA H200";
  c.device = 0;
  c.nodes = 32;
  c.kernel_us = 1.5;
  c.replays = 234;
  c.off_us = 61.2;
  c.on_us = 75.6;
  c.per_node_us = 0.45;
  return c;
}

TracedRun merged(const Crafted& process) {
  std::vector<ProcessFile> files;
  files.push_back(parse_process_file(process.bytes(), "p.tpgt"));
  return merge_traces(std::move(files), {});
}

}  // namespace

TEST_CASE("a cost chunk round-trips through the record file, and the last one holds the totals", "[trace][cost]") {
  Crafted c = six_node_process(false);
  SelfCost earlier = fabricated_self_cost();
  earlier.launches = 5;
  c.chunks.push_back(self_cost_chunk(earlier));
  c.chunks.push_back(self_cost_chunk(fabricated_self_cost()));
  const ProcessFile f = parse_process_file(c.bytes(), "p.tpgt");
  REQUIRE(f.self_cost.present);
  CHECK(f.self_cost.launches == 10'000);
  CHECK(f.self_cost.callback_ns == 5'000'000);
  CHECK(f.self_cost.launch_callback_ns == 2'000'000);
  CHECK(f.self_cost.buffer_records == 60'000);
  CHECK(f.notes.empty());
}

TEST_CASE("a sampled process's switches of CUPTI's activity: counted, timed, read back, and in its cost line",
          "[trace][cost]") {
  SelfCost sampled = fabricated_self_cost();
  sampled.activity_switches = 200;
  sampled.activity_switch_ns = 9'000'000;  // 45 µs each
  Crafted c = six_node_process(false);
  c.chunks.push_back(self_cost_chunk(sampled));
  const ProcessFile f = parse_process_file(c.bytes(), "p.tpgt");
  REQUIRE(f.self_cost.present);
  CHECK(f.self_cost.activity_switches == 200);
  CHECK(f.self_cost.activity_switch_ns == 9'000'000);
  const ProcessTracingCost p = process_tracing_cost({42, f.self_cost});
  REQUIRE(p.us_per_activity_switch);
  CHECK(*p.us_per_activity_switch == Approx(45.0));
  TracingCostAnalysis a;
  a.processes.push_back(p);
  const auto lines = report_detail::tracing_cost_lines(a);
  CHECK(std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
    return has(l, "CUPTI's activity switched on or off 200 times, 45.0 µs each");
  }));

  // A chunk written before the switches were counted has neither key: read as none, no note.
  json old = json::parse(self_cost_chunk(fabricated_self_cost()).substr(8));
  old.erase("activity_switches");
  old.erase("activity_switch_ns");
  Crafted before = six_node_process(false);
  before.chunks.push_back(chunk(ChunkType::cost, old.dump()));
  const ProcessFile g = parse_process_file(before.bytes(), "p.tpgt");
  REQUIRE(g.self_cost.present);
  CHECK(g.self_cost.activity_switches == 0);
  CHECK(g.notes.empty());
  CHECK_FALSE(process_tracing_cost({42, g.self_cost}).us_per_activity_switch);

  // A switch count that is not a count: the chunk is skipped, saying which key.
  json bad = json::parse(self_cost_chunk(sampled).substr(8));
  bad["activity_switches"] = "many";
  Crafted broken = six_node_process(false);
  broken.chunks.push_back(chunk(ChunkType::cost, bad.dump()));
  const ProcessFile h = parse_process_file(broken.bytes(), "p.tpgt");
  CHECK_FALSE(h.self_cost.present);
  REQUIRE(h.notes.size() == 1);
  CHECK(has(h.notes[0], "activity_switches"));
}

TEST_CASE("a record file without a cost chunk reads as before: no cost, no note", "[trace][cost]") {
  const ProcessFile f = parse_process_file(six_node_process(false).bytes(), "p.tpgt");
  CHECK_FALSE(f.self_cost.present);
  CHECK(f.notes.empty());
  CHECK(f.complete);
  CHECK(f.records.size() == 24);
}

TEST_CASE("a malformed cost chunk is skipped with a note, the rest of the file read", "[trace][cost][hostile]") {
  SECTION("not JSON") {
    Crafted c = six_node_process(false);
    c.chunks.push_back(chunk(ChunkType::cost, "{\"callbacks\": [[[[1]]]]}"));
    const ProcessFile f = parse_process_file(c.bytes(), "p.tpgt");
    CHECK_FALSE(f.self_cost.present);
    CHECK(f.notes.size() == 1);
  }
  SECTION("a count missing or negative") {
    Crafted c = six_node_process(false);
    json j = json::parse(self_cost_chunk(fabricated_self_cost()).substr(8));
    j["launches"] = -1;
    c.chunks.push_back(chunk(ChunkType::cost, j.dump()));
    const ProcessFile f = parse_process_file(c.bytes(), "p.tpgt");
    CHECK_FALSE(f.self_cost.present);
    CHECK(has(f.notes.at(0), "launches"));
  }
  SECTION("launch callbacks longer than all callbacks") {
    SelfCost bad = fabricated_self_cost();
    bad.launch_callback_ns = bad.callback_ns + 1;
    Crafted c = six_node_process(false);
    c.chunks.push_back(self_cost_chunk(bad));
    const ProcessFile f = parse_process_file(c.bytes(), "p.tpgt");
    CHECK_FALSE(f.self_cost.present);
    CHECK(f.notes.size() == 1);
  }
  CHECK(parse_process_file(six_node_process(false).bytes(), "p.tpgt").complete);
}

TEST_CASE("cost.json round-trips, and a missing or broken one reads as not measured, saying why", "[trace][cost]") {
  const CostCalibration c = fabricated_calibration();
  const CostCalibration back = parse_cost_file(cost_file_json(c), "cost.json");
  REQUIRE(back.measured);
  CHECK(back.gpu == "NVIDIA H200");
  CHECK(back.nodes == 32);
  CHECK(back.replays == 234);
  CHECK(back.per_node_us == Approx(0.45));
  CHECK(back.off_us == Approx(61.2));

  const CostCalibration skipped = parse_cost_file(cost_file_json(cost_not_measured("--no-cost")), "cost.json");
  CHECK_FALSE(skipped.measured);
  CHECK(skipped.not_measured == "--no-cost");

  CHECK(has(parse_cost_file("[1, 2]", "cost.json").not_measured, "not a JSON object"));
  CHECK(has(parse_cost_file("{\"measured\": true, \"nodes\": 32}", "cost.json").not_measured, "out of range"));
  json negative = json::parse(cost_file_json(c));
  negative["per_node_us"] = -0.5;
  CHECK_FALSE(parse_cost_file(negative.dump(), "cost.json").measured);

  const auto dir = std::filesystem::temp_directory_path() / ("tpgraph-cost-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  CHECK(has(read_cost_file(dir).not_measured, "no cost.json"));
  write_cost_file(dir, c);
  CHECK(read_cost_file(dir).measured);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the calibration is the median difference per node, never below 0", "[trace][cost]") {
  // Off: median 60; on: median 74.4 -> (74.4 - 60) / 32 = 0.45 µs per node.
  const CostCalibration c = calibration_from_walls({61, 60, 59, 80}, {74.4, 74.0, 75.0, 74.8, 70.0}, 32);
  REQUIRE(c.measured);
  CHECK(c.off_us == Approx(60.5));
  CHECK(c.on_us == Approx(74.4));
  CHECK(c.per_node_us == Approx((74.4 - 60.5) / 32));
  CHECK(c.replays == 4);
  // Records cannot make the chain faster: a negative difference is noise, read as 0.
  CHECK(calibration_from_walls({60, 61}, {59, 60}, 32).per_node_us == 0.0);
  CHECK_FALSE(calibration_from_walls({}, {60}, 32).measured);
  CHECK_FALSE(calibration_from_walls({60, std::numeric_limits<double>::quiet_NaN()}, {60}, 32).measured);
  CHECK_FALSE(calibration_from_walls({60, 0}, {60}, 32).measured);
}

TEST_CASE("a process's own cost: its launch callbacks per launch, its record processing per record", "[trace][cost]") {
  const ProcessTracingCost p = process_tracing_cost({42, fabricated_self_cost()});
  CHECK(p.not_measured.empty());
  REQUIRE(p.us_per_launch);
  CHECK(*p.us_per_launch == Approx(0.2));
  CHECK(p.other_callbacks_ms == Approx(3.0));
  REQUIRE(p.processing_us_per_record);
  CHECK(*p.processing_us_per_record == Approx(0.1));
  SelfCost idle;
  idle.present = true;
  const ProcessTracingCost none = process_tracing_cost({43, idle});
  CHECK_FALSE(none.us_per_launch);
  CHECK_FALSE(none.processing_us_per_record);
  CHECK(has(process_tracing_cost({44, SelfCost{}}).not_measured, "no cost chunk"));
}

TEST_CASE("a graph's cost: records per launch x CUPTI's per node + tpgraph's per launch", "[trace][cost]") {
  TracingCost cost;
  cost.calibration = fabricated_calibration();
  cost.processes = {{42, fabricated_self_cost()}};
  const TracingCostAnalysis analysis = analyze_tracing_cost(cost);
  // 6 x 0.45 + 0.2 = 2.9 µs of a 20 µs span: 14.5%.
  const auto g = graph_tracing_cost(analysis, {0}, 6, 20.0);
  REQUIRE(g);
  CHECK(*g->cupti_us == Approx(2.7));
  CHECK(*g->tpgraph_us == Approx(0.2));
  CHECK(g->total_us == Approx(2.9));
  CHECK(*g->span_fraction == Approx(0.145));
  CHECK(report_detail::graph_tracing_cost_text(*g) ==
        "tracing cost ≈ 6 record-bearing nodes × 0.45 µs (CUPTI, calibrated on NVIDIA H200 after the run) + 0.20 µs "
        "(tpgraph, host) per launch = 2.90 µs, 14.5% of its median span");

  SECTION("CUPTI's share not measured") {
    cost.calibration = cost_not_measured("--no-cost");
    const auto part = graph_tracing_cost(analyze_tracing_cost(cost), {0}, 6, 20.0);
    REQUIRE(part);
    CHECK(part->total_us == Approx(0.2));
    CHECK(report_detail::graph_tracing_cost_text(*part) ==
          "tracing cost ≈ 0.20 µs (tpgraph, host) per launch, 1.0% of its median span; CUPTI's share not measured: "
          "--no-cost");
  }
  SECTION("nothing measured: no estimate at all") {
    cost.calibration = cost_not_measured("--no-cost");
    cost.processes = {{42, SelfCost{}}};
    CHECK_FALSE(graph_tracing_cost(analyze_tracing_cost(cost), {0}, 6, 20.0));
    CHECK(analyze_tracing_cost(cost).nothing_measured());
  }
}

TEST_CASE("a trace's report carries the cost of tracing in its header, per graph and in report.json",
          "[trace][cost][report]") {
  TracedRun traced = merged(six_node_process(true));
  attach_tracing_cost(traced, fabricated_calibration());
  const RunAnalysis analysis = analyze_run(traced.run);
  REQUIRE(analysis.tracing_cost);
  REQUIRE(analysis.variants.at(0).trace_cost);
  CHECK(analysis.variants[0].trace_cost->records_per_launch == 6);
  const std::string md = render_report_markdown(traced.run, analysis);
  CHECK(has(md, "- tracing cost, CUPTI's records: 0.45 µs per kernel node, calibrated on NVIDIA H200 after the run"));
  CHECK(has(md, "not an A/B of this program"));
  CHECK(has(md,
            "- tracing cost, pid 100: tpgraph's callbacks 0.20 µs per graph launch (10000 launches, host; other "
            "callbacks 3.0 ms in all), record processing 0.100 µs per record (60000 records, its own thread)"));
  // 6 x 0.45 + 0.2 = 2.9 µs of the 20 µs median span.
  CHECK(has(md,
            "tracing cost ≈ 6 record-bearing nodes × 0.45 µs (CUPTI, calibrated on NVIDIA H200 after the run) + "
            "0.20 µs (tpgraph, host) per launch = 2.90 µs, 14.5% of its median span"));
  CHECK(has(md, "- CUPTI tracing cost: no untraced run of a traced program; itemised above"));
  CHECK_FALSE(has(md, "- CUPTI tracing cost: not measured"));
  CHECK(has(render_trace_heading(traced.run, analysis), "tracing cost, CUPTI's records: 0.45 µs per kernel node"));
  CHECK(has(render_terminal_table(traced.run, analysis), "tracing cost ≈ 6 record-bearing nodes"));
  const json report = json::parse(render_report_json(traced.run, analysis));
  const json& cost = report.at("trace").at("tracing_cost");
  CHECK(cost.at("calibration").at("per_node_us") == 0.45);
  CHECK(cost.at("processes").at(0).at("callback_us_per_launch") == 0.2);
  CHECK(cost.at("processes").at(0).at("processing_us_per_record") == 0.1);
  const json& estimate = report.at("variants").at(0).at("tracing_cost_estimate");
  CHECK(estimate.at("total_us") == 2.9);
  CHECK(estimate.at("span_fraction") == 0.145);
  CHECK(estimate.at("cupti_not_measured").is_null());
}

TEST_CASE("an older trace folder reads as before, plus one line saying the cost was not measured",
          "[trace][cost][report]") {
  const TracedRun before = merged(six_node_process(false));
  const RunAnalysis before_analysis = analyze_run(before.run);
  TracedRun older = merged(six_node_process(false));
  attach_tracing_cost(older, cost_not_measured("the trace folder has no cost.json"));
  const RunAnalysis older_analysis = analyze_run(older.run);
  const std::string was = render_report_markdown(before.run, before_analysis);
  const std::string now = render_report_markdown(older.run, older_analysis);
  const std::string line =
      "- tracing cost: not measured: the trace folder has no cost.json; no process file has a cost chunk\n";
  REQUIRE(has(now, line));
  std::string without = now;
  without.erase(without.find(line), line.size());
  CHECK(without == was);
  CHECK(render_terminal_table(older.run, older_analysis) == render_terminal_table(before.run, before_analysis));
  CHECK_FALSE(has(now, "tracing cost ≈"));
}
