// Issuing a layer graph on the ranks' streams: once under stream capture (the graph tpgraph
// replays) or every time, eagerly (as the hand-made harness tpgraph replaces did). Both walk the
// same nodes in the same order with the same cross-stream events, so the captured topology is the
// layer graph's by construction, and the driver's graph is then checked against it anyway.
#pragma once
#include <cuda_runtime_api.h>

#include <functional>
#include <string>
#include <vector>

#include "core/model/layer_graph.hpp"
#include "cuda/owners.hpp"

namespace tpgraph::cuda {

// Enqueues one node's work (kernel, copy, allocation, free) on `stream`, whose device is current.
// It must add exactly one operation: under capture that is one graph node. Event nodes (span begin
// and end) are the walker's own and never reach it.
using IssueNode = std::function<void(const Node& node, cudaStream_t stream)>;

// Called under capture right after a node was added: the driver's node for layer node `node`.
using NodeCaptured = std::function<void(cudaGraphNode_t captured, int node)>;

// Captures what `fn` issues on `stream` (thread-local capture mode: another thread's CUDA calls,
// CUPTI's or a logger's, cannot invalidate it) into a graph on `device`. `stream`'s device must be
// current. If `fn` or ending the capture throws, the capture is ended and the partial graph
// destroyed before the error propagates, so the stream is usable again. The only place tpgraph
// begins and ends a stream capture.
[[nodiscard]] Graph capture_graph(cudaStream_t stream, int device, const std::function<void()>& fn);

struct CapturedGraph {
  Graph graph;
  std::vector<cudaGraphNode_t> node_of;  // layer node id -> captured node
};

// One stream per rank on its GPU, and the events the walk needs: a fork/join event after every node
// with a cross-stream successor, and a timing event per span node, recorded by the graph's
// event-record nodes (or by cudaEventRecord when eager), which give each rank's span per replay.
class GraphIssuer {
 public:
  explicit GraphIssuer(const LayerGraph& graph);

  // Captures the whole graph (thread-local capture mode on the root stream). On failure the capture
  // is ended and the partial graph destroyed before the error propagates.
  [[nodiscard]] CapturedGraph capture(const IssueNode& issue, const NodeCaptured& captured);
  // Issues every node now, on the streams, with the same ordering events.
  void issue_eager(const IssueNode& issue);

  [[nodiscard]] cudaStream_t stream(int rank) const { return streams_[rank].get(); }
  [[nodiscard]] cudaStream_t root_stream() const { return stream(0); }
  [[nodiscard]] int device(int rank) const { return streams_[rank].device(); }
  [[nodiscard]] const LayerGraph& graph() const { return graph_; }
  // The timing event a span node records; null for other nodes.
  [[nodiscard]] cudaEvent_t span_event(int node) const { return span_events_[node].get(); }

 private:
  void walk(const IssueNode& issue, bool capturing, std::vector<cudaGraphNode_t>* node_of);

  const LayerGraph& graph_;
  std::vector<Stream> streams_;                // [rank]
  std::vector<Event> order_events_;            // [node]: set when it has a cross-stream successor
  std::vector<Event> span_events_;             // [node]: set for span_begin / span_end
  std::vector<std::vector<int>> cross_preds_;  // [node]: predecessors on other streams
  Event capture_start_;                        // forks every stream into the capture
};

// Compares the driver's graph with the layer graph: node counts by CUDA node type in total and per
// rank (through node_of and each captured node's real type), and every dependency edge. Throws
// std::runtime_error showing each difference when they disagree.
void check_captured_graph(const LayerGraph& layer, const CapturedGraph& captured);

// cudaGraphDebugDotPrint with verbose flags, returned as text (written to a temporary file first).
[[nodiscard]] std::string driver_dot(const Graph& graph);

}  // namespace tpgraph::cuda
