#include "core/analysis/timeline.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>

#include "core/analysis/device_timeline.hpp"
#include "core/analysis/samples.hpp"
#include "core/analysis/wait_walk.hpp"
#include "core/base/error.hpp"
#include "core/base/stats.hpp"

namespace tpgraph {

using timeline_detail::critical_path;
using timeline_detail::DeviceTimeline;
using timeline_detail::ns_to_us;
using timeline_detail::Sample;
using timeline_detail::split_wait;
using timeline_detail::Work;

namespace {

// Kahn's order over the edges; predecessors come first whatever order the nodes were issued in.
std::vector<int> topological_order(const LayerGraph& g, const std::vector<std::vector<int>>& succ) {
  const std::size_t n = g.nodes.size();
  std::vector<int> indegree(n, 0);
  for (const auto& e : g.edges) ++indegree[static_cast<std::size_t>(e.to)];
  std::vector<int> order;
  order.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    if (indegree[i] == 0) order.push_back(static_cast<int>(i));
  for (std::size_t head = 0; head < order.size(); ++head) {
    for (const int next : succ[static_cast<std::size_t>(order[head])])
      if (--indegree[static_cast<std::size_t>(next)] == 0) order.push_back(next);
  }
  if (order.size() != n)
    throw InputError(fmt::format("the layer graph has a cycle ({} of {} nodes ordered)", order.size(), n));
  return order;
}

}  // namespace

std::string_view to_string(Verdict v) {
  switch (v) {
    case Verdict::overlapped: return "OVERLAPPED";
    case Verdict::partial: return "PARTIAL";
    case Verdict::serialized: return "SERIALIZED";
    case Verdict::single_rank: return "ONE RANK";
    case Verdict::no_data: return "NO DATA";
  }
  return "?";
}

Verdict verdict_of(std::optional<double> overlap, int ranks) {
  if (ranks < 2) return Verdict::single_rank;
  if (!overlap) return Verdict::no_data;
  if (*overlap >= kOverlappedAtLeast) return Verdict::overlapped;
  if (*overlap <= kSerializedAtMost) return Verdict::serialized;
  return Verdict::partial;
}

std::string_view to_string(OverlapBasis b) {
  switch (b) {
    case OverlapBasis::window: return "window";
    case OverlapBasis::busy: return "busy";
    case OverlapBasis::mixed: return "busy or window per rank";
  }
  return "?";
}

std::string_view to_string(PathLinkKind k) {
  switch (k) {
    case PathLinkKind::run: return "run";
    case PathLinkKind::idle: return "idle";
    case PathLinkKind::contention: return "contention";
    case PathLinkKind::unexplained: return "unexplained";
  }
  return "?";
}

std::string verdict_thresholds_text() {
  return fmt::format(
      "verdict: OVERLAPPED if overlap >= {:.2f}, SERIALIZED if overlap <= {:.2f}, PARTIAL between; the "
      "overlap that decides is the busy overlap (time both ranks' kernels and copies ran at once / the less busy "
      "rank's busy time) for a rank on the root's GPU, else the window overlap (time two ranks' windows share / "
      "the shorter window); rank vs root, smallest if more than two ranks; event-span cross-check flagged beyond "
      "{:.0f}%",
      kOverlappedAtLeast, kSerializedAtMost, kEventSpanTolerance * 100);
}

double overlap_fraction(std::uint64_t a_start, std::uint64_t a_end, std::uint64_t b_start, std::uint64_t b_end) {
  const std::uint64_t shorter = std::min(a_end - a_start, b_end - b_start);
  if (shorter == 0) return 0;
  const std::uint64_t lo = std::max(a_start, b_start);
  const std::uint64_t hi = std::min(a_end, b_end);
  if (hi <= lo) return 0;
  return static_cast<double>(hi - lo) / static_cast<double>(shorter);
}

namespace {

// Sorted, merged union of intervals; empty and inverted intervals dropped.
std::vector<std::pair<std::uint64_t, std::uint64_t>> merged(std::vector<std::pair<std::uint64_t, std::uint64_t>> v) {
  std::erase_if(v, [](const auto& iv) { return iv.second <= iv.first; });
  std::sort(v.begin(), v.end());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (const auto& iv : v) {
    if (!out.empty() && iv.first <= out.back().second) {
      out.back().second = std::max(out.back().second, iv.second);
    } else {
      out.push_back(iv);
    }
  }
  return out;
}

std::uint64_t covered(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& v) {
  std::uint64_t t = 0;
  for (const auto& [lo, hi] : v) t += hi - lo;
  return t;
}

}  // namespace

double busy_overlap_fraction(std::vector<std::pair<std::uint64_t, std::uint64_t>> a,
                             std::vector<std::pair<std::uint64_t, std::uint64_t>> b) {
  const auto ua = merged(std::move(a));
  const auto ub = merged(std::move(b));
  const std::uint64_t smaller = std::min(covered(ua), covered(ub));
  if (smaller == 0) return 0.0;
  std::uint64_t both = 0;
  std::size_t i = 0;
  std::size_t j = 0;
  while (i < ua.size() && j < ub.size()) {
    const std::uint64_t lo = std::max(ua[i].first, ub[j].first);
    const std::uint64_t hi = std::min(ua[i].second, ub[j].second);
    if (hi > lo) both += hi - lo;
    if (ua[i].second < ub[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return static_cast<double>(both) / static_cast<double>(smaller);
}

Stats summarize(std::vector<double> values) {
  Stats s;
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.count = static_cast<int>(values.size());
  s.min = values.front();
  s.max = values.back();
  s.median = stats::percentile_sorted(values, 0.5);
  s.p90 = stats::percentile_sorted(values, 0.9);
  return s;
}

bool TimelineHealth::clean() const {
  return collected.clean() && unmatched_seen == 0 && no_timestamp_seen == 0 && replay_out_of_range == 0 &&
         duplicate == 0 && missing == 0;
}

std::string TimelineHealth::problems() const {
  std::string out;
  const auto add = [&](std::uint64_t count, std::string_view what) {
    if (count == 0) return;
    out += out.empty() ? "" : ", ";
    out += fmt::format("{} {}", count, what);
  };
  add(collected.dropped, "records dropped by CUPTI");
  add(std::max(collected.no_timestamp, no_timestamp_seen), "records without a timestamp");
  add(std::max(collected.unmatched, unmatched_seen), "records matching no graph node");
  add(replay_out_of_range, "records outside the replays");
  add(duplicate, "duplicate records of one node in one replay");
  add(missing, "kernel/copy nodes with no record in a replay");
  return out;
}

bool RunAnalysis::collection_clean() const {
  return std::all_of(variants.begin(), variants.end(), [](const VariantTimeline& v) { return v.health.clean(); });
}

namespace {

// Computes one replay: its nodes' timings and waits, its windows, overlaps and verdict, and its
// critical path. Pure in the variant's records: computing a replay twice gives the same result.
class ReplayAnalyzer {
 public:
  ReplayAnalyzer(const VariantRun& v, const VariantTimeline& out, const std::vector<Sample>& samples,
                 const std::map<int, DeviceTimeline>& devices)
      : g_(v.graph),
        out_(out),
        samples_(samples),
        devices_(devices),
        node_count_(v.graph.nodes.size()),
        pred_(node_count_),
        early_(node_count_),
        topology_(v.topology_error.empty()) {
    std::vector<std::vector<int>> succ(node_count_);
    for (const auto& e : g_.edges) {
      pred_[static_cast<std::size_t>(e.to)].push_back(e.from);
      early_[static_cast<std::size_t>(e.to)].push_back(e.type != 0 ? 1 : 0);
      succ[static_cast<std::size_t>(e.from)].push_back(e.to);
    }
    order_ = topological_order(g_, succ);
    for (const auto& s : v.event_spans) event_us_[{s.replay, s.rank}] = s.span_ms * 1000.0;
  }

  // Fills `nodes` (resized to the graph) and `rt` for replay r; the critical path only when asked.
  // With `detail` the waits' occupants and the path's links one by one, else their totals.
  void analyze(std::size_t r, std::vector<NodeTiming>& nodes, ReplayTimeline& rt, bool with_path, bool detail) const {
    place_records(r, nodes, rt);
    ready_times(r, nodes, rt, detail);
    rank_windows(r, nodes, rt);
    busy_overlaps(nodes, rt);
    for (std::size_t k = 1; k < static_cast<std::size_t>(out_.ranks); ++k) {
      const auto& decides = out_.rank_device[k] == out_.rank_device[0] ? rt.busy_vs_root[k] : rt.overlap_vs_root[k];
      if (decides && (!rt.verdict_overlap || *decides < *rt.verdict_overlap)) rt.verdict_overlap = decides;
    }
    rt.verdict = verdict_of(rt.verdict_overlap, out_.ranks);
    if (rt.present) rt.span_us = ns_to_us(rt.end_ns, rt.begin_ns);
    if (with_path) rt.critical_path = critical_path(g_, nodes, static_cast<int>(r), rt, devices_, detail);
  }

 private:
  // The replay's records onto its nodes, and the replay's extent.
  void place_records(std::size_t r, std::vector<NodeTiming>& nodes, ReplayTimeline& rt) const {
    const auto R = static_cast<std::size_t>(out_.ranks);
    nodes.assign(node_count_, NodeTiming{});
    for (std::size_t n = 0; n < node_count_; ++n) {
      const Sample& s = samples_[r * node_count_ + n];
      if (!s.recorded()) continue;
      nodes[n].recorded = true;
      nodes[n].start_ns = s.start_ns;
      nodes[n].end_ns = s.end_ns;
    }
    rt = ReplayTimeline{};
    rt.replay = static_cast<int>(r);
    rt.ranks.resize(R);
    rt.overlap_vs_root.resize(R);
    rt.begin_ns = std::numeric_limits<std::uint64_t>::max();
    for (std::size_t n = 0; n < node_count_; ++n) {
      if (!nodes[n].recorded) continue;
      rt.present = true;
      rt.begin_ns = std::min(rt.begin_ns, nodes[n].start_ns);
      rt.end_ns = std::max(rt.end_ns, nodes[n].end_ns);
    }
    if (!rt.present) rt.begin_ns = 0;
  }

  void ready_times(std::size_t r, std::vector<NodeTiming>& nodes, const ReplayTimeline& rt, bool detail) const {
    // Ready time: the latest end among recorded ancestors, walking through the nodes that leave no
    // record (events, alloc, free) or whose record is missing.
    done_ns_.assign(node_count_, 0);
    done_by_.assign(node_count_, -1);
    contention_ns_.assign(node_count_, 0);
    for (const int id : order_) {
      const auto n = static_cast<std::size_t>(id);
      NodeTiming& t = nodes[n];
      std::uint64_t ready = 0;
      int from = -1;
      for (std::size_t j = 0; j < pred_[n].size(); ++j) {
        const auto pi = static_cast<std::size_t>(pred_[n][j]);
        // A programmatic (or launch-completion) edge lets n start while the predecessor runs: the
        // overlap is allowed, not a negative wait, so such a predecessor is done by n's start.
        const std::uint64_t done = early_[n][j] && t.recorded ? std::min(done_ns_[pi], t.start_ns) : done_ns_[pi];
        if (done_by_[pi] >= 0 && done > ready) {
          ready = done;
          from = done_by_[pi];
        }
      }
      if (t.recorded && !topology_) {  // no edges known: nothing to wait for, no wait claimed
        t.ready_ns = t.start_ns;
        done_ns_[n] = t.end_ns;
        done_by_[n] = id;
      } else if (t.recorded) {
        t.ready_ns = from >= 0 ? ready : rt.begin_ns;
        t.ready_from = from;
        t.wait_us = ns_to_us(t.start_ns, t.ready_ns);
        const auto dit = devices_.find(g_.nodes[n].device);
        if (dit != devices_.end())
          t.parts = split_wait(dit->second, id, static_cast<int>(r), t.ready_ns, t.start_ns, contention_ns_[n], detail);
        // Arrival: the other rank's predecessor ended after this node's own chain had.
        const int rank = g_.nodes[n].rank;
        if (from >= 0 && g_.nodes[static_cast<std::size_t>(from)].rank != rank) {
          std::uint64_t own = 0;
          for (const int p : pred_[n]) {
            const auto pi = static_cast<std::size_t>(p);
            if (done_by_[pi] >= 0 && g_.nodes[static_cast<std::size_t>(done_by_[pi])].rank == rank &&
                done_ns_[pi] > own) {
              own = done_ns_[pi];
              t.parts.own_from = done_by_[pi];
            }
          }
          if (t.parts.own_from >= 0) t.parts.arrival_us = ns_to_us(ready, own);
        }
        done_ns_[n] = t.end_ns;
        done_by_[n] = id;
      } else {
        done_ns_[n] = ready;
        done_by_[n] = from;
      }
    }
  }

  void rank_windows(std::size_t r, const std::vector<NodeTiming>& nodes, ReplayTimeline& rt) const {
    const auto R = static_cast<std::size_t>(out_.ranks);
    // Per rank windows over the whole replay, and per (rank, layer) for the overlap: with layers
    // joined between them, whole-replay windows of serialized ranks would still share most of
    // their time.
    const auto L = static_cast<std::size_t>(out_.layers);
    std::vector<std::uint64_t> lo(R * L, std::numeric_limits<std::uint64_t>::max()), hi(R * L, 0);
    for (std::size_t n = 0; n < node_count_; ++n) {
      const NodeTiming& t = nodes[n];
      if (!t.recorded) continue;
      const auto rank = static_cast<std::size_t>(g_.nodes[n].rank);
      const auto layer = static_cast<std::size_t>(g_.nodes[n].layer);
      RankReplay& w = rt.ranks[rank];
      if (!w.present) {
        w.present = true;
        w.first_start_ns = t.start_ns;
        w.last_end_ns = t.end_ns;
      }
      w.first_start_ns = std::min(w.first_start_ns, t.start_ns);
      w.last_end_ns = std::max(w.last_end_ns, t.end_ns);
      ++w.ops;
      lo[rank * L + layer] = std::min(lo[rank * L + layer], t.start_ns);
      hi[rank * L + layer] = std::max(hi[rank * L + layer], t.end_ns);
    }
    for (std::size_t k = 0; k < R; ++k) {
      RankReplay& w = rt.ranks[k];
      w.rank = static_cast<int>(k);
      if (const auto it = event_us_.find({static_cast<int>(r), static_cast<int>(k)}); it != event_us_.end())
        w.event_span_us = it->second;
      if (!w.present) continue;
      w.span_us = ns_to_us(w.last_end_ns, w.first_start_ns);
      w.offset_us = ns_to_us(w.first_start_ns, rt.begin_ns);
    }
    for (std::size_t k = 1; k < R; ++k) {
      double shared = 0;
      double shorter = 0;
      bool any = false;
      for (std::size_t l = 0; l < L; ++l) {
        const std::size_t a = l;  // the root, rank 0
        const std::size_t b = k * L + l;
        if (hi[a] == 0 || hi[b] == 0) continue;
        any = true;
        const double frac = overlap_fraction(lo[a], hi[a], lo[b], hi[b]);
        const double s = static_cast<double>(std::min(hi[a] - lo[a], hi[b] - lo[b]));
        shared += frac * s;
        shorter += s;
      }
      if (any) rt.overlap_vs_root[k] = shorter > 0 ? shared / shorter : 0.0;
      if (rt.overlap_vs_root[k] && (!rt.overlap || *rt.overlap_vs_root[k] < *rt.overlap))
        rt.overlap = rt.overlap_vs_root[k];
    }
  }

  // Busy overlap: the ranks' kernels and copies as intervals, whole replay.
  void busy_overlaps(const std::vector<NodeTiming>& nodes, ReplayTimeline& rt) const {
    const auto R = static_cast<std::size_t>(out_.ranks);
    std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> busy(R);
    for (std::size_t n = 0; n < node_count_; ++n) {
      const NodeTiming& t = nodes[n];
      if (t.recorded) busy[static_cast<std::size_t>(g_.nodes[n].rank)].emplace_back(t.start_ns, t.end_ns);
    }
    rt.busy_vs_root.resize(R);
    for (std::size_t k = 1; k < R; ++k) {
      if (busy[0].empty() || busy[k].empty()) continue;
      const double f = busy_overlap_fraction(busy[0], busy[k]);
      rt.busy_vs_root[k] = f;
      if (!rt.busy_overlap || f < *rt.busy_overlap) rt.busy_overlap = f;
    }
  }

  const LayerGraph& g_;
  const VariantTimeline& out_;
  const std::vector<Sample>& samples_;
  const std::map<int, DeviceTimeline>& devices_;
  std::size_t node_count_;
  std::vector<std::vector<int>> pred_;
  std::vector<std::vector<char>> early_;  // [node][i]: pred_[node][i]'s edge is programmatic
  bool topology_ = true;
  std::vector<int> order_;
  std::map<std::pair<int, int>, double> event_us_;  // event spans by (replay, rank)
  mutable std::vector<std::uint64_t> done_ns_;
  mutable std::vector<int> done_by_;
  mutable std::vector<std::uint64_t> contention_ns_;

 public:
  // The last analysed replay's contention of node n, in ns.
  [[nodiscard]] std::uint64_t contention_ns(std::size_t n) const { return contention_ns_[n]; }
};

// The variant's shape: its name, ranks, layers, each rank's GPU, and how many replays it has.
VariantTimeline variant_shape(const VariantRun& v) {
  const LayerGraph& g = v.graph;
  VariantTimeline out;
  out.name = v.scenario.name;
  out.ranks = std::max(g.ranks, 1);
  out.layers = 1;
  for (const auto& n : g.nodes) out.layers = std::max(out.layers, n.layer + 1);
  out.ranks_share_gpu = v.ranks_share_gpu;
  out.rank_device.assign(static_cast<std::size_t>(out.ranks), -1);
  for (const auto& n : g.nodes) {
    auto& d = out.rank_device[static_cast<std::size_t>(n.rank)];
    if (d < 0) d = n.device;
  }
  for (auto& d : out.rank_device) d = std::max(d, 0);
  int replays = v.scenario.replays;
  if (replays <= 0) {
    for (const auto& a : v.records) replays = std::max(replays, a.replay + 1);
  }
  out.replay_count = replays;
  return out;
}

// Every timestamped record on its GPU's timeline, with other processes' work on the same GPUs:
// what occupied a GPU while a node waited.
std::map<int, DeviceTimeline> device_timelines(const VariantRun& v, int replays) {
  const LayerGraph& g = v.graph;
  std::map<int, std::vector<Work>> work;
  for (const auto& a : v.records) {
    if (a.start_ns == 0 || a.end_ns <= a.start_ns) continue;
    const bool matched = a.node >= 0 && static_cast<std::size_t>(a.node) < g.nodes.size();
    const int device = matched ? g.nodes[static_cast<std::size_t>(a.node)].device : a.device;
    work[device].push_back(
        Work{a.start_ns, a.end_ns, matched ? a.node : -1, a.replay >= 0 && a.replay < replays ? a.replay : -1});
  }
  if (v.outside)  // other processes' work on this variant's GPUs: named, never a node here
    for (const auto& o : *v.outside)
      if (o.end_ns > o.start_ns && work.count(o.device) > 0 &&
          std::find(v.own_processes.begin(), v.own_processes.end(), o.process) == v.own_processes.end())
        work[o.device].push_back(Work{o.start_ns, o.end_ns, -2 - o.label, -1});
  std::map<int, DeviceTimeline> devices;
  for (auto& [device, w] : work) {
    devices[device].build(std::move(w));
    w = {};
  }
  return devices;
}

// Every replay once: its windows and verdict kept, its nodes' waits into the samples, its critical
// path into each node's time on it (returned). Node timings and paths stay for the first replays.
timeline_detail::PathTimes analyze_replays(const VariantRun& v, const AnalysisOptions& options,
                                           const ReplayAnalyzer& analyzer, std::vector<Sample>& samples,
                                           VariantTimeline& out) {
  const std::size_t node_count = v.graph.nodes.size();
  const auto N = static_cast<std::size_t>(out.replay_count);
  const std::size_t detail =
      options.detail_replays < 0 ? N : std::min(N, static_cast<std::size_t>(options.detail_replays));
  out.timings.resize(N);
  out.replays.resize(N);
  timeline_detail::PathTimes on_path;  // node -> (run, wait) per present replay
  std::size_t present = 0;
  std::vector<NodeTiming> nodes;
  for (std::size_t r = 0; r < N; ++r) {
    ReplayTimeline& rt = out.replays[r];
    analyzer.analyze(r, nodes, rt, v.topology_error.empty(), r < detail);
    ++out.verdict_counts[static_cast<std::size_t>(rt.verdict)];
    for (std::size_t n = 0; n < node_count; ++n) {
      const NodeTiming& t = nodes[n];
      if (!t.recorded) continue;
      Sample& s = samples[r * node_count + n];
      s.ready_ns = t.ready_ns;
      s.ready_from = t.ready_from;
      s.contention_ns = analyzer.contention_ns(n);
      s.arrival_us = t.parts.arrival_us;
    }
    if (rt.present) {
      for (const PathLink& l : rt.critical_path) {
        if (l.node < 0) continue;
        auto& [ran, waited] = on_path[l.node];
        ran.resize(present + 1, 0.0);
        waited.resize(present + 1, 0.0);
        (l.kind == PathLinkKind::run ? ran : waited)[present] += l.us;
      }
      ++present;
    }
    if (r < detail) {
      out.timings[r] = nodes;
    } else {
      rt.critical_path.clear();  // kept only for the replays the outputs name (add_named_detail)
      rt.critical_path.shrink_to_fit();
    }
  }
  return on_path;
}

// Full detail (node timings with occupants, and the critical path) for the replays the outputs
// name: the median-span one, each outlier, each node's median-wait one and the one asked for; then
// each node's typical wait breakdown from its median-wait replay.
void add_named_detail(const VariantRun& v, const AnalysisOptions& options, const ReplayAnalyzer& analyzer,
                      VariantTimeline& out) {
  std::set<int> needed{out.critical_path.typical_replay};
  for (const auto& o : out.outliers) needed.insert(o.replay);
  for (const auto& w : out.waits) needed.insert(w.typical_replay);
  if (options.replay && *options.replay >= 0 && *options.replay < out.replay_count) needed.insert(*options.replay);
  std::vector<NodeTiming> nodes;
  ReplayTimeline scratch;
  for (const int r : needed) {
    if (r < 0 || out.has_detail(r)) continue;
    const auto ri = static_cast<std::size_t>(r);
    analyzer.analyze(ri, nodes, scratch, v.topology_error.empty(), true);
    out.timings[ri] = nodes;
    out.replays[ri].critical_path = std::move(scratch.critical_path);
  }
  for (auto& w : out.waits) {
    const NodeTiming& typical =
        out.timings[static_cast<std::size_t>(w.typical_replay)][static_cast<std::size_t>(w.node)];
    w.typical_wait_us = typical.wait_us;
    w.typical = typical.parts;
  }
}

// Traced graphs' conditional nodes, a graph without topology's streams, and what launching and
// tracing cost.
void conditionals_streams_and_costs(const VariantRun& v, const std::vector<Sample>& samples, VariantTimeline& out) {
  out.no_topology = v.topology_error;
  out.conditionals = timeline_detail::summarize_conditionals(v, samples, out.replays);
  if (!v.topology_error.empty())
    out.stream_nodes = timeline_detail::summarize_streams(v, samples, static_cast<std::size_t>(out.replay_count));
  out.host_launch_us = summarize(v.host_launch_us);
  if (v.replay_us_traced > 0 && v.replay_us_untraced > 0) out.tracing_cost = v.replay_us_traced / v.replay_us_untraced;
}

}  // namespace

const NodeWaitSummary* VariantTimeline::wait_of(int node) const {
  if (node < 0 || static_cast<std::size_t>(node) >= wait_index.size()) return nullptr;
  const int i = wait_index[static_cast<std::size_t>(node)];
  return i < 0 ? nullptr : &waits[static_cast<std::size_t>(i)];
}

bool VariantTimeline::has_detail(int replay) const {
  return replay >= 0 && static_cast<std::size_t>(replay) < timings.size() &&
         !timings[static_cast<std::size_t>(replay)].empty();
}

// The variant's analysis as steps in order; each fills in what the steps after it read.
VariantTimeline analyze_variant(const VariantRun& v, const AnalysisOptions& options) {
  VariantTimeline out = variant_shape(v);
  const std::map<int, DeviceTimeline> devices = device_timelines(v, out.replay_count);
  // Every record in its (replay, node) slot, counting what does not fit.
  out.health.collected = v.health;
  std::vector<Sample> samples =
      timeline_detail::place_records(v, static_cast<std::size_t>(out.replay_count), out.health);
  const ReplayAnalyzer analyzer(v, out, samples, devices);
  const timeline_detail::PathTimes on_path = analyze_replays(v, options, analyzer, samples, out);
  // Summaries over replays (timeline_summary.cpp), each reading those before it.
  timeline_detail::summarize_ranks(out);
  const std::vector<double> median_offset = timeline_detail::summarize_waits(v, samples, out);
  timeline_detail::find_outliers(samples, median_offset, out);
  out.steadiness = timeline_detail::steadiness_of(out);
  if (options.keep_series)
    out.series = timeline_detail::node_series(samples, v.graph.nodes.size(), out.replays, on_path);
  out.critical_path = timeline_detail::summarize_critical_path(v, on_path, out.replays);
  add_named_detail(v, options, analyzer, out);
  conditionals_streams_and_costs(v, samples, out);
  return out;
}

RunAnalysis analyze_run(const RunData& run, const AnalysisOptions& options) {
  RunAnalysis a;
  a.base_ns = std::numeric_limits<std::uint64_t>::max();
  for (const auto& v : run.variants) {
    a.variants.push_back(analyze_variant(v, options));
    // Every timestamped record, also those outside the replays, so the trace can place them all.
    for (const auto& r : v.records)
      if (r.start_ns != 0 && r.end_ns >= r.start_ns) a.base_ns = std::min(a.base_ns, r.start_ns);
  }
  if (a.base_ns == std::numeric_limits<std::uint64_t>::max()) a.base_ns = 0;
  if (run.tracing_cost) {
    a.tracing_cost = analyze_tracing_cost(*run.tracing_cost);
    for (std::size_t i = 0; i < run.variants.size(); ++i)
      a.variants[i].trace_cost = graph_tracing_cost(*a.tracing_cost, run.variants[i].own_processes,
                                                    records_per_launch(run.variants[i]), a.variants[i].span_us.median);
  }
  return a;
}

}  // namespace tpgraph
