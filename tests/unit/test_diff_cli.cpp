// tpgraph diff and gate as a user runs them: on the recorded H200 run, one variant per folder.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "catch.hpp"
#include "cli_helpers.hpp"
#include "core/records/run_data.hpp"

using namespace cli_test;

// --- diff and gate ----------------------------------------------------------------------------

namespace {

// One variant of the recorded H200 run as a run folder of its own, optionally changed by `edit`.
template <class Edit>
std::string one_variant_folder(const TempDir& dir, const std::string& folder, const std::string& variant, Edit&& edit) {
  tpgraph::RunData run = tpgraph::load_raw_records(kSource + "/tests/data/h200-run/records.json");
  std::erase_if(run.variants, [&](const tpgraph::VariantRun& v) { return v.scenario.name != variant; });
  REQUIRE(run.variants.size() == 1);
  edit(run);
  const auto path = dir.path / folder;
  tpgraph::save_raw_records(path / "records.json", run);
  return path.string();
}

std::string one_variant_folder(const TempDir& dir, const std::string& folder, const std::string& variant) {
  return one_variant_folder(dir, folder, variant, [](tpgraph::RunData&) {});
}

}  // namespace

TEST_CASE("diff of a run with itself: comparable first, no change", "[cli][diff]") {
  const auto r = run_tpgraph("diff tests/data/h200-run tests/data/h200-run");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.out.rfind("COMPARABLE: ", 0) == 0);
  CHECK(mentions(r.out, "0 changes among"));
  CHECK(mentions(r.out, "join (matched by name and graph): A replays 3-19 (17 steady of 20)"));
  const auto g = run_tpgraph("gate tests/data/h200-run tests/data/h200-run");
  CHECK(g.status == 0);
  CHECK(mentions(g.out, "gate: PASS"));
}

TEST_CASE("diff names the root's trunk nodes new and the variants the only ones left", "[cli][diff]") {
  const TempDir dir;
  const auto a = one_variant_folder(dir, "a", "baseline");
  const auto b = one_variant_folder(dir, "b", "root-busy");
  const auto json_path = (dir.path / "diff.json").string();
  const auto md_path = (dir.path / "diff.md").string();
  const auto r = run_tpgraph("diff " + a + " " + b + " --json " + json_path + " --md " + md_path + " --dot " +
                             (dir.path / "dot").string());
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(mentions(r.out, "baseline vs root-busy (matched by the only variants left)"));
  CHECK(mentions(r.out, "node added: r0.busy0"));
  CHECK(mentions(r.out, "joined the critical path: r0.busy0 (added)"));
  const auto doc = nlohmann::json::parse(std::ifstream(json_path));
  CHECK(doc["kind"] == "tpgraph-diff");
  CHECK(doc["changes"].get<int>() > 0);
  CHECK(std::filesystem::is_regular_file(md_path));
  CHECK(std::filesystem::is_regular_file(dir.path / "dot" / "baseline.diff.dot"));
}

TEST_CASE("gate exits 5 on a regression, naming the node and its figures", "[cli][diff]") {
  const TempDir dir;
  const auto a = one_variant_folder(dir, "a", "baseline");
  const auto b = one_variant_folder(dir, "b", "baseline", [](tpgraph::RunData& run) {
    auto& v = run.variants[0];
    const int gate = v.graph.find("r0.gate")->id;
    for (auto& rec : v.records)
      if (rec.node == gate) rec.end_ns += (rec.end_ns - rec.start_ns) / 10;  // 10% longer
  });
  const auto r = run_tpgraph("gate " + a + " " + b + " --max-slowdown 3%");
  INFO(r.output);
  CHECK(r.status == 5);
  CHECK(mentions(r.out, "REGRESSION: baseline r0.gate duration"));
  CHECK(run_tpgraph("gate " + a + " " + b + " --max-slowdown 20%").status == 0);
  const auto json = run_tpgraph("gate " + a + " " + b + " --json -");
  CHECK(json.status == 5);
  const auto doc = nlohmann::json::parse(json.out);
  CHECK(doc["gate"]["outcome"] == "regression");
  CHECK(doc["gate"]["failures"].size() == 1);
}

TEST_CASE("gate refuses with 6 what it cannot compare, and never passes a missing run", "[cli][diff][errors]") {
  const TempDir dir;
  const auto a = one_variant_folder(dir, "a", "baseline");
  const auto h100 = one_variant_folder(dir, "h100", "baseline",
                                       [](tpgraph::RunData& run) { run.env.devices[0].name = "NVIDIA H100"; });
  const auto r = run_tpgraph("gate " + a + " " + h100);
  CHECK(r.status == 6);
  CHECK(r.out.rfind("NOT COMPARABLE: GPUs differ", 0) == 0);
  const auto d = run_tpgraph("diff " + a + " " + h100);
  CHECK(d.status == 0);
  CHECK(d.out.rfind("NOT COMPARABLE: GPUs differ", 0) == 0);
  const auto missing = run_tpgraph("gate " + a + " " + (dir.path / "nothing").string());
  CHECK(missing.status == 6);
  CHECK(mentions(missing.out, "NOT COMPARABLE"));
  check_rejected("diff tests/data/h200-run /nonexistent", "B '/nonexistent': no such folder");
  check_rejected("gate tests/data/h200-run tests/data/h200-run --max-slowdown 3x",
                 "--max-slowdown: '3x' is not accepted");
}
