// `tpgraph trace -- CMD` as a user meets it without a GPU: the command's own exit code, a shell's
// 127/126 for a command that is missing or not executable, signals passed on, a report that says no
// CUDA work was seen, and a folder that is never reused.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "catch.hpp"

namespace {

namespace fs = std::filesystem;

struct Outcome {
  int code = -1;
  std::string text;  // stdout and stderr
};

// Runs `tpgraph trace ARGS` (through sh, so ARGS may hold a pipeline's worth of quoting).
Outcome trace(const std::string& args) {
  const fs::path log = fs::temp_directory_path() / ("tpgraph-trace-cli-" + std::to_string(::getpid()) + ".log");
  const std::string command = std::string("'") + TPGRAPH_BINARY + "' trace " + args + " >'" + log.string() + "' 2>&1";
  const int raw = std::system(command.c_str());
  Outcome o;
  o.code = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream in(log);
  o.text.assign(std::istreambuf_iterator<char>(in), {});
  fs::remove(log);
  return o;
}

struct Folder {
  fs::path path = fs::temp_directory_path() / ("tpgraph-trace-out-" + std::to_string(::getpid()));
  Folder() { fs::remove_all(path); }
  ~Folder() { fs::remove_all(path); }
};

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("trace exits with the command's own code and reports that no CUDA work was seen", "[trace][cli]") {
  Folder out;
  const Outcome o = trace("--out '" + out.path.string() + "' -- sh -c 'exit 7'");
  CHECK(o.code == 7);
  CHECK(has(o.text, "no CUDA work was seen"));
  CHECK(fs::is_directory(out.path / "procs"));
  REQUIRE(fs::exists(out.path / "report.md"));
  std::ifstream report(out.path / "report.md");
  const std::string text{std::istreambuf_iterator<char>(report), {}};
  CHECK(has(text, "no CUDA work was seen"));
  // Nothing recorded, nothing to calibrate: cost.json and the report say why.
  CHECK(has(text, "- tracing cost: not measured: the program's trace recorded no graph record"));
  std::ifstream cost(out.path / "cost.json");
  CHECK(has(std::string{std::istreambuf_iterator<char>(cost), {}}, "\"measured\": false"));
  // The folder is a trace folder now: analyze reads it again, and trace never reuses it.
  const Outcome again = trace("--out '" + out.path.string() + "' -- true");
  CHECK(again.code == 2);
  CHECK(has(again.text, "not an empty folder"));
}

TEST_CASE("trace --no-cost skips the calibration and says so", "[trace][cli][cost]") {
  Folder out;
  const Outcome o = trace("--no-cost --out '" + out.path.string() + "' -- true");
  CHECK(o.code == 0);
  CHECK(has(o.text, "tracing cost: not measured: --no-cost"));
  std::ifstream cost(out.path / "cost.json");
  CHECK(has(std::string{std::istreambuf_iterator<char>(cost), {}}, "\"reason\": \"--no-cost\""));
}

TEST_CASE("trace answers a missing or non-executable command as a shell would", "[trace][cli]") {
  Folder out;
  const Outcome missing = trace("--out '" + out.path.string() + "' -- /nonexistent/program");
  CHECK(missing.code == 127);
  CHECK(has(missing.text, "no such file"));
  CHECK_FALSE(fs::exists(out.path));  // nothing written for a command that never ran
  const Outcome unknown = trace("--out '" + out.path.string() + "' -- tpgraph-no-such-command");
  CHECK(unknown.code == 127);
  CHECK(has(unknown.text, "command not found"));
  const Outcome plain =
      trace("--out '" + out.path.string() + "' -- '" + std::string(TPGRAPH_SOURCE_DIR) + "/README.md'");
  CHECK(plain.code == 126);
  CHECK(has(plain.text, "not executable"));
  // With stderr closed the line cannot be written: the exit code stays the shell's.
  const std::string closed = std::string("'") + TPGRAPH_BINARY + "' trace --out '" + out.path.string() +
                             "' -- /nonexistent/program >/dev/null 2>&-";
  const int raw = std::system(closed.c_str());
  CHECK((WIFEXITED(raw) ? WEXITSTATUS(raw) : -1) == 127);
}

TEST_CASE("trace passes SIGTERM on to the command and exits as the command did", "[trace][cli]") {
  Folder out;
  // tpgraph is sent SIGTERM by another process (as a job scheduler would); the command, which
  // would otherwise sleep for a minute, must receive it and end with 128 + 15.
  const fs::path log = fs::temp_directory_path() / ("tpgraph-trace-term-" + std::to_string(::getpid()) + ".log");
  const std::string command = std::string("'") + TPGRAPH_BINARY + "' trace --out '" + out.path.string() +
                              "' -- sleep 60 >'" + log.string() + "' 2>&1 & sleep 1; kill -TERM $!; wait $!";
  const int raw = std::system(command.c_str());
  fs::remove(log);
  REQUIRE(WIFEXITED(raw));
  CHECK(WEXITSTATUS(raw) == 128 + 15);
}

TEST_CASE("trace refuses contradictory clock flags", "[trace][cli]") {
  Folder out;
  const Outcome o = trace("--assume-synced --align-collectives --out '" + out.path.string() + "' -- true");
  CHECK(o.code == 2);
  CHECK(has(o.text, "exclude each other"));
}

TEST_CASE("two traces started together write folders of their own", "[trace][cli][hostile]") {
  Folder cwd;
  fs::create_directories(cwd.path);
  // Same second, same default: each trace gets runs/trace-<UTC>-<pid>, never the other's folder.
  const std::string bin = std::string("'") + TPGRAPH_BINARY + "'";
  const std::string command = "cd '" + cwd.path.string() + "' && { " + bin + " trace -- sleep 0.3 >a.log 2>&1 & " +
                              bin + " trace -- sleep 0.3 >b.log 2>&1 & " + bin +
                              " trace -- true >c.log 2>&1; wait; } && grep -q 'wrote' a.log && grep -q 'wrote' b.log";
  CHECK(std::system(command.c_str()) == 0);
  int folders = 0;
  for (const auto& e : fs::directory_iterator(cwd.path / "runs")) {
    INFO(e.path());
    CHECK(e.path().filename().string().rfind("trace-", 0) == 0);
    CHECK(fs::exists(e.path() / "report.md"));
    ++folders;
  }
  CHECK(folders == 3);
}

TEST_CASE("a trace into a folder another tpgraph holds is refused before its command runs", "[trace][cli][hostile]") {
  Folder out;
  fs::create_directories(out.path);
  const fs::path marker = fs::temp_directory_path() / ("tpgraph-trace-ran-" + std::to_string(::getpid()));
  fs::remove(marker);
  SECTION("held by another process (a trace or analyze writing it)") {
    const int fd = ::open(out.path.c_str(), O_RDONLY | O_DIRECTORY);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
    const Outcome o = trace("--out '" + out.path.string() + "' -- touch '" + marker.string() + "'");
    ::close(fd);
    INFO(o.text);
    CHECK(o.code == 2);
    CHECK(has(o.text, "another tpgraph is writing this folder"));
    CHECK(std::count(o.text.begin(), o.text.end(), '\n') == 1);
    CHECK_FALSE(fs::exists(marker));  // the command never ran
    CHECK(fs::is_empty(out.path));
  }
  SECTION("held by a trace still running its command") {
    const std::string bin = std::string("'") + TPGRAPH_BINARY + "'";
    const std::string dir = "'" + out.path.string() + "'";
    const fs::path log = out.path.parent_path() / ("tpgraph-trace-second-" + std::to_string(::getpid()) + ".log");
    const std::string command = bin + " trace --out " + dir + " -- sleep 2 >/dev/null 2>&1 & sleep 0.7; " + bin +
                                " trace --out " + dir + " -- touch '" + marker.string() + "' >'" + log.string() +
                                "' 2>&1; second=$?; wait $!; first=$?; test $second = 2 && test $first = 0";
    CHECK(std::system(command.c_str()) == 0);
    std::ifstream in(log);
    const std::string text{std::istreambuf_iterator<char>(in), {}};
    fs::remove(log);
    INFO(text);
    CHECK(has(text, "another tpgraph is writing this folder"));
    CHECK_FALSE(fs::exists(marker));
    CHECK(fs::exists(out.path / "report.md"));  // the first trace finished its report
  }
  fs::remove(marker);
}

TEST_CASE("trace passes the recording flags to the program's environment", "[trace][cli][recording]") {
  Folder out;
  const fs::path env = fs::temp_directory_path() / ("tpgraph-trace-env-" + std::to_string(::getpid()));
  const Outcome o = trace(
      "--delay 20 --duration 5 --launches 7 --sample 100 --keep-last 200 --dump-on SIGUSR1 "
      "--max-file-size 10 --nvtx-range execute_model --out '" +
      out.path.string() + "' -- sh -c 'env > \"" + env.string() + "\"'");
  INFO(o.text);
  CHECK(o.code == 0);
  std::ifstream in(env);
  const std::string text{std::istreambuf_iterator<char>(in), {}};
  fs::remove(env);
  CHECK(has(text, "TPGRAPH_DELAY_MS=20000\n"));
  CHECK(has(text, "TPGRAPH_DURATION_MS=5000\n"));
  CHECK(has(text, "TPGRAPH_LAUNCHES=7\n"));
  CHECK(has(text, "TPGRAPH_SAMPLE=100\n"));
  CHECK(has(text, "TPGRAPH_KEEP_LAST=200\n"));
  CHECK(has(text, "TPGRAPH_DUMP_ON=10\n"));
  CHECK(has(text, "TPGRAPH_MAX_FILE_BYTES=10485760\n"));
  CHECK(has(text, "TPGRAPH_RANGE=nvtx:execute_model\n"));
  CHECK(has(text, "NVTX_INJECTION64_PATH="));
}

TEST_CASE("trace refuses recording flags it cannot honour, in one line, before the command runs",
          "[trace][cli][recording]") {
  Folder out;
  const std::string dir = " --out '" + out.path.string() + "' -- true";
  const auto refused = [&](const std::string& flags, const std::string& says) {
    const Outcome o = trace(flags + dir);
    INFO(flags << ": " << o.text);
    CHECK(o.code == 2);
    CHECK(has(o.text, says));
    CHECK_FALSE(fs::exists(out.path / "procs"));
  };
  refused("--sample 0", "--sample");
  refused("--delay 5x", "--delay");
  refused("--max-file-size 0", "--max-file-size");
  refused("--keep-last 10 --dump-on SIGTERM", "accepted: SIGUSR1 or SIGUSR2");
  refused("--dump-on SIGUSR1", "needs --keep-last");
  refused("--profiler-range --nvtx-range step", "exclude each other");
  refused("--nvtx-range ''", "--nvtx-range");
}
