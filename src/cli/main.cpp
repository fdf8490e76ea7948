// tpgraph: capture a tensor-parallel MoE layer once as a multi-device CUDA graph, replay it, and
// tell from CUPTI records when each rank really began and what it waited for.
//
//   plan / dot          GPU-free: geometry, routing, the layer graph (src/core)
//   check / bench       kernels against the CPU reference and the GPU's own limits (kernels/)
//   run / info          capture, replay, CUPTI timeline and its outputs (src/cuda, src/cupti)
//   analyze             recompute a run's outputs from its raw records, no GPU
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <exception>

#include "cli/commands.hpp"
#include "core/error.hpp"

int main(int argc, char** argv) {
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
