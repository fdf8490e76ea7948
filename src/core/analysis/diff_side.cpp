// One run as `tpgraph diff` reads it: node keys that survive renumbering, a fingerprint per graph,
// every replay's figures and the steady part of the replays.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include "core/analysis/run_diff.hpp"

namespace tpgraph {

namespace {

bool leaves_record(NodeKind k) {
  const CudaNodeType t = cuda_node_type(k);
  return t == CudaNodeType::kernel || t == CudaNodeType::memcpy || t == CudaNodeType::memset;
}

// Longest path from a node without predecessors; 0 for every node of a graph without edges. The
// edges of a cyclic graph never reach here (the analysis refuses it first).
std::vector<int> depths(const LayerGraph& g) {
  const std::size_t n = g.nodes.size();
  std::vector<std::vector<int>> succ(n);
  std::vector<int> indegree(n, 0), depth(n, 0), order;
  for (const auto& e : g.edges) {
    succ[static_cast<std::size_t>(e.from)].push_back(e.to);
    ++indegree[static_cast<std::size_t>(e.to)];
  }
  for (std::size_t i = 0; i < n; ++i)
    if (indegree[i] == 0) order.push_back(static_cast<int>(i));
  for (std::size_t head = 0; head < order.size(); ++head) {
    const auto from = static_cast<std::size_t>(order[head]);
    for (const int to : succ[from]) {
      const auto t = static_cast<std::size_t>(to);
      depth[t] = std::max(depth[t], depth[from] + 1);
      if (--indegree[t] == 0) order.push_back(to);
    }
  }
  return depth;
}

std::string kernel_of(const Node& n) { return n.name.empty() ? std::string(to_string(n.kind)) : n.name; }

// A traced node's key: rank, kernel, depth, and its occurrence among the nodes that share those
// three, ordered by what precedes them (their predecessors' kernels) and only then by id.
void traced_keys(const LayerGraph& g, std::vector<DiffNode>& nodes) {
  std::vector<std::string> before(g.nodes.size());
  {
    std::vector<std::vector<std::string>> preds(g.nodes.size());
    for (const auto& e : g.edges)
      preds[static_cast<std::size_t>(e.to)].push_back(kernel_of(g.nodes[static_cast<std::size_t>(e.from)]));
    for (std::size_t i = 0; i < preds.size(); ++i) {
      std::sort(preds[i].begin(), preds[i].end());
      for (const auto& p : preds[i]) before[i] += p + ";";
    }
  }
  std::vector<std::size_t> order(nodes.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return std::tie(nodes[x].rank, nodes[x].kernel, nodes[x].depth, before[x], x) <
           std::tie(nodes[y].rank, nodes[y].kernel, nodes[y].depth, before[y], y);
  });
  std::map<std::string, int> seen_label;
  for (const auto& n : nodes) ++seen_label[n.label];
  std::map<std::tuple<int, std::string, int>, int> occurrence;
  for (const std::size_t i : order) {
    DiffNode& d = nodes[i];
    const int k = occurrence[{d.rank, d.kernel, d.depth}]++;
    d.key = fmt::format("r{}|{}|d{}|#{}", d.rank, d.kernel, d.depth, k);
    if (seen_label[d.label] > 1) d.label = fmt::format("{}@d{}#{}", d.label, d.depth, k);
  }
}

std::uint64_t fnv(std::uint64_t h, std::string_view s) {
  for (const char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::uint64_t fingerprint_of(const LayerGraph& g, const std::vector<DiffNode>& nodes) {
  std::vector<std::string> parts;
  for (const auto& n : nodes) parts.push_back(fmt::format("n {} {}", n.key, n.kind));
  for (const auto& e : g.edges)
    parts.push_back(fmt::format("e {} {} {}", nodes[static_cast<std::size_t>(e.from)].key,
                                nodes[static_cast<std::size_t>(e.to)].key, e.type));
  std::sort(parts.begin(), parts.end());
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (const auto& p : parts) h = fnv(fnv(h, p), "\n");
  return h;
}

std::string occupant_label(const VariantTimeline& t, const LayerGraph& g, int node) {
  const NodeWaitSummary* w = t.wait_of(node);
  if (w == nullptr || w->typical.occupants.empty()) return {};
  const Occupant& o = w->typical.occupants.front();
  if (o.node >= 0 && static_cast<std::size_t>(o.node) < g.nodes.size())
    return g.nodes[static_cast<std::size_t>(o.node)].label + (o.other_replay ? " (another replay)" : "");
  const auto outside = static_cast<std::size_t>(-2 - o.node);
  if (o.node <= -2 && outside < g.outside_labels.size()) return g.outside_labels[outside];
  return "work of no node";
}

std::vector<DiffNode> nodes_of(const VariantRun& v, const VariantTimeline& t) {
  const LayerGraph& g = v.graph;
  const std::vector<int> depth = depths(g);
  std::vector<DiffNode> nodes(g.nodes.size());
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    DiffNode& d = nodes[i];
    d.label = n.label;
    d.key = n.label;
    d.rank = n.rank;
    d.depth = depth[i];
    d.kind = n.kind;
    d.kernel = g.traced() ? kernel_of(n) : "";
    d.timed = leaves_record(n.kind);
    d.occupant = occupant_label(t, g, n.id);
  }
  if (g.traced()) traced_keys(g, nodes);
  return nodes;
}

// The steady part: steady_window over the present replays' spans, as replay indices.
void choose_replays(DiffVariant& d) {
  std::vector<double> spans;
  std::vector<std::size_t> at;
  for (std::size_t r = 0; r < d.span_us.size(); ++r) {
    if (std::isnan(d.span_us[r])) continue;
    spans.push_back(d.span_us[r]);
    at.push_back(r);
  }
  d.steady = steady_window(spans);
  if (d.steady.found) {
    d.first_used = at[d.steady.first];
    d.used = d.steady.count;
  } else {
    d.first_used = 0;
    d.used = spans.size();
  }
}

void path_nodes_of(DiffVariant& d) {
  for (std::size_t n = 0; n < d.series.size(); ++n) {
    const auto& path = d.series[n].path_us;
    std::size_t on = 0;
    for (std::size_t r = d.first_used; r < path.size(); ++r) on += path[r] > 0 ? 1 : 0;
    if (d.used > 0 && 2 * on > d.used) d.path_nodes.push_back(static_cast<int>(n));
  }
}

DiffVariant variant_side(const VariantRun& v, VariantTimeline& t) {
  DiffVariant d;
  d.name = t.name;
  d.traced = v.graph.traced();
  d.waits_known = v.topology_error.empty();
  d.graph = v.graph;
  d.nodes = nodes_of(v, t);
  d.fingerprint = fingerprint_of(v.graph, d.nodes);
  d.identity = v.identity;
  d.series = std::move(t.series);
  d.series.resize(d.nodes.size());
  d.replays = t.replays.size();
  constexpr float kNone = std::numeric_limits<float>::quiet_NaN();
  d.span_us.assign(d.replays, kNone);
  d.rank_span_us.assign(static_cast<std::size_t>(t.ranks), std::vector<float>(d.replays, kNone));
  for (std::size_t r = 0; r < d.replays; ++r) {
    const ReplayTimeline& rt = t.replays[r];
    if (!rt.present) continue;
    d.span_us[r] = static_cast<float>(rt.span_us);
    for (std::size_t k = 0; k < rt.ranks.size() && k < d.rank_span_us.size(); ++k)
      if (rt.ranks[k].present) d.rank_span_us[k][r] = static_cast<float>(rt.ranks[k].span_us);
  }
  for (const double us : v.host_launch_us) d.launch_us.push_back(static_cast<float>(us));
  d.clean = t.health.clean();
  d.problems = t.health.problems();
  d.verdict = t.verdict;
  d.tracing_cost = t.tracing_cost;
  choose_replays(d);
  path_nodes_of(d);
  return d;
}

}  // namespace

DiffRun diff_side(const RunData& run, RunAnalysis analysis, std::string origin) {
  DiffRun out;
  out.origin = std::move(origin);
  out.trace = run.trace.has_value();
  out.env = run.env;
  if (run.trace) {
    out.completeness = run.trace->line();
    out.clean = run.trace->clean();
  }
  for (std::size_t i = 0; i < run.variants.size() && i < analysis.variants.size(); ++i) {
    out.variants.push_back(variant_side(run.variants[i], analysis.variants[i]));
    out.clean = out.clean && out.variants.back().clean;
  }
  return out;
}

}  // namespace tpgraph
