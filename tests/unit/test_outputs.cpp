#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "catch.hpp"
#include "core/base/error.hpp"
#include "core/report/report.hpp"
#include "core/report/run_outputs.hpp"
#include "core/report/svg.hpp"
#include "core/report/trace.hpp"
#include "run_fixture.hpp"
#include "xml_check.hpp"

using namespace tpgraph;
using namespace tpgraph::testing;
using nlohmann::json;

namespace {

RunData joined_run() {
  Scenario s = small_scenario("join", 3);
  s.join = JoinKind::reduce;
  s.peer_copy = PeerCopy::per_rank;
  VariantRun v = scheduled_variant(s, {0, 2'000});
  v.cuda_graph_dot = "digraph dot {\n}\n";
  Comparison c;
  c.compared = 4096;
  c.nonzero = 4096;
  c.absmax = 1.5;
  c.max_abs_err = 1e-4;
  c.max_rel_err = 6.7e-5;
  c.tolerance = 1e-3;
  v.output_check = c;
  v.notes.push_back("a note from the capture");
  return single_variant_run(std::move(v));
}

std::string render_all(const RunData& run, const RunAnalysis& a) {
  return render_terminal_table(run, a) + render_report_markdown(run, a) + render_report_json(run, a) +
         render_chrome_trace(run, a, 0) + render_timeline_svg(run, a, 0);
}

bool contains(const std::string& text, std::string_view what) { return text.find(what) != std::string::npos; }

void write_text(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
}

std::string load_error(const std::filesystem::path& p) {
  try {
    (void)load_raw_records(p);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("records.json round-trips every field of a run", "[outputs]") {
  const RunData run = joined_run();
  const auto dir = fresh_temp_dir("roundtrip");
  save_raw_records(dir / "records.json", run);
  const RunData back = load_raw_records(dir / "records.json");
  CHECK(run_data_to_json(back) == run_data_to_json(run));
  REQUIRE(back.variants.size() == 1);
  const VariantRun& v = back.variants[0];
  CHECK(v.scenario == run.variants[0].scenario);
  CHECK(v.records.size() == run.variants[0].records.size());
  CHECK(v.records[3].name == run.variants[0].records[3].name);
  CHECK(v.records[3].start_ns == run.variants[0].records[3].start_ns);
  CHECK(v.graph.nodes.size() == run.variants[0].graph.nodes.size());
  CHECK(v.graph.edges.size() == run.variants[0].graph.edges.size());
  CHECK(v.graph.nodes[5].label == run.variants[0].graph.nodes[5].label);
  CHECK(v.graph.nodes[5].kind == run.variants[0].graph.nodes[5].kind);
  CHECK(v.graph.nodes[5].role == run.variants[0].graph.nodes[5].role);
  REQUIRE(v.output_check.has_value());
  CHECK(v.output_check->max_rel_err == run.variants[0].output_check->max_rel_err);
  CHECK(v.cuda_graph_dot == "digraph dot {\n}\n");
  CHECK(back.env.devices.at(0).name == "NVIDIA H200");
  CHECK(back.env.cupti_version == 130001);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a bad records.json is an InputError naming the file and the problem", "[outputs]") {
  const auto dir = fresh_temp_dir("badrecords");
  const std::string good = run_data_to_json(joined_run());
  const auto file = dir / "records.json";
  SECTION("truncated") {
    write_text(file, good.substr(0, good.size() / 2));
    const std::string e = load_error(file);
    CHECK(contains(e, file.string()));
    CHECK(contains(e, "not valid JSON"));
  }
  SECTION("another schema version") {
    json doc = json::parse(good);
    doc["schema_version"] = 99;
    write_text(file, doc.dump());
    CHECK(contains(load_error(file), "schema version 99 is not supported"));
  }
  SECTION("a missing field") {
    json doc = json::parse(good);
    doc["variants"][0].erase("host_launch_us");
    write_text(file, doc.dump());
    CHECK(contains(load_error(file), "variants[0]: missing field 'host_launch_us'"));
  }
  SECTION("a record pointing at no node") {
    json doc = json::parse(good);
    doc["variants"][0]["records"]["rows"][2][1] = 100000;
    write_text(file, doc.dump());
    CHECK(contains(load_error(file), "variants[0].records.rows[2][1]"));
  }
  SECTION("an unknown node kind") {
    json doc = json::parse(good);
    doc["variants"][0]["graph"]["nodes"][1]["kind"] = "teleport";
    write_text(file, doc.dump());
    CHECK(contains(load_error(file), "unknown value 'teleport'"));
  }
  SECTION("not a records file") {
    write_text(file, "{\"traceEvents\": []}");
    CHECK(contains(load_error(file), "not a tpgraph records file"));
  }
  SECTION("no file") { CHECK(contains(load_error(dir / "absent.json"), "cannot open")); }
  std::filesystem::remove_all(dir);
}

TEST_CASE("trace.json is Chrome trace JSON with one process per rank", "[outputs]") {
  const RunData run = joined_run();
  const RunAnalysis a = analyze_run(run);
  const json doc = json::parse(render_chrome_trace(run, a, 0));
  REQUIRE(doc.contains("traceEvents"));
  std::map<int, std::string> processes;
  std::size_t slices = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes[e["pid"].get<int>()] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    ++slices;
    const json& args = e["args"];
    for (const char* key : {"replay", "node", "kind", "bytes", "wait_us"}) CHECK(args.contains(key));
    // µs with at most 3 decimals: a whole number of ns.
    const double ns = e["ts"].get<double>() * 1000.0;
    CHECK(std::abs(ns - std::round(ns)) < 1e-3);
  }
  CHECK(slices == run.variants[0].records.size());
  REQUIRE(processes.size() == 2);
  CHECK(processes[1] == "rank 0 (GPU 0: NVIDIA H200)");
  CHECK(processes[2] == "rank 1 (GPU 0: NVIDIA H200)");
  CHECK(doc["otherData"]["collection_clean"] == "true");
}

TEST_CASE("trace.json draws cross-rank edges as flows", "[outputs]") {
  const RunData run = joined_run();
  const RunAnalysis a = analyze_run(run);
  const json doc = json::parse(render_chrome_trace(run, a, 0));
  std::map<std::uint64_t, int> starts, finishes;
  std::set<std::string> names;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("cat", "") != "cross-rank") continue;
    if (e["ph"] == "s") ++starts[e["id"].get<std::uint64_t>()];
    if (e["ph"] == "f") {
      ++finishes[e["id"].get<std::uint64_t>()];
      CHECK(e["bp"] == "e");
      names.insert(e["name"].get<std::string>());
    }
  }
  CHECK_FALSE(starts.empty());
  CHECK(starts.size() == finishes.size());
  // The join copy on the root's stream waits for rank 1's combine: one flow per replay.
  CHECK(names.count("r1.combine -> r1->r0.copy") == 1);
  CHECK(starts.size() % 3 == 0);
}

TEST_CASE("timeline.svg is well-formed XML with lanes, a legend and the largest wait marked", "[outputs]") {
  RunData run = single_variant_run(scheduled_variant(small_scenario("serial <&> \"quoted\"", 4), {0, 72'000}));
  const RunAnalysis a = analyze_run(run);
  const std::string svg = render_timeline_svg(run, a, 0);
  CHECK(xml_problem(svg).empty());
  INFO(xml_problem(svg));
  CHECK(contains(svg, "rank 0"));
  CHECK(contains(svg, "rank 1"));
  CHECK(contains(svg, "wait (start - ready)"));
  CHECK(contains(svg, "serial &lt;&amp;&gt; &quot;quoted&quot;"));
  // Ready at the replay's start, it waited 72 µs: 70 while rank 0's chain held the GPU, 2 idle.
  CHECK(contains(
      svg,
      "r1.quant_z waited 72.0 µs: contention 70.0 (r0.quant_z 10.0, r0.gate 10.0, r0.up 10.0, others 40.0), idle 2.0"));
  CHECK(contains(svg, "url(#wait-hatch)"));
}

TEST_CASE("the XML check catches what breaks an SVG", "[outputs]") {
  CHECK(xml_problem("<svg><g></svg>") != "");
  CHECK(xml_problem("<svg><text>a & b</text></svg>") != "");
  CHECK(xml_problem("<svg><text>a < b</text></svg>") != "");
  CHECK(xml_problem("<svg x=1/>") != "");
  CHECK(xml_problem("<svg/><svg/>") != "");
  CHECK(xml_problem("<?xml version=\"1.0\"?>\n<svg a=\"&amp;\"><g/><text>x &lt; y</text></svg>\n") == "");
}

TEST_CASE("an unclean collection is shouted in every output", "[outputs]") {
  VariantRun v = scheduled_variant(small_scenario("dirty", 2), {0, 1'000});
  v.health.dropped = 7;
  v.health.unmatched = 2;
  const RunData run = single_variant_run(std::move(v));
  const RunAnalysis a = analyze_run(run);
  CHECK_FALSE(a.collection_clean());
  const std::string table = render_terminal_table(run, a);
  CHECK(contains(table, "!!! COLLECTION NOT CLEAN: 7 records dropped by CUPTI, 2 records matching no graph node"));
  CHECK(contains(table, "NOT CLEAN"));
  CHECK(contains(render_report_markdown(run, a), "COLLECTION NOT CLEAN"));
  const json report = json::parse(render_report_json(run, a));
  CHECK(report["collection_clean"] == false);
  CHECK(report["variants"][0]["collection"]["dropped"] == 7);
  const json trace = json::parse(render_chrome_trace(run, a, 0));
  CHECK(trace["otherData"]["collection_clean"] == "false");
  CHECK(contains(render_timeline_svg(run, a, 0), "COLLECTION NOT CLEAN"));
}

TEST_CASE("a clean collection raises no banner", "[outputs]") {
  const RunData run = joined_run();
  const RunAnalysis a = analyze_run(run);
  CHECK_FALSE(contains(render_all(run, a), "NOT CLEAN"));
  CHECK(json::parse(render_report_json(run, a))["collection_clean"] == true);
}

TEST_CASE("ranks sharing a GPU are said to share it in every output", "[outputs]") {
  const RunData run = joined_run();
  const RunAnalysis a = analyze_run(run);
  const std::string note = "ranks 0 and 1 share GPU 0: NVIDIA H200";
  CHECK(contains(render_terminal_table(run, a), note));
  CHECK(contains(render_report_markdown(run, a), note));
  const json report = json::parse(render_report_json(run, a));
  CHECK(report["variants"][0]["ranks_share_gpu"] == true);
  CHECK(contains(report["variants"][0]["ranks_share_gpu_note"].get<std::string>(), "not whether two GPUs overlapped"));
  CHECK(contains(json::parse(render_chrome_trace(run, a, 0))["otherData"]["ranks_share_gpu"].get<std::string>(), note));
  CHECK(contains(render_timeline_svg(run, a, 0), "ranks 0 and 1 share GPU 0: NVIDIA H200"));
}

TEST_CASE("the verdict thresholds are printed in every output", "[outputs]") {
  const RunData run = joined_run();
  const RunAnalysis a = analyze_run(run);
  const std::string thresholds = verdict_thresholds_text();
  CHECK(contains(render_terminal_table(run, a), thresholds));
  CHECK(contains(render_report_markdown(run, a), thresholds));
  const json report = json::parse(render_report_json(run, a));
  CHECK(report["thresholds"]["overlapped_at_least"] == kOverlappedAtLeast);
  CHECK(report["thresholds"]["serialized_at_most"] == kSerializedAtMost);
  CHECK(json::parse(render_chrome_trace(run, a, 0))["otherData"]["thresholds"] == thresholds);
  const std::string svg = render_timeline_svg(run, a, 0);
  CHECK(contains(svg, "OVERLAPPED if overlap &gt;= 0.50"));
  CHECK(contains(svg, "SERIALIZED if overlap &lt;= 0.05"));
}

TEST_CASE("report.json carries versions, devices, geometry and every replay", "[outputs]") {
  const RunData run = joined_run();
  const RunAnalysis a = analyze_run(run);
  const json r = json::parse(render_report_json(run, a));
  CHECK(r["schema_version"] == kReportSchemaVersion);
  CHECK(r["tool_version"] == "0.1.0");
  CHECK(r["git_revision"] == "testrevision");
  CHECK(r["versions"]["cupti"] == 130001);
  CHECK(r["devices"][0]["name"] == "NVIDIA H200");
  const json& v = r["variants"][0];
  CHECK(v["geometry"]["tokens"] == 43);
  CHECK(v["scenario"]["name"] == "join");
  CHECK(v["replays"].size() == 3);
  CHECK(v["replays"][1]["ranks"][1]["offset_us"] == 2.0);
  CHECK(v["summary"]["verdict"] == "OVERLAPPED");
  CHECK(v["summary"]["output_check"]["passed"] == true);
  CHECK(v["notes"][0] == "a note from the capture");
}

TEST_CASE("a run folder holds every output and no temporary file", "[outputs]") {
  const RunData run = joined_run();
  const auto dir = fresh_temp_dir("folder");
  const auto files = write_run_outputs(run, analyze_run(run), dir);
  for (const char* name : {"records.json", "report.md", "report.json", "join/trace.json", "join/timeline.svg",
                           "join/graph.dot", "join/cuda-graph.dot"}) {
    INFO(name);
    CHECK(std::filesystem::is_regular_file(dir / name));
  }
  CHECK(files.size() == 7);
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir))
    CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);
  CHECK(read_text(dir / "join" / "cuda-graph.dot") == "digraph dot {\n}\n");
  std::filesystem::remove_all(dir);
}

TEST_CASE("variant folders are safe names and unique", "[outputs]") {
  RunData run = joined_run();
  run.variants.push_back(run.variants[0]);
  run.variants.push_back(run.variants[0]);
  run.variants[2].scenario.name = "../x y";
  const auto names = variant_folder_names(run);
  CHECK(names == std::vector<std::string>{"join", "join-2", "variant.._x_y"});
}

namespace {

// Two ranks on one GPU taking turns: each node waits 10 µs while the other rank's node runs.
RunData turns_run(int replays = 3) {
  return single_variant_run(scheduled_variant(small_scenario("turns", replays), {0, 10'000}, 10'000, 10'000));
}

struct SvgText {
  double x = 0, y = 0;
  std::string text;
};

// Every <text class="wait-label" ...> of an SVG, with its position.
std::vector<SvgText> wait_labels(const std::string& svg) {
  std::vector<SvgText> out;
  const std::string open = "<text class=\"wait-label\" x=\"";
  for (auto at = svg.find(open); at != std::string::npos; at = svg.find(open, at + 1)) {
    SvgText t;
    const auto x_at = at + open.size();
    t.x = std::stod(svg.substr(x_at));
    const auto y_at = svg.find("y=\"", x_at) + 3;
    t.y = std::stod(svg.substr(y_at));
    const auto body = svg.find('>', y_at) + 1;
    t.text = svg.substr(body, svg.find("</text>", body) - body);
    out.push_back(t);
  }
  return out;
}

std::size_t chars(const std::string& s) {
  // XML entities count as one character, UTF-8 continuation bytes as none.
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;
    if (s[i] == '&') i = s.find(';', i);
    ++n;
  }
  return n;
}

}  // namespace

TEST_CASE("every output says which overlap decided the verdict and what the other one says", "[outputs][why]") {
  const RunData run = turns_run();
  const RunAnalysis a = analyze_run(run);
  const std::string basis = verdict_basis_text(a.variants[0]);
  CHECK(contains(basis, "SERIALIZED on busy overlap 0.00"));
  CHECK(contains(basis, "alone it would say OVERLAPPED"));
  CHECK(contains(render_terminal_table(run, a), basis));
  CHECK(contains(render_report_markdown(run, a), basis));
  const json report = json::parse(render_report_json(run, a));
  const json& summary = report["variants"][0]["summary"];
  CHECK(summary["verdict"] == "SERIALIZED");
  CHECK(summary["verdict_basis"] == "busy");
  CHECK(summary["window_verdict"] == "OVERLAPPED");
  CHECK(summary["verdict_text"] == basis);
  const json trace = json::parse(render_chrome_trace(run, a, 0));
  CHECK(trace["otherData"]["verdict_basis"] == "busy");
  CHECK(trace["otherData"]["verdict_text"] == basis);
  CHECK(contains(render_timeline_svg(run, a, 0), xml_escape(basis)));
  for (const std::string& text : {render_terminal_table(run, a), render_report_markdown(run, a)})
    CHECK(contains(text, "the overlap that decides is the busy overlap"));
}

TEST_CASE("the report names each wait's parts and occupants", "[outputs][why]") {
  const RunData run = turns_run();
  const RunAnalysis a = analyze_run(run);
  // Every wait is 10 µs; the first of equals in node order leads the terminal's top waits.
  CHECK(
      contains(render_terminal_table(run, a), "top waits: r0.gate waited 10.0 µs: contention 10.0 (r1.quant_z 10.0)"));
  CHECK(contains(render_report_markdown(run, a), "waited 10.0 µs: contention 10.0 (r0.gate 10.0)"));
  const json report = json::parse(render_report_json(run, a));
  CHECK(report["schema_version"] == 2);
  bool found = false;
  for (const auto& w : report["variants"][0]["summary"]["node_waits"]) {
    if (w["label"] != "r1.gate") continue;
    found = true;
    CHECK(w["typical"]["contention_us"] == 10.0);
    CHECK(w["typical"]["idle_us"] == 0.0);
    CHECK(w["typical"]["occupants"][0]["label"] == "r0.gate");
    CHECK(w["contention_us"]["median"] == 10.0);
    CHECK(w["duration_us"]["median"] == 10.0);
  }
  CHECK(found);
}

TEST_CASE("report.json carries the critical path, outliers and steadiness", "[outputs][why]") {
  VariantRun v = scheduled_variant(small_scenario("outlier", 12), {0, 1'000});
  for (auto& rec : v.records) {
    if (rec.replay != 6 || v.graph.nodes[static_cast<std::size_t>(rec.node)].rank != 1) continue;
    rec.start_ns += 30'000;
    rec.end_ns += 30'000;
  }
  const RunData run = single_variant_run(std::move(v));
  const RunAnalysis a = analyze_run(run);
  const json r = json::parse(render_report_json(run, a));
  const json& s = r["variants"][0]["summary"];
  REQUIRE(s["outliers"].size() == 1);
  CHECK(s["outliers"][0]["replay"] == 6);
  CHECK(s["outliers"][0]["late_label"] == "r1.quant_z");
  CHECK(s["outliers"][0]["late_wait"]["contention_us"] == 31.0);
  CHECK(s["outlier_rule"]["threshold_us"] == Approx(3.55));
  CHECK(s["steadiness"]["steady"] == true);
  CHECK(s["critical_path"]["speedup_label"].is_string());
  const int typical = s["critical_path"]["typical_replay"];
  for (const auto& rt : r["variants"][0]["replays"]) {
    const bool listed = rt["replay"] == typical || rt["replay"] == 6;
    CHECK(rt["critical_path"].is_array() == listed);
    if (!listed) continue;
    double total = 0;
    for (const auto& l : rt["critical_path"]) total += l["us"].get<double>();
    CHECK(total == Approx(rt["span_us"].get<double>()));
  }
  const std::string md = render_report_markdown(run, a);
  CHECK(contains(md,
                 "replay 6: span 101.0 µs, OVERLAPPED; r1.quant_z started +30.0 µs from its usual offset, "
                 "waited 31.0 µs: contention 31.0"));
  CHECK(contains(md, "(its median wait 1.0)"));
  CHECK(contains(md, "Steadiness: steady"));
  CHECK(contains(render_terminal_table(run, a), "outliers: 1 of 12 replays; furthest: replay 6"));
}

TEST_CASE("a run that is not steady says so above the table in the terminal and report.md", "[outputs][why]") {
  VariantRun v = scheduled_variant(small_scenario("drift", 12), {0, 1'000});
  for (auto& rec : v.records) {
    if (rec.replay < 8 || v.graph.nodes[static_cast<std::size_t>(rec.node)].rank != 1) continue;
    rec.start_ns += 40'000;
    rec.end_ns += 40'000;
  }
  const RunData run = single_variant_run(std::move(v));
  const RunAnalysis a = analyze_run(run);
  const std::string line =
      "NOTE: drift is NOT STEADY: median span 71.0 µs in the first 3 replays, 111.0 µs in the last 3";
  CHECK(contains(render_terminal_table(run, a), line));
  CHECK(contains(render_report_markdown(run, a), line));
  const json r = json::parse(render_report_json(run, a));
  CHECK(contains(r["banners"].dump(), "drift is NOT STEADY"));
  CHECK(r["variants"][0]["summary"]["steadiness"]["steady"] == false);
  const RunData steady = turns_run(12);
  CHECK_FALSE(contains(render_terminal_table(steady, analyze_run(steady)), "NOT STEADY"));
}

TEST_CASE("trace.json draws a flow from the node that held the GPU to the node that waited", "[outputs][why]") {
  const RunData run = turns_run(1);
  const RunAnalysis a = analyze_run(run);
  const json doc = json::parse(render_chrome_trace(run, a, 0));
  std::map<std::uint64_t, std::pair<json, json>> flows;
  for (const auto& e : doc["traceEvents"]) {
    if (e.value("cat", "") != "contention") continue;
    (e["ph"] == "s" ? flows[e["id"]].first : flows[e["id"]].second) = e;
  }
  // Every node but the first waited 10 µs on the other rank's node: 13 flows in one replay.
  CHECK(flows.size() == 13);
  bool gate = false;
  for (const auto& [id, sf] : flows) {
    REQUIRE(sf.first.is_object());
    REQUIRE(sf.second.is_object());
    if (sf.first["name"] != "r0.gate held the GPU: r1.gate waited 10.0 µs") continue;
    gate = true;
    CHECK(sf.first["pid"] == 1);   // from rank 0's r0.gate
    CHECK(sf.second["pid"] == 2);  // to rank 1's r1.gate, at its start
    CHECK(sf.second["ts"].get<double>() - sf.first["ts"].get<double>() == Approx(0.001));
  }
  CHECK(gate);
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X" || e["name"] != "r1.gate") continue;
    CHECK(e["args"]["contention_us"] == 10.0);
    CHECK(e["args"]["waited_for"] == "r0.gate");
  }
}

TEST_CASE("wait labels in timeline.svg never overlap one another", "[outputs][why]") {
  // Many waits of 10 µs, 20 µs apart: at this scale every label is wider than the gap between them.
  const RunData run = turns_run();
  const RunAnalysis a = analyze_run(run);
  SvgOptions options;
  options.waits_marked = 40;
  const std::string svg = render_timeline_svg(run, a, 0, options);
  CHECK(xml_problem(svg).empty());
  const auto labels = wait_labels(svg);
  REQUIRE(labels.size() >= 4);
  for (std::size_t i = 0; i < labels.size(); ++i) {
    for (std::size_t j = i + 1; j < labels.size(); ++j) {
      if (labels[i].y != labels[j].y) continue;
      const double i1 = labels[i].x + kSvgLabelCharPx * static_cast<double>(chars(labels[i].text));
      const double j1 = labels[j].x + kSvgLabelCharPx * static_cast<double>(chars(labels[j].text));
      INFO(labels[i].text << " | " << labels[j].text);
      CHECK((i1 <= labels[j].x || j1 <= labels[i].x));
    }
  }
  // Rows are used before labels are dropped: both rows of a lane hold one.
  std::set<double> rows;
  for (const auto& l : labels) rows.insert(l.y);
  CHECK(rows.size() >= 2 * 2);
  // The hatched bars of dropped labels remain (with the text as a tooltip).
  std::size_t bars = 0;
  for (auto at = svg.find("url(#wait-hatch)\" stroke"); at != std::string::npos;
       at = svg.find("url(#wait-hatch)\" stroke", at + 1))
    ++bars;
  CHECK(bars > labels.size());
}

TEST_CASE("analyze --replay prints one replay in full and refuses a replay the run does not have", "[outputs][why]") {
  const RunData run = turns_run();
  const RunAnalysis a = analyze_run(run);
  const std::string text = render_replay_detail(run, a, 1);
  INFO(text);
  CHECK(contains(text, "turns · replay 1 · span 140.0 µs"));
  CHECK(contains(text, "verdict SERIALIZED on busy overlap 0.0000 (window 0.9231, busy 0.0000"));
  CHECK(contains(text, "waited 10.0 µs: contention 10.0 (r0.gate 10.0)"));
  CHECK(contains(text, "critical path (14 links, adding up to the span)"));
  CHECK(contains(text, "r0.quant_z ran (held the GPU while r1.quant_z waited)"));
  for (const int bad : {-1, 3}) {
    INFO(bad);
    CHECK_THROWS_AS(render_replay_detail(run, a, bad), InputError);
  }
  try {
    (void)render_replay_detail(run, a, 3);
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) == "--replay 3: not a replay of this run (it has replays 0..2)");
  }
}

TEST_CASE("every writer reads a traced program's graph: kernel nodes, three ranks, two GPUs", "[outputs][why]") {
  HandBuilt h(3, 2);
  const int a0 = h.node(0, 0, "r0.gemm");
  const int b0 = h.node(0, 0, "r0.ncclAllReduce");
  const int a1 = h.node(1, 0, "r1.gemm");
  const int a2 = h.node(2, 1, "r2.gemm");
  h.edge(a0, b0);
  for (int replay = 0; replay < 2; ++replay) {
    h.record(a0, 0, 10, replay);
    h.record(a1, 10, 20, replay);
    h.record(b0, 25, 30, replay);
    h.record(a2, 0, 30, replay);
  }
  h.v.ranks_share_gpu = true;
  RunData run = single_variant_run(h.v);
  run.env.devices.push_back(DeviceInfo{1, "NVIDIA H200", 132, 150'000'000'000, "0000:2a:00.0"});
  const RunAnalysis a = analyze_run(run);
  const std::string md = render_report_markdown(run, a);
  CHECK(contains(render_terminal_table(run, a),
                 "r0.ncclAllReduce waited 15.0 µs: contention 10.0 (r1.gemm 10.0), idle 5.0"));
  CHECK(contains(md, "| r0.ncclAllReduce | r0 | kernel | r0.gemm |"));
  CHECK(contains(md, verdict_basis_text(a.variants[0])));
  CHECK(contains(verdict_basis_text(a.variants[0]), "busy overlap for ranks on the root's GPU"));
  const json r = json::parse(render_report_json(run, a));
  CHECK(r["variants"][0]["summary"]["verdict_basis"] == "busy or window per rank");
  CHECK(json::parse(render_chrome_trace(run, a, 0))["otherData"]["verdict_basis"] == "busy or window per rank");
  const std::string svg = render_timeline_svg(run, a, 0);
  INFO(xml_problem(svg));
  CHECK(xml_problem(svg).empty());
  CHECK(contains(svg, "rank 2"));
  CHECK(contains(render_replay_detail(run, a, 1), "r0.ncclAllReduce"));
}

TEST_CASE("report.json, written piece by piece, is the document as the JSON library prints it", "[outputs]") {
  const RunData run = joined_run();
  const RunAnalysis a = analyze_run(run);
  const std::string text = render_report_json(run, a);
  CHECK(text == json::parse(text).dump(1) + "\n");
  std::size_t pieces = 0;
  std::string streamed;
  write_report_json(run, a, [&](std::string_view piece) {
    ++pieces;
    streamed += piece;
  });
  CHECK(streamed == text);
  CHECK(pieces > 10);
  CHECK(json::parse(text)["variants"][0]["replays"].size() == 3);
}
