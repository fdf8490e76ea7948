// The layer graph: the nodes and edges a scenario captures, built without a GPU. DOT, the capture
// (which issues these nodes and checks the driver's graph against it) and the timeline analysis
// (which ties CUPTI records to its nodes) all read this one model.
//
// One stream per rank (stream == rank); rank 0's stream is the root, where capture begins and ends.
// Per layer l (labels get an "L{l}." prefix when layers > 1), nodes in issue order:
//   1. peer_copy first: for r = 1..R-1, "r0->r{r}.copy" on rank r's stream. Its only cross-stream
//      predecessor is the root's last node before the layer (the previous layer's join), if any.
//   2. root_busy K: "r0.busy0" .. "r0.busy{K-1}" on the root.
//   3. for r = 0..R-1, rank r's chain on its stream: "r{r}.begin" (event), ["r0->r{r}.copy" with
//      peer_copy per-rank, r > 0], ["r{r}.alloc" with alloc fresh], "r{r}.quant_z", "r{r}.gate",
//      "r{r}.up", "r{r}.swiglu", "r{r}.quant_a", "r{r}.down", "r{r}.combine", ["r{r}.free"],
//      "r{r}.end" (event).
//      The fork: unless peer_copy is first, rank r > 0's first node of the layer depends on the
//      root's last node before r0.begin (busy work, or the previous layer's join), if there is one.
//      With peer_copy first, the copy is that rank's fork and its chain follows it on its stream.
//   4. join copy: for r = 1..R-1, "r{r}->r0.copy" on the root, after r0.end and after r{r}.end.
//      join reduce: the same copies, then "r0.reduce" on the root (only when R > 1).
//      join none: no nodes; the next layer's first root node depends on every rank's last node,
//      and at the end of the graph each rank's last node is listed in `end_joins`.
// Edges: consecutive nodes of one stream, plus the cross-stream fork and join edges above. Node ids
// are the issue order, and every edge goes from a lower id to a higher one.
//
// How the capture (and eager issue, which walks the same graph on the same streams) follows it:
// walk nodes in id order; before issuing a node, make its stream wait on an event recorded for
// each cross-stream predecessor; right after issuing a node that has a cross-stream successor,
// record that event on the node's stream (recording later would also order everything issued on
// that stream since). Event nodes are cudaEventRecordWithFlags(..., cudaEventRecordExternal).
// Before ending the capture, the root waits on an event recorded after each node in `end_joins`
// (every forked stream must rejoin the origin stream).
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/enum_format.hpp"
#include "core/model/scenario.hpp"
#include "core/numerics/router.hpp"

namespace tpgraph {

// What a node does. The CUDA node type follows from it (cuda_node_type).
enum class NodeKind {
  busy,      // root's trunk work before the fork (kernel)
  quantize,  // gather+quantize of z, or quantize of a (kernel)
  gemm,      // gate, up or down grouped GEMM (kernel)
  swiglu,    // kernel
  combine,   // kernel
  reduce,    // root sums a copied partial into the layer output (kernel)
  copy,      // memcpy node: peer copy of z, or a join copy of a partial
  alloc,     // stream-ordered allocation inside the graph
  free_mem,  // its free
  event,     // event-record node (cudaEventRecordExternal) marking a rank's span
  // Kinds of a traced program's graph (`tpgraph trace`), whose nodes tpgraph did not issue:
  kernel,  // any kernel
  memset,  // memset node
  other,   // host, empty, event record/wait, child graph, conditional...: leaves no record
};
[[nodiscard]] std::string_view to_string(NodeKind k);
[[nodiscard]] inline std::string_view format_as(NodeKind k) { return to_string(k); }

// Which step of the chain a node is: what the capture issues for it.
enum class Role {
  busy,        // root trunk work: one grouped GEMM (gate shape) on the root's buffers
  quantize_z,  // gather+quantize of z
  gate,
  up,
  swiglu,
  quantize_a,
  down,
  combine,
  peer_copy,  // z rows (copy_row_count) from the root to rank `peer`, on that rank's stream
  join_copy,  // out_r of rank `peer` to the root's staging buffer, on the root stream
  reduce,     // root: layer output += staged partials, rank order
  alloc,
  free_mem,
  span_begin,
  span_end,  // event-record nodes around a rank's work in a layer
  traced,    // a node of a traced program's graph: `Node::name` says what it runs
};
[[nodiscard]] std::string_view to_string(Role r);
[[nodiscard]] inline std::string_view format_as(Role r) { return to_string(r); }

enum class CudaNodeType { kernel, memcpy, mem_alloc, mem_free, event_record, memset, other };
[[nodiscard]] CudaNodeType cuda_node_type(NodeKind k);
[[nodiscard]] std::string_view to_string(CudaNodeType t);
[[nodiscard]] inline std::string_view format_as(CudaNodeType t) { return to_string(t); }

struct Node {
  int id = 0;
  int layer = 0;
  int rank = 0;    // the rank whose stream issues it
  int device = 0;  // the GPU it runs on
  int stream = 0;  // stream index == rank (one stream per rank)
  NodeKind kind = NodeKind::gemm;
  Role role = Role::gate;
  int peer = -1;      // copies: the non-root rank at the other end
  std::string label;  // "r1.gate", "r0->r1.copy", "L2.r1.down" when layers > 1
  std::string name;   // traced nodes: the demangled kernel name or the copy's kind; "" otherwise
  // Counted from the geometry and routing, not measured: bytes moved (copies), read + written
  // (kernels; GEMMs read only the active experts' weights) or allocated (alloc/free); flops are
  // 2*rows*in*out for GEMMs and one per multiply/add/exp of the reference's formula elsewhere.
  std::int64_t bytes = 0;
  double flops = 0;
};

struct Edge {
  int from = 0;
  int to = 0;
  // A traced graph's edge type (CUgraphEdgeData): 0 the successor starts after the predecessor
  // completes; 1 programmatic, 2 launch completion: it may start while the predecessor still runs.
  std::uint8_t type = 0;
};

struct LayerGraph {
  std::vector<Node> nodes;  // in issue order; ids are indices
  std::vector<Edge> edges;
  std::vector<int> end_joins;  // nodes the root waits on before the capture ends (see the top)
  int ranks = 0;
  int layers = 0;
  // A traced graph's outside work: what ran on its GPUs that is not this graph (another process or
  // another graph). An occupant or path link whose node is -2 - i names outside_labels[i].
  std::vector<std::string> outside_labels;

  [[nodiscard]] std::vector<int> predecessors(int node) const;
  [[nodiscard]] std::vector<int> successors(int node) const;
  [[nodiscard]] bool cross_rank(const Edge& e) const { return nodes[e.from].rank != nodes[e.to].rank; }
  // Count of nodes per (rank, CUDA node type): what the captured graph must match.
  [[nodiscard]] std::map<std::pair<int, CudaNodeType>, int> cuda_node_counts() const;
  [[nodiscard]] const Node* find(std::string_view label) const;
  // A traced program's graph (`tpgraph trace`), not a scenario's layer graph.
  [[nodiscard]] bool traced() const { return !nodes.empty() && nodes.front().role == Role::traced; }
  // Nodes of one rank's stream, in issue order.
  [[nodiscard]] std::vector<int> stream_nodes(int rank) const;
};

// `visible_devices` maps ranks to GPUs (Scenario::device_of).
[[nodiscard]] LayerGraph build_layer_graph(const Scenario& s, const Routing& routing, int visible_devices);
// The same graph from the routing's two figures it uses (pairs, active experts): plan builds it
// without materialising the pairs.
[[nodiscard]] LayerGraph build_layer_graph(const Scenario& s, std::int64_t n_pairs, int n_active, int visible_devices);

}  // namespace tpgraph
