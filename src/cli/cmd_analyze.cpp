// tpgraph analyze RUN [--out DIR] [--replay N] [--no-trace] [--no-timeline]: every output of a run
// recomputed from its records.json (or a `tpgraph trace` folder), no GPU.
#include <fmt/core.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.hpp"
#include "cli/scenario_options.hpp"
#include "core/records/run_data.hpp"
#include "core/records/traced_run.hpp"
#include "core/report/report.hpp"
#include "core/report/run_outputs.hpp"

namespace tpgraph::cli {

namespace {

struct AnalyzeOptions {
  std::string run;
  std::string out;
  bool assume_synced = false;
  bool align_collectives = false;
  bool ranks_together = false;
  bool strict = false;
  std::optional<int> replay;
  bool no_trace = false;
  bool no_timeline = false;
};

// 0, or kNotCleanExit for --strict and a trace that is not clean.
int analyze(const AnalyzeOptions& opts) {
  OutputSelection selection;
  selection.trace = !opts.no_trace;
  selection.timeline = !opts.no_timeline;
  if (is_trace_folder(opts.run)) {  // written by `tpgraph trace`: per-process record files
    const std::filesystem::path from = opts.run;
    const std::filesystem::path dir = opts.out.empty() ? from : std::filesystem::path(opts.out);
    TraceMergeOptions merge = merge_options(opts.assume_synced, opts.align_collectives);
    merge.ranks_together = opts.ranks_together;
    bool clean = true;
    const std::size_t written = analyze_trace_folder(from, dir, merge, opts.replay, selection, nullptr, &clean);
    fmt::print("wrote {} files to {}\n", written, dir.string());
    return opts.strict && !clean ? kNotCleanExit : 0;
  }
  const std::filesystem::path records = resolve_records_path(opts.run);
  const RunData run = load_raw_records(records);
  std::filesystem::path from = records.parent_path();
  if (from.empty()) from = ".";
  const std::filesystem::path dir = opts.out.empty() ? from : std::filesystem::path(opts.out);
  // Analysing a run in its own folder leaves its records.json untouched.
  const RunAnalysis analysis = analyze_run(run, AnalysisOptions{.replay = opts.replay});
  const std::string detail = opts.replay ? render_replay_detail(run, analysis, *opts.replay) : "";
  // --out gets the records.json that was read, copied byte for byte.
  const auto files = write_run_folder(run, analysis, dir, same_folder(dir, from), selection, records);
  fmt::print("{}\n", render_terminal_table(run, analysis));
  fmt::print("{}wrote {} files to {}\n", detail, files.size(), dir.string());
  return 0;
}

}  // namespace

Command add_analyze_command(CLI::App& app) {
  auto opts = std::make_shared<AnalyzeOptions>();
  auto* cmd = app.add_subcommand(
      "analyze", "recompute a run's report, trace, picture and DOT files from its records.json, without a GPU");
  cmd->add_option("RUN", opts->run, "a run folder (written by 'tpgraph run') or its records.json")->required();
  cmd->add_option("--out", opts->out,
                  "write the outputs into this new or empty folder (default: the run's own folder)");
  cmd->add_flag("--no-trace", opts->no_trace, "do not write <variant>/trace.json (the largest output)");
  cmd->add_flag("--no-timeline", opts->no_timeline, "do not write <variant>/timeline.svg");
  cmd->add_flag("--assume-synced", opts->assume_synced, "a trace from several hosts: their clocks are synchronised");
  cmd->add_flag("--align-collectives", opts->align_collectives,
                "a trace from several hosts: align their clocks on matched collective ends");
  cmd->add_flag("--ranks-together", opts->ranks_together,
                "a trace: processes that launch the same graph are ranks of one replay (default: only where a "
                "collective ties them)");
  cmd->add_flag("--strict", opts->strict,
                "a trace: exit 4 when it is not clean (a record matched no node, a graph without topology, a "
                "truncated file)");
  add_integer_flag(*cmd, "--replay", opts->replay, 0, kMaxReplays - 1,
                   "also print this replay (0-based) in full: every node's wait and why, the critical path");
  return {cmd, [opts] { return analyze(*opts); }};
}

}  // namespace tpgraph::cli
