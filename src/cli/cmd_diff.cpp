// tpgraph diff A B and tpgraph gate A B: two run or trace folders compared node by node (core's
// analysis/run_diff), printed, and for gate an exit code a CI job can act on (docs/diff.md).
#include <fmt/core.h>

#include <charconv>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.hpp"
#include "cli/scenario_options.hpp"
#include "core/analysis/run_diff.hpp"
#include "core/base/atomic_file.hpp"
#include "core/base/error.hpp"
#include "core/records/run_data.hpp"
#include "core/records/traced_run.hpp"
#include "core/report/diff_report.hpp"
#include "core/report/run_outputs.hpp"

namespace tpgraph::cli {

namespace {

namespace fs = std::filesystem;

struct DiffArgs {
  std::string a, b;
  std::string threshold = "2%";
  double min_us = 0.5;
  std::string max_tracing_cost_change = "5%";
  std::uint64_t seed = 1;
  int resamples = stats::kDefaultResamples;
  std::string md, json, dot;
  // gate
  std::string max_slowdown = "3%";
  std::string max_span_slowdown;
};

// "3%", "3" (percent) or "0.5%" -> 0.03, 0.03, 0.005; InputError naming the flag otherwise.
double parse_percent(const std::string& text, std::string_view flag) {
  std::string_view t = text;
  if (!t.empty() && t.back() == '%') t.remove_suffix(1);
  double v = 0;
  const auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (t.empty() || ec != std::errc{} || end != t.data() + t.size() || !(v >= 0 && v <= 1000))
    throw InputError(
        fmt::format("{}: '{}' is not accepted; accepted: a percentage from 0 to 1000, as 3% or 3", flag, text));
  return v / 100;
}

// One side, read as analyze reads it, reduced to what diff compares; the records go before the
// other side is read.
DiffRun load_side(const std::string& where, std::string_view name) {
  const fs::path path = where;
  std::error_code ec;
  if (!fs::exists(path, ec))
    throw InputError(
        fmt::format("{} '{}': no such folder or file; accepted: a run folder (tpgraph run), a trace folder "
                    "(tpgraph trace) or a records.json",
                    name, where));
  AnalysisOptions options;
  options.keep_series = true;
  options.detail_replays = 0;
  if (is_trace_folder(path)) {
    TracedRun traced = merge_trace_folder(read_process_files(path / tracefile::kProcsFolder), TraceMergeOptions{});
    RunAnalysis analysis = analyze_run(traced.run, options);
    return diff_side(traced.run, std::move(analysis), where);
  }
  const RunData run = load_raw_records(resolve_records_path(path));
  RunAnalysis analysis = analyze_run(run, options);
  return diff_side(run, std::move(analysis), where);
}

struct Compared {
  DiffRun a, b;
  RunDiff diff;
};

Compared compare(const DiffArgs& args) {
  DiffOptions o;
  o.practical_fraction = parse_percent(args.threshold, "--threshold");
  o.practical_us = args.min_us;
  o.max_tracing_cost_change = parse_percent(args.max_tracing_cost_change, "--max-tracing-cost-change");
  o.seed = args.seed;
  o.resamples = args.resamples;
  Compared c{load_side(args.a, "A"), load_side(args.b, "B"), {}};
  c.diff = diff_runs(c.a, c.b, o);
  return c;
}

// Every output rendered before the first is written: a bad path leaves none half-done.
// `gate`: gate's decision, for the JSON.
void write_outputs(const DiffArgs& args, const Compared& c, const GateResult* gate = nullptr) {
  std::vector<std::pair<fs::path, std::string>> files;
  if (!args.md.empty() && args.md != "-") files.emplace_back(args.md, render_diff_markdown(c.diff));
  if (!args.json.empty() && args.json != "-") files.emplace_back(args.json, render_diff_json(c.diff, gate));
  if (!args.dot.empty()) {
    for (std::size_t i = 0; i < c.diff.variants.size(); ++i) {
      const VariantDiff& v = c.diff.variants[i];
      for (const auto& vb : c.b.variants)
        if (vb.name == v.b)
          files.emplace_back(fs::path(args.dot) / (v.a + ".diff.dot"), render_diff_dot(c.diff, v, vb));
    }
  }
  for (const auto& [path, text] : files) write_file_atomically(path, text);
}

void add_common(CLI::App& cmd, DiffArgs& args) {
  cmd.add_option("A", args.a, "the run or trace folder to compare against (before)")->required();
  cmd.add_option("B", args.b, "the run or trace folder compared (after)")->required();
  cmd.add_option("--threshold", args.threshold,
                 "practical threshold: a change moves the median by at least this share (default 2%)");
  cmd.add_option("--min-us", args.min_us, "practical threshold: ... and by at least this many µs (default 0.5)")
      ->check(CLI::Range(0.0, 1e9));
  cmd.add_option("--max-tracing-cost-change", args.max_tracing_cost_change,
                 "runs whose tracing costs differ by more than this are not comparable (default 5%)");
  cmd.add_option("--seed", args.seed, "seed of the bootstrap's draws (default 1)");
  add_integer_flag(cmd, "--resamples", args.resamples, 100, 100000, "bootstrap resamples per figure");
  cmd.add_option("--json", args.json,
                 "also write the diff as JSON (docs/diff.md) to this file; - for stdout instead of the table");
}

// diff exits 0 whatever it found: deciding is gate's.
int run_diff(const DiffArgs& args) {
  const Compared c = compare(args);
  write_outputs(args, c);
  if (args.json == "-") fmt::print("{}", render_diff_json(c.diff));
  else if (args.md == "-") fmt::print("{}", render_diff_markdown(c.diff));
  else fmt::print("{}", render_diff_text(c.diff));
  return 0;
}

// 0 on a pass, kGateRegressionExit or kGateNotComparableExit.
int run_gate(const DiffArgs& args) {
  GateBudget budget;
  budget.max_slowdown = parse_percent(args.max_slowdown, "--max-slowdown");
  if (!args.max_span_slowdown.empty())
    budget.max_span_slowdown = parse_percent(args.max_span_slowdown, "--max-span-slowdown");
  // Fails closed: a run that is missing or cannot be read is not comparable, never a pass.
  Compared c;
  try {
    c = compare(args);
  } catch (const InputError& e) {
    fmt::print("NOT COMPARABLE: {}\ngate: REFUSED: a run could not be read\n", e.what());
    return kGateNotComparableExit;
  }
  const GateResult g = gate_runs(c.diff, budget);
  write_outputs(args, c, &g);
  if (args.json == "-") fmt::print("{}", render_diff_json(c.diff, &g));
  else fmt::print("{}", render_gate_text(c.diff, g));
  switch (g.outcome) {
    case GateOutcome::pass: return 0;
    case GateOutcome::regression: return kGateRegressionExit;
    case GateOutcome::not_comparable: return kGateNotComparableExit;
  }
  return kGateNotComparableExit;  // not reached: every outcome is above
}

}  // namespace

Command add_diff_command(CLI::App& app) {
  auto args = std::make_shared<DiffArgs>();
  auto* cmd =
      app.add_subcommand("diff", "compare two runs or traces node by node: what changed, by how much, how sure");
  add_common(*cmd, *args);
  cmd->add_option("--md", args->md,
                  "also write the diff as markdown (a pull-request comment); - for stdout instead of the table");
  cmd->add_option("--dot", args->dot,
                  "write <variant>.diff.dot per variant pair into this folder: B's graph coloured by change");
  return {cmd, [args] { return run_diff(*args); }};
}

Command add_gate_command(CLI::App& app) {
  auto args = std::make_shared<DiffArgs>();
  auto* cmd = app.add_subcommand(
      "gate", "CI: exit 0 when B did not regress from A beyond the budget, 5 on a regression, 6 when not comparable");
  add_common(*cmd, *args);
  cmd->add_option("--max-slowdown", args->max_slowdown, "budget of a node's duration and the launch cost (default 3%)");
  cmd->add_option("--max-span-slowdown", args->max_span_slowdown,
                  "budget of the rank and replay spans (default: --max-slowdown)");
  return {cmd, [args] { return run_gate(*args); }};
}

}  // namespace tpgraph::cli
