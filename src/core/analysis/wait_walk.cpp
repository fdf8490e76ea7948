#include "core/analysis/wait_walk.hpp"

#include <algorithm>
#include <functional>
#include <tuple>
#include <utility>

namespace tpgraph::timeline_detail {

namespace {

// Contention and occupants of `node`'s wait [lo, hi) in `replay`; idle is the rest. `busy` gets the
// contention in ns, exactly. Without `occupants` only the contention and idle time, from the
// running sums: `hi` is the node's start, so none of its own segments falls in the wait.
// Past this many segments a wait's occupants come from running sums rather than a walk.
constexpr std::size_t kWalkLimit = 64;

WaitParts occupants_of(std::vector<std::pair<Occupant, std::uint64_t>> seen, std::uint64_t lo, std::uint64_t hi,
                       std::uint64_t busy);

}  // namespace

WaitParts split_wait(const DeviceTimeline& d, int node, int replay, std::uint64_t lo, std::uint64_t hi,
                     std::uint64_t& busy, bool occupants) {
  WaitParts parts;
  busy = 0;
  if (hi <= lo) return parts;
  if (!occupants) {
    busy = d.busy_within(lo, hi);
    parts.contention_us = static_cast<double>(busy) / 1000.0;
    parts.idle_us = static_cast<double>(hi - lo - busy) / 1000.0;
    return parts;
  }
  std::vector<std::pair<Occupant, std::uint64_t>> seen;
  if (d.count_within(lo, hi) > std::max(kWalkLimit, d.node_ranges.size())) {
    // A wait over more records than the GPU has nodes: the occupants from each node's running sums,
    // then this replay's own part of them (the waiting node itself left out) from its segments.
    d.busy_by_node(lo, hi, [&](int n, std::uint64_t part) { seen.push_back({Occupant{n, true, 0}, part}); });
    const auto at = [&](int n, bool other) {
      auto it = std::find_if(seen.begin(), seen.end(),
                             [&](const auto& o) { return o.first.node == n && o.first.other_replay == other; });
      if (it == seen.end()) it = seen.insert(seen.end(), {Occupant{n, other, 0}, 0});
      return it;
    };
    d.each_of_replay_within(replay, lo, hi, [&](const Segment& s, std::uint64_t part) {
      if (s.node < 0) return;  // records that match no node stay "other"
      at(s.node, true)->second -= part;
      if (s.node != node) at(s.node, false)->second += part;
    });
    std::erase_if(seen, [](const auto& o) { return o.second == 0; });
    for (const auto& o : seen) busy += o.second;
    return occupants_of(std::move(seen), lo, hi, busy);
  }
  for (std::size_t k = d.first_ending_after(lo); k < d.segments.size() && d.segments[k].begin < hi; ++k) {
    const Segment& s = d.segments[k];
    if (s.node == node && s.replay == replay) continue;
    const std::uint64_t part = std::min(s.end, hi) - std::max(s.begin, lo);
    busy += part;
    const bool other = s.replay != replay || s.node < 0;
    const auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& o) {
      return o.first.node == s.node && o.first.other_replay == other;
    });
    if (it != seen.end()) it->second += part;
    else seen.push_back({Occupant{s.node, other, 0}, part});
  }
  return occupants_of(std::move(seen), lo, hi, busy);
}

// The wait's parts from its occupants' shares: the largest kept, contention and idle from the total.
namespace {

WaitParts occupants_of(std::vector<std::pair<Occupant, std::uint64_t>> seen, std::uint64_t lo, std::uint64_t hi,
                       std::uint64_t busy) {
  WaitParts parts;
  std::sort(seen.begin(), seen.end(), [](const auto& a, const auto& b) {
    return std::tie(b.second, a.first.node, a.first.other_replay) <
           std::tie(a.second, b.first.node, b.first.other_replay);
  });
  for (std::size_t k = 0; k < std::min(seen.size(), kOccupantsKept); ++k) {
    Occupant o = seen[k].first;
    o.us = static_cast<double>(seen[k].second) / 1000.0;
    parts.occupants.push_back(o);
  }
  parts.contention_us = static_cast<double>(busy) / 1000.0;
  parts.idle_us = static_cast<double>(hi - lo - busy) / 1000.0;
  return parts;
}

// A wait over more records than the GPU has nodes, on the critical path: back to the latest
// segment of this replay that leads (as without detail), the time before it as one contention link
// per occupant, largest first, and the idle rest: a link per record would make the path as long as
// the wait's records. Returns where the walk goes on from; sets `next` and `held` when a segment of
// this replay held the GPU.
template <class Leads>
std::uint64_t wait_by_occupant(const DeviceTimeline& d, int replay, int cur, std::uint64_t lo, std::uint64_t t,
                               const Leads& leads, std::vector<PathLink>& links, int& next, int& held) {
  const std::size_t k = d.latest_of_replay(replay, lo, t, leads);
  const std::uint64_t from = k < d.segments.size() ? std::min(d.segments[k].end, t) : lo;
  std::vector<std::pair<std::uint64_t, int>> shares;
  d.busy_by_node(from, t, [&](int node, std::uint64_t busy) { shares.emplace_back(busy, node); });
  std::sort(shares.begin(), shares.end(), std::greater<>());
  std::uint64_t busy = 0;
  for (const auto& [ns, node] : shares) busy += ns;
  // Collected backwards, as the walk collects them: the idle rest is the latest.
  if (t > from + busy)
    links.push_back(PathLink{PathLinkKind::idle, cur, -1, -1, static_cast<double>(t - from - busy) / 1000.0});
  for (const auto& [ns, node] : shares)
    links.push_back(PathLink{PathLinkKind::contention, cur, -1, node, static_cast<double>(ns) / 1000.0});
  if (k < d.segments.size()) {
    next = d.segments[k].node;
    held = cur;
  }
  return from;
}

}  // namespace

// The critical path of one replay (the rule is in timeline.hpp). Without `detail` (a replay whose
// path only enters the summaries) a wait's links are its contention and its idle time as two
// totals, found from the running sums and that replay's own segments: the walk through other
// replays' records, one by one, would make a long run quadratic.
std::vector<PathLink> critical_path(const LayerGraph& g, const std::vector<NodeTiming>& nodes, int replay,
                                    const ReplayTimeline& rt, const std::map<int, DeviceTimeline>& devices,
                                    bool detail) {
  std::vector<PathLink> links;  // collected backwards
  if (!rt.present) return links;
  const auto add = [&](PathLinkKind kind, int node, std::uint64_t lo, std::uint64_t hi, int held, int occupant) {
    if (hi <= lo) return;
    const double us = static_cast<double>(hi - lo) / 1000.0;
    if (!links.empty() && links.back().kind == kind && links.back().node == node && links.back().held == held &&
        links.back().occupant == occupant) {
      links.back().us += us;
    } else {
      links.push_back(PathLink{kind, node, held, occupant, us});
    }
  };
  int cur = -1;
  for (std::size_t n = 0; n < nodes.size(); ++n)
    if (nodes[n].recorded && (cur < 0 || nodes[n].end_ns > nodes[static_cast<std::size_t>(cur)].end_ns))
      cur = static_cast<int>(n);
  const std::uint64_t begin = rt.begin_ns;
  std::uint64_t t = rt.end_ns;
  int held = -1;
  std::vector<char> visited(nodes.size(), 0);
  while (cur >= 0 && t > begin) {
    const auto ci = static_cast<std::size_t>(cur);
    if (visited[ci]) break;
    visited[ci] = 1;
    const NodeTiming& n = nodes[ci];
    add(PathLinkKind::run, cur, n.start_ns, t, held, -1);
    t = std::min(t, n.start_ns);
    held = -1;
    const std::uint64_t lo = std::max(n.ready_ns, begin);
    int next = -1;
    const auto dit = devices.find(g.nodes[ci].device);
    const auto leads = [&](const Segment& s) {
      return s.replay == replay && s.node >= 0 && s.node != cur && !visited[static_cast<std::size_t>(s.node)] &&
             nodes[static_cast<std::size_t>(s.node)].recorded;
    };
    if (!detail && t > lo && dit != devices.end()) {
      const DeviceTimeline& d = dit->second;
      const std::size_t k = d.latest_of_replay(replay, lo, t, leads);
      const std::uint64_t from = k < d.segments.size() ? std::min(d.segments[k].end, t) : lo;
      const std::uint64_t busy = d.busy_within(from, t);
      add(PathLinkKind::contention, cur, from, from + busy, -1, -1);
      add(PathLinkKind::idle, cur, from + busy, t, -1, -1);
      t = from;
      if (k < d.segments.size()) {
        next = d.segments[k].node;
        held = cur;
      }
    }
    if (detail && t > lo && dit != devices.end() &&
        dit->second.count_within(lo, t) > std::max(kWalkLimit, dit->second.node_ranges.size()))
      t = wait_by_occupant(dit->second, replay, cur, lo, t, leads, links, next, held);
    while (detail && t > lo && dit != devices.end()) {
      const DeviceTimeline& d = dit->second;
      const auto k = static_cast<std::size_t>(
          std::partition_point(d.segments.begin(), d.segments.end(), [&](const Segment& s) { return s.begin < t; }) -
          d.segments.begin());
      if (k == 0 || d.segments[k - 1].end < t) {
        const std::uint64_t from = k == 0 ? lo : std::max(d.segments[k - 1].end, lo);
        add(PathLinkKind::idle, cur, from, t, -1, -1);
        t = from;
        continue;
      }
      const Segment& s = d.segments[k - 1];
      if (leads(s)) {
        next = s.node;  // it held the GPU while `cur` waited: the path runs through it
        held = cur;
        break;
      }
      const std::uint64_t from = std::max(s.begin, lo);
      add(PathLinkKind::contention, cur, from, t, -1, s.node);
      t = from;
    }
    if (next < 0 && t > lo) {  // no records on this GPU at all
      add(PathLinkKind::idle, cur, lo, t, -1, -1);
      t = lo;
    }
    cur = next >= 0 ? next : n.ready_from;
  }
  if (t > begin) add(PathLinkKind::unexplained, -1, begin, t, -1, -1);
  std::reverse(links.begin(), links.end());
  return links;
}

}  // namespace tpgraph::timeline_detail
