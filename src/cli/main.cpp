// tpgraph: capture a tensor-parallel MoE layer once as a multi-device CUDA graph, replay it, and
// tell from CUPTI records when each rank really began and what it waited for.
//
//   plan / dot          GPU-free: geometry, routing, the layer graph (src/core)
//   check / bench       kernels against the CPU reference and the GPU's own limits (kernels/)
//   run / info          capture, replay, CUPTI timeline and its outputs (src/cuda, src/cupti)
//   analyze             recompute a run's outputs from its raw records, no GPU
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>

#include "cli/commands.hpp"
#include "core/error.hpp"

namespace {

// `analyze` and `trace` hold millions of records: with glibc's arenas on transparent huge pages the
// page faults of first touch cost a tenth (10 M records: seconds, not a minute, on a VM). The tunable
// is read only at start-up, so the process re-executes itself once with it set; the traced command
// gets the environment it was given (cmd_trace.cpp restores it).
void tune_allocator_for_records(int argc, char** argv) {
  if (argc < 2 || std::getenv("TPGRAPH_ALLOCATOR_TUNED") != nullptr) return;
  const std::string_view command = argv[1];
  if (command != "analyze" && command != "trace") return;
  const char* old = std::getenv("GLIBC_TUNABLES");
  ::setenv("TPGRAPH_ALLOCATOR_TUNED", old != nullptr ? old : "", 1);
  std::string tunables = "glibc.malloc.hugetlb=1";
  if (old != nullptr && *old != '\0') tunables = std::string(old) + ":" + tunables;
  ::setenv("GLIBC_TUNABLES", tunables.c_str(), 1);
  ::execv("/proc/self/exe", argv);
  // Could not re-execute: go on untuned, with the environment as it was.
  if (old != nullptr) ::setenv("GLIBC_TUNABLES", old, 1); else ::unsetenv("GLIBC_TUNABLES");
  ::unsetenv("TPGRAPH_ALLOCATOR_TUNED");
}

}  // namespace

int main(int argc, char** argv) {
  tune_allocator_for_records(argc, argv);
  CLI::App app{"tpgraph: multi-device CUDA graph capture, replay and timeline for a TP MoE layer"};
  app.set_version_flag("--version", std::string(TPGRAPH_VERSION) + " (" TPGRAPH_GIT_REVISION ")");
  app.require_subcommand(1);
  tpgraph::cli::add_plan_command(app);
  tpgraph::cli::add_dot_command(app);
  tpgraph::cli::add_run_command(app);
  tpgraph::cli::add_check_command(app);
  tpgraph::cli::add_bench_command(app);
  tpgraph::cli::add_analyze_command(app);
  tpgraph::cli::add_info_command(app);
  tpgraph::cli::add_trace_command(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const tpgraph::cli::ExitRequest& e) {
    return e.code;
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "tpgraph: {}\n", e.what());
    return 2;
  } catch (const tpgraph::InputError& e) {
    fmt::print(stderr, "tpgraph: {}\n", e.what());
    return 2;
  } catch (const tpgraph::NoDeviceError& e) {
    fmt::print(stderr, "tpgraph: {}\n", e.what());
    return 3;
  } catch (const std::exception& e) {
    fmt::print(stderr, "tpgraph: error: {}\n", e.what());
    return 1;
  }
  return 0;
}
