// render_diff_dot: B's graph of a variant pair, each node filled by how its duration changed.
#include <fmt/core.h>
#include <fmt/format.h>

#include <iterator>
#include <map>

#include "core/report/diff_report.hpp"
#include "core/report/dot.hpp"

namespace tpgraph {

namespace {

constexpr const char* kSlower = "#ef5350";
constexpr const char* kFaster = "#66bb6a";
constexpr const char* kSame = "#ffffff";
constexpr const char* kAdded = "#64b5f6";
constexpr const char* kUntimed = "#eeeeee";

}  // namespace

std::string render_diff_dot(const RunDiff& d, const VariantDiff& pair, const DiffVariant& b) {
  std::map<std::string, const MetricDiff*> duration;  // by B's label
  for (const auto& m : d.metrics)
    if (m.variant == pair.a && m.metric == Metric::duration) duration[m.subject] = &m;
  std::map<std::string, bool> added;
  std::vector<std::string> removed;
  for (const auto& s : d.structure) {
    if (s.variant != pair.a) continue;
    if (s.kind == StructureKind::node_added) added[s.what] = true;
    if (s.kind == StructureKind::node_removed) removed.push_back(s.what);
  }
  std::string out;
  auto w = std::back_inserter(out);
  std::string title = fmt::format("{} vs {}: B's graph, filled by the change of each node's median duration\n{}",
                                  pair.a, pair.b, d.comparability.line());
  if (!removed.empty()) title += fmt::format("\nremoved (in A only): {}", fmt::join(removed, ", "));
  fmt::format_to(w,
                 "digraph tpgraph_diff {{\n  graph [label=\"{}\", labelloc=t, fontname=\"Helvetica\", fontsize=12];\n",
                 dot_escape(title));
  fmt::format_to(w, "  node [fontname=\"Helvetica\", fontsize=10, shape=box, style=\"rounded,filled\"];\n");
  for (int r = 0; r < b.graph.ranks; ++r) {
    fmt::format_to(w, "  subgraph cluster_rank{} {{\n    label=\"rank {}\"; style=rounded;\n", r, r);
    for (std::size_t i = 0; i < b.nodes.size(); ++i) {
      const DiffNode& n = b.nodes[i];
      if (n.rank != r) continue;
      std::string label = n.label;
      const char* fill = n.timed ? kSame : kUntimed;
      if (added.count(n.label) > 0) {
        fill = kAdded;
        label += "\n(added)";
      } else if (const auto it = duration.find(n.label); it != duration.end()) {
        const MetricDiff& m = *it->second;
        label += fmt::format("\n{:.1f} -> {:.1f} µs ({:+.1f}%)", m.shift.median_a, m.shift.median_b, m.relative * 100);
        if (m.change()) fill = m.shift.shift > 0 ? kSlower : kFaster;
      }
      fmt::format_to(w, "    n{} [label=\"{}\", fillcolor=\"{}\"];\n", i, dot_escape(label), fill);
    }
    out += "  }\n";
  }
  for (const auto& e : b.graph.edges) fmt::format_to(w, "  n{} -> n{};\n", e.from, e.to);
  fmt::format_to(w,
                 "  subgraph cluster_legend {{\n    label=\"legend\"; style=dashed;\n"
                 "    legend_slower [label=\"slower (a change)\", fillcolor=\"{}\"];\n"
                 "    legend_faster [label=\"faster (a change)\", fillcolor=\"{}\"];\n"
                 "    legend_same [label=\"no change\", fillcolor=\"{}\"];\n"
                 "    legend_added [label=\"added in B\", fillcolor=\"{}\"];\n"
                 "    legend_slower -> legend_faster -> legend_same -> legend_added [style=invis];\n  }}\n}}\n",
                 kSlower, kFaster, kSame, kAdded);
  return out;
}

}  // namespace tpgraph
