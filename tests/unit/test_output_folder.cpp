// An output folder as write_run_folder leaves it after a writer that was killed, stopped midway
// through its swap, or analysed a different set of graphs: the next writer recognises what is its
// own (under the folder's lock), clears it, and never touches anything else.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "catch.hpp"
#include "core/base/atomic_file.hpp"
#include "core/report/output_folder.hpp"
#include "core/report/report.hpp"
#include "core/report/run_outputs.hpp"
#include "run_fixture.hpp"

using namespace tpgraph;
using namespace tpgraph::testing;

namespace {

namespace fs = std::filesystem;

RunData run_of(const std::vector<std::string>& names) {
  RunData run;
  run.env = test_environment();
  for (const auto& name : names) run.variants.push_back(scheduled_variant(small_scenario(name, 4), {0, 1'500}));
  return run;
}

int tpgraph_status(const std::string& args, std::string* output) {
  const fs::path log = fs::temp_directory_path() / ("tpgraph-folder-" + std::to_string(::getpid()) + ".log");
  const std::string command = std::string("'") + TPGRAPH_BINARY + "' " + args + " >'" + log.string() + "' 2>&1";
  const int raw = std::system(command.c_str());
  *output = read_text(log);
  fs::remove(log);
  return WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
}

}  // namespace

TEST_CASE("a staging folder left by a writer that is gone is removed by the next writer", "[analyze][hostile]") {
  const auto dir = fresh_temp_dir("dead-staging");
  const RunData run = run_of({"baseline"});
  (void)write_run_folder(run, analyze_run(run), dir, /*in_place=*/false);
  // What an analyze killed by the OOM killer leaves: its staging folder, full of outputs.
  const auto dead = dir / (std::string(kStagingPrefix) + "999999999");
  fs::create_directories(dead / "baseline");
  std::ofstream(dead / "baseline" / "trace.json") << std::string(1 << 16, 'x');
  std::ofstream(dir / (std::string(kOutputManifest) + ".tmp-999999999")) << "{";
  // A name like it that no writer makes stays.
  fs::create_directories(dir / (std::string(kStagingPrefix) + "notes"));
  (void)write_run_folder(run, analyze_run(run), dir, /*in_place=*/true);
  CHECK_FALSE(fs::exists(dead));
  CHECK_FALSE(fs::exists(dir / (std::string(kOutputManifest) + ".tmp-999999999")));
  CHECK(fs::exists(dir / (std::string(kStagingPrefix) + "notes")));
  CHECK(fs::exists(dir / "report.md"));
  fs::remove_all(dir);
}

TEST_CASE("an in-place analysis removes the outputs the previous one wrote and this one does not",
          "[analyze][hostile]") {
  const auto dir = fresh_temp_dir("stale");
  const RunData two = run_of({"baseline", "join"});
  (void)write_run_folder(two, analyze_run(two), dir, /*in_place=*/false);
  REQUIRE(fs::exists(dir / "join" / "trace.json"));
  std::ofstream(dir / "notes.txt") << "the user's";
  SECTION("a graph that is gone takes its folder along") {
    const RunData one = run_of({"baseline"});
    (void)write_run_folder(one, analyze_run(one), dir, /*in_place=*/true);
    CHECK_FALSE(fs::exists(dir / "join"));
    CHECK(fs::exists(dir / "baseline" / "trace.json"));
  }
  SECTION("a file of the user's keeps a graph's folder, and only the outputs go") {
    std::ofstream(dir / "join" / "mine.txt") << "kept";
    const RunData one = run_of({"baseline"});
    (void)write_run_folder(one, analyze_run(one), dir, /*in_place=*/true);
    CHECK(fs::exists(dir / "join" / "mine.txt"));
    CHECK_FALSE(fs::exists(dir / "join" / "trace.json"));
    CHECK_FALSE(fs::exists(dir / "join" / "graph.dot"));
  }
  SECTION("files this analysis skips go (--no-trace)") {
    OutputSelection no_trace;
    no_trace.trace = false;
    (void)write_run_folder(two, analyze_run(two), dir, /*in_place=*/true, no_trace);
    CHECK_FALSE(fs::exists(dir / "join" / "trace.json"));
    CHECK(fs::exists(dir / "join" / "timeline.svg"));
  }
  CHECK(fs::exists(dir / "notes.txt"));
  CHECK(fs::exists(dir / "records.json"));
  const OutputManifest manifest = read_output_manifest(dir);
  CHECK(manifest.present);
  for (const auto& f : manifest.files) CHECK(fs::exists(dir / f));
  fs::remove_all(dir);
}

TEST_CASE("a manifest from elsewhere removes nothing but outputs inside the folder", "[analyze][hostile]") {
  const auto dir = fresh_temp_dir("hostile-manifest");
  const auto outside = fresh_temp_dir("outside");
  std::ofstream(outside / "report.md") << "not yours";
  std::ofstream(dir / "keep.txt") << "mine";
  fs::create_directories(dir / "g");
  std::ofstream(dir / "g" / "data.bin") << "mine";
  write_output_manifest(dir, {true,
                              "x",
                              {"../" + outside.filename().string() + "/report.md", "keep.txt", "g/data.bin",
                               outside.string() + "/report.md", "records.json"}});
  const RunData run = run_of({"baseline"});
  save_raw_records(dir / "records.json", run);
  (void)write_run_folder(run, analyze_run(run), dir, /*in_place=*/true);
  CHECK(fs::exists(outside / "report.md"));
  CHECK(fs::exists(dir / "keep.txt"));
  CHECK(fs::exists(dir / "g" / "data.bin"));
  CHECK(fs::exists(dir / "records.json"));
  fs::remove_all(dir);
  fs::remove_all(outside);
}

TEST_CASE("analyze --out stopped midway through its swap is written again by the next analyze",
          "[analyze][cli][hostile]") {
  const auto scratch = fresh_temp_dir("half-moved");
  const auto trace = scratch / "trace";
  const auto out = scratch / "out";
  std::string text;
  REQUIRE(tpgraph_status("trace --out '" + trace.string() + "' -- true", &text) == 0);
  REQUIRE(tpgraph_status("analyze '" + trace.string() + "' --out '" + out.string() + "'", &text) == 0);
  // A swap stopped after the graph folders moved and before the reports did, its staging folder
  // still there (SIGKILL gives no chance to remove it).
  fs::remove(out / "report.md");
  fs::remove(out / "report.json");
  fs::create_directories(out / (std::string(kStagingPrefix) + "999999999"));
  std::ofstream(out / (std::string(kStagingPrefix) + "999999999") / "report.md") << "half";
  const int again = tpgraph_status("analyze '" + trace.string() + "' --out '" + out.string() + "'", &text);
  INFO(text);
  CHECK(again == 0);
  CHECK(fs::exists(out / "report.md"));
  CHECK_FALSE(fs::exists(out / (std::string(kStagingPrefix) + "999999999")));
  // The same folder stays refused to another input: its outputs are not this trace's.
  const auto other = scratch / "other";
  REQUIRE(tpgraph_status("trace --out '" + other.string() + "' -- true", &text) == 0);
  CHECK(tpgraph_status("analyze '" + other.string() + "' --out '" + out.string() + "'", &text) == 2);
  CHECK(text.find("the folder is not empty") != std::string::npos);
  // And a file of someone else's makes it not ours.
  std::ofstream(out / "notes.txt") << "mine";
  CHECK(tpgraph_status("analyze '" + trace.string() + "' --out '" + out.string() + "'", &text) == 2);
  CHECK(fs::exists(out / "notes.txt"));
  fs::remove_all(scratch);
}

TEST_CASE("a write the system refuses is a std::system_error with its errno, and leaves no file", "[analyze][errors]") {
  const fs::path dir = fresh_temp_dir("write-refused");
  const fs::path path = dir / "big.txt";
  std::error_code code;
  std::string what;
  {
    // A file size limit of 1 KiB, its signal ignored: the write fails with EFBIG, as a full disk
    // fails with ENOSPC. Both are restored when the block ends, however it ends.
    struct SmallFiles {
      rlimit before{};
      void (*handler)(int) = std::signal(SIGXFSZ, SIG_IGN);
      SmallFiles() {
        ::getrlimit(RLIMIT_FSIZE, &before);
        rlimit small = before;
        small.rlim_cur = 1024;
        ::setrlimit(RLIMIT_FSIZE, &small);
      }
      ~SmallFiles() {
        ::setrlimit(RLIMIT_FSIZE, &before);
        std::signal(SIGXFSZ, handler);
      }
    } const small_files;
    try {
      write_file_atomically(path, std::string(64 * 1024, 'x'));
    } catch (const std::system_error& e) {
      code = e.code();
      what = e.what();
    }
  }
  CHECK(code == std::errc::file_too_large);
  // One line: what failed on which path, then the system's reason.
  CHECK(what.rfind(path.string() + ": write failed after ", 0) == 0);
  CHECK(what.find(std::generic_category().message(EFBIG)) != std::string::npos);
  CHECK(what.find('\n') == std::string::npos);
  CHECK(fs::is_empty(dir));  // neither the file nor its temporary
  fs::remove_all(dir);
}
