// A graph's topology as the record file's graph chunk holds it (core/records/trace_file.hpp), read
// from the driver while the captured graph still exists: every node with its type, kernel name and
// bytes, every edge with its data (programmatic and launch-completion ports), and the nodes of
// child graphs and of conditional nodes' bodies, flattened into the one node list after their
// owner with `parent` and `body`.
//
// CUDA 13.0 has no getter for a conditional node's parameters, so its kind and body graphs are
// taken when the node is created: ConditionalNodes watches cuGraphAddNode (every way of making a
// conditional node ends there, also the runtime's cudaGraphAddNode and a stream capture's).
#pragma once
#include <cuda.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace tpgraph::inject {

class ConditionalNodes {
 public:
  struct Info {
    CUgraphConditionalNodeType type = CU_GRAPH_COND_TYPE_IF;
    std::vector<CUgraph> bodies;
  };
  // At the exit of a successful cuGraphAddNode / _v2: remembers the node if it is conditional.
  void on_node_added(CUgraphNode node, const CUgraphNodeParams* params);
  [[nodiscard]] bool find(CUgraphNode node, Info& out) const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<CUgraphNode, Info> nodes_;
};

std::string driver_text(CUresult status);
std::string demangle(const char* name);

struct Topology {
  nlohmann::json nodes = nlohmann::json::array();
  nlohmann::json edges = nlohmann::json::array();
  std::unordered_map<std::uint64_t, int> index_of_id;  // CUPTI id of a captured node -> its index
  std::string error;                                   // "": all of it was read
};

// Reads `graph` and, recursively, its child graphs and conditional bodies. `device` is the
// instantiating context's device (a node's own context overrides it).
[[nodiscard]] Topology read_topology(CUgraph graph, int device, const ConditionalNodes& conditionals);

}  // namespace tpgraph::inject
