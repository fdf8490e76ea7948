#include "core/report/diff_report.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/base/version.hpp"
#include "core/report/dot.hpp"
#include "core/report/table.hpp"

namespace tpgraph {

namespace {

std::string us(double v) { return fmt::format("{:.1f}", v); }
std::string signed_us(double v) { return fmt::format("{:+.1f}", v); }

std::string interval_text(const MetricDiff& m) {
  if (!m.shift.interval) return "-";
  // A narrow interval gets a second decimal, so its ends read apart.
  if (m.shift.hi - m.shift.lo < 1) return fmt::format("{:+.2f} to {:+.2f}", m.shift.lo, m.shift.hi);
  return fmt::format("{:+.1f} to {:+.1f}", m.shift.lo, m.shift.hi);
}

std::string verdict_word(const MetricDiff& m) {
  const bool wait = m.metric == Metric::wait || m.metric == Metric::contention || m.metric == Metric::idle ||
                    m.metric == Metric::arrival;
  if (!m.explained.empty()) return "explained";
  if (m.change() && wait) return m.shift.shift > 0 ? "LONGER" : "SHORTER";
  if (m.change()) return m.shift.shift > 0 ? "SLOWER" : "FASTER";
  if (m.practical) return "not significant";
  return "below threshold";
}

Table figure_table(const RunDiff& d, bool changes, std::size_t limit) {
  Table t({"variant", "node / rank", "figure", "median A µs", "median B µs", "shift µs", "shift", "CI µs", "change"},
          "___rrrrr_");
  std::size_t shown = 0;
  for (const auto& m : d.metrics) {
    if (m.change() != changes || shown == limit || (!changes && m.shift.shift == 0)) continue;
    ++shown;
    t.row({m.variant, m.subject, std::string(to_string(m.metric)), us(m.shift.median_a), us(m.shift.median_b),
           signed_us(m.shift.shift), fmt::format("{:+.1f}%", m.relative * 100), interval_text(m), verdict_word(m)});
  }
  return t;
}

bool moved_without_change(const RunDiff& d) {
  return std::any_of(d.metrics.begin(), d.metrics.end(),
                     [](const MetricDiff& m) { return !m.change() && m.shift.shift != 0; });
}

std::string replays_text(std::size_t first, std::size_t used, std::size_t of) {
  return used == 0 ? fmt::format("none of {} replays", of)
                   : fmt::format("replays {}-{} ({} steady of {})", first, of - 1, used, of);
}

std::string variant_line(const VariantDiff& v) {
  return fmt::format("{}{} (matched by {}): A {}, B {}; verdict {} -> {}{}", v.a, v.a == v.b ? "" : " vs " + v.b,
                     v.matched_by, replays_text(v.a_first, v.a_used, v.a_replays),
                     replays_text(v.b_first, v.b_used, v.b_replays), v.verdict_a, v.verdict_b,
                     v.verdict_a == v.verdict_b ? "" : " (VERDICT CHANGED)");
}

std::string explain_line(const VariantDiff& v) {
  if (v.span_mean_b_us == v.span_mean_a_us)
    return fmt::format("{}: mean span {:.1f} µs in both", v.a, v.span_mean_a_us);
  std::string parts;
  for (const auto& s : v.explains) parts += fmt::format("{} {:+.1f} µs, ", s.label, s.shift_us());
  return fmt::format("{}: mean span {:.1f} -> {:.1f} µs ({:+.1f} µs) = {}other {:+.1f} µs", v.a, v.span_mean_a_us,
                     v.span_mean_b_us, v.span_mean_b_us - v.span_mean_a_us, parts, v.other_path_us);
}

// The sections after the table, as lines; `bullet` prefixes each (markdown lists).
std::string details(const RunDiff& d, std::string_view bullet) {
  std::string out;
  auto w = std::back_inserter(out);
  if (!d.structure.empty()) {
    fmt::format_to(w, "\nstructure ({} changes):\n", d.structure.size());
    for (const auto& s : d.structure) fmt::format_to(w, "{}{}: {}: {}\n", bullet, s.variant, s.kind, s.what);
  }
  std::string path;
  for (const auto& v : d.variants) {
    if (!v.path_joined.empty())
      path += fmt::format("{}{}: joined the critical path: {}\n", bullet, v.a, fmt::join(v.path_joined, ", "));
    if (!v.path_left.empty())
      path += fmt::format("{}{}: left the critical path: {}\n", bullet, v.a, fmt::join(v.path_left, ", "));
  }
  if (!path.empty()) out += "\ncritical path:\n" + path;
  out += "\nwhat explains the span's change (mean time on the critical path, B - A):\n";
  for (const auto& v : d.variants) fmt::format_to(w, "{}{}\n", bullet, explain_line(v));
  std::string causes;
  for (const auto& v : d.variants)
    for (const auto& c : v.cause_changes) causes += fmt::format("{}{}: {}\n", bullet, v.a, c);
  if (!causes.empty()) out += "\nwaits whose cause changed:\n" + causes;
  std::string order;
  for (const auto& m : d.metrics)
    if (!m.explained.empty())
      order += fmt::format("{}{}: {} {} {:+.1f} µs: {}\n", bullet, m.variant, m.subject, m.metric, m.shift.shift,
                           m.explained);
  if (!order.empty())
    out += "\nshifts explained by the order of concurrent work on the GPU (not counted as changes):\n" + order;
  return out;
}

std::string rule_line(const RunDiff& d) {
  return fmt::format(
      "{} changes among {} figures: a change is a shift of the median whose {:.0f}% interval (circular block "
      "bootstrap, {} resamples) excludes 0 and that is at least {:g}% and {:g} µs ({:g}% and {:g} µs for the host "
      "launch cost)\n",
      d.change_count(), d.metrics.size(), d.options.confidence * 100, d.options.resamples,
      d.options.practical_fraction * 100, d.options.practical_us, d.options.launch_fraction_used() * 100,
      d.options.launch_us_used());
}

}  // namespace

std::string render_diff_text(const RunDiff& d) {
  std::string out = d.comparability.line() + "\n";
  fmt::format_to(std::back_inserter(out), "A: {} · B: {}\n", d.a_origin, d.b_origin);
  for (const auto& v : d.variants) out += variant_line(v) + "\n";
  out += rule_line(d);
  if (d.change_count() > 0) out += "\n" + figure_table(d, true, d.metrics.size()).text();
  if (moved_without_change(d))
    out += fmt::format("\nlargest shifts that are not changes:\n{}", figure_table(d, false, kDiffOthersShown).text());
  return out + details(d, "  ");
}

std::string render_diff_markdown(const RunDiff& d) {
  // The comparability line first, as in every output; a heading would push it down.
  std::string out = "**" + d.comparability.line() + "**\n\n";
  fmt::format_to(std::back_inserter(out), "A: `{}` · B: `{}`\n\n", d.a_origin, d.b_origin);
  for (const auto& v : d.variants) out += "- " + variant_line(v) + "\n";
  out += "\n" + rule_line(d) + "\n";
  if (d.change_count() > 0) out += figure_table(d, true, d.metrics.size()).markdown() + "\n";
  if (moved_without_change(d))
    out += "Largest shifts that are not changes:\n\n" + figure_table(d, false, kDiffOthersShown).markdown() + "\n";
  return out + details(d, "- ");
}

std::string render_diff_json(const RunDiff& d, const GateResult* gate) {
  using json = nlohmann::ordered_json;  // fields in the order the schema lists them
  json j;
  j["kind"] = "tpgraph-diff";
  j["schema_version"] = kDiffSchemaVersion;
  j["tool_version"] = std::string(build_version());
  j["a"] = d.a_origin;
  j["b"] = d.b_origin;
  j["comparable"] = d.comparability.comparable;
  j["comparability"] = {{"line", d.comparability.line()},
                        {"reasons", d.comparability.reasons},
                        {"agreed", d.comparability.agreed},
                        {"unchecked", d.comparability.unchecked}};
  j["options"] = {{"practical_fraction", d.options.practical_fraction},
                  {"practical_us", d.options.practical_us},
                  {"launch_fraction", d.options.launch_fraction},
                  {"launch_us", d.options.launch_us},
                  {"confidence", d.options.confidence},
                  {"resamples", d.options.resamples},
                  {"seed", d.options.seed},
                  {"method", "circular block bootstrap, block ceil(sqrt(n))"}};
  j["variants"] = json::array();
  for (const auto& v : d.variants) {
    json explains = json::array();
    for (const auto& s : v.explains)
      explains.push_back({{"node", s.label}, {"a_us", s.a_us}, {"b_us", s.b_us}, {"shift_us", s.shift_us()}});
    j["variants"].push_back({{"a", v.a},
                             {"b", v.b},
                             {"matched_by", v.matched_by},
                             {"a_replays", {{"first", v.a_first}, {"used", v.a_used}, {"of", v.a_replays}}},
                             {"b_replays", {{"first", v.b_first}, {"used", v.b_used}, {"of", v.b_replays}}},
                             {"verdict_a", to_string(v.verdict_a)},
                             {"verdict_b", to_string(v.verdict_b)},
                             {"critical_path", {{"joined", v.path_joined}, {"left", v.path_left}}},
                             {"span_change",
                              {{"mean_a_us", v.span_mean_a_us},
                               {"mean_b_us", v.span_mean_b_us},
                               {"explains", explains},
                               {"other_us", v.other_path_us}}},
                             {"cause_changes", v.cause_changes}});
  }
  j["figures"] = json::array();
  for (const auto& m : d.metrics) {
    j["figures"].push_back({{"variant", m.variant},
                            {"subject", m.subject},
                            {"figure", to_string(m.metric)},
                            {"n_a", m.shift.n_a},
                            {"n_b", m.shift.n_b},
                            {"median_a_us", m.shift.median_a},
                            {"median_b_us", m.shift.median_b},
                            {"shift_us", m.shift.shift},
                            {"relative", m.relative},
                            {"ci_us", m.shift.interval ? json::array({m.shift.lo, m.shift.hi}) : json(nullptr)},
                            {"block", {m.shift.block_a, m.shift.block_b}},
                            {"stride", {m.shift.stride_a, m.shift.stride_b}},
                            {"practical", m.practical},
                            {"significant", m.significant},
                            {"explained", m.explained.empty() ? json(nullptr) : json(m.explained)},
                            {"change", m.change()}});
  }
  j["structure"] = json::array();
  for (const auto& s : d.structure)
    j["structure"].push_back({{"kind", to_string(s.kind)}, {"variant", s.variant}, {"what", s.what}});
  j["changes"] = d.change_count();
  if (gate != nullptr) {
    const auto outcome = gate->outcome == GateOutcome::pass         ? "pass"
                         : gate->outcome == GateOutcome::regression ? "regression"
                                                                    : "not comparable";
    j["gate"] = {{"outcome", outcome}, {"failures", gate->failures}};
  }
  return j.dump(2) + "\n";
}

std::string render_gate_text(const RunDiff& d, const GateResult& g) {
  std::string out = d.comparability.line() + "\n";
  for (const auto& f : g.failures) out += f + "\n";
  switch (g.outcome) {
    case GateOutcome::pass:
      out += fmt::format("gate: PASS: no figure of {} regressed beyond the budget ({} changes in all)\n",
                         d.metrics.size(), d.change_count());
      break;
    case GateOutcome::regression:
      out += fmt::format("gate: FAIL: regressions beyond the budget: {}\n", g.failures.size());
      break;
    case GateOutcome::not_comparable: out += "gate: REFUSED: the runs are not comparable\n"; break;
  }
  return out;
}

}  // namespace tpgraph
