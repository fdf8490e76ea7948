// A variant's timeline as an SVG picture: a lane per rank on one time axis (µs), a few replays,
// every kernel and copy as a bar coloured by what it does, and the largest waits drawn as hatched
// red bars from the moment the node was ready to the moment it started, labelled with their parts
// (contention by whom, idle). Labels never overlap: a wait label takes the first of a lane's label
// rows where it fits and is left out (its bar keeps the text as a tooltip) where none has room; a
// node's name is written inside its bar only where it fits and clears the names already written.
// Where a traced program's NVTX ranges overlap the replays shown, thin rows of range bars above the
// lanes show them (a row per thread and depth); without such ranges the picture is unchanged.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/analysis/timeline.hpp"
#include "core/records/run_data.hpp"

namespace tpgraph {

// Width allowed per character of the 10 px labels when fitting them (wider than the average glyph).
inline constexpr double kSvgLabelCharPx = 6.0;
inline constexpr int kSvgWaitLabelRows = 2;
// NVTX rows above the lanes (where the program recorded NVTX ranges in the time shown): their
// height, how many at most, the depths of a thread's push/pop ranges shown, the bars drawn at most.
inline constexpr double kSvgNvtxRowPx = 14;
inline constexpr std::size_t kSvgNvtxRows = 6;
inline constexpr std::uint16_t kSvgNvtxDepths = 3;
inline constexpr std::size_t kSvgNvtxBars = 3000;

struct SvgOptions {
  int replays_shown = 3;  // the first replays: later ones look the same when the run is stable
  int waits_marked = 5;   // the largest waits among the replays shown
  int width_px = 1400;
};

[[nodiscard]] std::string render_timeline_svg(const RunData& run, const RunAnalysis& analysis, std::size_t variant,
                                              const SvgOptions& options = {});

// `text` safe inside an XML element or attribute value.
[[nodiscard]] std::string xml_escape(std::string_view text);

}  // namespace tpgraph
