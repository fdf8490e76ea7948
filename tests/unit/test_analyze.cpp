#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "catch.hpp"
#include "core/base/atomic_file.hpp"
#include "core/base/error.hpp"
#include "core/report/report.hpp"
#include "core/report/run_outputs.hpp"
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
  const Exit e = run_tpgraph("analyze \"" + run_dir.string() + "\" --out \"" + out_dir.string() + "\"", run_dir);
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

// --- hostile records files ----------------------------------------------------------------------

namespace {

// records.json of the two-variant run as a JSON value a test can corrupt.
nlohmann::json records_doc() { return nlohmann::json::parse(run_data_to_json(two_variant_run())); }

// The reader's verdict on a corrupted document: the InputError's text, or "" when it was accepted.
std::string refusal(const nlohmann::json& doc) {
  try {
    (void)parse_run_data(doc.dump(), "hostile/records.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string refusal(const std::string& text) {
  try {
    (void)parse_run_data(text, "hostile/records.json");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("the records reader refuses node indices the analysis would overflow on", "[analyze][hostile]") {
  auto doc = records_doc();
  auto& node = doc["variants"][0]["graph"]["nodes"][3];
  SECTION("layer INT_MAX") {
    node["layer"] = 2147483647;
    const auto why = refusal(doc);
    CHECK(contains(why, "variants[0].graph.nodes[3].layer"));
    CHECK(contains(why, "out of range [0, 0]"));
  }
  SECTION("layer 1e8") {
    node["layer"] = 100000000;
    CHECK(contains(refusal(doc), "nodes[3].layer"));
  }
  SECTION("rank past the graph's ranks") {
    node["rank"] = 2;
    CHECK(contains(refusal(doc), "nodes[3].rank"));
  }
  SECTION("device past any GPU index") {
    node["device"] = 2000000000;
    CHECK(contains(refusal(doc), "nodes[3].device"));
  }
  SECTION("stream of no rank") {
    node["stream"] = 7;
    CHECK(contains(refusal(doc), "nodes[3].stream"));
  }
  SECTION("flops infinite in effect") {
    node["flops"] = 1e300;
    CHECK(contains(refusal(doc), "nodes[3].flops"));
  }
  SECTION("bytes the writers' sums would overflow on") {
    node["bytes"] = 9223372036854775807LL;
    CHECK(contains(refusal(doc), "nodes[3].bytes"));
  }
  SECTION("an event span that makes the CUPTI / event ratio infinite") {
    doc["variants"][0]["event_spans"][0][2] = 1e-300;
    CHECK(contains(refusal(doc), "event_spans[0][2]"));
  }
  SECTION("a replay time that makes the tracing cost infinite") {
    doc["variants"][0]["replay_us_untraced"] = 1e-300;
    CHECK(contains(refusal(doc), "replay_us_untraced"));
  }
  SECTION("the untouched document is accepted") { CHECK(refusal(doc).empty()); }
}

TEST_CASE("the records reader bounds graph ranks and layers and ties them to the scenario", "[analyze][hostile]") {
  auto doc = records_doc();
  auto& graph = doc["variants"][0]["graph"];
  SECTION("ranks 1e6") {
    graph["ranks"] = 1000000;
    CHECK(contains(refusal(doc), "graph.ranks"));
  }
  SECTION("ranks INT_MAX") {
    graph["ranks"] = 2147483647;
    CHECK(contains(refusal(doc), "graph.ranks"));
  }
  SECTION("layers 2e9") {
    graph["layers"] = 2000000000;
    CHECK(contains(refusal(doc), "graph.layers"));
  }
  SECTION("a scenario of 64 ranks over a graph of 2") {
    doc["variants"][0]["scenario"]["geometry"]["ranks"] = 64;
    const auto why = refusal(doc);
    CHECK(contains(why, "graph.ranks"));
    CHECK(contains(why, "scenario has 64"));
  }
}

TEST_CASE("the records reader bounds scenario.replays by the records the file holds", "[analyze][hostile]") {
  auto doc = records_doc();
  doc["variants"][0]["scenario"]["replays"] = 1000000;
  const auto why = refusal(doc);
  CHECK(contains(why, "variants[0].scenario"));
  CHECK(contains(why, "replays = 1000000"));
}

TEST_CASE("the records reader survives deep nesting and quotes a short excerpt", "[analyze][hostile]") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  SECTION("in a wrong-typed field") {
    auto doc = records_doc();
    doc["environment"]["hostname"] = 0;  // replaced below by the raw nested text
    std::string text = doc.dump();
    const std::string field = "\"hostname\":0";
    text.replace(text.find(field), field.size(), "\"hostname\":" + deep);
    const auto why = refusal(text);
    CHECK(contains(why, "nested deeper than"));
    CHECK(why.size() < 300);
  }
  SECTION("in a variant's scenario") {
    std::string text = records_doc().dump();
    const std::string field = "\"description\":";
    text.insert(text.find(field), "\"x\":" + deep + ",");
    CHECK(contains(refusal(text), "nested deeper than"));
  }
  SECTION("a long wrong-typed value is quoted short") {
    auto doc = records_doc();
    doc["variants"][0]["scenario"]["name"] = nlohmann::json::array();
    for (int i = 0; i < 10000; ++i) doc["variants"][0]["scenario"]["name"].push_back(i);
    const auto why = refusal(doc);
    CHECK(contains(why, "array of 10000 values"));
    CHECK(why.size() < 300);
  }
}

TEST_CASE("a number beyond a double in records.json is bad input naming the file", "[analyze][hostile]") {
  std::string text = records_doc().dump();
  const std::string field = "\"replay_us_traced\":103.0";
  REQUIRE(contains(text, field));
  text.replace(text.find(field), field.size(), "\"replay_us_traced\":1e400");
  const auto why = refusal(text);
  CHECK(contains(why, "hostile/records.json"));
  CHECK(contains(why, "1e400"));
}

TEST_CASE("a stray record far from the replays is refused, not made the time base", "[analyze][hostile]") {
  auto doc = records_doc();
  auto& rows = doc["variants"][1]["records"]["rows"];
  auto stray = rows[0];
  stray[0] = -1;  // replay: none
  stray[3] = 1;   // start_ns
  stray[4] = 2;
  rows.push_back(stray);
  const auto why = refusal(doc);
  CHECK(contains(why, "variants[1].records.rows["));
  CHECK(contains(why, "not a record of this run"));
}

TEST_CASE("control characters in names are refused", "[analyze][hostile]") {
  auto doc = records_doc();
  SECTION("an escape sequence in a node label") {
    doc["variants"][0]["graph"]["nodes"][1]["label"] = "r0.\x1b[2Jgate";
    const auto why = refusal(doc);
    CHECK(contains(why, "nodes[1].label"));
    CHECK(contains(why, "\\u001b"));
    CHECK(!contains(why, "\x1b"));
  }
  SECTION("a newline in a kernel name") {
    doc["variants"][0]["records"]["names"][0] = "gemm\n| broken | table |";
    CHECK(contains(refusal(doc), "records.names[0]"));
  }
  SECTION("a NUL in the scenario name") {
    doc["variants"][0]["scenario"]["name"] = std::string("base\0line", 9);
    CHECK(contains(refusal(doc), "control character"));
  }
}

TEST_CASE("a variant named like a top-level file of the run folder is refused", "[analyze][hostile]") {
  for (const char* name : {"report.md", "report.json", "records.json"}) {
    auto doc = records_doc();
    doc["variants"][1]["scenario"]["name"] = name;
    INFO(name);
    CHECK(contains(refusal(doc), "is a file of every run folder"));
  }
  SECTION("and a RunData built in code cannot write over them either") {
    RunData run = two_variant_run();
    run.variants[1].scenario.name = "report.md";
    const auto dir = fresh_temp_dir("reserved");
    CHECK_THROWS_AS(write_run_outputs(run, analyze_run(run), dir), InputError);
    CHECK(!std::filesystem::exists(dir / "report.md"));
    std::filesystem::remove_all(dir);
  }
}

TEST_CASE("a records path that is not a regular file is refused without reading it", "[analyze][hostile]") {
  const auto dir = fresh_temp_dir("fifo-records");
  const auto fifo = dir / "records.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string why;
  try {
    (void)load_raw_records(fifo);
  } catch (const InputError& e) {
    why = e.what();
  }
  CHECK(contains(why, "not a regular file"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("analyze --out refuses another run's folder and leaves it as it was", "[analyze][cli][hostile]") {
  const auto run_a = fresh_temp_dir("run-a");
  const auto run_b = fresh_temp_dir("run-b");
  RunData a = two_variant_run();
  RunData b = two_variant_run();
  b.env.hostname = "another-host";
  b.variants.pop_back();
  save_raw_records(run_a / "records.json", a);
  (void)write_run_outputs(b, analyze_run(b), run_b);
  const std::string b_records = read_text(run_b / "records.json");
  const Exit e = run_tpgraph("analyze \"" + run_a.string() + "\" --out \"" + run_b.string() + "\"", run_a);
  INFO(e.output);
  CHECK(e.code == 2);
  CHECK(e.output.find("not empty") != std::string::npos);
  CHECK(std::count(e.output.begin(), e.output.end(), '\n') == 1);
  CHECK(read_text(run_b / "records.json") == b_records);
  CHECK(!std::filesystem::exists(run_b / "join"));

  SECTION("but a folder holding this very run is analysed again") {
    const auto out = fresh_temp_dir("run-a-out");
    REQUIRE(run_tpgraph("analyze \"" + run_a.string() + "\" --out \"" + out.string() + "\"", run_a).code == 0);
    const Exit again = run_tpgraph("analyze \"" + run_a.string() + "\" --out \"" + out.string() + "\"", run_a);
    INFO(again.output);
    CHECK(again.code == 0);
    std::filesystem::remove_all(out);
  }
  SECTION("and a path that is a file is not a folder") {
    const Exit f =
        run_tpgraph("analyze \"" + run_a.string() + "\" --out \"" + (run_b / "report.md").string() + "\"", run_a);
    CHECK(f.code == 2);
  }
  std::filesystem::remove_all(run_a);
  std::filesystem::remove_all(run_b);
}

TEST_CASE("a second writer of one run folder is refused while the first holds it", "[analyze][cli][hostile]") {
  const auto dir = fresh_temp_dir("locked");
  save_raw_records(dir / "records.json", two_variant_run());
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);  // as a first analyze would
  const Exit e = run_tpgraph("analyze \"" + dir.string() + "\"", dir);
  ::close(fd);
  INFO(e.output);
  CHECK(e.code == 2);
  CHECK(e.output.find("another tpgraph is writing this folder") != std::string::npos);
  CHECK(!std::filesystem::exists(dir / "report.md"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("an in-place analyze that fails midway leaves the old outputs whole", "[analyze][hostile]") {
  const auto dir = fresh_temp_dir("midway");
  const RunData run = two_variant_run();
  (void)write_run_outputs(run, analyze_run(run), dir);
  // A folder where the manifest must go: writing fails once every output is staged, before the
  // first one moves.
  std::filesystem::create_directories(dir / ".tpgraph-outputs" / "in the way");
  std::ofstream(dir / ".tpgraph-outputs" / "in the way" / "file") << "kept";
  const auto before = folder_contents(dir);
  CHECK_THROWS_AS(write_run_folder(run, analyze_run(run), dir, /*in_place=*/true), InputError);
  CHECK(!std::filesystem::exists(dir / (".tpgraph-staging-" + std::to_string(::getpid()))));
  CHECK(folder_contents(dir) == before);
  std::filesystem::remove_all(dir);
}

TEST_CASE("analyze writes the folder aside and leaves no staging behind", "[analyze][hostile]") {
  const auto dir = fresh_temp_dir("aside");
  const RunData run = two_variant_run();
  save_raw_records(dir / "records.json", run);
  const auto files = write_run_folder(run, analyze_run(run), dir, /*in_place=*/true);
  CHECK(files.back().filename() == "report.json");  // reports land last
  for (const auto& e : std::filesystem::directory_iterator(dir))
    CHECK(e.path().filename().string().rfind(".tpgraph-staging", 0) != 0);
  CHECK(std::filesystem::is_regular_file(dir / "join" / "trace.json"));
  SECTION("--no-trace and --no-timeline skip the large files") {
    const auto out = fresh_temp_dir("skip");
    const Exit e =
        run_tpgraph("analyze \"" + dir.string() + "\" --out \"" + out.string() + "\" --no-trace --no-timeline", dir);
    INFO(e.output);
    CHECK(e.code == 0);
    CHECK(std::filesystem::is_regular_file(out / "join" / "graph.dot"));
    CHECK(!std::filesystem::exists(out / "join" / "trace.json"));
    CHECK(!std::filesystem::exists(out / "join" / "timeline.svg"));
    std::filesystem::remove_all(out);
  }
  std::filesystem::remove_all(dir);
}

TEST_CASE("a folder registered for removal is removed when SIGTERM stops the process", "[analyze][hostile]") {
  const auto dir = fresh_temp_dir("signal");
  const auto staging = dir / ".tpgraph-staging";
  std::filesystem::create_directories(staging / "baseline");
  std::ofstream(staging / "baseline" / "trace.json.tmp-1") << "half";
  std::ofstream(staging / "records.json") << "{}";
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    install_signal_cleanup();
    const RemoveOnSignal guard(staging);
    ::raise(SIGTERM);
    ::_exit(0);  // not reached: the signal ends the process
  }
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(!std::filesystem::exists(staging));
  CHECK(std::filesystem::exists(dir));
  std::filesystem::remove_all(dir);
}
