// A variant's figures over its replays, once every replay has been analysed (timeline.cpp): per
// rank spans and overlaps and the verdict they give, per node its wait and the wait's parts, the
// replays that depart from the rest, whether the replays are steady, and each node's time on the
// critical path. They read the replays and the samples only; no replay is analysed again here.
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "core/analysis/samples.hpp"
#include "core/analysis/steady.hpp"
#include "core/base/stats.hpp"

namespace tpgraph::timeline_detail {

namespace {

double median_of(std::vector<double> v) { return stats::median(std::move(v)); }

// The value seen most often; the smallest of those tied; -1 for none.
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

// One rank over the replays: its span, its offset from the earliest rank, and its CUPTI span
// against the event nodes' span.
RankSummary summarize_rank(const VariantTimeline& out, std::size_t k) {
  RankSummary s;
  s.rank = static_cast<int>(k);
  s.device = out.rank_device[k];
  std::vector<double> span, offset, event, ratio, diff;
  for (const auto& rt : out.replays) {
    const RankReplay& w = rt.ranks[k];
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
  s.event_mismatch = s.cupti_over_event.count > 0 && std::abs(s.cupti_over_event.median - 1.0) > kEventSpanTolerance;
  return s;
}

// One figure of every replay that has it, summarized over the replays.
template <class Figure>
Stats over_replays(const std::vector<ReplayTimeline>& replays, Figure figure) {
  std::vector<double> values;
  for (const auto& rt : replays)
    if (const std::optional<double> value = figure(rt)) values.push_back(*value);
  return summarize(values);
}

}  // namespace

// Per rank spans and offsets, the overlaps over replays and the verdicts they give.
void summarize_ranks(VariantTimeline& out) {
  const auto R = static_cast<std::size_t>(out.ranks);
  out.rank_summaries.resize(R);
  out.overlap_vs_root.resize(R);
  for (std::size_t k = 0; k < R; ++k) {
    out.rank_summaries[k] = summarize_rank(out, k);
    out.overlap_vs_root[k] = over_replays(out.replays, [k](const ReplayTimeline& rt) { return rt.overlap_vs_root[k]; });
  }
  out.overlap = over_replays(out.replays, [](const ReplayTimeline& rt) { return rt.overlap; });
  out.busy_overlap = over_replays(out.replays, [](const ReplayTimeline& rt) { return rt.busy_overlap; });
  out.verdict_overlap = over_replays(out.replays, [](const ReplayTimeline& rt) { return rt.verdict_overlap; });
  const auto median_or_none = [](const Stats& st) {
    return st.count > 0 ? std::optional<double>(st.median) : std::nullopt;
  };
  out.verdict = verdict_of(median_or_none(out.verdict_overlap), out.ranks);
  out.window_verdict = verdict_of(median_or_none(out.overlap), out.ranks);
  out.busy_verdict = verdict_of(median_or_none(out.busy_overlap), out.ranks);
  std::size_t on_root_gpu = 0;
  for (std::size_t k = 1; k < R; ++k) on_root_gpu += out.rank_device[k] == out.rank_device[0] ? 1 : 0;
  out.basis = on_root_gpu == 0 ? OverlapBasis::window : on_root_gpu + 1 == R ? OverlapBasis::busy : OverlapBasis::mixed;
}

// Per node its wait and the wait's parts over replays; returns each node's median start offset.
std::vector<double> summarize_waits(const VariantRun& v, const std::vector<Sample>& samples, VariantTimeline& out) {
  const std::size_t node_count = v.graph.nodes.size();
  const std::size_t replays = out.replays.size();
  out.wait_index.assign(node_count, -1);
  std::vector<double> median_offset(node_count, 0);
  for (std::size_t n = 0; n < node_count; ++n) {
    std::vector<double> waits, durations, contention, idle, arrival, offsets;
    std::vector<int> from;
    std::vector<std::pair<double, int>> by_wait;
    for (std::size_t r = 0; r < replays; ++r) {
      const Sample& s = samples[r * node_count + n];
      if (!s.recorded()) continue;
      waits.push_back(s.wait_us());
      from.push_back(s.ready_from);
      durations.push_back(s.duration_us());
      contention.push_back(s.contention_us());
      idle.push_back(s.idle_us());
      arrival.push_back(s.arrival_us);
      offsets.push_back(ns_to_us(s.start_ns, out.replays[r].begin_ns));
      by_wait.emplace_back(s.wait_us(), static_cast<int>(r));
    }
    if (waits.empty() || !v.topology_error.empty()) continue;
    NodeWaitSummary w;
    w.node = static_cast<int>(n);
    w.wait_us = summarize(waits);
    w.ready_from = most_common(from);
    w.duration_us = summarize(durations);
    w.contention_us = summarize(contention);
    w.idle_us = summarize(idle);
    w.arrival_us = summarize(arrival);
    std::sort(by_wait.begin(), by_wait.end());
    w.typical_replay = by_wait[(by_wait.size() - 1) / 2].second;
    median_offset[n] = median_of(offsets);
    out.waits.push_back(std::move(w));
  }
  std::stable_sort(out.waits.begin(), out.waits.end(), [](const NodeWaitSummary& a, const NodeWaitSummary& b) {
    return a.wait_us.median > b.wait_us.median;
  });
  for (std::size_t i = 0; i < out.waits.size(); ++i)
    out.wait_index[static_cast<std::size_t>(out.waits[i].node)] = static_cast<int>(i);
  return median_offset;
}

// The spans over replays and the replays whose span or verdict departs from the rest.
void find_outliers(const std::vector<Sample>& samples, const std::vector<double>& median_offset, VariantTimeline& out) {
  const std::size_t node_count = median_offset.size();  // one per node of the graph
  std::vector<double> spans;
  for (const auto& rt : out.replays)
    if (rt.present) spans.push_back(rt.span_us);
  out.span_us = summarize(spans);
  out.span_mad_us = stats::mad(spans);
  out.outlier_threshold_us = std::max(kOutlierMads * out.span_mad_us, kOutlierFraction * out.span_us.median);
  const bool compare_verdicts = out.ranks >= 2;
  for (const auto& rt : out.replays) {
    if (!rt.present) continue;
    OutlierReplay o;
    o.replay = rt.replay;
    o.span_us = rt.span_us;
    o.verdict = rt.verdict;
    o.span_departs = std::abs(rt.span_us - out.span_us.median) > out.outlier_threshold_us;
    o.verdict_departs = compare_verdicts && rt.verdict != out.verdict;
    if (!o.span_departs && !o.verdict_departs) continue;
    for (std::size_t n = 0; n < node_count; ++n) {
      const Sample& s = samples[static_cast<std::size_t>(rt.replay) * node_count + n];
      const NodeWaitSummary* w = out.wait_of(static_cast<int>(n));
      if (!s.recorded() || w == nullptr) continue;
      const double excess = s.wait_us() - w->wait_us.median;
      if (o.late_node < 0 || excess > o.excess_wait_us) {
        o.late_node = static_cast<int>(n);
        o.excess_wait_us = excess;
        o.late_by_us = ns_to_us(s.start_ns, rt.begin_ns) - median_offset[n];
      }
      const double slower = s.duration_us() - w->duration_us.median;
      if (o.slow_node < 0 || slower > o.slow_by_us) {
        o.slow_node = static_cast<int>(n);
        o.slow_by_us = slower;
      }
    }
    out.outliers.push_back(o);
  }
}

// Whether the first and last quarter of the present replays agree on span and verdict.
Steadiness steadiness_of(const VariantTimeline& out) {
  std::vector<const ReplayTimeline*> shown;
  std::vector<double> spans;  // the spans of the replays shown, in order
  for (const auto& rt : out.replays) {
    if (!rt.present) continue;
    shown.push_back(&rt);
    spans.push_back(rt.span_us);
  }
  Steadiness st;
  const SpanDrift drift = span_drift(spans);
  st.known = drift.known;
  if (!st.known) return st;
  st.quarter = drift.quarter;
  const auto quarter_verdict = [&](std::size_t from) {
    std::vector<double> q_overlap;
    for (std::size_t i = from; i < from + static_cast<std::size_t>(st.quarter); ++i)
      if (shown[i]->verdict_overlap) q_overlap.push_back(*shown[i]->verdict_overlap);
    return verdict_of(q_overlap.empty() ? std::nullopt : std::optional<double>(median_of(q_overlap)), out.ranks);
  };
  st.first_span_us = drift.first_us;
  st.last_span_us = drift.last_us;
  st.first_verdict = quarter_verdict(0);
  st.last_verdict = quarter_verdict(shown.size() - static_cast<std::size_t>(st.quarter));
  st.threshold_us = drift.allowance_us;
  st.steady = drift.steady() && st.first_verdict == st.last_verdict;
  return st;
}

// Each node's time on the critical path over the present replays, and the path shown.
CriticalPathSummary summarize_critical_path(const VariantRun& v, const PathTimes& on_path,
                                            const std::vector<ReplayTimeline>& replays) {
  CriticalPathSummary cp;
  std::vector<std::pair<double, int>> by_span;
  for (const auto& rt : replays)
    if (rt.present) by_span.emplace_back(rt.span_us, rt.replay);
  std::sort(by_span.begin(), by_span.end());
  if (!by_span.empty() && v.topology_error.empty()) cp.typical_replay = by_span[(by_span.size() - 1) / 2].second;
  const std::size_t present = by_span.size();
  for (const auto& [node, times] : on_path) {
    // A node's times stop at the last replay it was on the path in: 0 for the present replays after.
    std::vector<double> ran = times.first;
    std::vector<double> waited = times.second;
    PathNodeSummary p;
    p.node = node;
    for (std::size_t i = 0; i < ran.size(); ++i) p.replays_on_path += ran[i] + waited[i] > 0 ? 1 : 0;
    ran.resize(present, 0.0);
    waited.resize(present, 0.0);
    p.run_us = summarize(std::move(ran));
    p.wait_us = summarize(std::move(waited));
    cp.nodes.push_back(p);
  }
  std::stable_sort(cp.nodes.begin(), cp.nodes.end(), [](const PathNodeSummary& a, const PathNodeSummary& b) {
    return a.run_us.median + a.wait_us.median > b.run_us.median + b.wait_us.median;
  });
  for (const auto& p : cp.nodes) {
    if (p.run_us.median > cp.speedup_us) {
      cp.speedup_us = p.run_us.median;
      cp.speedup_node = p.node;
    }
  }
  return cp;
}

}  // namespace tpgraph::timeline_detail
