// tpgraph: capture a tensor-parallel MoE layer once as a multi-device CUDA graph, replay it, and
// tell from CUPTI records when each rank really began and what it waited for.
//
//   plan / dot          GPU-free: geometry, routing, the layer graph (src/core)
//   check / bench       kernels against the CPU reference and the GPU's own limits (src/kernels)
//   run / info          capture, replay, CUPTI timeline and its outputs (src/cuda, src/cupti)
//   trace               any CUDA program, through the injection library (src/inject): the same
//                       timeline, waits and outputs from its processes' record files
//   analyze             recompute a run's or a trace's outputs from its raw records, no GPU
//   diff / gate         two runs or traces compared node by node, with confidence; gate for CI
#include <fcntl.h>
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <string_view>

#include "cli/app.hpp"
#include "core/base/atomic_file.hpp"
#include "core/base/error.hpp"

namespace {

// `analyze` and `trace` hold millions of records: with glibc's arenas on transparent huge pages the
// page faults of first touch cost a tenth (10 M records: seconds, not a minute, on a VM). The tunable
// is read only at start-up, so the process re-executes itself once with it set; the traced command
// gets the environment it was given (cmd_trace.cpp restores it).
void tune_allocator_for_records(int argc, char** argv) {
  if (argc < 2 || std::getenv("TPGRAPH_ALLOCATOR_TUNED") != nullptr) return;
  const std::string_view command = argv[1];
  if (command != "analyze" && command != "trace" && command != "diff" && command != "gate") return;
  const char* old = std::getenv("GLIBC_TUNABLES");
  ::setenv("TPGRAPH_ALLOCATOR_TUNED", old != nullptr ? old : "", 1);
  std::string tunables = "glibc.malloc.hugetlb=1";
  if (old != nullptr && *old != '\0') tunables = std::string(old) + ":" + tunables;
  ::setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  // Could not re-execute: go on untuned, with the environment as it was.
  if (old != nullptr) ::setenv("GLIBC_TUNABLES", old, 1);
  else ::unsetenv("GLIBC_TUNABLES");
  ::unsetenv("TPGRAPH_ALLOCATOR_TUNED");
}

// Output that did not reach stdout (closed, /dev/full, a full disk) is a failure, not a success:
// --help and --version too, whose output is all they do. CLI11 prints through std::cout, which
// writes through stdout's buffer (synchronised with stdio), so both are checked.
int check_stdout(int code) {
  errno = 0;
  std::cout.flush();
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0 || !std::cout) {
    const int err = errno;
    return tpgraph::cli::report_failure(
        code == 0 ? 1 : code, "cannot write to standard output: ", err != 0 ? std::strerror(err) : "write error");
  }
  return code;
}

// A standard descriptor the caller closed would be reused by the next file opened, and stdout's
// text would land in an output file. Hold each closed one with /dev/null opened read-only: nothing
// lands anywhere, and a write to stdout fails as it should.
void hold_closed_standard_descriptors() {
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int held = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (held >= 0 && held != fd) {
      ::dup2(held, fd);
      ::close(held);
    }
  }
}

}  // namespace

// A command's outcome is its return value (a verdict included); everything thrown is an error,
// turned here, and only here, into one line on stderr and the exit code docs/cli.md gives it.
int main(int argc, char** argv) {
  using tpgraph::cli::report_failure;
  tune_allocator_for_records(argc, argv);
  hold_closed_standard_descriptors();
  tpgraph::install_signal_cleanup();
  const tpgraph::cli::CommandLine line = tpgraph::cli::make_app();
  CLI::App& app = *line.app;
  int code = 0;
  try {
    app.parse(argc, argv);
    code = line.run_parsed();
  } catch (const CLI::CallForHelp& e) {
    return check_stdout(app.exit(e));
  } catch (const CLI::CallForAllHelp& e) {
    return check_stdout(app.exit(e));
  } catch (const CLI::CallForVersion& e) {
    return check_stdout(app.exit(e));
  } catch (const CLI::ParseError& e) {
    return report_failure(2, "", e.what());
  } catch (const tpgraph::InputError& e) {
    return report_failure(2, "", e.what());
  } catch (const tpgraph::NoDeviceError& e) {
    return report_failure(3, "", e.what());
  } catch (const std::exception& e) {
    // A CUDA or CUPTI error, an OS call that failed (std::system_error: what() ends with the
    // reason), a bug: exit 1.
    return report_failure(1, "error: ", e.what());
  }
  return check_stdout(code);
}
