#include <sys/wait.h>

#include <algorithm>
#include <cstdlib>

#include "catch.hpp"
#include "core/error.hpp"
#include "core/report.hpp"
#include "core/run_outputs.hpp"
#include "run_fixture.hpp"

using namespace tpgraph;
using namespace tpgraph::testing;

namespace {

RunData two_variant_run() {
  RunData run;
  run.env = test_environment();
  Scenario base = small_scenario("baseline", 6);
  run.variants.push_back(scheduled_variant(base, {0, 1'500}, 10'000, 700));
  Scenario join = small_scenario("join", 6);
  join.join = JoinKind::reduce;
  join.peer_copy = PeerCopy::per_rank;
  VariantRun v = scheduled_variant(join, {0, 80'000}, 10'000, 700);
  v.cuda_graph_dot = "digraph captured {\n  a -> b;\n}\n";
  v.health.dropped = 1;
  run.variants.push_back(std::move(v));
  return run;
}

// Every file a run folder holds, relative to it, with its bytes.
std::map<std::string, std::string> folder_contents(const std::filesystem::path& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir))
    if (e.is_regular_file()) files[std::filesystem::relative(e.path(), dir).string()] = read_text(e.path());
  return files;
}

struct Exit {
  int code = -1;
  std::string output;
};

Exit run_tpgraph(const std::string& args, const std::filesystem::path& scratch) {
  const auto log = scratch / "tpgraph-output.txt";
  const std::string command = std::string("\"") + TPGRAPH_BINARY + "\" " + args + " > \"" + log.string() + "\" 2>&1";
  const int status = std::system(command.c_str());
  Exit e;
  e.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  e.output = read_text(log);
  std::filesystem::remove(log);
  return e;
}

// Recomputes a run folder's outputs into `out`: report.json must come back byte for byte (it is
// what the run concluded); every other output must be written again.
void check_reanalysis_matches(const std::filesystem::path& run_dir, const std::filesystem::path& out) {
  const RunData run = load_raw_records(resolve_records_path(run_dir));
  (void)write_run_outputs(run, analyze_run(run), out);
  CHECK(read_text(out / "report.json") == read_text(run_dir / "report.json"));
  const auto recorded = folder_contents(run_dir);
  const auto recomputed = folder_contents(out);
  for (const auto& [name, bytes] : recorded) {
    INFO(run_dir.string() << ": " << name);
    CHECK(recomputed.count(name) == 1);
  }
}

}  // namespace

TEST_CASE("analysing a saved run reproduces every output byte for byte", "[analyze]") {
  const RunData run = two_variant_run();
  const auto first = fresh_temp_dir("analyze-first");
  const auto second = fresh_temp_dir("analyze-second");
  (void)write_run_outputs(run, analyze_run(run), first);
  check_reanalysis_matches(first, second);
  // With the same code, every other file comes back identical too.
  CHECK(folder_contents(first) == folder_contents(second));
  CHECK(folder_contents(first).size() == 10);  // 3 at the top, 3 + 4 in the variants
  std::filesystem::remove_all(first);
  std::filesystem::remove_all(second);
}

TEST_CASE("a run folder or its records.json both name a run", "[analyze]") {
  const auto dir = fresh_temp_dir("resolve");
  save_raw_records(dir / "records.json", two_variant_run());
  CHECK(resolve_records_path(dir) == dir / "records.json");
  CHECK(resolve_records_path(dir / "records.json") == dir / "records.json");
  CHECK_THROWS_AS(resolve_records_path(dir / "absent"), InputError);
  std::filesystem::remove(dir / "records.json");
  std::string message;
  try {
    (void)resolve_records_path(dir);
  } catch (const InputError& e) {
    message = e.what();
  }
  CHECK(message.find("no records.json in this folder") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("tpgraph analyze writes the outputs and prints the table", "[analyze][cli]") {
  const auto run_dir = fresh_temp_dir("cli-run");
  const auto out_dir = fresh_temp_dir("cli-out");
  const RunData run = two_variant_run();
  (void)write_run_outputs(run, analyze_run(run), run_dir);
  const Exit e = run_tpgraph("analyze \"" + run_dir.string() + "\" --out \"" + out_dir.string() + "\"", out_dir);
  INFO(e.output);
  CHECK(e.code == 0);
  CHECK(e.output.find("COLLECTION NOT CLEAN") != std::string::npos);
  CHECK(e.output.find("SERIALIZED") != std::string::npos);
  CHECK(read_text(out_dir / "report.json") == read_text(run_dir / "report.json"));
  CHECK(read_text(out_dir / "join" / "trace.json") == read_text(run_dir / "join" / "trace.json"));
  std::filesystem::remove_all(run_dir);
  std::filesystem::remove_all(out_dir);
}

TEST_CASE("tpgraph analyze in place leaves records.json untouched", "[analyze][cli]") {
  const auto run_dir = fresh_temp_dir("cli-inplace");
  save_raw_records(run_dir / "records.json", two_variant_run());
  const auto before = std::filesystem::last_write_time(run_dir / "records.json");
  const Exit e = run_tpgraph("analyze \"" + (run_dir / "records.json").string() + "\"", run_dir);
  INFO(e.output);
  CHECK(e.code == 0);
  CHECK(std::filesystem::is_regular_file(run_dir / "report.json"));
  CHECK(std::filesystem::is_regular_file(run_dir / "baseline" / "timeline.svg"));
  CHECK(std::filesystem::last_write_time(run_dir / "records.json") == before);
  std::filesystem::remove_all(run_dir);
}

TEST_CASE("tpgraph analyze of a bad path exits 2 with one line", "[analyze][cli]") {
  const auto scratch = fresh_temp_dir("cli-bad");
  const Exit e = run_tpgraph("analyze \"" + (scratch / "no-such-run").string() + "\"", scratch);
  CHECK(e.code == 2);
  CHECK(e.output.find("no-such-run") != std::string::npos);
  CHECK(std::count(e.output.begin(), e.output.end(), '\n') == 1);
  SECTION("a corrupt records.json too") {
    std::ofstream(scratch / "records.json") << "{\"kind\": \"tpgraph-records\", \"schema_version\": 1";
    const Exit c = run_tpgraph("analyze \"" + scratch.string() + "\"", scratch);
    CHECK(c.code == 2);
    CHECK(c.output.find("records.json") != std::string::npos);
    CHECK(std::count(c.output.begin(), c.output.end(), '\n') == 1);
  }
  std::filesystem::remove_all(scratch);
}

// Runs recorded on a GPU machine and committed under tests/data/<name>/ (records.json and the
// outputs `tpgraph run` wrote beside it): CI re-analyses each without a GPU and expects the same
// report.json. After a deliberate change of report.json, refresh the committed one with
// `tpgraph analyze tests/data/<name>`.
TEST_CASE("recorded runs under tests/data re-analyse to their committed outputs", "[analyze][recorded]") {
  const std::filesystem::path data = std::filesystem::path(TPGRAPH_SOURCE_DIR) / "tests" / "data";
  int runs = 0;
  if (std::filesystem::is_directory(data)) {
    for (const auto& entry : std::filesystem::directory_iterator(data)) {
      if (!std::filesystem::is_regular_file(entry.path() / "records.json")) continue;
      ++runs;
      const auto out = fresh_temp_dir("recorded");
      check_reanalysis_matches(entry.path(), out);
      std::filesystem::remove_all(out);
    }
  }
  // tests/data/h200-run is committed: a checkout without it must fail here, not pass vacuously.
  INFO("recorded runs under " << data.string());
  REQUIRE(runs > 0);
}
