// Placeholder until its issue lands: the command exists and says it is not built yet.
#include <stdexcept>

#include "cli/commands.hpp"

namespace tpgraph::cli {

void add_check_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("check", "(not built yet)");
  cmd->callback([] { throw std::runtime_error("'check' is not built yet"); });
}

}  // namespace tpgraph::cli
