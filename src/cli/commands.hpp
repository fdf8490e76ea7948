// Each command registers its subcommand and returns its work; app.cpp wires them together.
#pragma once
#include <CLI/CLI.hpp>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string_view>

#include "core/records/traced_run.hpp"
#include "core/report/run_outputs.hpp"

namespace tpgraph::cli {

// One subcommand and its work. Registering it runs nothing; `run` is called after the whole command
// line has been parsed and returns the process's exit code (docs/cli.md, "Exit codes"): 0, or the
// code of a verdict (check's or run's FAIL, --strict's not clean, gate's regression or not comparable,
// trace's command's own). Errors (bad input, no GPU, a CUDA or OS failure) are exceptions, which
// main.cpp alone turns into one line on stderr and their exit code.
struct Command {
  CLI::App* subcommand = nullptr;  // owned by the app it was added to
  std::function<int()> run;
};

// Each adds its subcommand and flags to `app` and returns it with its work.
Command add_plan_command(CLI::App& app);     // cmd_plan.cpp
Command add_dot_command(CLI::App& app);      // cmd_dot.cpp
Command add_info_command(CLI::App& app);     // cmd_info.cpp
Command add_run_command(CLI::App& app);      // cmd_run.cpp
Command add_check_command(CLI::App& app);    // cmd_check.cpp
Command add_bench_command(CLI::App& app);    // cmd_bench.cpp
Command add_analyze_command(CLI::App& app);  // cmd_analyze.cpp
Command add_trace_command(CLI::App& app);    // cmd_trace.cpp
Command add_diff_command(CLI::App& app);     // cmd_diff.cpp
Command add_gate_command(CLI::App& app);     // cmd_diff.cpp

// run and check (docs/cli.md): a failed output or numerics check, every output still written.
inline constexpr int kCheckFailedExit = 1;
// A failed check's one line on stderr, as main.cpp prints an error's: "tpgraph: error: <what>".
// Returns kCheckFailedExit. Never throws: with stderr closed the line is lost, the code is not.
int check_failed(std::string_view what);

// cmd_trace.cpp, shared with analyze: the clock flags as merge options (InputError when both), and
// every output of a trace folder (its procs/ record files) written into `dir`; returns the count.
// With `replay`, that replay is also printed in full (analyze --replay). `dir` is `from` itself or a
// new or empty folder; `selection` says which large files to write (its records and report appendix
// are the trace's own: no records.json, the processes' section in report.md). `held_lock`: trace's own
// lock on `dir`, taken before its command ran.
[[nodiscard]] TraceMergeOptions merge_options(bool assume_synced, bool align_collectives);
// The completeness line (CLEAN / NOT CLEAN) is the first line printed; `clean`, when given, says which.
// The cost of tracing: `calibrate` (trace: made after the merge, written to cost.json) or, without
// it, the folder's cost.json as it is.
using CostStep = std::function<CostCalibration(const TracedRun&)>;
std::size_t analyze_trace_folder(const std::filesystem::path& from, const std::filesystem::path& dir,
                                 const TraceMergeOptions& options, std::optional<int> replay = std::nullopt,
                                 OutputSelection selection = {}, const FolderLock* held_lock = nullptr,
                                 bool* clean = nullptr, const CostStep& calibrate = {});
// --strict: the exit code of a trace that is not clean (docs/cli.md).
inline constexpr int kNotCleanExit = 4;
// gate (docs/cli.md): B regressed beyond the budget; the runs are not comparable (either not clean
// or not steady, another GPU model or driver, another tracing cost, a variant of A missing in B).
inline constexpr int kGateRegressionExit = 5;
inline constexpr int kGateNotComparableExit = 6;

}  // namespace tpgraph::cli
