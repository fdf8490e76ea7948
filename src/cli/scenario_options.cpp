#include "cli/scenario_options.hpp"

#include <fmt/core.h>

#include <cstdlib>
#include <limits>

#include "core/base/error.hpp"
#include "core/base/json_input.hpp"
#include "core/base/whole_number.hpp"

namespace tpgraph::cli {

void add_scenario_options(CLI::App& cmd, ScenarioOptions& o) {
  const std::string group = "Scenario overrides (each replaces the scenario file's field)";
  cmd.add_option("--tokens", o.tokens, "tokens t (>= 1)")->group(group);
  cmd.add_option("--experts", o.experts, "experts E (>= 1)")->group(group);
  cmd.add_option("--top-k", o.top_k, "experts per token k (1..E)")->group(group);
  cmd.add_option("--hidden", o.hidden, "hidden width (multiple of 64)")->group(group);
  cmd.add_option("--ff", o.ff, "per-rank FFN width (multiple of 64)")->group(group);
  cmd.add_option("--ranks", o.ranks, "tensor-parallel ranks R (>= 1)")->group(group);
  cmd.add_option("--devices", o.devices, "GPU of each rank, comma-separated: 0,1 or 0,0")->group(group);
  cmd.add_option("--replays", o.replays, "timed graph replays (>= 1)")->group(group);
  cmd.add_option("--warmup", o.warmup,
                 "untimed replays before them (>= 0), or auto: until the span is steady (the default)")
      ->group(group);
  cmd.add_option("--layers", o.layers, "layers back to back in one graph (>= 1)")->group(group);
  cmd.add_option("--peer-copy", o.peer_copy, "copy z root->rank: none | per-rank | first")->group(group);
  cmd.add_option("--copy-rows", o.copy_rows, "rows each peer copy moves: N | all")->group(group);
  cmd.add_option("--join", o.join, "partials back to the root: none | copy | reduce")->group(group);
  cmd.add_option("--root-busy", o.root_busy, "extra kernels on the root before the fork (>= 0)")->group(group);
  cmd.add_option("--alloc", o.alloc, "working buffers: resident | fresh (allocated in the graph)")->group(group);
  cmd.add_option("--issue", o.issue, "graph (capture once, replay) | eager (issue every time)")->group(group);
  cmd.add_option("--layout", o.layout, "NVFP4 weight layout: v1 | v2")->group(group);
  cmd.add_option("--weights", o.weights, "random | zeros (zeros makes numerics VACUOUS)")->group(group);
  cmd.add_option("--seed", o.seed, "seed of weights and inputs")->group(group);
}

std::vector<int> parse_device_list(const std::string& text, std::string_view where) {
  std::vector<int> out;
  std::string_view rest = text;
  while (true) {
    const auto comma = rest.find(',');
    const auto device = whole_number<int>(rest.substr(0, comma));
    if (!device || *device < 0) {
      throw InputError(fmt::format("{}: '{}' is not accepted; accepted: comma-separated GPU indices, e.g. 0,1 or 0,0",
                                   where, escaped_excerpt(text)));
    }
    out.push_back(*device);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

template <class T>
T parse_integer_flag(std::string_view text, std::string_view flag, T lo, T hi) {
  const std::optional<T> value = whole_number<T>(text);
  if (!value || *value < lo || *value > hi)
    throw InputError(fmt::format("{}: '{}' is not accepted; accepted: a whole number from {} to {}", flag,
                                 escaped_excerpt(text), lo, hi));
  return *value;
}
template int parse_integer_flag<int>(std::string_view, std::string_view, int, int);
template std::uint64_t parse_integer_flag<std::uint64_t>(std::string_view, std::string_view, std::uint64_t,
                                                         std::uint64_t);

CLI::Option* add_integer_flag(CLI::App& cmd, const std::string& name, int& target, int lo, int hi,
                              const std::string& help) {
  const std::string flag = name.substr(name.rfind(',') + 1);
  return cmd
      .add_option_function<std::string>(
          name, [&target, flag, lo, hi](const std::string& text) { target = parse_integer_flag(text, flag, lo, hi); },
          fmt::format("{} ({} to {}; default {})", help, lo, hi, target))
      ->type_name("N");
}

CLI::Option* add_integer_flag(CLI::App& cmd, const std::string& name, std::optional<int>& target, int lo, int hi,
                              const std::string& help) {
  const std::string flag = name.substr(name.rfind(',') + 1);
  return cmd
      .add_option_function<std::string>(
          name, [&target, flag, lo, hi](const std::string& text) { target = parse_integer_flag(text, flag, lo, hi); },
          fmt::format("{} ({} to {})", help, lo, hi))
      ->type_name("N");
}

void apply_scenario_options(const ScenarioOptions& o, Scenario& s) {
  auto& g = s.geometry;
  if (o.tokens) g.tokens = parse_integer_flag<int>(*o.tokens, "--tokens");
  if (o.experts) g.experts = parse_integer_flag<int>(*o.experts, "--experts");
  if (o.top_k) g.top_k = parse_integer_flag<int>(*o.top_k, "--top-k");
  if (o.hidden) g.hidden = parse_integer_flag<int>(*o.hidden, "--hidden");
  if (o.ff) g.ff = parse_integer_flag<int>(*o.ff, "--ff");
  if (o.ranks) g.ranks = parse_integer_flag<int>(*o.ranks, "--ranks");
  if (o.devices) s.devices = parse_device_list(*o.devices, "--devices");
  if (o.replays) s.replays = parse_integer_flag<int>(*o.replays, "--replays");
  if (o.warmup) {
    if (*o.warmup == "auto") s.warmup = kWarmupAuto;
    else if (o.warmup->empty() || o.warmup->find_first_not_of("0123456789") != std::string::npos)
      throw InputError(fmt::format("--warmup: '{}' is not accepted; accepted: auto, or a whole number from 0 to {}",
                                   *o.warmup, kMaxWarmup));
    else s.warmup = parse_integer_flag<int>(*o.warmup, "--warmup", 0, kMaxWarmup);
  }
  if (o.layers) s.layers = parse_integer_flag<int>(*o.layers, "--layers");
  if (o.peer_copy) s.peer_copy = parse_peer_copy(*o.peer_copy, "--peer-copy");
  if (o.copy_rows) s.copy_rows = parse_copy_rows(*o.copy_rows, "--copy-rows");
  if (o.join) s.join = parse_join(*o.join, "--join");
  if (o.root_busy) s.root_busy = parse_integer_flag<int>(*o.root_busy, "--root-busy");
  if (o.alloc) s.alloc = parse_alloc(*o.alloc, "--alloc");
  if (o.issue) s.issue = parse_issue(*o.issue, "--issue");
  if (o.layout) s.layout = parse_layout(*o.layout, "--layout");
  if (o.weights) s.weights = parse_weights(*o.weights, "--weights");
  if (o.seed) s.seed = parse_integer_flag<std::uint64_t>(*o.seed, "--seed");
  validate(s);
}

void add_scenario_argument(CLI::App& cmd, std::string& scenario) {
  cmd.add_option("scenario", scenario,
                 "scenario name in graphs/ (baseline, peer-copy, ...) or a .json path; default: baseline");
}

std::filesystem::path graphs_dir() {
  if (const char* env = std::getenv("TPGRAPH_GRAPHS"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    // build-x/tpgraph -> ../graphs; build-x/src/cli/tpgraph -> ../../graphs; installed: ../share.
    for (const char* rel : {"../graphs", "../../graphs", "../share/tpgraph/graphs"}) {
      const auto candidate = (exe.parent_path() / rel).lexically_normal();
      if (std::filesystem::is_directory(candidate, ec)) return candidate;
    }
  }
  return "graphs";
}

Scenario scenario_from(const std::string& name_or_path, const ScenarioOptions& opts) {
  // The model's defaults are the baseline two-rank layer (graphs/baseline.json says the same;
  // a unit test holds them together), so plan and dot work without the graphs/ folder.
  Scenario s = name_or_path.empty() ? Scenario{} : resolve_scenario(name_or_path, graphs_dir());
  apply_scenario_options(opts, s);
  return s;
}

int assumed_visible_devices(const Scenario& s) { return s.geometry.ranks; }

}  // namespace tpgraph::cli
