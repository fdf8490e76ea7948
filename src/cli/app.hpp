// The whole command line of tpgraph, built without running anything: main.cpp parses argv with it
// and runs the command parsed; the unit tests parse command lines with it in process.
#pragma once
#include <CLI/CLI.hpp>

#include <memory>
#include <string_view>
#include <vector>

#include "cli/commands.hpp"

namespace tpgraph::cli {

struct CommandLine {
  std::unique_ptr<CLI::App> app;  // every subcommand and flag; parse with app->parse(argc, argv)
  std::vector<Command> commands;  // one per subcommand of `app`

  // After a successful app->parse: runs the subcommand it selected (exactly one, the app requires
  // it) and returns its exit code. Errors propagate as exceptions.
  [[nodiscard]] int run_parsed() const;
};

// Every subcommand registered, nothing parsed or run. Each call builds a new one: an app is parsed once.
[[nodiscard]] CommandLine make_app();

// One line on stderr, "tpgraph: <prefix><what>", and `code` returned. Never throws: with stderr
// closed the message is lost, the exit code is not.
int report_failure(int code, std::string_view prefix, std::string_view what);

}  // namespace tpgraph::cli
