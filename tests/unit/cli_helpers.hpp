// Running the built tpgraph binary from a test: its exit code, stdout, and stdout with stderr.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "catch.hpp"

namespace cli_test {

inline const std::string kSource = TPGRAPH_SOURCE_DIR;

struct Result {
  int status = -1;
  std::string output;  // stdout and stderr together
  std::string out;     // stdout only
};

// Runs `tpgraph ARGS` from the repository root (so graphs/ resolves either way); stderr is captured
// separately so JSON on stdout stays parseable.
inline Result run_tpgraph(const std::string& args, const std::string& env = "") {
  static int serial = 0;
  const auto err_file = std::filesystem::temp_directory_path() /
                        ("tpgraph-cli-" + std::to_string(::getpid()) + "-" + std::to_string(++serial) + ".err");
  const std::string command =
      "cd '" + kSource + "' && " + env + " '" + TPGRAPH_BINARY + "' " + args + " 2>'" + err_file.string() + "'";
  Result r;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
  const int raw = ::pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  std::ifstream err(err_file);
  r.output = r.out + std::string(std::istreambuf_iterator<char>(err), {});
  std::filesystem::remove(err_file);
  return r;
}

inline bool mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A bad input: exit 2 and one line on stderr that contains `part`.
inline void check_rejected(const std::string& args, const std::string& part) {
  const auto r = run_tpgraph(args);
  INFO("tpgraph " << args << "\n" << r.output);
  CHECK(r.status == 2);
  CHECK(mentions(r.output, part));
  CHECK(r.out.empty());
  const auto first_newline = r.output.find('\n');
  CHECK(first_newline == r.output.size() - 1);  // exactly one line
}

struct TempDir {
  std::filesystem::path path;
  TempDir() : path(std::filesystem::temp_directory_path() / ("tpgraph-cli-dir-" + std::to_string(::getpid()))) {
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  [[nodiscard]] std::string file(const std::string& name, const std::string& text) const {
    const auto p = path / name;
    std::ofstream(p) << text;
    return p.string();
  }
};

}  // namespace cli_test
