// Each command registers its subcommand and its callback; main.cpp wires them together.
#pragma once
#include <CLI/CLI.hpp>

#include <cstddef>
#include <filesystem>
#include <optional>

#include "core/records/traced_run.hpp"
#include "core/report/run_outputs.hpp"

namespace tpgraph::cli {

void add_plan_command(CLI::App& app);     // cmd_plan.cpp
void add_dot_command(CLI::App& app);      // cmd_dot.cpp
void add_info_command(CLI::App& app);     // cmd_info.cpp
void add_run_command(CLI::App& app);      // cmd_run.cpp
void add_check_command(CLI::App& app);    // cmd_check.cpp
void add_bench_command(CLI::App& app);    // cmd_bench.cpp
void add_analyze_command(CLI::App& app);  // cmd_analyze.cpp
void add_trace_command(CLI::App& app);    // cmd_trace.cpp
void add_diff_command(CLI::App& app);     // cmd_diff.cpp
void add_gate_command(CLI::App& app);     // cmd_diff.cpp

// Thrown by a command that must end the process with a given code (trace: the traced command's own).
struct ExitRequest {
  int code = 0;
};

// cmd_trace.cpp, shared with analyze: the clock flags as merge options (InputError when both), and
// every output of a trace folder (its procs/ record files) written into `dir`; returns the count.
// With `replay`, that replay is also printed in full (analyze --replay). `dir` is `from` itself or a
// new or empty folder; `selection` says which large files to write (its records and report appendix
// are the trace's own: no records.json, the processes' section in report.md). `held_lock`: trace's own
// lock on `dir`, taken before its command ran.
[[nodiscard]] TraceMergeOptions merge_options(bool assume_synced, bool align_collectives);
// The completeness line (CLEAN / NOT CLEAN) is the first line printed; `clean`, when given, says which.
std::size_t analyze_trace_folder(const std::filesystem::path& from, const std::filesystem::path& dir,
                                 const TraceMergeOptions& options, std::optional<int> replay = std::nullopt,
                                 OutputSelection selection = {}, const FolderLock* held_lock = nullptr,
                                 bool* clean = nullptr);
// --strict: the exit code of a trace that is not clean (docs/cli.md).
inline constexpr int kNotCleanExit = 4;
// gate (docs/cli.md): B regressed beyond the budget; the runs are not comparable (either not clean
// or not steady, another GPU model or driver, another tracing cost, a variant of A missing in B).
inline constexpr int kGateRegressionExit = 5;
inline constexpr int kGateNotComparableExit = 6;

}  // namespace tpgraph::cli
