// What only a trace's report says: its first line (clean or not, and why), the rank rule and the
// program's own profiler in the header, and per graph its bodies' runs or, without topology, its
// records per stream. Shared by report.md, the terminal and report.json.
#include <fmt/core.h>

#include <map>
#include <utility>

#include "core/report/report.hpp"
#include "core/report/report_common.hpp"

namespace tpgraph::report_detail {

std::string report_heading(const RunData& run) {
  if (!run.trace) return "# tpgraph run report\n\n";
  const TraceCompleteness& t = *run.trace;
  std::string out = t.line() + "\n\n# tpgraph trace report\n\n";
  for (const auto& line : trace_header_lines(t)) out += fmt::format("- {}\n", line);
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

std::string render_trace_heading(const RunData& run) {
  if (!run.trace) return "";
  std::string out = run.trace->line() + "\n";
  for (const auto& line : report_detail::trace_header_lines(*run.trace)) out += line + "\n";
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
  return out;
}

}  // namespace tpgraph::report_detail
