#include "core/report/dot.hpp"

#include <fmt/core.h>

#include <array>
#include <iterator>

namespace tpgraph {
namespace {

struct KindStyle {
  NodeKind kind;
  const char* fill;
  const char* font;
  const char* legend;
};

// Compute in blues and greens, data movement in orange, memory in yellow, the root's extra work in
// grey: the eye finds copies and waits first, which is what the picture is for.
constexpr std::array kKindStyles{
    KindStyle{NodeKind::busy, "#bdbdbd", "black", "root busy (kernel)"},
    KindStyle{NodeKind::quantize, "#aec7e8", "black", "quantize (kernel)"},
    KindStyle{NodeKind::gemm, "#1f77b4", "white", "grouped GEMM (kernel)"},
    KindStyle{NodeKind::swiglu, "#98df8a", "black", "swiglu (kernel)"},
    KindStyle{NodeKind::combine, "#2ca02c", "white", "combine (kernel)"},
    KindStyle{NodeKind::reduce, "#9467bd", "white", "join reduce (kernel)"},
    KindStyle{NodeKind::copy, "#ff7f0e", "black", "copy (memcpy)"},
    KindStyle{NodeKind::alloc, "#ffdd71", "black", "alloc (mem_alloc)"},
    KindStyle{NodeKind::free_mem, "#fff2b3", "black", "free (mem_free)"},
    KindStyle{NodeKind::event, "white", "black", "span event (event_record)"},
    KindStyle{NodeKind::kernel, "#c6dbef", "black", "kernel"},
    KindStyle{NodeKind::memset, "#fdd0a2", "black", "memset"},
    KindStyle{NodeKind::other, "white", "black", "other (no record)"},
};

const KindStyle& style_of(NodeKind k) {
  for (const auto& s : kKindStyles)
    if (s.kind == k) return s;
  return kKindStyles.front();
}

const char* shape_of(CudaNodeType t) {
  switch (t) {
    case CudaNodeType::kernel: return "box";
    case CudaNodeType::memcpy: return "parallelogram";
    case CudaNodeType::mem_alloc: return "invtrapezium";
    case CudaNodeType::mem_free: return "trapezium";
    case CudaNodeType::event_record: return "ellipse";
    case CudaNodeType::memset: return "parallelogram";
    case CudaNodeType::other: return "ellipse";
  }
  return "box";
}

constexpr const char* kCrossRankColor = "#d62728";

// ColorBrewer's YlOrRd, light to dark, one per kDotHeatSteps entry.
constexpr std::array<const char*, 6> kHeatFill{"#ffffb2", "#fed976", "#feb24c", "#fd8d3c", "#f03b20", "#bd0026"};

std::size_t heat_step(double share) {
  std::size_t step = 0;
  for (std::size_t i = 0; i < kDotHeatSteps.size(); ++i)
    if (share >= kDotHeatSteps[i]) step = i;
  return step;
}

void write_heat_legend(std::string& out, double span_us) {
  out += "  subgraph cluster_legend {\n    label=\"legend\"; style=\"rounded,dashed\"; color=\"#9e9e9e\";\n";
  for (std::size_t i = 0; i < kHeatFill.size(); ++i) {
    const std::string text =
        i + 1 < kDotHeatSteps.size()
            ? fmt::format("ran {:g}-{:g}% of the span", kDotHeatSteps[i] * 100, kDotHeatSteps[i + 1] * 100)
            : fmt::format("ran {:g}% or more of the span", kDotHeatSteps[i] * 100);
    fmt::format_to(std::back_inserter(out),
                   "    legend_heat{} [label=\"{}\", shape=box, style=\"rounded,filled\", fillcolor=\"{}\", "
                   "fontcolor=\"{}\"];\n",
                   i, dot_escape(text), kHeatFill[i], i >= 4 ? "white" : "black");
  }
  fmt::format_to(std::back_inserter(out),
                 "    legend_wait [label=\"{}\", shape=box, style=\"rounded,filled\", fillcolor=\"white\", "
                 "color=\"{}\", penwidth=3];\n",
                 dot_escape(fmt::format("waited {:g}% of the span or more\n(median span {:.1f} µs)",
                                        kDotWaitShareMarked * 100, span_us)),
                 kCrossRankColor);
  for (std::size_t i = 0; i + 1 < kHeatFill.size(); ++i)
    fmt::format_to(std::back_inserter(out), "    legend_heat{} -> legend_heat{} [style=invis];\n", i, i + 1);
  fmt::format_to(std::back_inserter(out), "    legend_heat{} -> legend_wait [style=invis];\n", kHeatFill.size() - 1);
  out += "  }\n";
}

std::string si(double v, std::string_view unit) {
  static constexpr std::array<const char*, 5> kPrefixes{"", "K", "M", "G", "T"};
  std::size_t i = 0;
  while (v >= 1000.0 && i + 1 < kPrefixes.size()) {
    v /= 1000.0;
    ++i;
  }
  return fmt::format("{:.3g} {}{}", v, kPrefixes[i], unit);
}

std::string node_detail(const Node& n) {
  switch (n.kind) {
    case NodeKind::event:
    case NodeKind::other: return {};
    case NodeKind::kernel: return n.name;
    case NodeKind::memset:
    case NodeKind::copy:
    case NodeKind::alloc:
    case NodeKind::free_mem: return format_bytes(n.bytes);
    default: return si(n.flops, "FLOP") + ", " + format_bytes(n.bytes);
  }
}

void node_attrs(std::string& out, const std::string& label, NodeKind kind, CudaNodeType type) {
  const auto& st = style_of(kind);
  fmt::format_to(std::back_inserter(out), "label=\"{}\", shape={}, style=\"{}\", fillcolor=\"{}\", fontcolor=\"{}\"",
                 label, shape_of(type), type == CudaNodeType::kernel ? "rounded,filled" : "filled", st.fill, st.font);
}

void write_legend(std::string& out) {
  out += "  subgraph cluster_legend {\n    label=\"legend\"; style=\"rounded,dashed\"; color=\"#9e9e9e\";\n";
  for (const auto& st : kKindStyles) {
    fmt::format_to(std::back_inserter(out), "    legend_{} [", st.kind);
    node_attrs(out, dot_escape(st.legend), st.kind, cuda_node_type(st.kind));
    out += "];\n";
  }
  // Chain them so the legend lays out as one column, and show the three edge styles on it.
  for (std::size_t i = 0; i + 1 < kKindStyles.size(); ++i) {
    const auto from = to_string(kKindStyles[i].kind);
    const auto to = to_string(kKindStyles[i + 1].kind);
    if (i == 0) {
      fmt::format_to(std::back_inserter(out), "    legend_{} -> legend_{} [label=\"same stream\"];\n", from, to);
    } else if (i == 1) {
      fmt::format_to(std::back_inserter(out),
                     "    legend_{} -> legend_{} [label=\"cross-rank fork\", color=\"{}\", penwidth=2.5];\n", from, to,
                     kCrossRankColor);
    } else if (i == 2) {
      fmt::format_to(std::back_inserter(out),
                     "    legend_{} -> legend_{} [label=\"cross-rank join\", color=\"{}\", penwidth=2.5, "
                     "style=dashed];\n",
                     from, to, kCrossRankColor);
    } else {
      fmt::format_to(std::back_inserter(out), "    legend_{} -> legend_{} [style=invis];\n", from, to);
    }
  }
  out += "  }\n";
}

}  // namespace

std::string dot_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': break;
      default: out += c;
    }
  }
  return out;
}

std::string layer_graph_dot(const LayerGraph& graph, const Scenario& s, const VariantTimeline* timeline) {
  const double span_us = timeline && timeline->span_us.count > 0 ? timeline->span_us.median : 0.0;
  const bool timed = span_us > 0;
  std::string out;
  auto w = std::back_inserter(out);
  const auto& g = s.geometry;
  std::string title = fmt::format(
      "{}: {}\nexperts {}, top-k {}, hidden {}, ff {}, tokens {}, ranks {}, layers {} | peer copy {}, "
      "join {}, root busy {}, alloc {}, issue {}",
      s.name, s.description, g.experts, g.top_k, g.hidden, g.ff, g.tokens, g.ranks, s.layers, s.peer_copy, s.join,
      s.root_busy, s.alloc, s.issue);
  if (timed)
    title += fmt::format(
        "\nmedian span {:.1f} µs over {} replays; fill: share of the span a node ran; red border: "
        "median wait {:g}% of the span or more",
        span_us, timeline->span_us.count, kDotWaitShareMarked * 100);
  fmt::format_to(w, "digraph tpgraph {{\n");
  fmt::format_to(w,
                 "  graph [label=\"{}\", labelloc=t, fontname=\"Helvetica\", fontsize=12, newrank=true, "
                 "nodesep=0.3, ranksep=0.35];\n",
                 dot_escape(title));
  fmt::format_to(w, "  node [fontname=\"Helvetica\", fontsize=10, color=\"#444444\"];\n");
  fmt::format_to(w, "  edge [color=\"#7f7f7f\", arrowsize=0.7, fontname=\"Helvetica\", fontsize=9];\n");

  for (int r = 0; r < graph.ranks; ++r) {
    const auto ids = graph.stream_nodes(r);
    const int device = ids.empty() ? 0 : graph.nodes[static_cast<std::size_t>(ids.front())].device;
    fmt::format_to(w, "  subgraph cluster_rank{} {{\n", r);
    fmt::format_to(w, "    label=\"{}\"; style=rounded; color=\"#636363\";\n",
                   dot_escape(fmt::format("rank {}{} on GPU {}, stream {}", r, r == 0 ? " (root)" : "", device, r)));
    for (int id : ids) {
      const auto& n = graph.nodes[static_cast<std::size_t>(id)];
      const auto detail = node_detail(n);
      std::string label = dot_escape(n.label) + (detail.empty() ? "" : "\\n" + dot_escape(detail));
      std::string tooltip = fmt::format("{} | {} | layer {} | GPU {}", n.label, n.role, n.layer, n.device);
      const NodeWaitSummary* timing = timed ? timeline->wait_of(n.id) : nullptr;
      fmt::format_to(w, "    n{} [", n.id);
      if (timing == nullptr) {
        node_attrs(out, label, n.kind, cuda_node_type(n.kind));
      } else {
        const double share = timing->duration_us.median / span_us;
        const double wait_share = timing->wait_us.median / span_us;
        label += dot_escape(fmt::format("\n{:.1f} µs ({:.1f}%) · wait {:.1f} µs", timing->duration_us.median,
                                        100.0 * share, timing->wait_us.median));
        const std::size_t step = heat_step(share);
        fmt::format_to(w, "label=\"{}\", shape={}, style=\"{}\", fillcolor=\"{}\", fontcolor=\"{}\"", label,
                       shape_of(cuda_node_type(n.kind)),
                       cuda_node_type(n.kind) == CudaNodeType::kernel ? "rounded,filled" : "filled", kHeatFill[step],
                       step >= 4 ? "white" : "black");
        if (wait_share >= kDotWaitShareMarked) fmt::format_to(w, ", color=\"{}\", penwidth=3", kCrossRankColor);
        tooltip += fmt::format(" | median {:.1f} µs, {:.1f}% of the median span {:.1f} µs | median wait {:.1f} µs",
                               timing->duration_us.median, 100.0 * share, span_us, timing->wait_us.median);
      }
      fmt::format_to(w, ", tooltip=\"{}\"];\n", dot_escape(tooltip));
    }
    if (r == 0 && !graph.end_joins.empty()) {
      fmt::format_to(
          w,
          "    graph_end [label=\"end\", tooltip=\"end of the graph: every stream has rejoined the root\", shape=doublecircle, fixedsize=true, width=0.45, fontsize=8];\n");
    }
    out += "  }\n";
  }

  for (const auto& e : graph.edges) {
    const auto& from = graph.nodes[static_cast<std::size_t>(e.from)];
    const auto& to = graph.nodes[static_cast<std::size_t>(e.to)];
    if (!graph.cross_rank(e)) {
      fmt::format_to(w, "  n{} -> n{};\n", e.from, e.to);
      continue;
    }
    // Forks leave the root, joins come back to it: dashed for joins so the two read apart.
    fmt::format_to(w, "  n{} -> n{} [color=\"{}\", penwidth=2.5{}, tooltip=\"{}\"];\n", e.from, e.to, kCrossRankColor,
                   to.rank == 0 ? ", style=dashed" : "",
                   dot_escape(fmt::format("cross-rank: {} -> {}", from.label, to.label)));
  }
  if (!graph.nodes.empty() && !graph.end_joins.empty()) {
    // The root's own last node reaches the end on its stream; the other streams rejoin it there.
    const auto root = graph.stream_nodes(0);
    if (!root.empty()) fmt::format_to(w, "  n{} -> graph_end;\n", root.back());
    for (int id : graph.end_joins) {
      fmt::format_to(w, "  n{} -> graph_end [color=\"{}\", penwidth=2.5, style=dashed, tooltip=\"{}\"];\n", id,
                     kCrossRankColor,
                     dot_escape(fmt::format("cross-rank: {} rejoins the root at the end of capture",
                                            graph.nodes[static_cast<std::size_t>(id)].label)));
    }
  }
  if (timed) write_heat_legend(out, span_us);
  else write_legend(out);
  out += "}\n";
  return out;
}

}  // namespace tpgraph
