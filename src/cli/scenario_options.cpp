#include "cli/scenario_options.hpp"

#include <fmt/core.h>

#include <charconv>
#include <cstdlib>
#include <limits>

#include "core/base/error.hpp"
#include "core/base/json_input.hpp"

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
  cmd.add_option("--warmup", o.warmup, "untimed replays before them (>= 0)")->group(group);
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
    const auto item = rest.substr(0, comma);
    int device = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), device);
    if (item.empty() || ec != std::errc{} || end != item.data() + item.size() || device < 0) {
      throw InputError(fmt::format("{}: '{}' is not accepted; accepted: comma-separated GPU indices, e.g. 0,1 or 0,0",
                                   where, escaped_excerpt(text)));
    }
    out.push_back(device);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

int parse_int_flag(std::string_view text, std::string_view flag) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size())
    throw InputError(fmt::format("{}: '{}' is not accepted; accepted: a whole number from {} to {}", flag,
                                 escaped_excerpt(text), std::numeric_limits<int>::min(),
                                 std::numeric_limits<int>::max()));
  return value;
}

std::uint64_t parse_seed_flag(std::string_view text, std::string_view flag) {
  std::uint64_t value = 0;
  // from_chars takes no '+' and, for an unsigned type, no '-': "-1" is refused, not wrapped.
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc{} || end != text.data() + text.size())
    throw InputError(fmt::format("{}: '{}' is not accepted; accepted: a whole number from 0 to {}", flag,
                                 escaped_excerpt(text), std::numeric_limits<std::uint64_t>::max()));
  return value;
}

void apply_scenario_options(const ScenarioOptions& o, Scenario& s) {
  auto& g = s.geometry;
  if (o.tokens) g.tokens = parse_int_flag(*o.tokens, "--tokens");
  if (o.experts) g.experts = parse_int_flag(*o.experts, "--experts");
  if (o.top_k) g.top_k = parse_int_flag(*o.top_k, "--top-k");
  if (o.hidden) g.hidden = parse_int_flag(*o.hidden, "--hidden");
  if (o.ff) g.ff = parse_int_flag(*o.ff, "--ff");
  if (o.ranks) g.ranks = parse_int_flag(*o.ranks, "--ranks");
  if (o.devices) s.devices = parse_device_list(*o.devices, "--devices");
  if (o.replays) s.replays = parse_int_flag(*o.replays, "--replays");
  if (o.warmup) s.warmup = parse_int_flag(*o.warmup, "--warmup");
  if (o.layers) s.layers = parse_int_flag(*o.layers, "--layers");
  if (o.peer_copy) s.peer_copy = parse_peer_copy(*o.peer_copy, "--peer-copy");
  if (o.copy_rows) s.copy_rows = parse_copy_rows(*o.copy_rows, "--copy-rows");
  if (o.join) s.join = parse_join(*o.join, "--join");
  if (o.root_busy) s.root_busy = parse_int_flag(*o.root_busy, "--root-busy");
  if (o.alloc) s.alloc = parse_alloc(*o.alloc, "--alloc");
  if (o.issue) s.issue = parse_issue(*o.issue, "--issue");
  if (o.layout) s.layout = parse_layout(*o.layout, "--layout");
  if (o.weights) s.weights = parse_weights(*o.weights, "--weights");
  if (o.seed) s.seed = parse_seed_flag(*o.seed, "--seed");
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
