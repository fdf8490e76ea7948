#include "core/timeline.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "core/error.hpp"

namespace tpgraph {

namespace {

double ns_to_us(std::uint64_t later, std::uint64_t earlier) {
  // Subtract as integers: CUPTI timestamps (~1.7e18 ns) are beyond a double's exact range.
  const auto diff = later >= earlier ? static_cast<double>(later - earlier) : -static_cast<double>(earlier - later);
  return diff / 1000.0;
}

// CUPTI reports kernels and copies; allocation, free and event-record nodes leave no record.
bool leaves_record(NodeKind k) {
  const CudaNodeType t = cuda_node_type(k);
  return t == CudaNodeType::kernel || t == CudaNodeType::memcpy || t == CudaNodeType::memset;
}

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

int most_common(const std::vector<int>& values) {
  std::map<int, int> counts;
  for (const int v : values) ++counts[v];
  int best = -1;
  int best_count = 0;
  for (const auto& [v, c] : counts) {
    if (c > best_count) {
      best = v;
      best_count = c;
    }
  }
  return best;
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

std::string verdict_thresholds_text() {
  return fmt::format(
      "verdict: OVERLAPPED if overlap >= {:.2f}, SERIALIZED if overlap <= {:.2f}, PARTIAL between; "
      "overlap = time two ranks' windows share / the shorter window (rank vs root, smallest if more "
      "than two ranks); event-span cross-check flagged beyond {:.0f}%",
      kOverlappedAtLeast, kSerializedAtMost, kEventSpanTolerance * 100);
}

double overlap_fraction(std::uint64_t a_start, std::uint64_t a_end, std::uint64_t b_start,
                        std::uint64_t b_end) {
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
  const auto at = [&](double q) {
    const double pos = q * static_cast<double>(values.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = static_cast<std::size_t>(std::ceil(pos));
    return values[lo] + (values[hi] - values[lo]) * (pos - static_cast<double>(lo));
  };
  s.count = static_cast<int>(values.size());
  s.min = values.front();
  s.max = values.back();
  s.median = at(0.5);
  s.p90 = at(0.9);
  return s;
}

bool TimelineHealth::clean() const {
  return collected.clean() && unmatched_seen == 0 && no_timestamp_seen == 0 &&
         replay_out_of_range == 0 && duplicate == 0 && missing == 0;
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
  return std::all_of(variants.begin(), variants.end(),
                     [](const VariantTimeline& v) { return v.health.clean(); });
}

VariantTimeline analyze_variant(const VariantRun& v) {
  const LayerGraph& g = v.graph;
  const std::size_t node_count = g.nodes.size();
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
  const auto R = static_cast<std::size_t>(out.ranks);
  const auto N = static_cast<std::size_t>(replays);

  // Place every record in its (replay, node) slot, counting what does not fit.
  out.health.collected = v.health;
  out.health.records = v.records.size();
  out.timings.assign(N, std::vector<NodeTiming>(node_count));
  for (const auto& a : v.records) {
    if (a.start_ns == 0 || a.end_ns == 0 || a.end_ns < a.start_ns) {
      ++out.health.no_timestamp_seen;
      continue;
    }
    if (a.node < 0 || static_cast<std::size_t>(a.node) >= node_count) {
      ++out.health.unmatched_seen;
      continue;
    }
    if (a.replay < 0 || a.replay >= replays) {
      ++out.health.replay_out_of_range;
      continue;
    }
    NodeTiming& t = out.timings[static_cast<std::size_t>(a.replay)][static_cast<std::size_t>(a.node)];
    if (t.recorded) {
      ++out.health.duplicate;
      t.start_ns = std::min(t.start_ns, a.start_ns);
      t.end_ns = std::max(t.end_ns, a.end_ns);
    } else {
      t.recorded = true;
      t.start_ns = a.start_ns;
      t.end_ns = a.end_ns;
    }
  }
  for (const auto& replay : out.timings)
    for (std::size_t n = 0; n < node_count; ++n)
      if (leaves_record(g.nodes[n].kind) && !replay[n].recorded) ++out.health.missing;

  std::vector<std::vector<int>> pred(node_count), succ(node_count);
  for (const auto& e : g.edges) {
    pred[static_cast<std::size_t>(e.to)].push_back(e.from);
    succ[static_cast<std::size_t>(e.from)].push_back(e.to);
  }
  const std::vector<int> order = topological_order(g, succ);

  // Event spans by (replay, rank).
  std::map<std::pair<int, int>, double> event_us;
  for (const auto& s : v.event_spans) event_us[{s.replay, s.rank}] = s.span_ms * 1000.0;

  out.replays.resize(N);
  for (std::size_t r = 0; r < N; ++r) {
    std::vector<NodeTiming>& nodes = out.timings[r];
    ReplayTimeline& rt = out.replays[r];
    rt.replay = static_cast<int>(r);
    rt.ranks.resize(R);
    rt.overlap_vs_root.resize(R);
    rt.begin_ns = std::numeric_limits<std::uint64_t>::max();
    for (std::size_t n = 0; n < node_count; ++n) {
      if (!nodes[n].recorded) continue;
      rt.present = true;
      rt.begin_ns = std::min(rt.begin_ns, nodes[n].start_ns);
      rt.end_ns = std::max(rt.end_ns, nodes[n].end_ns);
    }
    if (!rt.present) rt.begin_ns = 0;

    // Ready time: the latest end among recorded ancestors, walking through the nodes that leave no
    // record (events, alloc, free) or whose record is missing.
    std::vector<std::uint64_t> done_ns(node_count, 0);
    std::vector<int> done_by(node_count, -1);
    for (const int id : order) {
      const auto n = static_cast<std::size_t>(id);
      std::uint64_t ready = 0;
      int from = -1;
      for (const int p : pred[n]) {
        const auto pi = static_cast<std::size_t>(p);
        if (done_by[pi] >= 0 && done_ns[pi] > ready) {
          ready = done_ns[pi];
          from = done_by[pi];
        }
      }
      NodeTiming& t = nodes[n];
      if (t.recorded) {
        t.ready_ns = from >= 0 ? ready : rt.begin_ns;
        t.ready_from = from;
        t.wait_us = ns_to_us(t.start_ns, t.ready_ns);
        done_ns[n] = t.end_ns;
        done_by[n] = id;
      } else {
        done_ns[n] = ready;
        done_by[n] = from;
      }
    }

    // Per rank windows over the whole replay, and per (rank, layer) for the overlap: with layers
    // joined between them, whole-replay windows of serialized ranks would still share most of
    // their time.
    const auto L = static_cast<std::size_t>(out.layers);
    std::vector<std::uint64_t> lo(R * L, std::numeric_limits<std::uint64_t>::max()), hi(R * L, 0);
    for (std::size_t n = 0; n < node_count; ++n) {
      const NodeTiming& t = nodes[n];
      if (!t.recorded) continue;
      const auto rank = static_cast<std::size_t>(g.nodes[n].rank);
      const auto layer = static_cast<std::size_t>(g.nodes[n].layer);
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
      if (const auto it = event_us.find({static_cast<int>(r), static_cast<int>(k)}); it != event_us.end())
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
    // Busy overlap: the ranks' kernels and copies as intervals, whole replay.
    std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> busy(R);
    for (std::size_t n = 0; n < node_count; ++n) {
      const NodeTiming& t = nodes[n];
      if (t.recorded) busy[static_cast<std::size_t>(g.nodes[n].rank)].emplace_back(t.start_ns, t.end_ns);
    }
    for (std::size_t k = 1; k < R; ++k) {
      if (busy[0].empty() || busy[k].empty()) continue;
      const double f = busy_overlap_fraction(busy[0], busy[k]);
      if (!rt.busy_overlap || f < *rt.busy_overlap) rt.busy_overlap = f;
    }
    rt.verdict = verdict_of(rt.overlap, out.ranks);
    ++out.verdict_counts[static_cast<std::size_t>(rt.verdict)];
  }

  // Summaries over replays.
  out.rank_summaries.resize(R);
  out.overlap_vs_root.resize(R);
  std::vector<double> overlaps;
  for (std::size_t k = 0; k < R; ++k) {
    RankSummary& s = out.rank_summaries[k];
    s.rank = static_cast<int>(k);
    s.device = out.rank_device[k];
    std::vector<double> span, offset, event, ratio, diff, vs_root;
    for (const auto& rt : out.replays) {
      const RankReplay& w = rt.ranks[k];
      if (rt.overlap_vs_root[k]) vs_root.push_back(*rt.overlap_vs_root[k]);
      if (w.event_span_us) event.push_back(*w.event_span_us);
      if (!w.present) continue;
      span.push_back(w.span_us);
      offset.push_back(w.offset_us);
      if (w.event_span_us && *w.event_span_us > 0) {
        ratio.push_back(w.span_us / *w.event_span_us);
        diff.push_back(*w.event_span_us - w.span_us);
      }
    }
    s.span_us = summarize(span);
    s.offset_us = summarize(offset);
    s.event_span_us = summarize(event);
    s.cupti_over_event = summarize(ratio);
    s.event_minus_cupti_us = summarize(diff);
    s.event_mismatch = s.cupti_over_event.count > 0 &&
                       std::abs(s.cupti_over_event.median - 1.0) > kEventSpanTolerance;
    out.overlap_vs_root[k] = summarize(vs_root);
  }
  for (const auto& rt : out.replays)
    if (rt.overlap) overlaps.push_back(*rt.overlap);
  out.overlap = summarize(overlaps);
  std::vector<double> busy_overlaps;
  for (const auto& rt : out.replays)
    if (rt.busy_overlap) busy_overlaps.push_back(*rt.busy_overlap);
  out.busy_overlap = summarize(busy_overlaps);
  out.verdict = verdict_of(out.overlap.count > 0 ? std::optional<double>(out.overlap.median) : std::nullopt,
                           out.ranks);

  for (std::size_t n = 0; n < node_count; ++n) {
    std::vector<double> waits;
    std::vector<int> from;
    for (const auto& replay : out.timings) {
      if (!replay[n].recorded) continue;
      waits.push_back(replay[n].wait_us);
      from.push_back(replay[n].ready_from);
    }
    if (waits.empty()) continue;
    out.waits.push_back(NodeWaitSummary{static_cast<int>(n), summarize(waits), most_common(from)});
  }
  std::stable_sort(out.waits.begin(), out.waits.end(), [](const NodeWaitSummary& a, const NodeWaitSummary& b) {
    return a.wait_us.median > b.wait_us.median;
  });

  out.host_launch_us = summarize(v.host_launch_us);
  if (v.replay_us_traced > 0 && v.replay_us_untraced > 0)
    out.tracing_cost = v.replay_us_traced / v.replay_us_untraced;
  return out;
}

RunAnalysis analyze_run(const RunData& run) {
  RunAnalysis a;
  a.base_ns = std::numeric_limits<std::uint64_t>::max();
  for (const auto& v : run.variants) {
    a.variants.push_back(analyze_variant(v));
    // Every timestamped record, also those outside the replays, so the trace can place them all.
    for (const auto& r : v.records)
      if (r.start_ns != 0 && r.end_ns >= r.start_ns) a.base_ns = std::min(a.base_ns, r.start_ns);
  }
  if (a.base_ns == std::numeric_limits<std::uint64_t>::max()) a.base_ns = 0;
  return a;
}

}  // namespace tpgraph
