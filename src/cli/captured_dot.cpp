// `tpgraph dot --captured -o FILE`: capture the scenario on its GPUs (the same setup and capture as
// `run`, checked against the layer graph) and write the driver's verbose dump of the captured graph
// to FILE, with tpgraph's labelled layer graph beside it as FILE's stem + ".tpgraph.dot".
#include "cli/captured_dot.hpp"

#include <fmt/core.h>

#include <cstdio>

#include "core/base/atomic_file.hpp"
#include "core/base/error.hpp"
#include "core/report/dot.hpp"
#include "cuda/scenario_runner.hpp"
#include "cuda_error/error.hpp"

namespace tpgraph::cli {

void write_captured_dot(const Scenario& s, const std::filesystem::path& path) {
  cuda::require_device("dot --captured captures the graph on the GPU and needs");
  if (s.issue == IssueKind::eager) {
    throw InputError(
        fmt::format("scenario '{}' issues eagerly (issue: eager): there is no captured graph to "
                    "dump; use --issue graph, or `tpgraph dot` for the layer graph",
                    s.name));
  }
  const auto progress = [](std::string_view line) { fmt::print(stderr, "tpgraph dot: {}\n", line); };
  cuda::RunnerSettings settings;
  settings.trace = false;
  settings.check_tokens = 0;  // the topology does not need the CPU reference
  cuda::ScenarioRunner runner(nullptr, settings, progress);
  const auto prepared = runner.prepare(s);
  const std::string driver = cuda::driver_dot(prepared->captured()->graph);
  const std::string labelled = layer_graph_dot(prepared->graph(), s);

  std::filesystem::path beside = path;
  beside.replace_extension();
  beside += ".tpgraph.dot";
  write_file_atomically(path, driver);
  write_file_atomically(beside, labelled);
  fmt::print(stderr, "tpgraph dot: wrote {} (the driver's verbose dump, {} nodes) and {} (tpgraph's labelled graph)\n",
             path.string(), prepared->graph().nodes.size(), beside.string());
}

}  // namespace tpgraph::cli
