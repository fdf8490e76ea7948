#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "catch.hpp"
#include "core/error.hpp"
#include "core/report.hpp"
#include "core/run_outputs.hpp"
#include "core/svg.hpp"
#include "core/trace.hpp"
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
  SECTION("no file") {
    CHECK(contains(load_error(dir / "absent.json"), "cannot open"));
  }
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
  CHECK(contains(svg, "r1.quant_z waited 72.0 µs: contention 70.0 (r0.quant_z 10.0, r0.gate 10.0, r0.up 10.0, others 40.0), idle 2.0"));
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
