// `tpgraph bench`'s two outputs, siblings that say the same thing: the terminal text and the JSON
// file (--json). Both print the figures of core/analysis/bench_model.hpp and compute none of them.
// The text comes in two parts so the terminal shows the limits before the first token count is
// timed and each token count as soon as it is.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/analysis/bench_model.hpp"

namespace tpgraph::bench {

// Bumped whenever a field of the JSON changes meaning or disappears.
inline constexpr const char* kBenchSchema = "tpgraph.bench/4";

// The first lines: the device, layout and replays, then the limits (where measured).
[[nodiscard]] std::string render_bench_header(const BenchSetup& setup);
// One token count: the kernel table, the three GEMMs against their floor, the chain, the tiles.
[[nodiscard]] std::string render_bench_tokens(const TokenFigures& t, const Limits& limits);

// What run-specific facts the JSON carries beside the figures.
struct BenchProvenance {
  std::string tool_version;
  std::string git_revision;
  std::string date;  // ISO 8601, UTC
};
[[nodiscard]] nlohmann::json bench_tokens_json(const TokenFigures& t);
[[nodiscard]] nlohmann::json bench_json(const BenchSetup& setup, const std::vector<TokenFigures>& results,
                                        const BenchProvenance& provenance);

}  // namespace tpgraph::bench
