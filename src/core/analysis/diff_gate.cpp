// Whether two runs may be compared (diff's first line), and the gate's decision on a diff.
#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/analysis/diff_match.hpp"

namespace tpgraph {

namespace diff_detail {

namespace {

std::vector<std::string> gpu_models(const RunEnvironment& env) {
  std::vector<std::string> out;
  for (const auto& d : env.devices) out.push_back(d.name);
  std::sort(out.begin(), out.end());
  return out;
}

// Which side did not record a fact: "neither run records it", "A records none", "B records none".
std::string_view missing_on(bool a_missing, bool b_missing) {
  if (a_missing && b_missing) return "neither run records it";
  return a_missing ? "A records none" : "B records none";
}

void check_environment(const DiffRun& a, const DiffRun& b, Comparability& c) {
  const auto ga = gpu_models(a.env);
  const auto gb = gpu_models(b.env);
  if (ga.empty() || gb.empty()) {
    c.unchecked.push_back(fmt::format("GPU model ({})", missing_on(ga.empty(), gb.empty())));
  } else if (ga != gb) {
    c.reasons.push_back(fmt::format("GPUs differ: A ran on {}, B on {}", fmt::join(ga, ", "), fmt::join(gb, ", ")));
  } else {
    c.agreed.push_back(fmt::format("same GPUs ({})", fmt::join(ga, ", ")));
  }
  if (a.env.driver_version == 0 || b.env.driver_version == 0) {
    c.unchecked.push_back(fmt::format("driver ({})", missing_on(a.env.driver_version == 0, b.env.driver_version == 0)));
  } else if (a.env.driver_version != b.env.driver_version) {
    c.reasons.push_back(fmt::format("drivers differ: A {}, B {}", a.env.driver_version, b.env.driver_version));
  } else {
    c.agreed.push_back(fmt::format("same driver ({})", a.env.driver_version));
  }
  c.unchecked.push_back("clock state (neither run records it)");
}

void check_variant(const DiffVariant& va, const DiffVariant& vb, const DiffOptions& o, Comparability& c,
                   bool& cost_unknown, bool& cost_agreed) {
  const std::pair<const char*, const DiffVariant*> sides[] = {{"A", &va}, {"B", &vb}};
  for (const auto& [side, v] : sides) {
    if (!v->clean) c.reasons.push_back(fmt::format("{}'s {} is not clean: {}", side, v->name, v->problems));
    if (!v->steady.found) {
      const SpanDrift& d = v->steady.drift;
      c.reasons.push_back(
          d.known
              ? fmt::format("{}'s {} is not steady: no tail of {:.0f}% or more of its replays is (the last tried: "
                            "first quarter {:.1f} µs, last {:.1f} µs, allowance {:.1f} µs)",
                            side, v->name, kSteadyMinFraction * 100, d.first_us, d.last_us, d.allowance_us)
              : fmt::format("{}'s {} has too few replays to judge steadiness ({} present)", side, v->name, v->used));
    }
  }
  if (va.tracing_cost && vb.tracing_cost) {
    const double change = *vb.tracing_cost / *va.tracing_cost - 1;
    if (std::abs(change) > o.max_tracing_cost_change)
      c.reasons.push_back(fmt::format("{}: tracing cost differs: A {:.3f}x, B {:.3f}x ({:+.1f}%, allowed ±{:.0f}%)",
                                      va.name, *va.tracing_cost, *vb.tracing_cost, change * 100,
                                      o.max_tracing_cost_change * 100));
    else cost_agreed = true;
  } else {
    cost_unknown = true;
  }
}

}  // namespace

Comparability comparability_of(const DiffRun& a, const DiffRun& b, const std::vector<VariantPair>& pairs,
                               const DiffOptions& options) {
  Comparability c;
  if (a.trace != b.trace)
    c.reasons.push_back(fmt::format("A is a {} and B a {}: recorded by different tracing", a.trace ? "trace" : "run",
                                    b.trace ? "trace" : "run"));
  if (a.trace && !a.clean) c.reasons.push_back("A: " + a.completeness);
  if (b.trace && !b.clean) c.reasons.push_back("B: " + b.completeness);
  check_environment(a, b, c);
  if (pairs.empty()) c.reasons.push_back("no variant of A matches one of B");
  bool cost_unknown = false;
  bool cost_agreed = false;
  for (const auto& p : pairs)
    check_variant(a.variants[static_cast<std::size_t>(p.a)], b.variants[static_cast<std::size_t>(p.b)], options, c,
                  cost_unknown, cost_agreed);
  c.agreed.insert(c.agreed.begin(), "both clean and steady");
  if (a.trace == b.trace) c.agreed.push_back(a.trace ? "both traces" : "both runs");
  if (cost_agreed)
    c.agreed.push_back(fmt::format("tracing costs within {:.0f}%", options.max_tracing_cost_change * 100));
  if (cost_unknown) c.unchecked.push_back("tracing cost (not measured on both sides)");
  c.comparable = c.reasons.empty();
  return c;
}

}  // namespace diff_detail

namespace {

bool gated(Metric m) {
  return m == Metric::duration || m == Metric::rank_span || m == Metric::replay_span || m == Metric::launch;
}

bool is_span(Metric m) { return m == Metric::rank_span || m == Metric::replay_span; }

}  // namespace

GateResult gate_runs(const RunDiff& diff, const GateBudget& budget) {
  GateResult g;
  if (!diff.comparability.comparable)
    for (const auto& why : diff.comparability.reasons) g.failures.push_back("NOT COMPARABLE: " + why);
  for (const auto& s : diff.structure)
    if (s.kind == StructureKind::variant_only_a)
      g.failures.push_back(fmt::format("NOT COMPARABLE: {} is in A but not in B: nothing to gate it on", s.variant));
  for (const auto& v : diff.variants)
    if (v.a_used == 0 || v.b_used == 0)
      g.failures.push_back(
          fmt::format("NOT COMPARABLE: {}: no replay to compare (A {}, B {})", v.a, v.a_used, v.b_used));
  if (!g.failures.empty()) {
    g.outcome = GateOutcome::not_comparable;
    return g;
  }
  for (const auto& m : diff.metrics) {
    if (!m.change() || !gated(m.metric) || m.shift.shift <= 0 || m.shift.median_a <= 0) continue;
    const double limit =
        is_span(m.metric) ? budget.max_span_slowdown.value_or(budget.max_slowdown) : budget.max_slowdown;
    const double slowdown = m.shift.shift / m.shift.median_a;
    if (slowdown <= limit) continue;
    g.failures.push_back(fmt::format(
        "REGRESSION: {} {} {}: {:.1f} -> {:.1f} µs ({:+.1f}%, {:.0f}% CI {:+.1f} to {:+.1f} µs), beyond the budget "
        "{:.1f}%",
        m.variant, m.subject, m.metric, m.shift.median_a, m.shift.median_b, slowdown * 100,
        diff.options.confidence * 100, m.shift.lo, m.shift.hi, limit * 100));
  }
  g.outcome = g.failures.empty() ? GateOutcome::pass : GateOutcome::regression;
  return g;
}

}  // namespace tpgraph
