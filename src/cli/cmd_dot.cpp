// tpgraph dot [SCENARIO] [options] [-o FILE] [--captured]: the layer graph as Graphviz DOT.
#include <fmt/core.h>

#include <cstdio>
#include <memory>

#include "cli/captured_dot.hpp"
#include "cli/commands.hpp"
#include "cli/scenario_options.hpp"
#include "core/base/atomic_file.hpp"
#include "core/base/error.hpp"
#include "core/model/layer_graph.hpp"
#include "core/numerics/router.hpp"
#include "core/report/dot.hpp"

namespace tpgraph::cli {
namespace {

struct DotArgs {
  std::string scenario;
  ScenarioOptions overrides;
  std::string output;
  bool captured = false;
};

int run_dot(const DotArgs& args) {
  const Scenario s = scenario_from(args.scenario, args.overrides);
  if (args.captured) {
    if (args.output.empty()) throw InputError("dot --captured writes the driver's dump to a file: give -o FILE");
    write_captured_dot(s, args.output);
    return 0;
  }
  const ExpertCounts counts = count_expert_rows(s.geometry);
  const LayerGraph graph = build_layer_graph(s, counts.n_pairs, counts.n_active(), assumed_visible_devices(s));
  const std::string text = layer_graph_dot(graph, s);
  if (args.output.empty() || args.output == "-") {
    (void)std::fwrite(text.data(), 1, text.size(), stdout);  // all of it, NULs too
  } else {
    write_file_atomically(args.output, text);  // never a half-written FILE
  }
  return 0;
}

}  // namespace

Command add_dot_command(CLI::App& app) {
  auto args = std::make_shared<DotArgs>();
  auto* cmd = app.add_subcommand("dot", "the layer graph as Graphviz DOT (no GPU); --captured: the driver's dump");
  add_scenario_argument(*cmd, args->scenario);
  add_scenario_options(*cmd, args->overrides);
  cmd->add_option("-o,--output", args->output, "write to FILE instead of stdout");
  cmd->add_flag("--captured", args->captured,
                "capture on the GPU and write the driver's verbose dump (cudaGraphDebugDotPrint); needs -o");
  return {cmd, [args] { return run_dot(*args); }};
}

}  // namespace tpgraph::cli
