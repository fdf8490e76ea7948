// The outputs of `tpgraph diff` and `tpgraph gate`: the terminal table (changes first, largest first),
// markdown for a pull-request comment, JSON (docs/diff.md's schema), and per variant pair a DOT of
// B's graph coloured by change. Each starts with the comparability line. They compute nothing.
#pragma once
#include <cstddef>
#include <string>

#include "core/analysis/run_diff.hpp"

namespace tpgraph {

// Bumped whenever a field of the diff JSON changes meaning or disappears.
inline constexpr int kDiffSchemaVersion = 1;

// Figures that are not changes but are listed anyway (the largest shifts), under the changes.
inline constexpr std::size_t kDiffOthersShown = 5;

[[nodiscard]] std::string render_diff_text(const RunDiff& diff);
[[nodiscard]] std::string render_diff_markdown(const RunDiff& diff);
// With `gate`, the gate's decision too ("gate": outcome and failures).
[[nodiscard]] std::string render_diff_json(const RunDiff& diff, const GateResult* gate = nullptr);
// B's graph of one variant pair: slower nodes red, faster green, unchanged white, added blue; the
// removed nodes named in the title.
[[nodiscard]] std::string render_diff_dot(const RunDiff& diff, const VariantDiff& pair, const DiffVariant& b);
// gate's output: the comparability line, one line per failure, and the decision.
[[nodiscard]] std::string render_gate_text(const RunDiff& diff, const GateResult& gate);

}  // namespace tpgraph
