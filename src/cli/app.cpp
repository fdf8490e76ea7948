// make_app: the CLI11 app with every subcommand (cmd_*.cpp), and the dispatch to the one parsed.
#include "cli/app.hpp"

#include <cstdio>
#include <stdexcept>
#include <string>

#include "core/base/version.hpp"

namespace tpgraph::cli {

CommandLine make_app() {
  CommandLine line;
  line.app =
      std::make_unique<CLI::App>("tpgraph: multi-device CUDA graph capture, replay and timeline for a TP MoE layer");
  CLI::App& app = *line.app;
  app.set_version_flag("--version", std::string(build_version()) + " (" + std::string(build_git_revision()) + ")");
  app.require_subcommand(1);
  for (auto* add : {add_plan_command, add_dot_command, add_run_command, add_check_command, add_bench_command,
                    add_analyze_command, add_info_command, add_trace_command, add_diff_command, add_gate_command})
    line.commands.push_back(add(app));
  return line;
}

int CommandLine::run_parsed() const {
  for (const Command& command : commands)
    if (command.subcommand->parsed()) return command.run();
  throw std::logic_error("run_parsed: no subcommand was parsed");
}

int report_failure(int code, std::string_view prefix, std::string_view what) {
  std::string line = "tpgraph: ";
  line += prefix;
  line += what;
  line += '\n';
  (void)std::fwrite(line.data(), 1, line.size(), stderr);
  return code;
}

int check_failed(std::string_view what) { return report_failure(kCheckFailedExit, "error: ", what); }

}  // namespace tpgraph::cli
