// The scenario flags every command shares: any field of a scenario can be overridden.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/scenario.hpp"

namespace tpgraph::cli {

// Numbers are kept as given and parsed by apply_scenario_options, strictly: an empty value, a sign
// on the seed, trailing text or a value beyond the type is refused with the flag's name, never
// wrapped around or dropped.
struct ScenarioOptions {
  std::optional<std::string> tokens, experts, top_k, hidden, ff, ranks, replays, warmup, layers, root_busy;
  std::optional<std::string> devices;    // "0,0" or "0,1"
  std::optional<std::string> peer_copy;  // none | per-rank | first
  std::optional<std::string> copy_rows;  // N | all
  std::optional<std::string> join;       // none | copy | reduce
  std::optional<std::string> alloc;      // resident | fresh
  std::optional<std::string> issue;      // graph | eager
  std::optional<std::string> layout;     // v1 | v2
  std::optional<std::string> weights;    // random | zeros
  std::optional<std::string> seed;
};

// Adds --tokens, --experts, ... to `cmd`.
void add_scenario_options(CLI::App& cmd, ScenarioOptions& opts);
// Adds the optional positional `scenario` (a name in graphs/ or a .json path) to `cmd`.
void add_scenario_argument(CLI::App& cmd, std::string& scenario);
// Applies the flags that were given on top of `s`, then validates; throws InputError.
void apply_scenario_options(const ScenarioOptions& opts, Scenario& s);
// The graphs/ folder: $TPGRAPH_GRAPHS, else next to the executable's source tree, else ./graphs.
[[nodiscard]] std::filesystem::path graphs_dir();
// Resolve a scenario name/path (or the default baseline when empty) and apply the flags.
[[nodiscard]] Scenario scenario_from(const std::string& name_or_path, const ScenarioOptions& opts);
// The GPU count the GPU-free commands (plan, dot) map ranks with when --devices is not given: one
// GPU per rank. `run` uses the real count instead.
[[nodiscard]] int assumed_visible_devices(const Scenario& s);
// Every integer flag is read by this one parser: a whole decimal number (whole_number.hpp) from
// `lo` to `hi`, or an InputError naming `flag` and the range. Defined for int and std::uint64_t.
template <class T>
[[nodiscard]] T parse_integer_flag(std::string_view text, std::string_view flag, T lo = std::numeric_limits<T>::min(),
                                   T hi = std::numeric_limits<T>::max());
// Registers an integer flag (`name` as CLI11 takes it, e.g. "--replays") whose text goes through
// parse_integer_flag as the command line is parsed: `--replay ''` or `--replays 5x` is refused like
// any other bad value. The help text gains the range (and the default, `target` as it is now).
CLI::Option* add_integer_flag(CLI::App& cmd, const std::string& name, int& target, int lo, int hi,
                              const std::string& help);
CLI::Option* add_integer_flag(CLI::App& cmd, const std::string& name, std::optional<int>& target, int lo, int hi,
                              const std::string& help);
// "0,1" -> {0, 1}; throws InputError naming `where`.
[[nodiscard]] std::vector<int> parse_device_list(const std::string& text, std::string_view where);

}  // namespace tpgraph::cli
