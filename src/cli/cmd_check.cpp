// tpgraph check [SCENARIO] [options]: are the kernels right, and do they give the same bits every
// time? Four arms, each with a verdict and the figures that show the output is not degenerate:
//   numerics    the layer output (every rank's chain and the join) against the CPU reference, on
//               sampled tokens at large t (all of them at small t)
//   repeat      the same inputs N times: bitwise identical layer outputs
//   concurrent  again while a second copy of the layer runs the same kernels: still the same bits
//   batch       a token's output in a 43-token batch and in a 4096-token batch: the same bits
// The layer is issued by the scenario runner, the same issuer `tpgraph run` captures: the
// scenario's devices, geometry, layout, weights, peer copy and issue kind, as one layer with no
// trunk work, resident buffers and the join reduce (check_layer below).
// An arm whose output is all zeros (weights zeros, say) is VACUOUS, which is not a pass. Exit 0
// only when every arm passes.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/scenario_options.hpp"
#include "core/base/atomic_file.hpp"
#include "core/base/error.hpp"
#include "core/base/stats.hpp"
#include "core/base/version.hpp"
#include "core/numerics/reference.hpp"
#include "cuda/devices.hpp"
#include "cuda/scenario_runner.hpp"
#include "cuda_error/error.hpp"

namespace tpgraph::cli {
namespace {

using stats::describe;
using stats::guard_of;
using stats::OutputGuard;

struct CheckArgs {
  std::string scenario;
  ScenarioOptions overrides;
  int sample = 64;
  int repeats = 8;
  std::optional<std::string> json;
};

struct Arm {
  std::string name;
  std::string verdict;  // PASS, FAIL or VACUOUS
  std::string summary;
  std::vector<std::string> details;
  nlohmann::json figures;
  [[nodiscard]] bool passed() const { return verdict == "PASS"; }
};

std::string verdict_of(bool ok, const OutputGuard& guard) {
  if (guard.vacuous()) return "VACUOUS";
  return ok && guard.nan_count == 0 ? "PASS" : "FAIL";
}

nlohmann::json guard_json(const OutputGuard& g) {
  return {{"count", g.count}, {"nonzero", g.nonzero}, {"nan", g.nan_count}, {"absmax", g.absmax}};
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::int64_t differing(std::span<const float> a, std::span<const float> b) {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n + static_cast<std::int64_t>(std::max(a.size(), b.size()) - std::min(a.size(), b.size()));
}

std::vector<float> rows_of(std::span<const float> plane, std::span<const int> tokens, int hidden) {
  std::vector<float> out;
  out.reserve(tokens.size() * static_cast<std::size_t>(hidden));
  for (const int t : tokens) {
    const auto first = plane.begin() + static_cast<std::ptrdiff_t>(t) * hidden;
    out.insert(out.end(), first, first + hidden);
  }
  return out;
}

// The layer check runs: one layer of the scenario with no trunk work and resident buffers (what
// poison reaches). `join` reduce leaves the layer output in rank 0's out; none leaves every rank's
// out_r (one rank has no join either way).
Scenario check_layer(const Scenario& s, JoinKind join) {
  Scenario c = s;
  c.layers = 1;
  c.root_busy = 0;
  c.alloc = AllocKind::resident;
  c.join = s.geometry.ranks > 1 ? join : JoinKind::none;
  return c;
}

// Poison, one replay, wait: rank 0's out afterwards.
std::vector<float> run_once(cuda::PreparedVariant& layer) {
  layer.poison();
  layer.launch();
  layer.wait();
  return layer.rank_output(0);
}

// `ranks` leaves each rank's out_r (join none); `layer_out` is a replay of the layer with the join.
Arm numerics_arm(cuda::PreparedVariant& ranks, const cuda::LayerInputs& in, const std::vector<float>& layer_out) {
  const Geometry& g = in.geometry;
  Arm arm{"numerics", "", "", {}, {}};
  bool all_ok = true;
  nlohmann::json rank_figures = nlohmann::json::array();
  ranks.poison();
  ranks.launch();
  ranks.wait();
  for (int r = 0; r < g.ranks; ++r) {
    const auto gpu = rows_of(ranks.rank_output(r), in.sample, g.hidden);
    const Comparison c = compare_to_reference(gpu, in.rank_reference[static_cast<std::size_t>(r)]);
    all_ok = all_ok && c.passed();
    arm.details.push_back(fmt::format("rank {}: max |gpu-ref|/max|ref| {:.2e}, {} over tolerance; {}", r, c.max_rel_err,
                                      c.mismatches, describe(guard_of(gpu))));
    rank_figures.push_back({{"rank", r}, {"max_rel_err", c.max_rel_err}, {"mismatches", c.mismatches}});
  }
  const auto gpu = rows_of(layer_out, in.sample, g.hidden);
  const Comparison c = compare_to_reference(gpu, in.layer_reference);
  const OutputGuard guard = guard_of(gpu);
  arm.verdict = verdict_of(all_ok && c.passed(), guard);
  arm.summary = fmt::format(
      "layer output, {} of {} tokens x {}: max |gpu-ref|/max|ref| {:.2e} (tolerance {:.1e}), "
      "{} over it; {}",
      in.sample.size(), g.tokens, g.hidden, c.max_rel_err, c.tolerance, c.mismatches, describe(guard));
  arm.figures = {{"tokens_compared", in.sample.size()},
                 {"max_rel_err", c.max_rel_err},
                 {"max_abs_err", c.max_abs_err},
                 {"tolerance", c.tolerance},
                 {"mismatches", c.mismatches},
                 {"guard", guard_json(guard)},
                 {"ranks", rank_figures}};
  return arm;
}

Arm repeat_arm(cuda::PreparedVariant& layer, const std::vector<float>& first, int repeats) {
  std::int64_t worst = 0;
  std::int64_t worst_nan = 0;
  int identical = 1;
  for (int i = 1; i < repeats; ++i) {
    const auto again = run_once(layer);
    const std::int64_t d = differing(first, again);
    worst = std::max(worst, d);
    worst_nan = std::max(worst_nan, guard_of(again).nan_count);
    identical += d == 0 ? 1 : 0;
  }
  const OutputGuard guard = guard_of(first);
  return Arm{"repeat",
             verdict_of(identical == repeats, guard),
             fmt::format("{} of {} runs bitwise identical to the first (worst: {} elements differ, {} NaN); {}",
                         identical, repeats, worst, worst_nan, describe(guard)),
             {},
             {{"runs", repeats},
              {"identical", identical},
              {"worst_differing", worst},
              {"worst_nan", worst_nan},
              {"guard", guard_json(guard)}}};
}

Arm concurrent_arm(cuda::PreparedVariant& layer, cuda::PreparedVariant& noise, const std::vector<float>& first) {
  // A second copy of the layer (its own buffers and streams) keeps the same kernels busy on the
  // GPUs while the measured layer runs: both are enqueued before anything waits. Scheduling
  // changes; the bits must not.
  int identical = 0;
  std::int64_t worst_nan = 0;
  const int runs = 3;
  for (int i = 0; i < runs; ++i) {
    layer.poison();
    noise.launch();
    layer.launch();
    noise.launch();
    layer.wait();
    const auto again = layer.rank_output(0);
    noise.wait();
    identical += same_bits(first, again) ? 1 : 0;
    worst_nan = std::max(worst_nan, guard_of(again).nan_count);
  }
  const OutputGuard guard = guard_of(first);
  return Arm{"concurrent",
             verdict_of(identical == runs, guard),
             fmt::format("{} of {} runs beside a second stream running the same kernels bitwise identical ({} NaN); {}",
                         identical, runs, worst_nan, describe(guard)),
             {},
             {{"runs", runs}, {"identical", identical}, {"worst_nan", worst_nan}, {"guard", guard_json(guard)}}};
}

Arm batch_arm(cuda::ScenarioRunner& runner, const Scenario& layer_scenario) {
  constexpr int kSmall = 43;
  constexpr int kBig = 4096;
  // The layer input of a token does not depend on the batch it is in (make_layer_input draws each
  // element from its own position), so the small batch's z is the big batch's first rows.
  Scenario small = layer_scenario;
  small.geometry.tokens = kSmall;
  Scenario big = layer_scenario;
  big.geometry.tokens = kBig;
  std::vector<float> out_small;
  std::vector<float> out_big;
  {
    const auto layer = runner.prepare(small);
    out_small = run_once(*layer);
  }
  {
    const auto layer = runner.prepare(big);
    const auto out = run_once(*layer);
    out_big.assign(out.begin(), out.begin() + static_cast<std::ptrdiff_t>(out_small.size()));
  }
  const std::int64_t d = differing(out_small, out_big);
  const OutputGuard guard = guard_of(out_small);
  return Arm{"batch",
             verdict_of(d == 0, guard),
             fmt::format("tokens 0..{} in a {}-token and a {}-token batch: {} of {} elements differ; {}", kSmall - 1,
                         kSmall, kBig, d, out_small.size(), describe(guard)),
             {},
             {{"small_tokens", kSmall}, {"big_tokens", kBig}, {"differing", d}, {"guard", guard_json(guard)}}};
}

// 0 when every arm passes, kCheckFailedExit otherwise (every output written either way).
int run_check(const CheckArgs& args) {
  const Scenario s = scenario_from(args.scenario, args.overrides);
  // Every rank's weights and the routing are built on the host before the GPU is touched: a
  // geometry whose host side cannot fit is refused here, not by bad_alloc after minutes of work.
  check_host_memory_fits(host_memory_for_check(s.geometry), available_host_memory(), "tpgraph check");
  cuda::require_device("tpgraph check runs the kernels and needs");
  const Geometry& g = s.geometry;
  const Scenario layer_scenario = check_layer(s, JoinKind::reduce);
  const Scenario ranks_scenario = check_layer(s, JoinKind::none);
  const std::vector<int> devices = cuda::rank_devices(layer_scenario, cuda::visible_device_count());
  const auto device_list = cuda::query_devices();
  cuda::RunnerSettings settings;
  settings.trace = false;
  settings.check_tokens = args.sample;
  cuda::ScenarioRunner runner(nullptr, settings, {});
  // The devices, peer access and memory of the layer, checked before anything is printed or made.
  runner.preflight_all(std::span(&layer_scenario, 1));

  std::string head;
  fmt::format_to(std::back_inserter(head),
                 "tpgraph check: E={} k={} hidden={} ff={} t={} ranks={} layout {} weights {} seed {} on {}\n",
                 g.experts, g.top_k, g.hidden, g.ff, g.tokens, g.ranks, s.layout, s.weights, s.seed,
                 device_list.at(static_cast<std::size_t>(devices.front())).name);
  fmt::print("{}", head);
  std::fflush(stdout);

  std::vector<Arm> arms;
  {
    const auto layer = runner.prepare(layer_scenario);
    const std::vector<float> first = run_once(*layer);
    {
      const auto ranks = runner.prepare(ranks_scenario);
      arms.push_back(numerics_arm(*ranks, ranks->inputs(), first));
    }
    arms.push_back(repeat_arm(*layer, first, args.repeats));
    const auto noise = runner.prepare_apart(layer_scenario);
    arms.push_back(concurrent_arm(*layer, *noise, first));
  }
  arms.push_back(batch_arm(runner, layer_scenario));

  int passed = 0;
  std::string out;
  auto put = std::back_inserter(out);
  for (const Arm& arm : arms) {
    fmt::format_to(put, "{:<11} {:<7} {}\n", arm.name, arm.verdict, arm.summary);
    for (const auto& d : arm.details) fmt::format_to(put, "{:<19} {}\n", "", d);
    passed += arm.passed() ? 1 : 0;
  }
  const bool ok = passed == static_cast<int>(arms.size());
  fmt::format_to(put,
                 "check: {} ({} of {} arms pass; tolerance {:.1e} of max|ref|, see src/core/numerics/reference.hpp)\n",
                 ok ? "PASS" : "FAIL", passed, arms.size(), kReferenceTolerance);
  fmt::print("{}", out);

  if (args.json) {
    nlohmann::json j;
    j["schema"] = "tpgraph.check/1";
    j["tool_version"] = build_version();
    j["git_revision"] = build_git_revision();
    j["device"] = device_list.at(static_cast<std::size_t>(devices.front())).name;
    j["devices"] = devices;
    j["geometry"] = {{"experts", g.experts}, {"top_k", g.top_k},   {"hidden", g.hidden},
                     {"ff", g.ff},           {"tokens", g.tokens}, {"ranks", g.ranks}};
    j["layout"] = std::string(to_string(s.layout));
    j["weights"] = std::string(to_string(s.weights));
    j["seed"] = s.seed;
    j["arms"] = nlohmann::json::array();
    for (const Arm& arm : arms) {
      j["arms"].push_back({{"name", arm.name},
                           {"verdict", arm.verdict},
                           {"summary", arm.summary},
                           {"details", arm.details},
                           {"figures", arm.figures}});
    }
    j["passed"] = ok;
    write_file_atomically(*args.json, j.dump(2) + "\n");
  }
  if (!ok) return check_failed(fmt::format("check failed: {} of {} arms pass", passed, arms.size()));
  return 0;
}

}  // namespace

Command add_check_command(CLI::App& app) {
  auto args = std::make_shared<CheckArgs>();
  auto* cmd = app.add_subcommand("check", "kernels against the CPU reference, and determinism (needs a GPU)");
  cmd->add_option("scenario", args->scenario, "scenario name or file (default: baseline)");
  add_scenario_options(*cmd, args->overrides);
  add_integer_flag(*cmd, "--sample", args->sample, 2, std::numeric_limits<int>::max(),
                   "tokens compared with the reference at large t");
  add_integer_flag(*cmd, "--repeats", args->repeats, 2, std::numeric_limits<int>::max(), "runs of the repeat arm");
  cmd->add_option("--json", args->json, "also write the verdicts and figures as JSON to this file");
  return {cmd, [args] { return run_check(*args); }};
}

}  // namespace tpgraph::cli
