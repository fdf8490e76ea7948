// Placeholder until its issue lands: the command exists and says it is not built yet.
#include <stdexcept>

#include "cli/commands.hpp"

namespace tpgraph::cli {

void add_dot_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("dot", "(not built yet)");
  cmd->callback([] { throw std::runtime_error("'dot' is not built yet"); });
}

}  // namespace tpgraph::cli
