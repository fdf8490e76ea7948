// What only a trace's report says: its first line (clean or not, and why), the rank rule and the
// program's own profiler in the header, and per graph its bodies' runs or, without topology, its
// records per stream. Shared by report.md, the terminal and report.json.
#include <fmt/core.h>

#include <map>
#include <utility>

#include "core/report/report.hpp"
#include "core/report/report_common.hpp"

namespace tpgraph::report_detail {

std::string report_heading(const RunData& run, const RunAnalysis& analysis) {
  if (!run.trace) return "# tpgraph run report\n\n";
  const TraceCompleteness& t = *run.trace;
  std::string out = t.line() + "\n\n# tpgraph trace report\n\n";
  for (const auto& line : trace_header_lines(t)) out += fmt::format("- {}\n", line);
  if (analysis.tracing_cost)
    for (const auto& line : tracing_cost_lines(*analysis.tracing_cost)) out += fmt::format("- {}\n", line);
  return out + "\n";
}

std::vector<std::string> trace_header_lines(const TraceCompleteness& t) {
  std::vector<std::string> out;
  for (const auto& g : t.no_topology) out.push_back("no topology: " + g);
  for (const auto& f : t.truncated) out.push_back("truncated: " + f);
  for (const auto& g : t.unseen)
    out.push_back("launched from the device: " + g +
                  ": instantiated for device launch; CUPTI records nothing a graph launched from the device runs, "
                  "so those launches are not in this report (its host launches are)");
  for (const auto& p : t.profiler) out.push_back("CUPTI SHARED WITH ANOTHER PROFILER: " + p);
  for (const auto& r : t.recording) out.push_back(r);
  if (!t.rank_rule.empty()) out.push_back(t.rank_rule);
  return out;
}

}  // namespace tpgraph::report_detail

namespace tpgraph {

std::string render_trace_heading(const RunData& run, const RunAnalysis& analysis) {
  if (!run.trace) return "";
  std::string out = run.trace->line() + "\n";
  for (const auto& line : report_detail::trace_header_lines(*run.trace)) out += line + "\n";
  if (analysis.tracing_cost)
    for (const auto& line : report_detail::tracing_cost_lines(*analysis.tracing_cost)) out += line + "\n";
  return out;
}

}  // namespace tpgraph

namespace tpgraph::report_detail {

namespace {

std::string conditional_text(const LayerGraph& g, const ConditionalSummary& c) {
  const std::string& label = g.nodes[static_cast<std::size_t>(c.node)].label;
  if (c.kind == NestedNode::Conditional::while_) {
    if (c.iterations.count == 0) return fmt::format("while {}: no launch recorded", label);
    return fmt::format("while {}: iterations per launch min {:.0f}, median {:.1f}, max {:.0f} ({} launches)", label,
                       c.iterations.min, c.iterations.median, c.iterations.max, c.iterations.count);
  }
  std::string runs;
  for (std::size_t b = 0; b < c.ran_in.size(); ++b)
    runs += fmt::format("{}body {} in {}", runs.empty() ? "" : ", ", b, c.ran_in[b]);
  return fmt::format("{} {}: {} of {} launches{}", c.kind == NestedNode::Conditional::if_ ? "if" : "switch", label,
                     runs.empty() ? "no body ran in any" : "ran " + runs, c.launches,
                     runs.empty() ? "" : " (launches with a record of the graph)");
}

}  // namespace

std::vector<std::string> traced_lines(const VariantRun& vr, const VariantTimeline& v) {
  std::vector<std::string> out;
  for (const auto& note : vr.notes)
    if (note.starts_with("traced ")) out.push_back(note);
  if (!vr.nvtx.empty())
    if (std::string where = nvtx_launches_text(vr.nvtx_launches); !where.empty()) out.push_back(std::move(where));
  if (!v.no_topology.empty())
    out.push_back(
        fmt::format("**no topology: {}** — its records as a timeline per stream (nodes are what ran, in "
                    "order; gap: start minus the end of the stream's previous record); no wait, cause or "
                    "critical path is claimed",
                    v.no_topology));
  std::map<std::uint32_t, std::string> streams;
  for (const auto& s : v.stream_nodes) {
    std::string& line = streams[s.stream];
    if (line.size() > 4000) continue;  // a stream of thousands of nodes: report.json has them all
    const std::string& label = vr.graph.nodes[static_cast<std::size_t>(s.node)].label;
    line += fmt::format("{}{}{} {}", line.empty() ? "" : " → ",
                        s.gap_us.count ? fmt::format("(gap {:.1f}) ", s.gap_us.median) : "", label,
                        s.duration_us.count ? fmt::format("{:.1f} µs", s.duration_us.median) : "not run");
  }
  for (const auto& [stream, line] : streams) out.push_back(fmt::format("stream {} (medians): {}", stream, line));
  for (const auto& c : v.conditionals) out.push_back(conditional_text(vr.graph, c));
  if (v.trace_cost) out.push_back(graph_tracing_cost_text(*v.trace_cost));
  return out;
}

namespace {

std::string calibration_line(const CostCalibration& c) {
  if (!c.measured) return "tracing cost, CUPTI's records: not measured: " + c.not_measured;
  return fmt::format(
      "tracing cost, CUPTI's records: {:.2f} µs per kernel node, calibrated on {} after the run ({} kernels of "
      "{:.1f} µs in a chain, median replay {:.1f} µs with records off and {:.1f} µs on, {} replays each): a "
      "calibration on a chain of short kernels, an upper estimate for nodes in parallel branches, not an A/B of "
      "this program",
      c.per_node_us, c.gpu.empty() ? "its GPU" : c.gpu, c.nodes, c.kernel_us, c.off_us, c.on_us, c.replays);
}

std::string process_line(const ProcessTracingCost& p) {
  if (!p.not_measured.empty())
    return fmt::format("tracing cost, pid {}: tpgraph's own work not measured: {}", p.pid, p.not_measured);
  const std::string callbacks =
      p.us_per_launch ? fmt::format("{:.2f} µs per graph launch ({} launches, host; other callbacks {:.1f} ms in all)",
                                    *p.us_per_launch, p.launches, p.other_callbacks_ms)
                      : fmt::format("no graph launch (other callbacks {:.1f} ms in all, host)", p.other_callbacks_ms);
  const std::string processing =
      p.processing_us_per_record
          ? fmt::format("{:.3f} µs per record ({} records, its own thread)", *p.processing_us_per_record, p.records)
          : std::string("no record");
  // A window's edges and sampled launches switch CUPTI's activity on and off inside the callbacks.
  const std::string switches =
      p.us_per_activity_switch
          ? fmt::format("; CUPTI's activity switched on or off {} times, {:.1f} µs each (inside the callbacks)",
                        p.activity_switches, *p.us_per_activity_switch)
          : std::string();
  return fmt::format("tracing cost, pid {}: tpgraph's callbacks {}, record processing {}{}", p.pid, callbacks,
                     processing, switches);
}

std::string count_text(double v) {
  return v == static_cast<double>(static_cast<long long>(v)) ? fmt::format("{:.0f}", v) : fmt::format("{:.1f}", v);
}

}  // namespace

std::vector<std::string> tracing_cost_lines(const TracingCostAnalysis& cost) {
  if (cost.nothing_measured())
    return {
        fmt::format("tracing cost: not measured: {}; no process file has a cost chunk", cost.calibration.not_measured)};
  std::vector<std::string> out{calibration_line(cost.calibration)};
  for (const auto& p : cost.processes) out.push_back(process_line(p));
  return out;
}

std::string graph_tracing_cost_text(const GraphTracingCost& g) {
  std::string parts;
  if (g.cupti_us)
    parts = fmt::format("{} record-bearing nodes × {:.2f} µs (CUPTI, calibrated on {} after the run)",
                        count_text(g.records_per_launch), g.cupti_us_per_node, g.gpu.empty() ? "its GPU" : g.gpu);
  if (g.tpgraph_us) parts += fmt::format("{}{:.2f} µs (tpgraph, host)", parts.empty() ? "" : " + ", *g.tpgraph_us);
  std::string out = fmt::format("tracing cost ≈ {} per launch", parts);
  if (g.cupti_us) out += fmt::format(" = {:.2f} µs", g.total_us);
  if (g.span_fraction) out += fmt::format(", {:.1f}% of its median span", *g.span_fraction * 100);
  if (!g.cupti_us) out += "; CUPTI's share not measured: " + g.cupti_not_measured;
  if (!g.tpgraph_us) out += "; tpgraph's share not measured: " + g.tpgraph_not_measured;
  return out;
}

}  // namespace tpgraph::report_detail
