// A GPU's timeline as the wait analysis reads it: every recorded interval on the GPU cut into
// disjoint segments, each owned by one interval, with running sums and a per-replay index so a
// wait's contention and the node that held the GPU are found without walking other replays'
// records. Internal to the analysis (timeline.cpp).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <queue>
#include <set>
#include <tuple>
#include <vector>

namespace tpgraph::timeline_detail {

// One recorded interval on a GPU: a node's record in a replay, or a record that fits no node.
struct Work {
  std::uint64_t start = 0;
  std::uint64_t end = 0;
  int node = -1;    // -1: matches no node
  int replay = -1;  // -1: outside the replays
};

// A stretch of time during which a GPU ran recorded work, owned by one interval: the one running
// then that started first (ties: the order of the intervals, sorted by start, end, replay, node).
struct Segment {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  int node = -1;    // the owner's node; -1: a record that matches no node
  int replay = -1;  // the owner's replay; -1: outside the replays
};

struct DeviceTimeline {
  std::vector<Segment> segments;  // disjoint, in time order; gaps are idle time

  // One sort and one sweep; adjacent stretches of one interval merge. `work` is consumed: only
  // the segments stay (a trace of ten million records keeps 24 bytes per stretch, not two copies).
  void build(std::vector<Work> work) {
    std::sort(work.begin(), work.end(), [](const Work& a, const Work& b) {
      return std::tie(a.start, a.end, a.replay, a.node) < std::tie(b.start, b.end, b.replay, b.node);
    });
    using End = std::pair<std::uint64_t, std::size_t>;
    std::priority_queue<End, std::vector<End>, std::greater<>> ends;
    std::set<std::size_t> active;
    std::size_t i = 0;
    std::uint64_t t = 0;
    std::size_t last_owner = std::numeric_limits<std::size_t>::max();
    while (i < work.size() || !active.empty()) {
      if (active.empty()) t = work[i].start;
      for (; i < work.size() && work[i].start <= t; ++i) {
        if (work[i].end <= t) continue;
        active.insert(i);
        ends.emplace(work[i].end, i);
      }
      if (active.empty()) continue;
      std::uint64_t next = ends.top().first;
      if (i < work.size()) next = std::min(next, work[i].start);
      const std::size_t owner = *active.begin();
      if (!segments.empty() && last_owner == owner && segments.back().end == t) {
        segments.back().end = next;
      } else {
        segments.push_back(Segment{t, next, work[owner].node, work[owner].replay});
        last_owner = owner;
      }
      t = next;
      while (!ends.empty() && ends.top().first <= t) {
        active.erase(ends.top().second);
        ends.pop();
      }
    }
    segments.shrink_to_fit();
    busy_before.assign(segments.size() + 1, 0);
    for (std::size_t k = 0; k < segments.size(); ++k)
      busy_before[k + 1] = busy_before[k] + (segments[k].end - segments[k].begin);
    of_replay.resize(segments.size());
    for (std::size_t k = 0; k < segments.size(); ++k) of_replay[k] = static_cast<std::uint32_t>(k);
    std::stable_sort(of_replay.begin(), of_replay.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return segments[a].replay < segments[b].replay; });
    of_node = of_replay;
    std::stable_sort(of_node.begin(), of_node.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return segments[a].begin < segments[b].begin; });
    std::stable_sort(of_node.begin(), of_node.end(),
                     [&](std::uint32_t a, std::uint32_t b) { return segments[a].node < segments[b].node; });
    node_busy_before.assign(of_node.size() + 1, 0);
    for (std::size_t k = 0; k < of_node.size(); ++k) {
      const Segment& s = segments[of_node[k]];
      node_busy_before[k + 1] = node_busy_before[k] + (s.end - s.begin);
      if (k == 0 || segments[of_node[k - 1]].node != s.node)
        node_ranges.push_back(NodeRange{s.node, static_cast<std::uint32_t>(k), static_cast<std::uint32_t>(k)});
      node_ranges.back().last = static_cast<std::uint32_t>(k + 1);
    }
  }

  // Segments that overlap [lo, hi).
  [[nodiscard]] std::size_t count_within(std::uint64_t lo, std::uint64_t hi) const {
    if (hi <= lo) return 0;
    const std::size_t a = first_ending_after(lo);
    const auto b = static_cast<std::size_t>(
        std::partition_point(segments.begin(), segments.end(), [&](const Segment& s) { return s.begin < hi; }) -
        segments.begin());
    return b > a ? b - a : 0;
  }

  // f(node, busy ns) for each node whose segments cover part of [lo, hi): from each node's own
  // running sums, so a wait over the records of thousands of replays costs a binary search per
  // node on the GPU, not a step per record.
  template <class F>
  void busy_by_node(std::uint64_t lo, std::uint64_t hi, const F& f) const {
    if (hi <= lo) return;
    for (const NodeRange& r : node_ranges) {
      const auto first = of_node.begin() + r.first;
      const auto last = of_node.begin() + r.last;
      const auto a = std::partition_point(first, last, [&](std::uint32_t k) { return segments[k].end <= lo; });
      const auto b = std::partition_point(a, last, [&](std::uint32_t k) { return segments[k].begin < hi; });
      if (a == b) continue;
      std::uint64_t busy = node_busy_before[static_cast<std::size_t>(b - of_node.begin())] -
                           node_busy_before[static_cast<std::size_t>(a - of_node.begin())];
      if (segments[*a].begin < lo) busy -= lo - segments[*a].begin;
      if (segments[*(b - 1)].end > hi) busy -= segments[*(b - 1)].end - hi;
      f(r.node, busy);
    }
  }

  // f(segment, its time within [lo, hi)) for the segments of `replay` that overlap [lo, hi).
  template <class F>
  void each_of_replay_within(int replay, std::uint64_t lo, std::uint64_t hi, const F& f) const {
    const auto first = std::partition_point(of_replay.begin(), of_replay.end(),
                                            [&](std::uint32_t k) { return segments[k].replay < replay; });
    const auto last =
        std::partition_point(first, of_replay.end(), [&](std::uint32_t k) { return segments[k].replay == replay; });
    for (auto it = std::partition_point(first, last, [&](std::uint32_t k) { return segments[k].end <= lo; });
         it != last && segments[*it].begin < hi; ++it) {
      const Segment& s = segments[*it];
      f(s, std::min(s.end, hi) - std::max(s.begin, lo));
    }
  }

  // Time covered by segments within [lo, hi), from the running sums: a wait that spans the records
  // of thousands of other replays costs two binary searches, not a walk over them.
  [[nodiscard]] std::uint64_t busy_within(std::uint64_t lo, std::uint64_t hi) const {
    if (hi <= lo) return 0;
    const std::size_t a = first_ending_after(lo);
    const auto b = static_cast<std::size_t>(
        std::partition_point(segments.begin(), segments.end(), [&](const Segment& s) { return s.begin < hi; }) -
        segments.begin());
    if (a >= b) return 0;
    std::uint64_t busy = busy_before[b] - busy_before[a];
    if (segments[a].begin < lo) busy -= lo - segments[a].begin;
    if (segments[b - 1].end > hi) busy -= segments[b - 1].end - hi;
    return busy;
  }

  // The latest segment of `replay` that begins before `t` and ends after `lo` and that `take`
  // accepts; segments.size() when none. Walks that replay's segments only.
  template <class Take>
  [[nodiscard]] std::size_t latest_of_replay(int replay, std::uint64_t lo, std::uint64_t t, const Take& take) const {
    const auto first = std::partition_point(of_replay.begin(), of_replay.end(),
                                            [&](std::uint32_t k) { return segments[k].replay < replay; });
    const auto last =
        std::partition_point(first, of_replay.end(), [&](std::uint32_t k) { return segments[k].replay == replay; });
    auto it = std::partition_point(first, last, [&](std::uint32_t k) { return segments[k].begin < t; });
    while (it != first) {
      --it;
      if (segments[*it].end <= lo) break;
      if (take(segments[*it])) return *it;
    }
    return segments.size();
  }

  std::vector<std::uint64_t> busy_before;  // [k]: time covered by segments[0..k)
  std::vector<std::uint32_t> of_replay;    // segment indices by replay, in time order within one
  // Segment indices by node, in time order within one, with running sums in that order, and where
  // each node's run of them lies.
  struct NodeRange {
    int node = -1;
    std::uint32_t first = 0, last = 0;
  };
  std::vector<std::uint32_t> of_node;
  std::vector<std::uint64_t> node_busy_before;
  std::vector<NodeRange> node_ranges;

  // Index of the first segment ending after t.
  [[nodiscard]] std::size_t first_ending_after(std::uint64_t t) const {
    return static_cast<std::size_t>(
        std::partition_point(segments.begin(), segments.end(), [&](const Segment& s) { return s.end <= t; }) -
        segments.begin());
  }
};

}  // namespace tpgraph::timeline_detail
