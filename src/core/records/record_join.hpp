// The CUPTI record join, GPU-free: which graph node and which launch (replay) each activity record
// belongs to. CUPTI's records carry the *instantiated* node's id; instantiation (and cudaGraphClone)
// clones every node, so the id is followed back through the clone chain to a node whose meaning is
// known. `run` (src/cupti) and `trace` (src/core/traced_run) both join through this one module, and
// the unit tests drive it with fabricated records.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "core/records/records.hpp"

namespace tpgraph {

// A clone of a clone (graph clone, then instantiation) is a chain; no real chain is this long, and
// the bound keeps a cycle in a corrupt file from looping.
inline constexpr int kMaxCloneDepth = 16;

class NodeResolver {
 public:
  // A clone callback: `clone`'s records belong to whatever `original` belongs to.
  void add_clone(std::uint64_t clone, std::uint64_t original) { original_of_clone_[clone] = original; }
  // A node whose meaning is known: records of `id` (or of its clones) belong to node `node`.
  void map_node(std::uint64_t id, int node) { node_of_id_[id] = node; }
  // Forgets the node map, keeps the clones (node ids are unique in a process, so clones seen earlier
  // still resolve later).
  void clear_nodes() { node_of_id_.clear(); }
  // The node of a record's graph node id, following clones; -1 when nothing known is reached.
  [[nodiscard]] int resolve(std::uint64_t graph_node_id) const;

 private:
  std::unordered_map<std::uint64_t, std::uint64_t> original_of_clone_;
  std::unordered_map<std::uint64_t, int> node_of_id_;
};

// Correlation ids tagged by the collector around launches (CUPTI's external correlation records).
struct CorrelationTags {
  std::unordered_map<std::uint32_t, std::int64_t> replay;  // correlation id -> replay (-1.. warm-ups)
  std::unordered_map<std::uint32_t, int> node;             // correlation id -> node of eager work
};

// Fills `node` and `replay` of every record: graph work through `nodes` (its graph node id), eager
// work through the node tag of its correlation id; replay from the replay tag. Adds to `health` the
// records with a zero start or end and those that match no node.
void join_records(std::vector<ActivityRecord>& records, const NodeResolver& nodes, const CorrelationTags& tags,
                  CollectionHealth& health);

}  // namespace tpgraph
