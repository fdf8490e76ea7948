// How a node's wait is split and how a replay's critical path is walked back through waits, over
// a GPU's segments (device_timeline.hpp). Internal to the analysis (timeline.cpp): the rules are at
// the top of timeline.hpp.
#pragma once
#include <cstdint>
#include <map>
#include <vector>

#include "core/analysis/device_timeline.hpp"
#include "core/analysis/timeline.hpp"
#include "core/model/layer_graph.hpp"

namespace tpgraph::timeline_detail {

// Contention and occupants of `node`'s wait [lo, hi) in `replay`; idle is the rest. `busy` gets the
// contention in ns. Without `occupants` only the contention and idle time, from the running sums.
[[nodiscard]] WaitParts split_wait(const DeviceTimeline& d, int node, int replay, std::uint64_t lo, std::uint64_t hi,
                                   std::uint64_t& busy, bool occupants);

// The critical path of one replay: links in time order that add up to its span. Without `detail`
// a wait's links are its contention and its idle time as two totals.
[[nodiscard]] std::vector<PathLink> critical_path(const LayerGraph& g, const std::vector<NodeTiming>& nodes, int replay,
                                                  const ReplayTimeline& rt,
                                                  const std::map<int, DeviceTimeline>& devices, bool detail);

}  // namespace tpgraph::timeline_detail
