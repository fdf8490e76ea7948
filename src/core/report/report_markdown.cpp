// report.md: the terminal table's figures with each variant's ranks, overlap, waits, critical path,
// outliers and costs in full.
#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include "core/report/report.hpp"
#include "core/report/report_common.hpp"
#include "core/report/table.hpp"

namespace tpgraph {

using namespace report_detail;

namespace {

std::string version_text(int v) {
  if (v <= 0) return "unknown";
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

// The variant's heading, description, banners and what it is.
void variant_heading(std::string& out, const RunData& run, const VariantRun& vr, const VariantTimeline& v,
                     const std::string& folder) {
  auto it = std::back_inserter(out);
  const Scenario& s = vr.scenario;
  fmt::format_to(it, "## {}\n\n", v.name);
  if (!s.description.empty()) fmt::format_to(it, "{}\n\n", s.description);
  const std::string banner = collection_banner(v);
  if (!banner.empty()) fmt::format_to(it, "**{}**\n\n", banner);
  const std::string shared = shared_gpu_note(run.env, v);
  if (!shared.empty()) fmt::format_to(it, "**NOTE: {}.**\n\n", shared);
  if (vr.graph.traced()) {
    fmt::format_to(it, "- {} launches analysed; outputs in `{}/`\n", v.replay_count, folder);
    for (const auto& line : traced_lines(vr, v)) fmt::format_to(it, "- {}\n", line);
    fmt::format_to(it, "\n");
  } else
    fmt::format_to(it,
                   "- {}\n- peer copy {}, copy rows {}, join {}, layers {}, root busy {}, alloc {}, issue {}, "
                   "layout {}, weights {}\n- {} replays analysed ({} warm-up dropped); outputs in `{}/`\n\n",
                   geometry_text(s.geometry), to_string(s.peer_copy),
                   s.copy_rows ? fmt::format("{}", *s.copy_rows) : "all", to_string(s.join), s.layers, s.root_busy,
                   to_string(s.alloc), to_string(s.issue), to_string(s.layout), to_string(s.weights), v.replay_count,
                   warmup_text(s.warmup), folder);
}

void ranks_section(std::string& out, const RunData& run, const VariantTimeline& v) {
  auto it = std::back_inserter(out);
  fmt::format_to(it, "### Ranks (µs: min / median / p90)\n\n");
  Table ranks({"rank", "GPU", "start offset", "span", "event span", "cupti/event", "event - cupti"}, "llrrrrr");
  const auto triple = [](const Stats& st, int decimals) {
    if (st.count == 0) return std::string("-");
    return fmt::format("{:.{}f} / {:.{}f} / {:.{}f}", st.min, decimals, st.median, decimals, st.p90, decimals);
  };
  for (const auto& rs : v.rank_summaries) {
    ranks.row({fmt::format("r{}", rs.rank), device_label(run.env, rs.device), triple(rs.offset_us, 1),
               triple(rs.span_us, 1), triple(rs.event_span_us, 1),
               rs.cupti_over_event.count
                   ? fmt::format(
                         "{:.4f}{}", rs.cupti_over_event.median,
                         rs.event_mismatch ? fmt::format(" (off by more than {:.0f}%)", kEventSpanTolerance * 100) : "")
                   : "-",
               triple(rs.event_minus_cupti_us, 1)});
  }
  out += ranks.markdown();
  fmt::format_to(it,
                 "\nThe event span runs from the rank's begin event-record node to its end node; CUPTI sees "
                 "only kernels and copies, so the event span also holds the gaps before the first and after "
                 "the last of them (the \"event - cupti\" column).\n\n");
}

void overlap_section(std::string& out, const VariantTimeline& v) {
  auto it = std::back_inserter(out);
  if (v.ranks >= 2) {
    fmt::format_to(it, "### Overlap\n\n");
    fmt::format_to(it, "Verdict {}.\n\n", verdict_basis_text(v));
    const auto stats_line = [&](std::string_view name, const Stats& st) {
      if (st.count == 0) return fmt::format("- {}: not measured\n", name);
      return fmt::format("- {}: median {:.4f}, min {:.4f}, p90 {:.4f}, max {:.4f}\n", name, st.median, st.min, st.p90,
                         st.max);
    };
    out += stats_line("window overlap (time the ranks' windows share / the shorter window)", v.overlap);
    out += stats_line("busy overlap (time both ranks had a kernel or copy running / the less busy rank's busy time)",
                      v.busy_overlap);
    fmt::format_to(it, "- replays: {} OVERLAPPED, {} PARTIAL, {} SERIALIZED, {} without data\n\n",
                   v.verdict_counts[static_cast<std::size_t>(Verdict::overlapped)],
                   v.verdict_counts[static_cast<std::size_t>(Verdict::partial)],
                   v.verdict_counts[static_cast<std::size_t>(Verdict::serialized)],
                   v.verdict_counts[static_cast<std::size_t>(Verdict::no_data)]);
    if (v.busy_overlap.count > 0 && v.overlap.count > 0 && v.busy_verdict != v.window_verdict)
      fmt::format_to(it,
                     "The windows overlap ({:.2f}) more than the work did ({:.2f}): the ranks' kernels took turns "
                     "for much of the time their windows shared.\n\n",
                     v.overlap.median, v.busy_overlap.median);
    if (v.ranks > 2) {
      for (std::size_t k = 1; k < v.overlap_vs_root.size(); ++k)
        fmt::format_to(it, "- r{} vs r0: window median {:.4f}, min {:.4f}\n", k, v.overlap_vs_root[k].median,
                       v.overlap_vs_root[k].min);
      out += "\n";
    }
  }
}

void waits_section(std::string& out, const VariantRun& vr, const VariantTimeline& v) {
  auto it = std::back_inserter(out);
  fmt::format_to(it, "### Largest waits (µs)\n\n");
  fmt::format_to(it,
                 "Wait = start - the latest end of what the node depends on; it splits into contention (its GPU ran "
                 "other recorded work; the occupants named) and idle (nothing recorded ran). The breakdown is the "
                 "node's median replay's, so its parts add up to that replay's wait. Arrival: where the latest "
                 "predecessor is on another rank, how much later it ended than the node's own chain.\n\n");
  Table waits({"node", "rank", "kind", "waited on", "median", "p90", "max", "why (median replay)"}, "llllrrrl");
  for (std::size_t w = 0; w < std::min<std::size_t>(10, v.waits.size()); ++w) {
    const NodeWaitSummary& nw = v.waits[w];
    const Node& n = vr.graph.nodes[static_cast<std::size_t>(nw.node)];
    waits.row({n.label, fmt::format("r{}", n.rank), std::string(to_string(n.kind)), waited_on(vr, nw.ready_from),
               fmt::format("{:.1f}", nw.wait_us.median), fmt::format("{:.1f}", nw.wait_us.p90),
               fmt::format("{:.1f}", nw.wait_us.max),
               fmt::format("replay {}: {}", nw.typical_replay, typical_parts_text(vr.graph, v, nw))});
  }
  out += waits.markdown();
  out += "\n";
}

void critical_path_section(std::string& out, const VariantRun& vr, const VariantTimeline& v) {
  auto it = std::back_inserter(out);
  const CriticalPathSummary& cp = v.critical_path;
  fmt::format_to(it, "### Critical path\n\n");
  if (cp.typical_replay >= 0) {
    const ReplayTimeline& rt = v.replays[static_cast<std::size_t>(cp.typical_replay)];
    fmt::format_to(it,
                   "The chain of runs and waits that set each replay's span, walked back from the node that ended "
                   "last: through the predecessor that made a node ready, or through the node that held the GPU "
                   "while it waited (contention). Replay {} (median span {:.1f} µs):\n\n",
                   cp.typical_replay, rt.span_us);
    Table path({"#", "link", "µs", "share"}, "rlrr");
    for (std::size_t li = 0; li < rt.critical_path.size(); ++li) {
      const PathLink& l = rt.critical_path[li];
      path.row({fmt::format("{}", li + 1), link_text(vr.graph, l), fmt::format("{:.1f}", l.us),
                fmt::format("{:.1f}%", rt.span_us > 0 ? 100.0 * l.us / rt.span_us : 0.0)});
    }
    out += path.markdown();
    fmt::format_to(it, "\nOver all replays (median µs on the path; 0 in replays where the node is off it):\n\n");
    Table nodes({"node", "on the path", "ran", "waited", "share of the median span"}, "lrrrr");
    for (std::size_t ni = 0; ni < std::min<std::size_t>(10, cp.nodes.size()); ++ni) {
      const PathNodeSummary& p = cp.nodes[ni];
      nodes.row(
          {node_name(vr.graph, p.node), fmt::format("{}/{}", p.replays_on_path, v.span_us.count),
           fmt::format("{:.1f}", p.run_us.median), fmt::format("{:.1f}", p.wait_us.median),
           fmt::format("{:.1f}%",
                       v.span_us.median > 0 ? 100.0 * (p.run_us.median + p.wait_us.median) / v.span_us.median : 0.0)});
    }
    out += nodes.markdown();
    if (cp.speedup_node >= 0)
      fmt::format_to(it,
                     "\nSpeed up **{}** first: it ran {:.1f} µs on the critical path (median), the most of any "
                     "node; cutting it shortens the span by up to that while it stays on the path.\n\n",
                     node_name(vr.graph, cp.speedup_node), cp.speedup_us);
    else out += "\n";
  } else {
    fmt::format_to(it, "{}\n\n", v.no_topology.empty() ? "No replay has records." : "None: the topology is unknown.");
  }
}

void outliers_section(std::string& out, const VariantRun& vr, const VariantTimeline& v) {
  auto it = std::back_inserter(out);
  fmt::format_to(it, "### Outliers and steadiness\n\n");
  fmt::format_to(it, "Rule: {}. Median span {:.1f} µs, MAD {:.1f} µs.\n\n", outlier_rule_text(v), v.span_us.median,
                 v.span_mad_us);
  if (v.outliers.empty()) {
    fmt::format_to(it, "No outlier among {} replays.\n\n", v.span_us.count);
  } else {
    constexpr std::size_t kListed = 20;
    for (std::size_t o = 0; o < std::min(kListed, v.outliers.size()); ++o)
      fmt::format_to(it, "- {}\n", outlier_text(vr, v, v.outliers[o]));
    if (v.outliers.size() > kListed)
      fmt::format_to(it, "- ... and {} more (report.json lists every one)\n", v.outliers.size() - kListed);
    fmt::format_to(it, "\n`tpgraph analyze RUN --replay N` prints one replay in full.\n\n");
  }
  fmt::format_to(it, "Steadiness: {}.\n\n", steadiness_text(v));
}

void costs_section(std::string& out, const VariantRun& vr, const VariantTimeline& v) {
  auto it = std::back_inserter(out);
  fmt::format_to(it, "### Costs and checks\n\n");
  if (v.host_launch_us.count)
    fmt::format_to(it, "- host launch call: median {:.1f} µs, p90 {:.1f} µs, max {:.1f} µs\n", v.host_launch_us.median,
                   v.host_launch_us.p90, v.host_launch_us.max);
  else fmt::format_to(it, "- host launch call: not measured\n");
  if (const std::string costs = host_costs_text(vr); !costs.empty()) fmt::format_to(it, "- {}\n", costs);
  if (v.tracing_cost)
    fmt::format_to(it, "- CUPTI tracing: {:.1f} µs per replay traced vs {:.1f} µs untraced ({:.3f}x)\n",
                   vr.replay_us_traced, vr.replay_us_untraced, *v.tracing_cost);
  else if (v.trace_cost)  // a trace: no untraced run to compare with, its cost is itemised instead
    fmt::format_to(it, "- CUPTI tracing cost: no untraced run of a traced program; itemised above (tracing cost ≈)\n");
  else fmt::format_to(it, "- CUPTI tracing cost: not measured\n");
  fmt::format_to(it, "- collection: {} ({} records)\n",
                 v.health.clean() ? "clean" : "NOT CLEAN: " + v.health.problems(), v.health.records);
  if (vr.output_check) {
    const Comparison& c = *vr.output_check;
    fmt::format_to(
        it,
        "- output vs CPU reference: {} ({} values, {} mismatches, {} NaN, max rel err {:.3g}, tolerance {:.3g}){}\n",
        c.passed() ? "passed" : "FAILED", c.compared, c.mismatches, c.nan_count, c.max_rel_err, c.tolerance,
        c.vacuous() ? " — VACUOUS: the output is all zeros" : "");
  } else {
    fmt::format_to(it, "- output vs CPU reference: not checked\n");
  }
  // A traced graph's "traced ..." lines head its section already (traced_lines).
  for (const auto& n : vr.notes)
    if (!vr.graph.traced() || !n.starts_with("traced ")) fmt::format_to(it, "- note: {}\n", n);
}

void environment_section(std::string& out, const RunEnvironment& env) {
  auto it = std::back_inserter(out);
  fmt::format_to(it, "## Environment\n\n");
  fmt::format_to(it, "- tpgraph {} (git {})\n- host {}, started {}\n", env.tool_version, env.git_revision,
                 env.hostname.empty() ? "unknown" : env.hostname, env.started_at);
  fmt::format_to(it, "- CUDA driver {}, runtime {}, CUPTI API {}\n", version_text(env.driver_version),
                 version_text(env.runtime_version), env.cupti_version);
  for (const auto& d : env.devices)
    fmt::format_to(it, "- {} ({} SMs, {}, PCI {})\n", device_label(env, d.ordinal), d.sm_count,
                   format_bytes(d.memory_bytes), d.pci_bus_id);
}

// A trace of many graphs (a server captures one per batch size, a compiled model one per piece):
// the kFullGraphs that took the most GPU time in full, in that order, and the rest in one table. A
// run of the layer, or a trace of few graphs, shows every variant in full in its own order.
constexpr std::size_t kFullGraphs = 8;

// Each variant's GPU time: the sum of its records' durations, µs.
std::vector<double> gpu_times_us(const RunData& run) {
  std::vector<double> out;
  for (const auto& vr : run.variants) {
    double ns = 0;
    for (const auto& a : vr.records)
      if (a.end_ns > a.start_ns) ns += static_cast<double>(a.end_ns - a.start_ns);
    out.push_back(ns / 1000.0);
  }
  return out;
}

std::vector<std::size_t> variants_in_full(const RunData& run, const std::vector<double>& gpu) {
  std::vector<std::size_t> order(gpu.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (!run.trace || order.size() <= kFullGraphs) return order;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return gpu[a] > gpu[b]; });
  order.resize(kFullGraphs);
  return order;
}

std::string other_graphs_section(const RunData& run, const RunAnalysis& analysis, const std::vector<double>& gpu,
                                 const std::vector<std::size_t>& in_full, const std::vector<std::string>& folders) {
  std::vector<std::size_t> rest;
  for (std::size_t i = 0; i < gpu.size(); ++i)
    if (std::find(in_full.begin(), in_full.end(), i) == in_full.end()) rest.push_back(i);
  std::stable_sort(rest.begin(), rest.end(), [&](std::size_t a, std::size_t b) { return gpu[a] > gpu[b]; });
  double all = 0;
  for (const double g : gpu) all += g;
  std::string out = fmt::format(
      "## The other {} graphs\n\nThe {} graphs that took the most GPU time are shown in full below, in that order; "
      "these took the rest (each in full in its folder's trace.json, timeline.svg and graph.dot, and in "
      "report.json).\n\n",
      rest.size(), in_full.size());
  Table t({"graph", "nodes", "launches", "GPU time µs", "share", "median span µs", "collection", "folder"}, "lrrrrrll");
  for (const std::size_t i : rest) {
    const VariantTimeline& v = analysis.variants[i];
    t.row({v.name, fmt::format("{}", run.variants[i].graph.nodes.size()), fmt::format("{}", v.replay_count),
           fmt::format("{:.1f}", gpu[i]), fmt::format("{:.1f}%", all > 0 ? 100.0 * gpu[i] / all : 0.0),
           v.span_us.count ? fmt::format("{:.1f}", v.span_us.median) : "-", v.health.clean() ? "clean" : "NOT CLEAN",
           "`" + folders[i] + "/`"});
  }
  return out + t.markdown() + "\n";
}

}  // namespace

std::string render_report_markdown(const RunData& run, const RunAnalysis& analysis) {
  std::string out;
  auto it = std::back_inserter(out);
  const auto folders = variant_folder_names(run);
  out += report_heading(run, analysis);
  for (const auto& line : run_banners(run, analysis)) fmt::format_to(it, "**{}**\n\n", line);
  const std::string setup = common_setup(run);
  if (!setup.empty()) fmt::format_to(it, "{}\n\n", setup);
  fmt::format_to(it, "{}.\n\n", verdict_thresholds_text());

  fmt::format_to(it, "## Variants side by side\n\n");
  fmt::format_to(
      it,
      "Medians over replays. Overlap: window overlap, median (min) over replays; busy: the busy "
      "overlap (kernels and copies of both ranks running at the same time). cupti/event: CUPTI span over the "
      "event-node span (`!` beyond {:.0f}%). Launch: host time of one launch call.\n\n",
      kEventSpanTolerance * 100);
  out += summary_table(run, analysis, false).markdown();
  out += "\n";

  const std::vector<double> gpu = gpu_times_us(run);
  const std::vector<std::size_t> in_full = variants_in_full(run, gpu);
  if (in_full.size() < analysis.variants.size()) out += other_graphs_section(run, analysis, gpu, in_full, folders);
  for (const std::size_t i : in_full) {
    const VariantTimeline& v = analysis.variants[i];
    const VariantRun& vr = run.variants[i];
    variant_heading(out, run, vr, v, folders[i]);
    ranks_section(out, run, v);
    overlap_section(out, v);
    waits_section(out, vr, v);
    critical_path_section(out, vr, v);
    outliers_section(out, vr, v);
    costs_section(out, vr, v);
    out += "\n";
  }
  environment_section(out, run.env);
  return out;
}

}  // namespace tpgraph
