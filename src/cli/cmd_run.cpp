// tpgraph run [SCENARIO...] [options] [--out DIR] [--json PATH] [--no-trace]: every named variant
// (default: the built-in scenarios) set up on the GPUs, captured once, replayed, traced with CUPTI,
// checked against the CPU reference, then handed to the run-folder writer and the terminal table.
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/scenario_options.hpp"
#include "core/analysis/timeline.hpp"
#include "core/base/atomic_file.hpp"
#include "core/base/error.hpp"
#include "core/records/run_data.hpp"
#include "core/report/report.hpp"
#include "core/report/run_outputs.hpp"
#include "cuda/devices.hpp"
#include "cuda/scenario_runner.hpp"
#include "cuda_error/error.hpp"
#include "cupti/collector.hpp"
#include "cupti/observer.hpp"

namespace tpgraph::cli {
namespace {

struct RunArgs {
  std::vector<std::string> scenarios;
  ScenarioOptions overrides;
  std::string out;
  std::string json;
  bool no_trace = false;
  int check_tokens = 32;
};

// 0 when every variant's output matches the CPU reference, kCheckFailedExit otherwise (the outputs
// are written either way).
int run_command(const RunArgs& args) {
  // Every scenario is resolved and checked against the GPUs before any GPU work: a bad name, flag,
  // device or size stops the run with nothing written.
  const std::vector<std::string> names = args.scenarios.empty() ? builtin_scenario_names() : args.scenarios;
  std::vector<Scenario> scenarios;
  for (const std::string& name : names) scenarios.push_back(scenario_from(name, args.overrides));

  cuda::require_device("tpgraph run captures and replays on a GPU and needs");

  RunData run;
  run.env = host_environment();
  const std::filesystem::path folder = args.out.empty() ? default_run_folder() : std::filesystem::path(args.out);
  if (std::filesystem::exists(folder) && !std::filesystem::is_empty(folder)) {
    throw InputError(fmt::format("--out {}: the folder exists and is not empty; give a new one", folder.string()));
  }
  const cuda::CudaVersions versions = cuda::query_cuda_versions();
  run.env.driver_version = versions.driver;
  run.env.runtime_version = versions.runtime;
  run.env.cupti_version = static_cast<int>(cupti::Collector::cupti_version());
  run.env.devices = cuda::query_devices();

  const int total = static_cast<int>(scenarios.size());
  int index = 0;
  std::string current;
  const auto progress = [&](std::string_view line) {
    fmt::print(stderr, "tpgraph run [{}/{}] {}: {}\n", index, total, current, line);
    std::fflush(stderr);
  };
  cuda::RunnerSettings settings;
  settings.trace = !args.no_trace;
  settings.check_tokens = args.check_tokens;
  cuda::ScenarioRunner runner(nullptr, settings, progress);
  // The devices, peers and memory of every scenario first: this also creates the CUDA contexts,
  // before CUPTI subscribes. With CUPTI subscribed before the first context, the first variant's
  // warm-up, untraced and queued-launch replays were recorded too, with its activity kinds off.
  runner.preflight_all(scenarios);
  // CUPTI must be on before the first capture: replaying a graph captured before CUPTI was enabled
  // has been seen to hang.
  std::unique_ptr<cupti::Collector> collector;
  std::unique_ptr<cupti::CuptiObserver> observer;
  if (!args.no_trace) {
    collector = std::make_unique<cupti::Collector>();
    observer = std::make_unique<cupti::CuptiObserver>(*collector);
  }
  runner.set_observer(observer.get());
  for (const Scenario& s : scenarios) {
    ++index;
    current = s.name;
    run.variants.push_back(runner.run(s));
    const VariantRun& v = run.variants.back();
    progress(fmt::format("done: output {} ({} sampled values, max error {:.2e} of absmax), {} records",
                         v.output_check && v.output_check->passed() ? "matches the CPU reference" : "DIFFERS",
                         v.output_check ? v.output_check->compared : 0,
                         v.output_check ? v.output_check->max_rel_err : 0.0, v.records.size()));
  }
  observer.reset();
  collector.reset();

  const RunAnalysis analysis = analyze_run(run);
  write_run_outputs(run, analysis, folder);
  if (!args.json.empty()) write_file_atomically(args.json, render_report_json(run, analysis));
  fmt::print("{}", render_terminal_table(run, analysis));
  fmt::print("run folder: {}\n", folder.string());

  std::vector<std::string> failed;
  for (const VariantRun& v : run.variants) {
    if (!v.output_check || !v.output_check->passed()) failed.push_back(v.scenario.name);
  }
  if (!failed.empty()) {
    return check_failed(fmt::format("the layer output differs from the CPU reference in: {} (outputs written)",
                                    fmt::join(failed, ", ")));
  }
  return 0;
}

}  // namespace

Command add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand(
      "run",
      "capture each variant once, replay it, trace it with CUPTI, check its output; default: every built-in scenario");
  cmd->add_option("scenarios", args->scenarios, "scenario names in graphs/ or .json paths; default: all built-in");
  add_scenario_options(*cmd, args->overrides);
  cmd->add_option("--out", args->out, "run folder to create (default: runs/<UTC time>)");
  cmd->add_option("--json", args->json, "also write report.json here");
  cmd->add_flag("--no-trace", args->no_trace, "no CUPTI: event spans and host times only");
  add_integer_flag(*cmd, "--check-tokens", args->check_tokens, 2, std::numeric_limits<int>::max(),
                   "tokens the output check compares");
  return {cmd, [args] { return run_command(*args); }};
}

}  // namespace tpgraph::cli
