// What the terminal table, report.md and report.json share: the texts each of them prints the same
// way (outliers, steadiness, waits, the critical path) and the side-by-side summary table. Private
// to the report's renderers; report.hpp is the public face.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

#include "core/report/report.hpp"
#include "core/report/table.hpp"

namespace tpgraph::report_detail {

// The wait and outlier texts print µs at one decimal: a part below this would print as 0.0, so it
// is left out.
inline constexpr double kShownAtLeastUs = 0.05;

// A node's label, "replay start" for -1: what a node waited on.
[[nodiscard]] std::string waited_on(const VariantRun& v, int node);
// A node's typical wait without its label: "waited 732.1 µs: contention ...".
[[nodiscard]] std::string typical_parts_text(const LayerGraph& g, const VariantTimeline& v, const NodeWaitSummary& w);
// What a critical-path link is, without its length: "r0.gate ran (held the GPU while r1.gate waited)".
[[nodiscard]] std::string link_text(const LayerGraph& g, const PathLink& l);
// The outlier rule with its constants and this variant's threshold.
[[nodiscard]] std::string outlier_rule_text(const VariantTimeline& v);
// One outlier replay: its span, verdict, the node that started late and why, the node that ran long.
[[nodiscard]] std::string outlier_text(const VariantRun& run, const VariantTimeline& v, const OutlierReplay& o);
// "steady: median span ... in the first N replays, ... in the last N ...", or why it was not judged.
[[nodiscard]] std::string steadiness_text(const VariantTimeline& v);
// "tokens=4096 experts=288 top_k=8 hidden=4096 ff=640 ranks=2".
[[nodiscard]] std::string geometry_text(const Geometry& g);
// "host: capture 3.1 ms, instantiate 1.2 ms, launch 28.5 µs from idle, 9.8 µs queued"; "" when not measured.
[[nodiscard]] std::string host_costs_text(const VariantRun& vr);
// The side-by-side table both the terminal and report.md show; `waits_as_lines` adds each variant's
// verdict basis, top waits, critical path, outliers, steadiness and host costs as lines below it.
[[nodiscard]] Table summary_table(const RunData& run, const RunAnalysis& analysis, bool waits_as_lines);
// The run's warnings: unclean collection, ranks sharing a GPU, variants that are not steady.
[[nodiscard]] std::vector<std::string> run_banners(const RunData& run, const RunAnalysis& analysis);
// report.md's first lines: a trace's completeness line first (CLEAN or NOT CLEAN, why), then the
// title and trace_header_lines; a run's title alone.
[[nodiscard]] std::string report_heading(const RunData& run, const RunAnalysis& analysis);
// What tracing cost, for a trace's header: CUPTI's calibrated cost per node (or why not measured)
// and each process's own cost; one "not measured" line where nothing was (an older trace folder).
[[nodiscard]] std::vector<std::string> tracing_cost_lines(const TracingCostAnalysis& cost);
// A graph's "tracing cost ≈ k record-bearing nodes × c µs (CUPTI, ...) + A µs (tpgraph, host) per
// launch = D µs, p% of its median span", naming a part not measured and why.
[[nodiscard]] std::string graph_tracing_cost_text(const GraphTracingCost& g);
// Graphs without topology, truncated files, the program's profiler refused CUPTI (or holding it),
// and how processes became ranks.
[[nodiscard]] std::vector<std::string> trace_header_lines(const TraceCompleteness& t);
// A traced graph's own lines: which process each rank is, no topology and its per-stream records,
// while loops' iterations and which if/switch body ran.
[[nodiscard]] std::vector<std::string> traced_lines(const VariantRun& vr, const VariantTimeline& v);
// One geometry and replay count for the whole run, or empty when variants differ.
[[nodiscard]] std::string common_setup(const RunData& run);

}  // namespace tpgraph::report_detail
