#include "core/records/record_join.hpp"

namespace tpgraph {

int NodeResolver::resolve(std::uint64_t graph_node_id) const {
  std::uint64_t id = graph_node_id;
  for (int depth = 0; depth <= kMaxCloneDepth; ++depth) {
    if (const auto found = node_of_id_.find(id); found != node_of_id_.end()) return found->second;
    const auto parent = original_of_clone_.find(id);
    if (parent == original_of_clone_.end()) return -1;
    id = parent->second;
  }
  return -1;
}

void join_records(std::vector<ActivityRecord>& records, const NodeResolver& nodes, const CorrelationTags& tags,
                  CollectionHealth& health) {
  for (ActivityRecord& record : records) {
    if (record.start_ns == 0 || record.end_ns == 0) ++health.no_timestamp;
    if (const auto replay = tags.replay.find(record.correlation_id); replay != tags.replay.end()) {
      // Replays arrive as CUPTI's unsigned external ids; anything outside int is no replay of ours.
      if (replay->second >= INT32_MIN && replay->second <= INT32_MAX) record.replay = static_cast<int>(replay->second);
    }
    record.node = -1;
    if (record.graph_node_id != 0) {
      record.node = nodes.resolve(record.graph_node_id);
    } else if (const auto node = tags.node.find(record.correlation_id); node != tags.node.end()) {
      record.node = node->second;
    }
    if (record.node < 0) ++health.unmatched;
  }
}

}  // namespace tpgraph
