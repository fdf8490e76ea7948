// Runs the built tpgraph binary: exit codes and messages as a user sees them.
#include "catch.hpp"
#include "cli_helpers.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

namespace {

// The helpers of the CLI tests (cli_helpers.hpp) under the names these tests use.
using cli_test::check_rejected;
using cli_test::kSource;
using cli_test::mentions;
using cli_test::Result;
using cli_test::TempDir;
Result tpgraph(const std::string& args, const std::string& env = "") { return cli_test::run_tpgraph(args, env); }

}  // namespace

TEST_CASE("plan --json reports the router's figures at t=43", "[cli]") {
  const auto r = tpgraph("plan --tokens 43 --json");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("n_pairs") == 344);
  CHECK(j.at("n_active") == 196);
  CHECK(j.at("routing").at("min_rows").get<int>() >= 1);
  CHECK(j.at("scenario").at("name") == "baseline");
  CHECK(j.at("graph").at("ranks").size() == 2);
  CHECK(j.at("graph").at("ranks")[1].at("nodes_by_cuda_type").at("kernel") == 7);
  CHECK(j.at("memory").at("per_rank")[0].at("total").get<std::int64_t>() > 0);
}

TEST_CASE("plan prints geometry, memory, routing and the graph", "[cli]") {
  const auto r = tpgraph("plan peer-copy --tokens 43");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(mentions(r.out, "pairs 344, active experts 196 of 288"));
  CHECK(mentions(r.out, "peer copy per-rank (32 rows)"));
  CHECK(mentions(r.out, "per GPU:"));
  CHECK(mentions(r.out, "rank 1 (GPU 1)"));
}

TEST_CASE("plan sums memory per GPU when ranks share one", "[cli]") {
  const auto r = tpgraph("plan --devices 0,0 --json");
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& per_rank = j.at("memory").at("per_rank");
  REQUIRE(j.at("memory").at("per_device").size() == 1);
  CHECK(j.at("memory").at("per_device")[0].at("total").get<std::int64_t>() ==
        per_rank[0].at("total").get<std::int64_t>() + per_rank[1].at("total").get<std::int64_t>());
}

TEST_CASE("flags override the scenario file, the file overrides the defaults", "[cli]") {
  const auto r = tpgraph("plan root-busy --copy-rows 7 --layers 2 --json");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto s = nlohmann::json::parse(r.out).at("scenario");
  CHECK(s.at("copy_rows") == 7);  // flag over file (32)
  CHECK(s.at("layers") == 2);     // flag over default
  CHECK(s.at("root_busy") == 4);  // file over default
  CHECK(s.at("peer_copy") == "per-rank");
  CHECK(s.at("geometry").at("tokens") == 4096);  // default
}

TEST_CASE("a scenario can be named by path and TPGRAPH_GRAPHS moves graphs/", "[cli]") {
  TempDir dir;
  const auto path = dir.file("mine.json", R"({"layers": 3})");
  const auto by_path = tpgraph("plan '" + path + "' --tokens 43 --json");
  REQUIRE(by_path.status == 0);
  CHECK(nlohmann::json::parse(by_path.out).at("scenario").at("layers") == 3);
  const auto moved = tpgraph("plan mine --tokens 43 --json", "TPGRAPH_GRAPHS='" + dir.path.string() + "'");
  INFO(moved.output);
  REQUIRE(moved.status == 0);
  CHECK(nlohmann::json::parse(moved.out).at("scenario").at("name") == "mine");
}

TEST_CASE("dot writes the file whole, leaving no temporary behind", "[cli]") {
  TempDir dir;
  const auto out = dir.path / "g.dot";
  const auto r = tpgraph("dot join --tokens 43 -o '" + out.string() + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::ifstream file(out);
  const std::string text{std::istreambuf_iterator<char>(file), {}};
  CHECK(text.rfind("digraph tpgraph {", 0) == 0);
  CHECK(mentions(text, "r1->r0.copy"));
  CHECK_FALSE(std::filesystem::exists(dir.path / "g.dot.tmp"));
}

TEST_CASE("dot prints to stdout without -o", "[cli]") {
  const auto r = tpgraph("dot --tokens 43");
  REQUIRE(r.status == 0);
  CHECK(r.out.rfind("digraph tpgraph {", 0) == 0);
}

TEST_CASE("dot into a path it cannot create fails without leaving a file", "[cli][errors]") {
  TempDir dir;
  const auto blocker = dir.file("plain-file", "not a folder");
  check_rejected("dot --tokens 43 -o '" + blocker + "/g.dot'", blocker);
  CHECK_FALSE(std::filesystem::exists(blocker + "/g.dot.tmp"));
}

TEST_CASE("dot --captured needs -o", "[cli][errors]") { check_rejected("dot --captured", "-o FILE"); }

TEST_CASE("bad scenario files exit 2 with one line naming the problem", "[cli][errors]") {
  TempDir dir;
  SECTION("missing file") { check_rejected("plan /nonexistent/s.json", "/nonexistent/s.json: no such scenario file"); }
  SECTION("unknown name") { check_rejected("plan no-such-variant", "unknown scenario 'no-such-variant'"); }
  SECTION("broken JSON") {
    const auto path = dir.file("broken.json", "{\n  \"layers\": 2,\n  \"join\": reduce\n}\n");
    check_rejected("plan '" + path + "'", path + ":3:");
  }
  SECTION("unknown field") {
    const auto path = dir.file("typo.json", R"({"layer": 2})");
    check_rejected("plan '" + path + "'", "unknown field 'layer'; accepted: name, description");
  }
  SECTION("wrong type") {
    const auto path = dir.file("type.json", R"({"root_busy": "four"})");
    check_rejected("plan '" + path + "'", "field 'root_busy' must be an integer, got string");
  }
  SECTION("bad enum value") {
    const auto path = dir.file("enum.json", R"({"alloc": "pool"})");
    check_rejected("plan '" + path + "'", "accepted: resident, fresh");
  }
}

// Each run of the binary costs about a second (it loads the CUDA libraries), so this covers each
// path once; test_scenario.cpp covers every field and value in-process.
TEST_CASE("invalid geometry and bad flags exit 2 with one line", "[cli][errors]") {
  check_rejected("plan --hidden 100", "hidden = 100");
  check_rejected("plan --tokens 0", "tokens = 0");
  check_rejected("dot --top-k 999", "top_k = 999");
  check_rejected("plan --join sum", "--join: 'sum' is not accepted; accepted: none, copy, reduce");
  check_rejected("plan --copy-rows 0", "--copy-rows: '0' is not accepted");
  check_rejected("plan --devices 0,x", "--devices");
  check_rejected("plan --tokens abc", "--tokens");
}

// --- hostile input --------------------------------------------------------------------------------

namespace {

// Exit status of `tpgraph ARGS` run by the shell with the redirections in ARGS as given.
int status_of(const std::string& args) {
  const std::string command = "cd '" + kSource + "' && '" + TPGRAPH_BINARY + "' " + args;
  const int raw = std::system(command.c_str());
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + (WIFSIGNALED(raw) ? WTERMSIG(raw) : 0);
}

}  // namespace

TEST_CASE("numeric flags are parsed whole: no wrap-around, no silent drop", "[cli][errors][hostile]") {
  check_rejected("plan --seed -1",
                 "--seed: '-1' is not accepted; accepted: a whole number from 0 to 18446744073709551615");
  check_rejected("plan --seed 18446744073709551616", "--seed: '18446744073709551616' is not accepted");
  // bench parses its own seed the same way, before it looks for a GPU.
  check_rejected("bench --seed -1", "--seed: '-1' is not accepted");
  check_rejected("bench --seed 18446744073709551616", "--seed: '18446744073709551616' is not accepted");
  check_rejected("plan --tokens ''", "--tokens: '' is not accepted");
  check_rejected("plan --replays 5x", "--replays: '5x' is not accepted");
  const auto r = tpgraph("plan --json --tokens 43 --seed 18446744073709551615");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out)["scenario"]["seed"].get<std::uint64_t>() == 18446744073709551615ULL);
}

TEST_CASE("names with NUL or terminal escapes never reach the output", "[cli][errors][hostile]") {
  TempDir dir;
  const auto nul = dir.file("nul.json", R"({"name": "cut\u0000here"})");
  check_rejected("plan '" + nul + "'", "control character");
  const auto esc = dir.file("esc.json", R"({"description": "\u001b]0;owned\u0007"})");
  const auto r = tpgraph("plan '" + esc + "'");
  CHECK(r.status == 2);
  CHECK(r.output.find('\x1b') == std::string::npos);
}

TEST_CASE("a scenario path that is a FIFO is refused at once", "[cli][errors][hostile]") {
  TempDir dir;
  const auto fifo = dir.path / "wait.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // `timeout` turns the old behaviour (blocking forever on open) into a failure of this test.
  const auto r = tpgraph("plan '" + fifo.string() + "'", "timeout 20");
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(mentions(r.output, "not a regular file"));
  check_rejected("plan /dev/zero", "/dev/zero: not a regular file");
}

TEST_CASE("output that does not reach stdout is a failure", "[cli][errors][hostile]") {
  CHECK(status_of("plan --tokens 43 > /dev/full 2>/dev/null") == 1);
  CHECK(status_of("plan --tokens 43 >&- 2>/dev/null") == 1);
  CHECK(status_of("dot --tokens 43 > /dev/full 2>/dev/null") == 1);
  // A bad flag with stderr closed still exits 2 (the message has nowhere to go), never aborts.
  CHECK(status_of("plan --no-such-flag 2>&-") == 2);
  CHECK(status_of("plan --tokens 0 2>&- >/dev/null") == 2);
}

TEST_CASE("--help and --version fail when their output is lost", "[cli][errors][hostile]") {
  CHECK(status_of("--help >/dev/null") == 0);
  CHECK(status_of("--version >/dev/null") == 0);
  CHECK(status_of("--help >/dev/full 2>/dev/null") == 1);
  CHECK(status_of("--version >/dev/full 2>/dev/null") == 1);
  CHECK(status_of("--version >&- 2>/dev/null") == 1);
  CHECK(status_of("plan --help >&- 2>/dev/null") == 1);
  // The failure is said on stderr.
  const auto r = tpgraph("--version >/dev/full");
  CHECK(r.status == 1);
  CHECK(mentions(r.output, "cannot write to standard output"));
}

TEST_CASE("every integer flag is read by the one strict parser", "[cli][errors][hostile]") {
  // An empty value is refused, never read as "not given" (analyze --replay '' printed nothing).
  check_rejected("analyze tests/data --replay ''", "--replay: '' is not accepted; accepted: a whole number from 0");
  check_rejected("analyze tests/data --replay 1x", "--replay: '1x' is not accepted");
  // Bench's, check's and run's own counts are read, and bounded, before anything looks for a GPU.
  check_rejected("bench --replays ''", "--replays: '' is not accepted; accepted: a whole number from 1 to 1000000");
  check_rejected("bench --replays 0", "--replays: '0' is not accepted");
  check_rejected("bench --warmup -1", "--warmup: '-1' is not accepted");
  check_rejected("bench --device 0x1", "--device: '0x1' is not accepted");
  check_rejected("bench --tile 99", "--tile: '99' is not accepted; accepted: a whole number from 0 to");
  check_rejected("bench --tokens 43,+5", "--tokens: '43,+5' is not accepted");
  check_rejected("check --sample 1", "--sample: '1' is not accepted; accepted: a whole number from 2");
  check_rejected("check --repeats ' 4'", "--repeats: ' 4' is not accepted");
  check_rejected("run --check-tokens 2147483648", "--check-tokens: '2147483648' is not accepted");
  check_rejected("plan --copy-rows 4x", "--copy-rows: '4x' is not accepted");
  check_rejected("plan --devices 0,-1", "--devices: '0,-1' is not accepted");
}

// docs/cli.md's "Exit codes": each code, as the table describes it, from the binary.
TEST_CASE("exit codes are those docs/cli.md lists", "[cli][errors]") {
  CHECK(status_of("plan >/dev/null") == 0);
  CHECK(status_of("plan >/dev/full 2>/dev/null") == 1);    // output that did not reach stdout
  CHECK(status_of("plan --hidden 100 2>/dev/null") == 2);  // an invalid geometry
  CHECK(status_of("plan --no-such-flag 2>/dev/null") == 2);
  CHECK(status_of("2>/dev/null") == 2);  // no command
  CHECK(status_of("analyze /nonexistent 2>/dev/null") == 2);
  CHECK(status_of("trace -- /nonexistent/program >/dev/null 2>&1") == 127);
  CHECK(status_of("trace -- ./README.md >/dev/null 2>&1") == 126);
  // `info` needs a GPU: 3 without one, 0 with one; never anything else.
  const int info = status_of("info >/dev/null 2>&1");
  CHECK((info == 0 || info == 3));
}

TEST_CASE("dot -o never replaces a symlink, FIFO or device with a regular file", "[cli][errors][hostile]") {
  TempDir dir;
  const auto target = dir.file("target.txt", "keep me");
  const auto link = dir.path / "link.dot";
  std::filesystem::create_symlink(target, link);
  check_rejected("dot --tokens 43 -o '" + link.string() + "'", "exists and is a symbolic link");
  CHECK(std::filesystem::is_symlink(link));
  std::ifstream kept(target);
  CHECK(std::string(std::istreambuf_iterator<char>(kept), {}) == "keep me");
  const auto fifo = dir.path / "fifo.dot";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  check_rejected("dot --tokens 43 -o '" + fifo.string() + "'", "exists and is a device, FIFO or socket");
  CHECK(std::filesystem::is_fifo(fifo));
}

TEST_CASE("plan at the documented extremes counts pairs without materialising them", "[cli][hostile]") {
  // 2^20 tokens x top-k 2047 = 2,146,435,072 pairs: per-pair arrays would be tens of GB.
#if defined(__SANITIZE_ADDRESS__)
  const std::string limit;  // ASan reserves terabytes of address space for its shadow: no ulimit -v
#else
  const std::string limit = "ulimit -v 4000000;";  // 4 GB of address space, threads' stacks included
#endif
  const auto r = tpgraph("plan --json --tokens 1048576 --experts 4096 --top-k 2047", limit);
  INFO(r.output);
  REQUIRE(r.status == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["n_pairs"].get<std::int64_t>() == 2146435072LL);
  CHECK(j["n_active"].get<int>() == 4096);
}

TEST_CASE("check refuses a geometry whose host side cannot fit before it builds anything", "[cli][errors][hostile]") {
  // Weights alone: 4096 experts x 3 matrices of 65536 x 65536 NVFP4 per rank, petabytes.
  check_rejected("check --experts 4096 --hidden 65536 --ff 65536 --tokens 1024", "of host memory but");
}

TEST_CASE("--warmup takes auto (the default) or a count", "[cli][errors]") {
  CHECK(mentions(tpgraph("plan").out, "after auto warm-up"));
  CHECK(mentions(tpgraph("plan --warmup 7").out, "after 7 warm-up"));
  check_rejected("plan --warmup soon",
                 "--warmup: 'soon' is not accepted; accepted: auto, or a whole number from 0 to 100000");
  check_rejected("plan --warmup -3", "--warmup: '-3' is not accepted");
}
