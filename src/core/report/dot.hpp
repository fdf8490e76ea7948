// The layer graph as Graphviz DOT: a cluster per rank (labelled with its GPU), nodes coloured by
// what they do and shaped by the CUDA node type they capture as, cross-rank edges drawn red and
// thick (forks solid, joins dashed), and a legend. `tpgraph dot` prints it; `run` saves it as
// graph.dot beside the driver's own dump.
//
// Given the variant's timeline, every node with records also carries its median duration and
// median wait, and is filled by the share of the median replay span it ran (a heat scale in the
// legend), with a red border when its median wait is a large share too: the picture of the graph
// is then the picture of where the time went.
#pragma once
#include <array>
#include <string>
#include <string_view>

#include "core/analysis/timeline.hpp"
#include "core/model/layer_graph.hpp"
#include "core/model/scenario.hpp"

namespace tpgraph {

[[nodiscard]] std::string layer_graph_dot(const LayerGraph& graph, const Scenario& scenario,
                                          const VariantTimeline* timeline = nullptr);

// Heat steps: a node whose median duration is at least kDotHeatSteps[i] of the median span gets
// fill kDotHeatFill[i] (the last step that applies).
inline constexpr std::array<double, 6> kDotHeatSteps{0.0, 0.025, 0.05, 0.10, 0.20, 0.40};
// A node whose median wait is at least this share of the median span gets a thick red border.
inline constexpr double kDotWaitShareMarked = 0.05;

// `text` as the inside of a DOT double-quoted string: quotes and backslashes escaped, line breaks
// as Graphviz's centred "\n".
[[nodiscard]] std::string dot_escape(std::string_view text);

}  // namespace tpgraph
