// Each command registers its subcommand and its callback; main.cpp wires them together.
#pragma once
#include <CLI/CLI.hpp>

namespace tpgraph::cli {

void add_plan_command(CLI::App& app);     // cmd_plan.cpp
void add_dot_command(CLI::App& app);      // cmd_dot.cpp
void add_info_command(CLI::App& app);     // cmd_info.cpp
void add_run_command(CLI::App& app);      // cmd_run.cpp
void add_check_command(CLI::App& app);    // cmd_check.cpp
void add_bench_command(CLI::App& app);    // cmd_bench.cpp
void add_analyze_command(CLI::App& app);  // cmd_analyze.cpp

}  // namespace tpgraph::cli
