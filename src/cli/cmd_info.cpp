// Placeholder until its issue lands: the command exists and says it is not built yet.
#include <stdexcept>

#include "cli/commands.hpp"

namespace tpgraph::cli {

void add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "(not built yet)");
  cmd->callback([] { throw std::runtime_error("'info' is not built yet"); });
}

}  // namespace tpgraph::cli
