// The terminal table and `analyze --replay N`: plain text for a terminal.
#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <stdexcept>

#include "core/base/error.hpp"
#include "core/report/report.hpp"
#include "core/report/report_common.hpp"
#include "core/report/table.hpp"

namespace tpgraph {

using namespace report_detail;

std::string render_terminal_table(const RunData& run, const RunAnalysis& analysis) {
  std::string out;
  auto it = std::back_inserter(out);
  const std::string setup = common_setup(run);
  fmt::format_to(it, "tpgraph {} · {} variant{}{}{}\n", run.env.tool_version, run.variants.size(),
                 run.variants.size() == 1 ? "" : "s", setup.empty() ? "" : " · ", setup);
  for (const auto& line : run_banners(run, analysis)) fmt::format_to(it, "{}\n", line);
  fmt::format_to(it, "{}\n", verdict_thresholds_text());
  fmt::format_to(it,
                 "medians over replays; overlap: window overlap median (min), busy: kernels and copies running "
                 "at the same time; cupti/event: CUPTI span / event-node span "
                 "(! beyond {:.0f}%); wait: start - latest end of what the graph says it depends on, split into "
                 "contention (its GPU ran other work: who) and idle, from the node's median replay; critical path: "
                 "share of the median span\n\n",
                 kEventSpanTolerance * 100);
  out += summary_table(run, analysis, true).text();
  return out;
}

std::string render_replay_detail(const RunData& run, const RunAnalysis& analysis, int replay) {
  int replays = 0;
  for (const auto& v : analysis.variants) replays = std::max(replays, v.replay_count);
  if (replay < 0 || replay >= replays)
    throw InputError(fmt::format("--replay {}: not a replay of this run (it has replays 0..{})", replay, replays - 1));
  std::string out;
  auto it = std::back_inserter(out);
  for (std::size_t i = 0; i < analysis.variants.size(); ++i) {
    const VariantTimeline& v = analysis.variants[i];
    const LayerGraph& g = run.variants[i].graph;
    fmt::format_to(it, "{} · replay {}", v.name, replay);
    if (replay >= v.replay_count || !v.replays[static_cast<std::size_t>(replay)].present) {
      fmt::format_to(it, ": no records\n\n");
      continue;
    }
    if (!v.has_detail(replay) && !g.nodes.empty())
      throw std::logic_error(
          fmt::format("replay {} was analysed without its detail (AnalysisOptions::replay)", replay));
    const ReplayTimeline& rt = v.replays[static_cast<std::size_t>(replay)];
    fmt::format_to(it, " · span {:.1f} µs (median {:.1f})", rt.span_us, v.span_us.median);
    const auto outlier =
        std::find_if(v.outliers.begin(), v.outliers.end(), [&](const OutlierReplay& o) { return o.replay == replay; });
    fmt::format_to(it, "{}\n", outlier != v.outliers.end() ? " · OUTLIER" : "");
    if (v.ranks >= 2) {
      const auto fraction = [](const std::optional<double>& x) {
        return x ? fmt::format("{:.4f}", *x) : std::string("-");
      };
      fmt::format_to(it, "verdict {} on {} overlap {} (window {}, busy {}; variant: {})\n", to_string(rt.verdict),
                     to_string(v.basis), fraction(rt.verdict_overlap), fraction(rt.overlap), fraction(rt.busy_overlap),
                     to_string(v.verdict));
    }
    for (const auto& w : rt.ranks) {
      if (!w.present) {
        fmt::format_to(it, "r{}: no records\n", w.rank);
        continue;
      }
      fmt::format_to(it, "r{}: offset {:.1f} µs, span {:.1f} µs, {} records\n", w.rank, w.offset_us, w.span_us, w.ops);
    }
    const auto& nodes = v.timings[static_cast<std::size_t>(replay)];
    std::vector<int> order;
    for (std::size_t n = 0; n < nodes.size(); ++n)
      if (nodes[n].recorded) order.push_back(static_cast<int>(n));
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      return nodes[static_cast<std::size_t>(a)].start_ns < nodes[static_cast<std::size_t>(b)].start_ns;
    });
    Table table({"node", "rank", "start µs", "duration µs", "waited on", "its wait and why (the node's median wait)"},
                "llrrll");
    for (const int n : order) {
      const NodeTiming& t = nodes[static_cast<std::size_t>(n)];
      const NodeWaitSummary* w = v.wait_of(n);
      table.row({node_name(g, n), fmt::format("r{}", g.nodes[static_cast<std::size_t>(n)].rank),
                 fmt::format("{:.1f}", static_cast<double>(t.start_ns - rt.begin_ns) / 1000.0),
                 fmt::format("{:.1f}", static_cast<double>(t.end_ns - t.start_ns) / 1000.0), node_name(g, t.ready_from),
                 wait_parts_text(g, t.wait_us, t.parts, t.ready_from) +
                     (w ? fmt::format(" (median {:.1f})", w->wait_us.median) : "")});
    }
    out += table.text();
    fmt::format_to(it, "critical path ({} links, adding up to the span):\n", rt.critical_path.size());
    for (const auto& l : rt.critical_path)
      fmt::format_to(it, "  {:8.1f} µs {:5.1f}%  {}\n", l.us, rt.span_us > 0 ? 100.0 * l.us / rt.span_us : 0.0,
                     link_text(g, l));
    out += "\n";
  }
  return out;
}

}  // namespace tpgraph
