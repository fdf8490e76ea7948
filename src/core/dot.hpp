// The layer graph as Graphviz DOT: a cluster per rank (labelled with its GPU), nodes coloured by
// what they do and shaped by the CUDA node type they capture as, cross-rank edges drawn red and
// thick (forks solid, joins dashed), and a legend. `tpgraph dot` prints it; `run` saves it as
// graph.dot beside the driver's own dump.
#pragma once
#include <string>
#include <string_view>

#include "core/layer_graph.hpp"
#include "core/scenario.hpp"

namespace tpgraph {

[[nodiscard]] std::string layer_graph_dot(const LayerGraph& graph, const Scenario& scenario);

// `text` as the inside of a DOT double-quoted string: quotes and backslashes escaped, line breaks
// as Graphviz's centred "\n".
[[nodiscard]] std::string dot_escape(std::string_view text);

}  // namespace tpgraph
