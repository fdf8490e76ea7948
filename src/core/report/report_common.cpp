#include "core/report/report_common.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace tpgraph::report_detail {

namespace {

std::string overlap_cell(const VariantTimeline& v) {
  if (v.ranks < 2) return "-";
  if (v.overlap.count == 0) return "no data";
  std::string cell = fmt::format("{:.2f} (min {:.2f})", v.overlap.median, v.overlap.min);
  if (v.busy_overlap.count > 0) cell += fmt::format(" busy {:.2f}", v.busy_overlap.median);
  return cell;
}

std::string verdict_cell(const VariantTimeline& v) {
  if (v.ranks < 2) return std::string(to_string(Verdict::single_rank));
  return fmt::format("{} {}/{} ({})", to_string(v.verdict), v.verdict_counts[static_cast<std::size_t>(v.verdict)],
                     v.replay_count, v.basis == OverlapBasis::mixed ? "per rank" : to_string(v.basis));
}

std::string ratio_cell(const RankSummary& s) {
  if (s.cupti_over_event.count == 0) return "-";
  return fmt::format("{:.3f}{}", s.cupti_over_event.median, s.event_mismatch ? " !" : "");
}

std::string check_cell(const VariantRun& v) {
  if (!v.output_check) return "-";
  if (!v.output_check->passed()) return "FAIL";
  if (v.output_check->vacuous()) return "VACUOUS";
  return "ok";
}

std::string trace_cost_cell(const VariantTimeline& v) {
  return v.tracing_cost ? fmt::format("{:.2f}x", *v.tracing_cost) : "-";
}

std::string host_cell(const VariantTimeline& v) {
  return v.host_launch_us.count > 0 ? fmt::format("{:.1f}", v.host_launch_us.median) : "-";
}

// The nodes that held most of the critical path, over replays.
std::string critical_path_text(const VariantRun& run, const VariantTimeline& v, std::size_t count) {
  const CriticalPathSummary& cp = v.critical_path;
  if (cp.nodes.empty() || v.span_us.count == 0) return "none";
  std::string out;
  for (std::size_t i = 0; i < std::min(count, cp.nodes.size()); ++i) {
    const PathNodeSummary& p = cp.nodes[i];
    const double us = p.run_us.median + p.wait_us.median;
    out += fmt::format("{}{} {:.0f}%", out.empty() ? "" : ", ", node_name(run.graph, p.node),
                       100.0 * us / v.span_us.median);
  }
  if (cp.speedup_node >= 0)
    out += fmt::format("; speed up {} first ({:.1f} µs on the path)", node_name(run.graph, cp.speedup_node),
                       cp.speedup_us);
  return out;
}

// The outlier whose span is furthest from the median; nullptr when there is none.
const OutlierReplay* worst_outlier(const VariantTimeline& v) {
  const OutlierReplay* worst = nullptr;
  for (const auto& o : v.outliers)
    if (!worst || std::abs(o.span_us - v.span_us.median) > std::abs(worst->span_us - v.span_us.median)) worst = &o;
  return worst;
}

}  // namespace

std::string waited_on(const VariantRun& v, int node) { return node_name(v.graph, node); }

std::string typical_parts_text(const LayerGraph& g, const VariantTimeline& v, const NodeWaitSummary& w) {
  int from = w.ready_from;
  if (w.typical_replay >= 0)
    from = v.timings[static_cast<std::size_t>(w.typical_replay)][static_cast<std::size_t>(w.node)].ready_from;
  return wait_parts_text(g, w.typical_wait_us, w.typical, from);
}

std::string link_text(const LayerGraph& g, const PathLink& l) {
  switch (l.kind) {
    case PathLinkKind::run:
      return l.held >= 0
                 ? fmt::format("{} ran (held the GPU while {} waited)", node_name(g, l.node), node_name(g, l.held))
                 : fmt::format("{} ran", node_name(g, l.node));
    case PathLinkKind::idle: return fmt::format("{} waited, its GPU idle", node_name(g, l.node));
    case PathLinkKind::contention:
      return fmt::format("{} waited behind {}", node_name(g, l.node), occupant_name(g, Occupant{l.occupant, true, 0}));
    case PathLinkKind::unexplained: return "unexplained (clocks of two engines disagree)";
  }
  return "";
}

std::string outlier_rule_text(const VariantTimeline& v) {
  return fmt::format(
      "span further than max({:g} x MAD, {:.0f}% of the median) = {:.1f} µs from the median {:.1f} µs, "
      "or a verdict other than the variant's",
      kOutlierMads, kOutlierFraction * 100, v.outlier_threshold_us, v.span_us.median);
}

std::string outlier_text(const VariantRun& run, const VariantTimeline& v, const OutlierReplay& o) {
  std::string out = fmt::format("replay {}: span {:.1f} µs, {}", o.replay, o.span_us, to_string(o.verdict));
  if (o.late_node >= 0) {
    const NodeTiming& t = v.timings[static_cast<std::size_t>(o.replay)][static_cast<std::size_t>(o.late_node)];
    out += fmt::format("; {} started {:+.1f} µs from its usual offset, {}", node_name(run.graph, o.late_node),
                       o.late_by_us, wait_parts_text(run.graph, t.wait_us, t.parts, t.ready_from));
    if (const NodeWaitSummary* w = v.wait_of(o.late_node))
      out += fmt::format(" (its median wait {:.1f})", w->wait_us.median);
  }
  if (o.slow_node >= 0 && o.slow_by_us >= kShownAtLeastUs)
    out += fmt::format("; {} ran {:.1f} µs longer than its median", node_name(run.graph, o.slow_node), o.slow_by_us);
  return out;
}

std::string steadiness_text(const VariantTimeline& v) {
  const Steadiness& st = v.steadiness;
  if (!st.known) return fmt::format("steadiness not judged (fewer than {} replays)", kSteadinessMinReplays);
  return fmt::format(
      "{}: median span {:.1f} µs in the first {} replays, {:.1f} µs in the last {} (allowance {:.1f} µs); "
      "verdict {} then {}",
      st.steady ? "steady" : "NOT STEADY", st.first_span_us, st.quarter, st.last_span_us, st.quarter, st.threshold_us,
      to_string(st.first_verdict), to_string(st.last_verdict));
}

std::string geometry_text(const Geometry& g) {
  return fmt::format("tokens={} experts={} top_k={} hidden={} ff={} ranks={}", g.tokens, g.experts, g.top_k, g.hidden,
                     g.ff, g.ranks);
}

std::string host_costs_text(const VariantRun& vr) {
  const HostCosts& c = vr.costs;
  if (c.capture_ms <= 0 && c.instantiate_ms <= 0 && c.queued_launch_us.empty()) return "";
  std::string out = "host:";
  if (c.capture_ms > 0)
    out += fmt::format(" capture {:.2f} ms, instantiate {:.2f} ms,", c.capture_ms, c.instantiate_ms);
  const Stats idle = summarize(vr.host_launch_us);
  const Stats queued = summarize(c.queued_launch_us);
  if (idle.count) out += fmt::format(" launch {:.1f} µs from idle", idle.median);
  if (queued.count) out += fmt::format("{} {:.1f} µs queued back to back", idle.count ? "," : " launch", queued.median);
  return out;
}

Table summary_table(const RunData& run, const RunAnalysis& analysis, bool waits_as_lines) {
  Table t({"variant", "rank", "GPU", "offset µs", "span µs", "cupti/event", "overlap", "verdict", "launch µs",
           "trace cost", "output", "collection"},
          "llrrrrllrrll");
  for (std::size_t i = 0; i < analysis.variants.size(); ++i) {
    const VariantTimeline& v = analysis.variants[i];
    const VariantRun& vr = run.variants[i];
    for (std::size_t k = 0; k < v.rank_summaries.size(); ++k) {
      const RankSummary& s = v.rank_summaries[k];
      const bool first = k == 0;
      t.row({first ? v.name : "", fmt::format("r{}", s.rank), fmt::format("{}", s.device),
             s.offset_us.count ? fmt::format("{:.1f}", s.offset_us.median) : "-",
             s.span_us.count ? fmt::format("{:.1f}", s.span_us.median) : "-", ratio_cell(s),
             first ? overlap_cell(v) : "", first ? verdict_cell(v) : "", first ? host_cell(v) : "",
             first ? trace_cost_cell(v) : "", first ? check_cell(vr) : "",
             first ? (!v.no_topology.empty() ? "NO TOPOLOGY"
                      : v.health.clean()     ? "clean"
                                             : "NOT CLEAN")
                   : ""});
    }
    if (waits_as_lines) {
      if (v.ranks >= 2) t.line(fmt::format("    verdict: {}", verdict_basis_text(v)));
      for (std::size_t w = 0; w < std::min<std::size_t>(3, v.waits.size()); ++w)
        t.line(
            fmt::format("    {} {}", w == 0 ? "top waits:" : "          ", typical_wait_text(vr.graph, v, v.waits[w])));
      if (v.no_topology.empty()) t.line(fmt::format("    critical path: {}", critical_path_text(vr, v, 4)));
      if (vr.graph.traced())
        for (const auto& line : traced_lines(vr, v))
          if (!line.starts_with("traced ")) t.line("    " + line);
      const OutlierReplay* worst = worst_outlier(v);
      t.line(fmt::format("    outliers: {} of {} replays{}{}", v.outliers.size(), v.replay_count,
                         worst ? "; furthest: " : "", worst ? outlier_text(vr, v, *worst) : ""));
      t.line(fmt::format("    {}", steadiness_text(v)));
      if (const std::string costs = host_costs_text(vr); !costs.empty()) t.line(fmt::format("    {}", costs));
    }
  }
  return t;
}

std::vector<std::string> run_banners(const RunData& run, const RunAnalysis& analysis) {
  std::vector<std::string> lines;
  for (const auto& v : analysis.variants) {
    const std::string b = collection_banner(v);
    if (!b.empty()) lines.push_back(fmt::format("{} [{}]", b, v.name));
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < analysis.variants.size(); ++i) {
    const std::string note = shared_gpu_note(run.env, analysis.variants[i]);
    if (!note.empty() && seen.insert(note).second) lines.push_back("NOTE: " + note);
  }
  for (const auto& v : analysis.variants)
    if (v.steadiness.known && !v.steadiness.steady)
      lines.push_back(fmt::format("NOTE: {} is {} — its early and late replays differ, so its medians describe neither",
                                  v.name, steadiness_text(v)));
  return lines;
}

std::string common_setup(const RunData& run) {
  if (run.variants.empty()) return "no variants";
  if (std::all_of(run.variants.begin(), run.variants.end(), [](const VariantRun& v) { return v.graph.traced(); }))
    return fmt::format("traced program · {} graph{} launched", run.variants.size(),
                       run.variants.size() == 1 ? "" : "s");
  const Scenario& s0 = run.variants.front().scenario;
  for (const auto& v : run.variants)
    if (!(v.scenario.geometry == s0.geometry) || v.scenario.replays != s0.replays) return "";
  return fmt::format("{} · {} replays ({} warm-up dropped)", geometry_text(s0.geometry), s0.replays,
                     warmup_text(s0.warmup));
}

}  // namespace tpgraph::report_detail
