#include "catch.hpp"

#include <fmt/core.h>
#include <sys/stat.h>
#include <unistd.h>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "core/analysis/timeline.hpp"
#include "core/base/error.hpp"
#include "core/base/json_input.hpp"
#include "core/model/scenario.hpp"
#include "core/numerics/nvfp4_layout.hpp"
#include "core/numerics/reference.hpp"
#include "core/records/records.hpp"

using namespace tpgraph;

namespace {

const std::filesystem::path kGraphs = std::filesystem::path(TPGRAPH_SOURCE_DIR) / "graphs";

// The InputError message of parse_scenario(text), or "" if it parsed.
std::string rejection(const std::string& text, const std::string& origin = "test.json") {
  try {
    (void)parse_scenario(text, origin);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

bool mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("every built-in scenario is a file in graphs/ and every file is built in", "[scenario]") {
  const auto names = builtin_scenario_names();
  REQUIRE(names.size() >= 8);
  CHECK(names.front() == "baseline");
  std::set<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(kGraphs))
    if (entry.path().extension() == ".json") files.insert(entry.path().stem().string());
  CHECK(files == std::set<std::string>(names.begin(), names.end()));
  for (const char* required :
       {"baseline", "peer-copy", "copy-first", "join", "layers", "fresh-alloc", "root-busy", "eager"}) {
    CHECK(files.count(required) == 1);
  }
}

TEST_CASE("every file in graphs/ parses, names itself and describes its question", "[scenario]") {
  for (const auto& name : builtin_scenario_names()) {
    INFO(name);
    const auto s = resolve_scenario(name, kGraphs);
    CHECK(s.name == name);
    CHECK_FALSE(s.description.empty());
  }
}

TEST_CASE("the scenario files set the variants their names promise", "[scenario]") {
  CHECK(resolve_scenario("peer-copy", kGraphs).peer_copy == PeerCopy::per_rank);
  CHECK(resolve_scenario("copy-first", kGraphs).peer_copy == PeerCopy::first);
  CHECK(resolve_scenario("join", kGraphs).join == JoinKind::reduce);
  const auto layers = resolve_scenario("layers", kGraphs);
  CHECK(layers.layers == 4);
  CHECK(layers.join == JoinKind::reduce);
  CHECK(resolve_scenario("fresh-alloc", kGraphs).alloc == AllocKind::fresh);
  const auto busy = resolve_scenario("root-busy", kGraphs);
  CHECK(busy.root_busy == 4);
  CHECK(busy.peer_copy == PeerCopy::per_rank);
  CHECK(resolve_scenario("eager", kGraphs).issue == IssueKind::eager);
}

TEST_CASE("graphs/baseline.json is the model's default scenario", "[scenario]") {
  // plan and dot fall back to Scenario{} when no scenario is named; the file must say the same.
  CHECK(resolve_scenario("baseline", kGraphs) == Scenario{});
}

TEST_CASE("a scenario round-trips through JSON", "[scenario]") {
  Scenario s;
  s.name = "odd \"name\"";
  s.description = "line one\nline two";
  s.geometry = Geometry{64, 4, 512, 128, 43, 3};
  s.devices = {0, 0, 1};
  s.replays = 7;
  s.warmup = 0;
  s.layers = 3;
  s.peer_copy = PeerCopy::first;
  s.copy_rows = 5;
  s.join = JoinKind::copy;
  s.root_busy = 2;
  s.alloc = AllocKind::fresh;
  s.issue = IssueKind::eager;
  s.layout = Layout::v1;
  s.weights = WeightsKind::zeros;
  s.seed = 18446744073709551615ULL;
  CHECK(parse_scenario(scenario_to_json(s), "round-trip") == s);
  s.copy_rows.reset();
  CHECK(parse_scenario(scenario_to_json(s), "round-trip") == s);
  CHECK(parse_scenario(scenario_to_json(Scenario{}), "round-trip") == Scenario{});
}

TEST_CASE("comments are allowed and missing fields keep their defaults", "[scenario]") {
  const auto s = parse_scenario(R"(// a question
    {
      /* block */ "layers": 2, // trailing
      "geometry": { "tokens": 43 }
    })",
                                "graphs/two.json");
  CHECK(s.layers == 2);
  CHECK(s.geometry.tokens == 43);
  CHECK(s.geometry.hidden == Geometry{}.hidden);
  CHECK(s.name == "two");  // no "name": the file's stem
  CHECK(s.peer_copy == PeerCopy::none);
}

TEST_CASE("copy_rows takes a count or \"all\"", "[scenario]") {
  CHECK(parse_scenario(R"({"copy_rows": 32})", "x.json").copy_rows == 32);
  CHECK_FALSE(parse_scenario(R"({"copy_rows": "all"})", "x.json").copy_rows.has_value());
  CHECK(mentions(rejection(R"({"copy_rows": "some"})"), "all"));
  CHECK(mentions(rejection(R"({"copy_rows": 0})"), "copy_rows"));
  CHECK(mentions(rejection(R"({"copy_rows": true})"), "copy_rows"));
}

TEST_CASE("copy rows are capped at the token count", "[scenario]") {
  Scenario s;
  s.geometry.tokens = 43;
  CHECK(s.copy_row_count() == 43);
  s.copy_rows = 32;
  CHECK(s.copy_row_count() == 32);
  s.copy_rows = 100;
  CHECK(s.copy_row_count() == 43);
}

TEST_CASE("ranks map to devices from the list, or round-robin over the visible GPUs", "[scenario]") {
  Scenario s;
  s.geometry.ranks = 4;
  CHECK(s.device_of(3, 2) == 1);
  CHECK(s.device_of(1, 1) == 0);
  s.devices = {0, 0};
  CHECK(s.device_of(1, 8) == 0);
  s.devices = {2, 3};
  CHECK(s.device_of(2, 8) == 2);
}

TEST_CASE("broken JSON names the file, line and column", "[scenario][errors]") {
  // The position is where the parser stopped: the last character of the offending token.
  const auto message = rejection("{\n  \"layers\": 2,\n  \"join\" \"reduce\"\n}", "graphs/broken.json");
  INFO(message);
  CHECK(mentions(message, "graphs/broken.json:3:17: invalid JSON"));
  CHECK(message.find('\n') == std::string::npos);
}

TEST_CASE("an empty file is broken JSON at 1:1", "[scenario][errors]") {
  CHECK(mentions(rejection("", "e.json"), "e.json:1:1: invalid JSON"));
}

TEST_CASE("an unknown field is named with the accepted ones", "[scenario][errors]") {
  const auto message = rejection(R"({"peer_cpy": "first"})", "graphs/typo.json");
  INFO(message);
  CHECK(mentions(message, "graphs/typo.json"));
  CHECK(mentions(message, "unknown field 'peer_cpy'"));
  CHECK(mentions(message, "accepted: name, description, geometry"));
  CHECK(mentions(message, "peer_copy"));
}

TEST_CASE("a geometry field at the top level says where it belongs", "[scenario][errors]") {
  const auto message = rejection(R"({"tokens": 43})");
  CHECK(mentions(message, "unknown field 'tokens'"));
  CHECK(mentions(message, "under \"geometry\""));
  CHECK(mentions(rejection(R"({"geometry": {"token": 43}})"), "unknown field 'geometry.token'"));
}

TEST_CASE("a field of the wrong type names the field and the expected type", "[scenario][errors]") {
  SECTION("string for an integer") {
    const auto message = rejection(R"({"layers": "4"})");
    CHECK(mentions(message, "field 'layers' must be an integer, got string"));
  }
  SECTION("fraction for an integer") {
    CHECK(mentions(rejection(R"({"geometry": {"tokens": 4.5}})"), "field 'geometry.tokens' must be an integer"));
  }
  SECTION("number for an enum") {
    CHECK(mentions(rejection(R"({"join": 1})"), "field 'join' must be a string, one of none, copy, reduce"));
  }
  SECTION("object for the device list") {
    CHECK(mentions(rejection(R"({"devices": {"0": 1}})"), "field 'devices' must be an array"));
  }
  SECTION("negative seed") { CHECK(mentions(rejection(R"({"seed": -1})"), "field 'seed'")); }
  SECTION("not an object at all") { CHECK(mentions(rejection("[1, 2]"), "must be a JSON object")); }
}

TEST_CASE("a bad enum value lists the accepted ones", "[scenario][errors]") {
  CHECK(mentions(rejection(R"({"peer_copy": "all"})"), "'all' is not accepted; accepted: none, per-rank, first"));
  CHECK(mentions(rejection(R"({"join": "sum"})"), "accepted: none, copy, reduce"));
  CHECK(mentions(rejection(R"({"alloc": "pool"})"), "accepted: resident, fresh"));
  CHECK(mentions(rejection(R"({"issue": "stream"})"), "accepted: graph, eager"));
  CHECK(mentions(rejection(R"({"layout": "v3"})"), "accepted: v1, v2"));
  CHECK(mentions(rejection(R"({"weights": "ones"})"), "accepted: random, zeros"));
}

TEST_CASE("an invalid geometry or setting in a file names the file and the field", "[scenario][errors]") {
  const auto hidden = rejection(R"({"geometry": {"hidden": 100}})", "graphs/h.json");
  CHECK(mentions(hidden, "graphs/h.json: invalid geometry: hidden = 100"));
  CHECK(mentions(rejection(R"({"geometry": {"top_k": 999}})"), "top_k = 999"));
  CHECK(mentions(rejection(R"({"layers": 0})"), "layers = 0"));
  CHECK(mentions(rejection(R"({"replays": 0})"), "replays = 0"));
  CHECK(mentions(rejection(R"({"devices": [0, -1]})"), "devices[1] = -1"));
  CHECK(mentions(rejection(R"({"geometry": {"tokens": 99999999999}})"), "out of range"));
}

TEST_CASE("a missing file, an unknown name and a folder are each named", "[scenario][errors]") {
  try {
    (void)load_scenario("/nonexistent/x.json");
    FAIL("no error for a missing file");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()) == "/nonexistent/x.json: no such scenario file");
  }
  try {
    (void)resolve_scenario("no-such-variant", kGraphs);
    FAIL("no error for an unknown scenario name");
  } catch (const InputError& e) {
    const std::string message = e.what();
    CHECK(mentions(message, "unknown scenario 'no-such-variant'"));
    CHECK(mentions(message, "baseline, peer-copy"));
  }
  CHECK_THROWS_AS(load_scenario(kGraphs), InputError);
}

TEST_CASE("a path resolves as a path, a name in graphs/", "[scenario]") {
  const auto dir = std::filesystem::temp_directory_path() / ("tpgraph-scenario-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto file = dir / "mine.json";
  std::ofstream(file) << R"({"layers": 3})";
  const auto s = resolve_scenario(file.string(), kGraphs);
  CHECK(s.layers == 3);
  CHECK(s.name == "mine");
  CHECK(resolve_scenario("join", kGraphs).name == "join");
  std::filesystem::remove_all(dir);
}

TEST_CASE("memory per device adds up the ranks that share a GPU", "[scenario]") {
  Scenario s;
  s.join = JoinKind::reduce;
  s.devices = {0, 0};
  const auto per_device = memory_per_device(s, 1);
  REQUIRE(per_device.size() == 1);
  CHECK(per_device[0].first == 0);
  CHECK(per_device[0].second == memory_of_rank(s, 0).total() + memory_of_rank(s, 1).total());
  CHECK(memory_of_rank(s, 0).staging > 0);
  CHECK(memory_of_rank(s, 1).staging == 0);
}

// --- hostile scenario files ---------------------------------------------------------------------

TEST_CASE("deep nesting is refused before parsing, wherever it is", "[scenario][hostile]") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const auto why = rejection("{\"name\": " + deep + "}");
  CHECK(mentions(why, "test.json: JSON nested deeper than 32 levels"));
  CHECK(why.size() < 200);
  // Brackets inside strings are text, not nesting.
  CHECK(rejection("{\"description\": \"" + std::string(100, '[') + "\"}").empty());
}

TEST_CASE("a wrong-typed value is quoted by a short escaped excerpt", "[scenario][hostile]") {
  const auto long_name = rejection("{\"layers\": \"" + std::string(100000, 'x') + "\"}");
  CHECK(mentions(long_name, "must be an integer, got string \"xxxx"));
  CHECK(long_name.size() < 200);
  const auto array = rejection("{\"replays\": [1, 2, 3]}");
  CHECK(mentions(array, "got array of 3 values"));
  const auto escape = rejection("{\"join\": \"\\u001b[31mred\"}");
  CHECK(mentions(escape, "\\u001b[31mred"));
  CHECK(!mentions(escape, "\x1b"));
}

TEST_CASE("a number beyond a double is bad input naming the file", "[scenario][hostile]") {
  const auto why = rejection("{\"replays\": 1e400}", "graphs/huge.json");
  CHECK(mentions(why, "graphs/huge.json"));
  CHECK(mentions(why, "1e400"));
}

TEST_CASE("names and descriptions with control characters are refused", "[scenario][hostile]") {
  CHECK(mentions(rejection("{\"name\": \"a\\u0000b\"}"), "name \"a\\u0000b\" holds a control character"));
  CHECK(mentions(rejection("{\"name\": \"a\\nb\"}"), "control character"));
  CHECK(mentions(rejection("{\"description\": \"\\u001b]0;title\\u0007\"}"), "description"));
  CHECK(rejection("{\"description\": \"two\\nlines\\tand a tab\"}").empty());    // paragraphs are text
  CHECK(mentions(rejection("{\"name\": \"a\\u0085b\"}"), "control character"));  // C1 (NEL)
  CHECK(rejection("{\"name\": \"gr\\u00fc\\u00dfe-\\u4e2d\"}").empty());         // plain UTF-8 is fine
}

TEST_CASE("a name that would collide with a run folder's files is refused", "[scenario][hostile]") {
  CHECK(mentions(rejection("{\"name\": \"report.md\"}"), "is a file of every run folder"));
  CHECK(mentions(rejection("{\"name\": \"records.json\"}"), "is a file of every run folder"));
  CHECK(mentions(rejection("{\"name\": \"" + std::string(101, 'n') + "\"}"), "accepted: 1 to 100"));
  CHECK(mentions(rejection("{\"name\": \"\"}"), "accepted: 1 to 100"));
}

TEST_CASE("a scenario path that is not a regular file is refused without reading it", "[scenario][hostile]") {
  const auto dir = std::filesystem::temp_directory_path() / ("tpgraph-fifo-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto fifo = dir / "scenario.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string why;
  try {
    (void)load_scenario(fifo);  // would block forever if it were opened for reading as a file
  } catch (const InputError& e) {
    why = e.what();
  }
  CHECK(mentions(why, "not a regular file"));
  why.clear();
  try {
    (void)load_scenario("/dev/zero");
  } catch (const InputError& e) {
    why = e.what();
  }
  CHECK(mentions(why, "/dev/zero: not a regular file"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("the JSON input helpers", "[scenario][hostile]") {
  CHECK_NOTHROW(check_json_depth("[[[]]]", "x", 3));
  CHECK_THROWS_AS(check_json_depth("[[[[]]]]", "x", 3), InputError);
  CHECK_NOTHROW(check_json_depth("[\"[[[[\\\"[[[[\"]", "x", 1));  // brackets and an escaped quote in a string
  CHECK(quoted_excerpt("abc") == "\"abc\"");
  CHECK(quoted_excerpt("a\nb\x1b") == "\"a\\nb\\u001b\"");
  CHECK(quoted_excerpt(std::string(50, 'z'), 10) == "\"zzzzzzzzzz\"...");
  CHECK(quoted_excerpt("\xc3\xa9\xc3\xa9", 3) == "\"\xc3\xa9\"...");  // cut at a character boundary
  CHECK(has_control_characters(std::string("a\0b", 3)));
  CHECK(has_control_characters("\x7f"));
  CHECK(has_control_characters("\xc2\x9b"));  // C1 CSI
  CHECK(!has_control_characters("\xc2\xa0 plain"));
}

TEST_CASE("every enum with a name prints by that name through fmt, width and alignment included", "[format]") {
  // fmt 9 prints an enum without a formatter as its number: these would read "1", "0", ...
  CHECK(fmt::format("{}", PeerCopy::first) == to_string(PeerCopy::first));
  CHECK(fmt::format("{}", JoinKind::reduce) == to_string(JoinKind::reduce));
  CHECK(fmt::format("{}", AllocKind::fresh) == to_string(AllocKind::fresh));
  CHECK(fmt::format("{}", IssueKind::eager) == to_string(IssueKind::eager));
  CHECK(fmt::format("{}", WeightsKind::zeros) == "zeros");
  CHECK(fmt::format("[{:>4}]", Layout::v1) == "[  v1]");
  CHECK(fmt::format("{:<8}|", ActivityKind::memset) == "memset  |");
  CHECK(fmt::format("{}", Verdict::serialized) == to_string(Verdict::serialized));
}

TEST_CASE("warmup is auto by default, takes \"auto\" or a count, and round-trips", "[scenario]") {
  CHECK(Scenario{}.warmup == kWarmupAuto);
  CHECK(parse_scenario(R"({"warmup": "auto"})", "w.json").warmup == kWarmupAuto);
  CHECK(parse_scenario(R"({"warmup": 7})", "w.json").warmup == 7);
  Scenario s;
  CHECK(parse_scenario(scenario_to_json(s), "w.json").warmup == kWarmupAuto);
  s.warmup = 12;
  CHECK(parse_scenario(scenario_to_json(s), "w.json").warmup == 12);
  CHECK(warmup_text(kWarmupAuto) == "auto");
  CHECK(warmup_text(3) == "3");
  CHECK(mentions(rejection(R"({"warmup": "soon"})"), "field 'warmup' must be \"auto\" or a whole number of replays"));
  CHECK(mentions(rejection(R"({"warmup": -2})"), "warmup = -2; accepted: \"auto\" or 0 to 100000"));
}
