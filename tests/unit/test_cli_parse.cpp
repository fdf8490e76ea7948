// The command line parsed in process (cli/app.hpp: make_app): flags land where the commands read
// them, bad flags are refused while parsing, and a command's outcome is its return value, errors
// being exceptions. test_cli.cpp and the other *_cli tests run the binary for what a user sees
// (messages, exit codes, stdout).
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "catch.hpp"
#include "cli/app.hpp"
#include "cli_helpers.hpp"
#include "core/base/error.hpp"
#include "core/records/run_data.hpp"

namespace {

using cli_test::kSource;
using cli_test::TempDir;
using tpgraph::cli::CommandLine;

// `args` parsed as `tpgraph ARGS...` would be; throws what the parse throws.
CommandLine parse(const std::vector<std::string>& args) {
  CommandLine line = tpgraph::cli::make_app();
  std::vector<const char*> argv{"tpgraph"};
  for (const auto& a : args) argv.push_back(a.c_str());
  line.app->parse(static_cast<int>(argv.size()), argv.data());
  return line;
}

// The parsed subcommand's option `name`, as CLI11 converts its value.
template <class T>
T option(const CommandLine& line, const std::string& command, const std::string& name) {
  return line.app->get_subcommand(command)->get_option(name)->as<T>();
}

// While one lives, what the commands print to stdout goes to /dev/null (the test's report stays readable).
class QuietStdout {
 public:
  QuietStdout() {
    std::fflush(stdout);
    saved_ = ::dup(STDOUT_FILENO);
    const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
    ::dup2(null, STDOUT_FILENO);
    ::close(null);
  }
  QuietStdout(const QuietStdout&) = delete;
  QuietStdout& operator=(const QuietStdout&) = delete;
  ~QuietStdout() {
    std::fflush(stdout);
    ::dup2(saved_, STDOUT_FILENO);
    ::close(saved_);
  }

 private:
  int saved_ = -1;
};

// The message of the InputError parsing `args` throws ("" when it throws none).
std::string input_error_of(const std::vector<std::string>& args) {
  try {
    (void)parse(args);
  } catch (const tpgraph::InputError& e) {
    return e.what();
  }
  return "";
}

// Parses and runs `tpgraph ARGS...` in this process, stdout silenced: the command's exit code.
int exit_code_of(const std::vector<std::string>& args) {
  const CommandLine line = parse(args);
  const QuietStdout quiet;
  return line.run_parsed();
}

// The recorded H200 run's baseline variant as a run folder of its own, changed by `edit`.
template <class Edit>
std::string baseline_folder(const TempDir& dir, const std::string& name, Edit&& edit) {
  tpgraph::RunData run = tpgraph::load_raw_records(kSource + "/tests/data/h200-run/records.json");
  std::erase_if(run.variants, [](const tpgraph::VariantRun& v) { return v.scenario.name != "baseline"; });
  REQUIRE(run.variants.size() == 1);
  edit(run);
  tpgraph::save_raw_records(dir.path / name / "records.json", run);
  return (dir.path / name).string();
}

}  // namespace

TEST_CASE("make_app registers every command and runs none", "[cli][parse]") {
  const CommandLine line = tpgraph::cli::make_app();
  std::vector<std::string> names;
  for (const auto& command : line.commands) {
    names.push_back(command.subcommand->get_name());
    CHECK_FALSE(command.subcommand->parsed());
    CHECK(command.run);
  }
  CHECK(names ==
        std::vector<std::string>{"plan", "dot", "run", "check", "bench", "analyze", "info", "trace", "diff", "gate"});
  // Nothing parsed: there is nothing to run.
  CHECK_THROWS_AS(line.run_parsed(), std::logic_error);
}

TEST_CASE("flags land on the subcommand that was parsed", "[cli][parse]") {
  SECTION("gate") {
    const auto line = parse({"gate", "a", "b", "--max-slowdown", "20%", "--threshold", "1", "--json", "-"});
    CHECK(line.app->get_subcommand("gate")->parsed());
    CHECK_FALSE(line.app->get_subcommand("diff")->parsed());
    CHECK(option<std::string>(line, "gate", "A") == "a");
    CHECK(option<std::string>(line, "gate", "B") == "b");
    CHECK(option<std::string>(line, "gate", "--max-slowdown") == "20%");
    CHECK(option<std::string>(line, "gate", "--threshold") == "1");
    CHECK(option<std::string>(line, "gate", "--json") == "-");
    CHECK(line.app->get_subcommand("gate")->get_option("--max-span-slowdown")->count() == 0);
  }
  SECTION("analyze") {
    const auto line = parse({"analyze", "tests/data/h200-run", "--out", "/tmp/x", "--replay", "3", "--strict"});
    CHECK(option<std::string>(line, "analyze", "RUN") == "tests/data/h200-run");
    CHECK(option<std::string>(line, "analyze", "--out") == "/tmp/x");
    CHECK(option<int>(line, "analyze", "--replay") == 3);
    CHECK(line.app->get_subcommand("analyze")->get_option("--strict")->count() == 1);
    CHECK(line.app->get_subcommand("analyze")->get_option("--no-trace")->count() == 0);
  }
  SECTION("trace: everything after -- is the command, its own flags included") {
    const auto line = parse(
        {"trace", "--keep-last", "10", "--dump-on", "SIGUSR1", "--no-cost", "--out", "d", "--", "sh", "-c", "exit 7"});
    CHECK(option<int>(line, "trace", "--keep-last") == 10);
    CHECK(line.app->get_subcommand("trace")->get_option("--no-cost")->count() == 1);
    CHECK(option<std::string>(line, "trace", "--dump-on") == "SIGUSR1");
    CHECK(option<std::vector<std::string>>(line, "trace", "command") == std::vector<std::string>{"sh", "-c", "exit 7"});
  }
  SECTION("plan: a scenario and its overrides") {
    const auto line = parse({"plan", "baseline", "--tokens", "43", "--join", "reduce", "--json"});
    CHECK(option<std::string>(line, "plan", "scenario") == "baseline");
    CHECK(option<std::string>(line, "plan", "--tokens") == "43");
    CHECK(option<std::string>(line, "plan", "--join") == "reduce");
  }
}

TEST_CASE("bad flags are refused while parsing, before any command runs", "[cli][parse][errors]") {
  // CLI11's own refusals: exit 2 in main.cpp.
  CHECK_THROWS_AS(parse({}), CLI::RequiredError);  // no command
  CHECK_THROWS_AS(parse({"no-such-command"}), CLI::ParseError);
  CHECK_THROWS_AS(parse({"plan", "--no-such-flag"}), CLI::ExtrasError);
  CHECK_THROWS_AS(parse({"diff", "a"}), CLI::RequiredError);  // B missing
  CHECK_THROWS_AS(parse({"diff", "a", "b", "--min-us", "-1"}), CLI::ValidationError);
  CHECK_THROWS_AS(parse({"trace"}), CLI::RequiredError);  // no command to run
  // tpgraph's own flag parsers: an InputError naming the flag, also exit 2.
  CHECK(input_error_of({"bench", "--replays", "0"}) ==
        "--replays: '0' is not accepted; accepted: a whole number from 1 to 1000000");
  CHECK_THROWS_AS(parse({"analyze", "tests/data", "--replay", ""}), tpgraph::InputError);
  CHECK_THROWS_AS(parse({"trace", "--dump-on", "SIGTERM", "--", "true"}), tpgraph::InputError);
  CHECK_THROWS_AS(parse({"trace", "--nvtx-range", "", "--", "true"}), tpgraph::InputError);
  // --help and --version end the parse too, for main.cpp to print.
  CHECK_THROWS_AS(parse({"--help"}), CLI::CallForHelp);
  CHECK_THROWS_AS(parse({"plan", "--help"}), CLI::CallForHelp);
  CHECK_THROWS_AS(parse({"--version"}), CLI::CallForVersion);
}

TEST_CASE("a command's verdict is its return value, an error an exception", "[cli][parse][diff]") {
  const TempDir dir;
  const auto a = baseline_folder(dir, "a", [](tpgraph::RunData&) {});
  SECTION("gate: 0 on a pass, 5 on a regression, 6 when not comparable") {
    CHECK(exit_code_of({"gate", a, a}) == 0);
    const auto slower = baseline_folder(dir, "slower", [](tpgraph::RunData& r) {
      auto& v = r.variants[0];
      const int gate = v.graph.find("r0.gate")->id;
      for (auto& rec : v.records)
        if (rec.node == gate) rec.end_ns += (rec.end_ns - rec.start_ns) / 10;  // 10% longer
    });
    CHECK(exit_code_of({"gate", a, slower, "--max-slowdown", "3%"}) == tpgraph::cli::kGateRegressionExit);
    CHECK(exit_code_of({"gate", a, slower, "--max-slowdown", "20%"}) == 0);
    const auto h100 = baseline_folder(dir, "h100", [](tpgraph::RunData& r) { r.env.devices[0].name = "H100"; });
    CHECK(exit_code_of({"gate", a, h100}) == tpgraph::cli::kGateNotComparableExit);
    // gate fails closed: a run it cannot read is not comparable, a verdict and not an error.
    CHECK(exit_code_of({"gate", a, (dir.path / "nothing").string()}) == tpgraph::cli::kGateNotComparableExit);
  }
  SECTION("diff: 0 whatever it found; a run it cannot read is an error") {
    const auto h100 = baseline_folder(dir, "h100", [](tpgraph::RunData& r) { r.env.devices[0].name = "H100"; });
    CHECK(exit_code_of({"diff", a, h100}) == 0);
    CHECK_THROWS_AS(exit_code_of({"diff", a, (dir.path / "nothing").string()}), tpgraph::InputError);
  }
  SECTION("analyze and plan: 0, or an error for input only the command can judge") {
    const auto out = (dir.path / "analyzed").string();
    CHECK(exit_code_of({"analyze", a, "--out", out, "--no-trace", "--no-timeline"}) == 0);
    CHECK(std::filesystem::is_regular_file(std::filesystem::path(out) / "report.md"));
    CHECK(exit_code_of({"plan", "--tokens", "43"}) == 0);
    // A flag's text is checked against the geometry when the command runs, not by the parser.
    const auto line = parse({"plan", "--hidden", "100"});
    CHECK_THROWS_AS(line.run_parsed(), tpgraph::InputError);
  }
}
