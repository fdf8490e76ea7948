#include "core/analysis/run_diff.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "core/analysis/diff_match.hpp"
#include "core/base/stats.hpp"

namespace tpgraph {

using diff_detail::NodePairs;

std::string_view to_string(Metric m) {
  switch (m) {
    case Metric::duration: return "duration";
    case Metric::wait: return "wait";
    case Metric::contention: return "contention";
    case Metric::idle: return "idle";
    case Metric::arrival: return "arrival";
    case Metric::rank_span: return "rank span";
    case Metric::replay_span: return "span";
    case Metric::launch: return "launch";
  }
  return "?";
}

std::string_view to_string(StructureKind k) {
  switch (k) {
    case StructureKind::variant_only_a: return "only in A";
    case StructureKind::variant_only_b: return "only in B";
    case StructureKind::node_removed: return "node removed";
    case StructureKind::node_added: return "node added";
    case StructureKind::kernel_renamed: return "kernel renamed";
    case StructureKind::edge_removed: return "edge removed";
    case StructureKind::edge_added: return "edge added";
  }
  return "?";
}

std::string Comparability::line() const {
  std::string out = comparable ? "COMPARABLE" : "NOT COMPARABLE";
  if (!reasons.empty()) out += ": " + fmt::format("{}", fmt::join(reasons, "; "));
  else out += ": " + fmt::format("{}", fmt::join(agreed, ", "));
  if (!unchecked.empty()) out += fmt::format(" (not checked: {})", fmt::join(unchecked, "; "));
  return out;
}

std::size_t RunDiff::change_count() const {
  return static_cast<std::size_t>(
      std::count_if(metrics.begin(), metrics.end(), [](const MetricDiff& m) { return m.change(); }));
}

namespace {

// The steady replays' values of one series (NaN: no record).
std::vector<double> used_values(const std::vector<float>& series, std::size_t first) {
  std::vector<double> out;
  out.reserve(series.size() > first ? series.size() - first : 0);
  for (std::size_t r = first; r < series.size(); ++r)
    if (!std::isnan(series[r])) out.push_back(series[r]);
  return out;
}

bool all_zero(const std::vector<double>& v) {
  return std::all_of(v.begin(), v.end(), [](double x) { return x == 0.0; });
}

class Comparer {
 public:
  Comparer(const DiffOptions& o, std::string variant, std::vector<MetricDiff>& out)
      : o_(o), variant_(std::move(variant)), out_(out) {}

  // Compares one figure and keeps it; returns its index in the output. Skipped (nullopt) when either
  // side has no value, or both are all zero (a part of a wait that never happened on either side).
  std::optional<std::size_t> compare(const std::string& subject, Metric metric, const std::vector<double>& a,
                                     const std::vector<double>& b) {
    std::optional<MetricDiff> m = evaluate(subject, metric, a, b);
    if (!m) return std::nullopt;
    out_.push_back(std::move(*m));
    return out_.size() - 1;
  }

  // The same comparison, not kept.
  [[nodiscard]] std::optional<MetricDiff> evaluate(const std::string& subject, Metric metric,
                                                   const std::vector<double>& a, const std::vector<double>& b) const {
    if (a.empty() || b.empty() || (all_zero(a) && all_zero(b))) return std::nullopt;
    MetricDiff m;
    m.variant = variant_;
    m.subject = subject;
    m.metric = metric;
    m.shift = stats::median_shift(a, b, 0, false);
    const double base = std::max(std::abs(m.shift.median_a), o_.practical_us);
    m.relative = m.shift.shift / base;
    const bool host = metric == Metric::launch;
    const double floor_us = host ? o_.launch_us_used() : o_.practical_us;
    const double fraction = host ? o_.launch_fraction_used() : o_.practical_fraction;
    m.practical =
        std::abs(m.shift.shift) >= floor_us && std::abs(m.shift.shift) >= fraction * std::abs(m.shift.median_a);
    if (m.practical) {
      const std::uint64_t seed =
          stats::seed_for(o_.seed, fmt::format("{}/{}/{}", variant_, subject, to_string(metric)));
      m.shift = stats::median_shift(a, b, seed, true, o_.resamples, o_.confidence);
      m.significant = m.shift.excludes_zero();
    }
    return m;
  }

  MetricDiff& at(std::size_t i) { return out_[i]; }

 private:
  const DiffOptions& o_;
  std::string variant_;
  std::vector<MetricDiff>& out_;
};

// Each node's successors along the edges.
std::vector<std::vector<int>> successors(const LayerGraph& g) {
  std::vector<std::vector<int>> succ(g.nodes.size());
  for (const auto& e : g.edges) succ[static_cast<std::size_t>(e.from)].push_back(e.to);
  return succ;
}

// Nodes reachable from `node` along the edges (forward), itself included.
std::vector<bool> reach_of(const std::vector<std::vector<int>>& succ, int node) {
  std::vector<bool> seen(succ.size(), false);
  std::vector<int> stack{node};
  seen[static_cast<std::size_t>(node)] = true;
  while (!stack.empty()) {
    const int x = stack.back();
    stack.pop_back();
    for (const int y : succ[static_cast<std::size_t>(x)])
      if (!seen[static_cast<std::size_t>(y)]) {
        seen[static_cast<std::size_t>(y)] = true;
        stack.push_back(y);
      }
  }
  return seen;
}

// Two nodes ready within this of each other start in whichever order the GPU picks: a tie.
constexpr double kReadyTieUs = 1.0;

// Per node, its ready time in each replay after the replay's first start (start - wait); NaN where unknown.
float ready_at(const NodeSeries& s, std::size_t r) {
  return r < s.start_us.size() && r < s.wait_us.size() ? s.start_us[r] - s.wait_us[r]
                                                       : std::numeric_limits<float>::quiet_NaN();
}

// Whether x and y were ready within kReadyTieUs of each other in most steady replays where both ran.
bool ready_together(const DiffVariant& d, std::size_t x, std::size_t y) {
  const NodeSeries& sx = d.series[x];
  const NodeSeries& sy = d.series[y];
  std::size_t both = 0, tied = 0;
  for (std::size_t r = d.first_used; r < sx.start_us.size() && r < sy.start_us.size(); ++r) {
    const float rx = ready_at(sx, r), ry = ready_at(sy, r);
    if (std::isnan(rx) || std::isnan(ry)) continue;
    ++both;
    tied += std::abs(rx - ry) <= kReadyTieUs ? 1 : 0;
  }
  return both > 0 && 2 * tied > both;
}

// Two concurrent nodes on one GPU ready together in most steady replays of both runs: the GPU breaks
// the tie one way or the other, and the same program breaks it in different proportions in two
// processes (two root GEMMs on two streams: the one that starts second shares the GPU and takes
// twice as long). Every node after exactly one of them then shares the GPU with other work in the
// replays of one order than of the other: its figures are a mixture of two distributions whose
// shares the order sets, and a median moves when the shares cross a half though nothing ran slower.
struct OrderTie {
  std::size_t u = 0, v = 0;                   // in A
  std::size_t ub = 0, vb = 0;                 // in B
  double a_share = 0, b_share = 0;            // share of the steady replays in which u (ub) started first
  std::vector<signed char> a_order, b_order;  // [replay]: 1 u first, 0 v first, -1 unknown
};

// Per replay, whether x started before y (-1 where either has no start).
std::vector<signed char> order_of(const DiffVariant& d, std::size_t x, std::size_t y) {
  const NodeSeries& sx = d.series[x];
  const NodeSeries& sy = d.series[y];
  std::vector<signed char> out(std::min(sx.start_us.size(), sy.start_us.size()), -1);
  for (std::size_t r = 0; r < out.size(); ++r)
    if (!std::isnan(sx.start_us[r]) && !std::isnan(sy.start_us[r])) out[r] = sx.start_us[r] < sy.start_us[r] ? 1 : 0;
  return out;
}

// The share of the steady replays (from `first`) in which the first node started first.
double first_share(const std::vector<signed char>& order, std::size_t first) {
  std::size_t known = 0, ahead = 0;
  for (std::size_t r = first; r < order.size(); ++r)
    if (order[r] >= 0) {
      ++known;
      ahead += static_cast<std::size_t>(order[r]);
    }
  return known > 0 ? static_cast<double>(ahead) / static_cast<double>(known) : 0.5;
}

// The ties of A matched in B; per node of A, the first tie it is after exactly one side of (-1: none).
std::pair<std::vector<OrderTie>, std::vector<int>> order_ties(const DiffVariant& a, const DiffVariant& b,
                                                              const NodePairs& p) {
  const std::size_t n = a.nodes.size();
  std::vector<OrderTie> ties;
  std::vector<int> reached(n, -1);
  if (!a.waits_known || !b.waits_known) return {ties, reached};
  // Candidates: nodes whose median ready times in A are within a tie of each other.
  std::vector<std::pair<double, std::size_t>> ready;
  for (std::size_t i = 0; i < n; ++i) {
    if (!a.nodes[i].timed || p.b_of_a[i] < 0) continue;
    std::vector<double> r;
    for (std::size_t k = a.first_used; k < a.series[i].start_us.size(); ++k)
      if (const float x = ready_at(a.series[i], k); !std::isnan(x)) r.push_back(x);
    if (!r.empty()) ready.emplace_back(stats::median(r), i);
  }
  std::sort(ready.begin(), ready.end());
  const std::vector<std::vector<int>> succ = successors(a.graph);
  for (std::size_t x = 0; x < ready.size(); ++x)
    for (std::size_t y = x + 1; y < ready.size() && ready[y].first - ready[x].first <= kReadyTieUs; ++y) {
      OrderTie t;
      t.u = ready[x].second;
      t.v = ready[y].second;
      if (a.graph.nodes[t.u].device != a.graph.nodes[t.v].device) continue;
      t.ub = static_cast<std::size_t>(p.b_of_a[t.u]);
      t.vb = static_cast<std::size_t>(p.b_of_a[t.v]);
      if (!ready_together(a, t.u, t.v) || !ready_together(b, t.ub, t.vb)) continue;
      const std::vector<bool> after_u = reach_of(succ, static_cast<int>(t.u));
      const std::vector<bool> after_v = reach_of(succ, static_cast<int>(t.v));
      if (after_u[t.v] || after_v[t.u]) continue;  // not concurrent
      t.a_order = order_of(a, t.u, t.v);
      t.b_order = order_of(b, t.ub, t.vb);
      t.a_share = first_share(t.a_order, a.first_used);
      t.b_share = first_share(t.b_order, b.first_used);
      ties.push_back(std::move(t));
      for (std::size_t k = 0; k < n; ++k)
        if (after_u[k] != after_v[k] && reached[k] < 0) reached[k] = static_cast<int>(ties.size() - 1);
    }
  return {ties, reached};
}

// The steady replays' values of a series in which the tie went `way` (1: u first).
std::vector<double> values_in_order(const std::vector<float>& series, std::size_t first,
                                    const std::vector<signed char>& order, signed char way) {
  std::vector<double> out;
  for (std::size_t r = first; r < series.size() && r < order.size(); ++r)
    if (order[r] == way && !std::isnan(series[r])) out.push_back(series[r]);
  return out;
}

// A replay order seen this often on both sides is compared on its own.
constexpr std::size_t kMinOrderReplays = 20;

// Whether a changed figure of a node the tie reaches is the order's doing: compared within each order
// seen at least kMinOrderReplays times on both sides, it changed in none. Where no order was seen that
// often on both (the tie went one way in every replay of A and the other in every replay of B), the
// order flipped in at least three quarters of each run's replays explains it. "" where it does not.
std::string order_explains(const Comparer& c, const OrderTie& t, const DiffVariant& a, const DiffVariant& b,
                           const std::string& label, Metric m, const std::vector<float>& xa,
                           const std::vector<float>& xb) {
  const std::string& u = b.nodes[t.ub].label;
  const std::string& v = b.nodes[t.vb].label;
  int compared = 0;
  for (const int w : {1, 0}) {
    const auto way = static_cast<signed char>(w);
    const auto va = values_in_order(xa, a.first_used, t.a_order, way);
    const auto vb = values_in_order(xb, b.first_used, t.b_order, way);
    if (va.size() < kMinOrderReplays || vb.size() < kMinOrderReplays) continue;
    const auto within = c.evaluate(label, m, va, vb);
    if (within && within->change()) return "";
    ++compared;
  }
  if (compared > 0)
    return fmt::format(
        "order: {} and {} were ready together; {} started first in {:.0f}% of A's replays and {:.0f}% of B's, and "
        "within each order this did not change",
        u, v, u, 100 * t.a_share, 100 * t.b_share);
  if (std::abs(t.a_share - 0.5) < 0.25 || std::abs(t.b_share - 0.5) < 0.25 || (t.a_share > 0.5) == (t.b_share > 0.5))
    return "";
  return fmt::format(
      "order: {} and {} were ready together; A ran {} first, B ran {} first, and the work after them shared the GPU "
      "differently",
      u, v, t.a_share > 0.5 ? u : v, t.a_share > 0.5 ? v : u);
}

void compare_nodes(const DiffVariant& a, const DiffVariant& b, const NodePairs& p, Comparer& c, VariantDiff& vd) {
  const auto tied = order_ties(a, b, p);
  const std::vector<OrderTie>& ties = tied.first;
  const std::vector<int>& reached = tied.second;
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    const int jb = p.b_of_a[i];
    if (jb < 0 || !a.nodes[i].timed) continue;
    const auto j = static_cast<std::size_t>(jb);
    const NodeSeries& sa = a.series[i];
    const NodeSeries& sb = b.series[j];
    const std::string& label = b.nodes[j].label;
    // A figure the order of tied concurrent work explains: shown, not counted.
    const auto compare = [&](Metric m, const std::vector<float>& xa, const std::vector<float>& xb) {
      const auto k = c.compare(label, m, used_values(xa, a.first_used), used_values(xb, b.first_used));
      if (k && c.at(*k).change() && reached[i] >= 0)
        c.at(*k).explained = order_explains(c, ties[static_cast<std::size_t>(reached[i])], a, b, label, m, xa, xb);
      return k;
    };
    (void)compare(Metric::duration, sa.duration_us, sb.duration_us);
    if (!a.waits_known || !b.waits_known) continue;
    (void)compare(Metric::wait, sa.wait_us, sb.wait_us);
    std::string cause;
    const auto part = [&](Metric m, const std::vector<float>& xa, const std::vector<float>& xb) {
      const auto k = compare(m, xa, xb);
      if (!k || !c.at(*k).change()) return;
      const MetricDiff& d = c.at(*k);
      cause += fmt::format("{}{} {:+.1f} µs", cause.empty() ? "" : ", ", to_string(m), d.shift.shift);
      if (m == Metric::contention && d.shift.shift > 0 && !b.nodes[j].occupant.empty())
        cause += fmt::format(" (by {})", b.nodes[j].occupant);
    };
    part(Metric::contention, sa.contention_us, sb.contention_us);
    part(Metric::idle, sa.idle_us, sb.idle_us);
    part(Metric::arrival, sa.arrival_us, sb.arrival_us);
    if (!cause.empty()) vd.cause_changes.push_back(fmt::format("{}'s wait: {}", label, cause));
  }
}

void compare_spans(const DiffVariant& a, const DiffVariant& b, Comparer& c) {
  for (std::size_t k = 0; k < a.rank_span_us.size() && k < b.rank_span_us.size(); ++k)
    (void)c.compare(fmt::format("r{}", k), Metric::rank_span, used_values(a.rank_span_us[k], a.first_used),
                    used_values(b.rank_span_us[k], b.first_used));
  (void)c.compare("replay", Metric::replay_span, used_values(a.span_us, a.first_used),
                  used_values(b.span_us, b.first_used));
  // Host launch costs come from the replays with tracing off, as many as the traced ones and in the
  // same order after the same warm-up: the same steady part is taken.
  (void)c.compare("replay", Metric::launch, used_values(a.launch_us, a.first_used),
                  used_values(b.launch_us, b.first_used));
}

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return 0;
  double s = 0;
  for (const double x : v) s += x;
  return s / static_cast<double>(v.size());
}

// Mean time on the path over the steady replays present (0 where the node was off it).
double path_mean(const DiffVariant& d, std::size_t node) {
  return mean_of(used_values(d.series[node].path_us, d.first_used));
}

void explain_span(const DiffVariant& a, const DiffVariant& b, const NodePairs& p, VariantDiff& vd) {
  vd.span_mean_a_us = mean_of(used_values(a.span_us, a.first_used));
  vd.span_mean_b_us = mean_of(used_values(b.span_us, b.first_used));
  std::vector<PathShare> shares;
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    const int j = p.b_of_a[i];
    shares.push_back({j >= 0 ? b.nodes[static_cast<std::size_t>(j)].label : a.nodes[i].label + " (removed)",
                      path_mean(a, i), j >= 0 ? path_mean(b, static_cast<std::size_t>(j)) : 0.0});
  }
  for (std::size_t j = 0; j < b.nodes.size(); ++j)
    if (p.a_of_b[j] < 0) shares.push_back({b.nodes[j].label + " (added)", 0.0, path_mean(b, j)});
  std::stable_sort(shares.begin(), shares.end(), [](const PathShare& x, const PathShare& y) {
    return std::abs(x.shift_us()) > std::abs(y.shift_us());
  });
  const double change = vd.span_mean_b_us - vd.span_mean_a_us;
  double listed = 0;
  // Largest first, until the listed shares are within a tenth of the change (at most eight).
  for (const PathShare& s : shares) {
    if (vd.explains.size() == 8 || std::abs(s.shift_us()) < 1e-9) break;
    if (!vd.explains.empty() && std::abs(change - listed) <= 0.1 * std::abs(change)) break;
    vd.explains.push_back(s);
    listed += s.shift_us();
  }
  vd.other_path_us = change - listed;
}

void path_changes(const DiffVariant& a, const DiffVariant& b, const NodePairs& p, VariantDiff& vd) {
  const std::set<int> on_a(a.path_nodes.begin(), a.path_nodes.end());
  const std::set<int> on_b(b.path_nodes.begin(), b.path_nodes.end());
  for (const int j : on_b) {
    const int i = p.a_of_b[static_cast<std::size_t>(j)];
    if (i < 0 || on_a.count(i) == 0)
      vd.path_joined.push_back(b.nodes[static_cast<std::size_t>(j)].label + (i < 0 ? " (added)" : ""));
  }
  for (const int i : on_a) {
    const int j = p.b_of_a[static_cast<std::size_t>(i)];
    if (j < 0 || on_b.count(j) == 0)
      vd.path_left.push_back(a.nodes[static_cast<std::size_t>(i)].label + (j < 0 ? " (removed)" : ""));
  }
}

}  // namespace

RunDiff diff_runs(const DiffRun& a, const DiffRun& b, const DiffOptions& options) {
  RunDiff out;
  out.a_origin = a.origin;
  out.b_origin = b.origin;
  out.options = options;
  const auto pairs = diff_detail::match_variants(a, b, out.structure);
  out.comparability = diff_detail::comparability_of(a, b, pairs, options);
  for (const auto& pair : pairs) {
    const DiffVariant& va = a.variants[static_cast<std::size_t>(pair.a)];
    const DiffVariant& vb = b.variants[static_cast<std::size_t>(pair.b)];
    VariantDiff vd;
    vd.a = va.name;
    vd.b = vb.name;
    vd.matched_by = pair.matched_by;
    vd.a_first = va.first_used;
    vd.a_used = va.used;
    vd.a_replays = va.replays;
    vd.b_first = vb.first_used;
    vd.b_used = vb.used;
    vd.b_replays = vb.replays;
    vd.verdict_a = va.verdict;
    vd.verdict_b = vb.verdict;
    const NodePairs nodes = diff_detail::match_nodes(va, vb, va.name, out.structure);
    Comparer comparer(options, va.name, out.metrics);
    compare_nodes(va, vb, nodes, comparer, vd);
    compare_spans(va, vb, comparer);
    path_changes(va, vb, nodes, vd);
    explain_span(va, vb, nodes, vd);
    out.variants.push_back(std::move(vd));
  }
  // Changes first: what ran slower or faster on the GPU (durations), then the spans, then the host
  // launch cost (a CPU figure, noisier between processes), then the waits and their parts (a node
  // that got slower moves its successors' waits by as much: the effect comes after its cause);
  // within each, the largest shift in µs first. Figures that are not changes by their relative shift.
  const auto rank_of = [](Metric m) {
    return m == Metric::duration                                ? 0
           : m == Metric::rank_span || m == Metric::replay_span ? 1
           : m == Metric::launch                                ? 2
                                                                : 3;
  };
  std::stable_sort(out.metrics.begin(), out.metrics.end(), [&](const MetricDiff& x, const MetricDiff& y) {
    if (x.change() != y.change()) return x.change();
    if (!x.change()) return std::abs(x.relative) > std::abs(y.relative);
    if (rank_of(x.metric) != rank_of(y.metric)) return rank_of(x.metric) < rank_of(y.metric);
    return std::abs(x.shift.shift) > std::abs(y.shift.shift);
  });
  return out;
}

}  // namespace tpgraph
