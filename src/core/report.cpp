#include "core/report.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <cmath>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.hpp"

namespace tpgraph {

using nlohmann::json;

namespace {

// Rounded so report.json reads as measured (ns resolution for µs, 4 digits for fractions); the
// same input always rounds to the same text, which `analyze` relies on.
double round_to(double x, int decimals) {
  if (!std::isfinite(x)) return x;
  const double scale = std::pow(10.0, decimals);
  return std::round(x * scale) / scale;
}
double us3(double x) { return round_to(x, 3); }

json stats_json(const Stats& s, int decimals) {
  if (s.count == 0) return nullptr;
  return json{{"count", s.count},
              {"min", round_to(s.min, decimals)},
              {"median", round_to(s.median, decimals)},
              {"p90", round_to(s.p90, decimals)},
              {"max", round_to(s.max, decimals)}};
}

std::string version_text(int v) {
  if (v <= 0) return "unknown";
  return fmt::format("{}.{}", v / 1000, (v % 1000) / 10);
}

std::size_t display_width(std::string_view s) {
  // UTF-8: count every byte that does not continue a code point ("µs" is two columns).
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

std::string node_label(const VariantRun& v, int node) {
  if (node < 0 || static_cast<std::size_t>(node) >= v.graph.nodes.size()) return "replay start";
  return v.graph.nodes[static_cast<std::size_t>(node)].label;
}

std::string waited_on(const VariantRun& v, int node) {
  return node < 0 ? "replay start" : node_label(v, node);
}

bool shares_gpu(const VariantRun& run, const VariantTimeline& v) {
  if (run.ranks_share_gpu) return true;
  std::set<int> devices(v.rank_device.begin(), v.rank_device.end());
  return devices.size() < v.rank_device.size();
}

std::string overlap_cell(const VariantTimeline& v) {
  if (v.ranks < 2) return "-";
  if (v.overlap.count == 0) return "no data";
  std::string cell = fmt::format("{:.2f} (min {:.2f})", v.overlap.median, v.overlap.min);
  if (v.busy_overlap.count > 0) cell += fmt::format(" busy {:.2f}", v.busy_overlap.median);
  return cell;
}

std::string verdict_cell(const VariantTimeline& v) {
  if (v.ranks < 2) return std::string(to_string(Verdict::single_rank));
  return fmt::format("{} {}/{} ({})", to_string(v.verdict), v.verdict_counts[static_cast<std::size_t>(v.verdict)],
                     v.replay_count, v.basis == OverlapBasis::mixed ? "per rank" : to_string(v.basis));
}

std::string ratio_cell(const RankSummary& s) {
  if (s.cupti_over_event.count == 0) return "-";
  return fmt::format("{:.3f}{}", s.cupti_over_event.median, s.event_mismatch ? " !" : "");
}

std::string check_cell(const VariantRun& v) {
  if (!v.output_check) return "-";
  if (!v.output_check->passed()) return "FAIL";
  if (v.output_check->vacuous()) return "VACUOUS";
  return "ok";
}

std::string trace_cost_cell(const VariantTimeline& v) {
  return v.tracing_cost ? fmt::format("{:.2f}x", *v.tracing_cost) : "-";
}

std::string host_cell(const VariantTimeline& v) {
  return v.host_launch_us.count > 0 ? fmt::format("{:.1f}", v.host_launch_us.median) : "-";
}

// A node's typical wait without its label: "waited 732.1 µs: contention ...".
std::string typical_parts_text(const LayerGraph& g, const VariantTimeline& v, const NodeWaitSummary& w) {
  int from = w.ready_from;
  if (w.typical_replay >= 0)
    from = v.timings[static_cast<std::size_t>(w.typical_replay)][static_cast<std::size_t>(w.node)].ready_from;
  return wait_parts_text(g, w.typical_wait_us, w.typical, from);
}

// What a critical-path link is, without its length: "r0.gate ran (held the GPU while r1.gate waited)".
std::string link_text(const LayerGraph& g, const PathLink& l) {
  switch (l.kind) {
    case PathLinkKind::run:
      return l.held >= 0 ? fmt::format("{} ran (held the GPU while {} waited)", node_name(g, l.node), node_name(g, l.held))
                         : fmt::format("{} ran", node_name(g, l.node));
    case PathLinkKind::idle: return fmt::format("{} waited, its GPU idle", node_name(g, l.node));
    case PathLinkKind::contention:
      return fmt::format("{} waited behind {}", node_name(g, l.node), occupant_name(g, Occupant{l.occupant, true, 0}));
    case PathLinkKind::unexplained: return "unexplained (clocks of two engines disagree)";
  }
  return "";
}

// The nodes that held most of the critical path, over replays.
std::string critical_path_text(const VariantRun& run, const VariantTimeline& v, std::size_t count) {
  const CriticalPathSummary& cp = v.critical_path;
  if (cp.nodes.empty() || v.span_us.count == 0) return "none";
  std::string out;
  for (std::size_t i = 0; i < std::min(count, cp.nodes.size()); ++i) {
    const PathNodeSummary& p = cp.nodes[i];
    const double us = p.run_us.median + p.wait_us.median;
    out += fmt::format("{}{} {:.0f}%", out.empty() ? "" : ", ", node_name(run.graph, p.node),
                       100.0 * us / v.span_us.median);
  }
  if (cp.speedup_node >= 0)
    out += fmt::format("; speed up {} first ({:.1f} µs on the path)", node_name(run.graph, cp.speedup_node),
                       cp.speedup_us);
  return out;
}

std::string outlier_rule_text(const VariantTimeline& v) {
  return fmt::format("span further than max({:g} x MAD, {:.0f}% of the median) = {:.1f} µs from the median {:.1f} µs, "
                     "or a verdict other than the variant's",
                     kOutlierMads, kOutlierFraction * 100, v.outlier_threshold_us, v.span_us.median);
}

std::string outlier_text(const VariantRun& run, const VariantTimeline& v, const OutlierReplay& o) {
  std::string out = fmt::format("replay {}: span {:.1f} µs, {}", o.replay, o.span_us, to_string(o.verdict));
  if (o.late_node >= 0) {
    const NodeTiming& t = v.timings[static_cast<std::size_t>(o.replay)][static_cast<std::size_t>(o.late_node)];
    out += fmt::format("; {} started {:+.1f} µs from its usual offset, {}", node_name(run.graph, o.late_node),
                       o.late_by_us, wait_parts_text(run.graph, t.wait_us, t.parts, t.ready_from));
    if (const NodeWaitSummary* w = v.wait_of(o.late_node))
      out += fmt::format(" (its median wait {:.1f})", w->wait_us.median);
  }
  if (o.slow_node >= 0 && o.slow_by_us >= 0.05)
    out += fmt::format("; {} ran {:.1f} µs longer than its median", node_name(run.graph, o.slow_node), o.slow_by_us);
  return out;
}

// The outlier whose span is furthest from the median; nullptr when there is none.
const OutlierReplay* worst_outlier(const VariantTimeline& v) {
  const OutlierReplay* worst = nullptr;
  for (const auto& o : v.outliers)
    if (!worst || std::abs(o.span_us - v.span_us.median) > std::abs(worst->span_us - v.span_us.median)) worst = &o;
  return worst;
}

std::string steadiness_text(const VariantTimeline& v) {
  const Steadiness& st = v.steadiness;
  if (!st.known) return "steadiness not judged (fewer than 8 replays)";
  return fmt::format("{}: median span {:.1f} µs in the first {} replays, {:.1f} µs in the last {} (allowance {:.1f} µs); "
                     "verdict {} then {}",
                     st.steady ? "steady" : "NOT STEADY", st.first_span_us, st.quarter, st.last_span_us, st.quarter,
                     st.threshold_us, to_string(st.first_verdict), to_string(st.last_verdict));
}

std::string geometry_text(const Geometry& g) {
  return fmt::format("tokens={} experts={} top_k={} hidden={} ff={} ranks={}", g.tokens, g.experts, g.top_k,
                     g.hidden, g.ff, g.ranks);
}

// Rows of cells, or free lines between them; columns padded to the widest cell.
class Table {
 public:
  explicit Table(std::vector<std::string> header, std::string right_aligned)
      : header_(std::move(header)), right_(std::move(right_aligned)) {}
  void row(std::vector<std::string> cells) { rows_.push_back({std::move(cells), {}}); }
  void line(std::string text) { rows_.push_back({{}, std::move(text)}); }

  [[nodiscard]] std::string text() const {
    std::vector<std::size_t> width(header_.size(), 0);
    for (std::size_t c = 0; c < header_.size(); ++c) width[c] = display_width(header_[c]);
    for (const auto& r : rows_)
      for (std::size_t c = 0; c < r.cells.size(); ++c) width[c] = std::max(width[c], display_width(r.cells[c]));
    std::string out;
    const auto emit = [&](const std::vector<std::string>& cells) {
      std::string line;
      for (std::size_t c = 0; c < cells.size(); ++c) {
        const std::size_t pad = width[c] - display_width(cells[c]);
        const bool right = c < right_.size() && right_[c] == 'r';
        if (c > 0) line += "  ";
        if (right) line.append(pad, ' ');
        line += cells[c];
        if (!right) line.append(pad, ' ');
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    };
    emit(header_);
    for (const auto& r : rows_) {
      if (r.cells.empty()) out += r.free + "\n";
      else emit(r.cells);
    }
    return out;
  }

  [[nodiscard]] std::string markdown() const {
    std::string out;
    const auto emit = [&](const std::vector<std::string>& cells) {
      out += "|";
      for (const auto& c : cells) {
        out += ' ';
        out += escape_md(c);
        out += " |";
      }
      out += "\n";
    };
    emit(header_);
    out += "|";
    for (std::size_t c = 0; c < header_.size(); ++c)
      out += (c < right_.size() && right_[c] == 'r') ? " ---: |" : " --- |";
    out += "\n";
    for (const auto& r : rows_) {
      if (!r.cells.empty()) {
        emit(r.cells);
      } else {
        std::vector<std::string> cells(header_.size());
        cells[0] = r.free;
        emit(cells);
      }
    }
    return out;
  }

  static std::string escape_md(std::string_view s) {
    std::string out;
    for (const char c : s) {
      if (c == '|') out += "\\|";
      else out += c;
    }
    return out;
  }

 private:
  struct Row {
    std::vector<std::string> cells;
    std::string free;
  };
  std::vector<std::string> header_;
  std::string right_;
  std::vector<Row> rows_;
};

// "host: capture 3.1 ms, instantiate 1.2 ms, launch 28.5 µs from idle, 9.8 µs queued"; "" when not measured.
std::string host_costs_text(const VariantRun& vr) {
  const HostCosts& c = vr.costs;
  if (c.capture_ms <= 0 && c.instantiate_ms <= 0 && c.queued_launch_us.empty()) return "";
  std::string out = "host:";
  if (c.capture_ms > 0) out += fmt::format(" capture {:.2f} ms, instantiate {:.2f} ms,", c.capture_ms, c.instantiate_ms);
  const Stats idle = summarize(vr.host_launch_us);
  const Stats queued = summarize(c.queued_launch_us);
  if (idle.count) out += fmt::format(" launch {:.1f} µs from idle", idle.median);
  if (queued.count) out += fmt::format("{} {:.1f} µs queued back to back", idle.count ? "," : " launch", queued.median);
  return out;
}

// The side-by-side table both the terminal and report.md show.
Table summary_table(const RunData& run, const RunAnalysis& analysis, bool waits_as_lines) {
  Table t({"variant", "rank", "GPU", "offset µs", "span µs", "cupti/event", "overlap", "verdict", "launch µs",
           "trace cost", "output", "collection"},
          "llrrrrllrrll");
  for (std::size_t i = 0; i < analysis.variants.size(); ++i) {
    const VariantTimeline& v = analysis.variants[i];
    const VariantRun& vr = run.variants[i];
    for (std::size_t k = 0; k < v.rank_summaries.size(); ++k) {
      const RankSummary& s = v.rank_summaries[k];
      const bool first = k == 0;
      t.row({first ? v.name : "", fmt::format("r{}", s.rank), fmt::format("{}", s.device),
             s.offset_us.count ? fmt::format("{:.1f}", s.offset_us.median) : "-",
             s.span_us.count ? fmt::format("{:.1f}", s.span_us.median) : "-", ratio_cell(s),
             first ? overlap_cell(v) : "", first ? verdict_cell(v) : "", first ? host_cell(v) : "",
             first ? trace_cost_cell(v) : "", first ? check_cell(vr) : "",
             first ? (v.health.clean() ? "clean" : "NOT CLEAN") : ""});
    }
    if (waits_as_lines) {
      if (v.ranks >= 2) t.line(fmt::format("    verdict: {}", verdict_basis_text(v)));
      for (std::size_t w = 0; w < std::min<std::size_t>(3, v.waits.size()); ++w)
        t.line(fmt::format("    {} {}", w == 0 ? "top waits:" : "          ", typical_wait_text(vr.graph, v, v.waits[w])));
      t.line(fmt::format("    critical path: {}", critical_path_text(vr, v, 4)));
      const OutlierReplay* worst = worst_outlier(v);
      t.line(fmt::format("    outliers: {} of {} replays{}{}", v.outliers.size(), v.replay_count,
                         worst ? "; furthest: " : "", worst ? outlier_text(vr, v, *worst) : ""));
      t.line(fmt::format("    {}", steadiness_text(v)));
      if (const std::string costs = host_costs_text(vr); !costs.empty()) t.line(fmt::format("    {}", costs));
    }
  }
  return t;
}

std::vector<std::string> run_banners(const RunData& run, const RunAnalysis& analysis) {
  std::vector<std::string> lines;
  for (const auto& v : analysis.variants) {
    const std::string b = collection_banner(v);
    if (!b.empty()) lines.push_back(fmt::format("{} [{}]", b, v.name));
  }
  std::set<std::string> seen;
  for (std::size_t i = 0; i < analysis.variants.size(); ++i) {
    const std::string note = shared_gpu_note(run.env, analysis.variants[i]);
    if (!note.empty() && seen.insert(note).second) lines.push_back("NOTE: " + note);
  }
  for (const auto& v : analysis.variants)
    if (v.steadiness.known && !v.steadiness.steady)
      lines.push_back(fmt::format("NOTE: {} is {} — its early and late replays differ, so its medians describe neither",
                                  v.name, steadiness_text(v)));
  return lines;
}

// One geometry and replay count for the whole run, or empty when variants differ.
std::string common_setup(const RunData& run) {
  if (run.variants.empty()) return "no variants";
  if (std::all_of(run.variants.begin(), run.variants.end(), [](const VariantRun& v) { return v.graph.traced(); }))
    return fmt::format("traced program · {} graph{} launched", run.variants.size(), run.variants.size() == 1 ? "" : "s");
  const Scenario& s0 = run.variants.front().scenario;
  for (const auto& v : run.variants)
    if (!(v.scenario.geometry == s0.geometry) || v.scenario.replays != s0.replays) return "";
  return fmt::format("{} · {} replays ({} warm-up dropped)", geometry_text(s0.geometry), s0.replays, s0.warmup);
}

json scenario_json(const Scenario& s) { return json::parse(scenario_to_json(s)); }

json geometry_json(const Geometry& g) {
  return json{{"experts", g.experts}, {"top_k", g.top_k}, {"hidden", g.hidden},
              {"ff", g.ff},           {"tokens", g.tokens}, {"ranks", g.ranks}};
}

json opt_json(const std::optional<double>& x, int decimals) {
  return x ? json(round_to(*x, decimals)) : json(nullptr);
}

json occupants_json(const LayerGraph& g, const WaitParts& p) {
  json out = json::array();
  for (const auto& o : p.occupants)
    out.push_back(json{{"node", o.node}, {"label", occupant_name(g, o)}, {"other_replay", o.other_replay}, {"us", us3(o.us)}});
  return out;
}

json parts_json(const LayerGraph& g, const NodeTiming& t) {
  return json{{"wait_us", us3(t.wait_us)},
              {"waited_on_node", t.ready_from},
              {"contention_us", us3(t.parts.contention_us)},
              {"idle_us", us3(t.parts.idle_us)},
              {"arrival_us", us3(t.parts.arrival_us)},
              {"own_chain_node", t.parts.own_from},
              {"occupants", occupants_json(g, t.parts)},
              {"text", wait_parts_text(g, t.wait_us, t.parts, t.ready_from)}};
}

json health_json(const VariantTimeline& v) {
  const TimelineHealth& h = v.health;
  return json{{"clean", h.clean()},
              {"problems", h.problems()},
              {"dropped", h.collected.dropped},
              {"no_timestamp", h.collected.no_timestamp},
              {"unmatched", h.collected.unmatched},
              {"records", h.records},
              {"unmatched_seen", h.unmatched_seen},
              {"no_timestamp_seen", h.no_timestamp_seen},
              {"replay_out_of_range", h.replay_out_of_range},
              {"duplicate", h.duplicate},
              {"missing", h.missing}};
}

// `text`, a value as dump(1) prints it at the top level, as it prints `depth` levels down: every
// line after the first indented by `depth` more spaces (JSON strings hold no raw newline).
std::string indented(const std::string& text, std::size_t depth) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    out += c;
    if (c == '\n') out.append(depth, ' ');
  }
  return out;
}

using Sink = std::function<void(std::string_view)>;

// `object` as dump(1) prints it at `depth`; `member(key, depth)` may write a member's value itself
// (returning true), for values too large to hold.
void write_object(const json& object, std::size_t depth, const Sink& sink,
                  const std::function<bool(const std::string&, std::size_t)>& member) {
  if (object.empty()) {
    sink("{}");
    return;
  }
  sink("{\n");
  std::size_t k = 0;
  for (auto it = object.begin(); it != object.end(); ++it, ++k) {
    sink(std::string(depth + 1, ' ') + json(it.key()).dump() + ": ");
    if (!member(it.key(), depth + 1)) sink(indented(it->dump(1), depth + 1));
    sink(k + 1 < object.size() ? ",\n" : "\n");
  }
  sink(std::string(depth, ' ') + "}");
}

// An array of `count` elements as dump(1) prints it at `depth`; `element(i, depth)` writes each.
void write_array(std::size_t count, std::size_t depth, const Sink& sink,
                 const std::function<void(std::size_t, std::size_t)>& element) {
  if (count == 0) {
    sink("[]");
    return;
  }
  sink("[\n");
  for (std::size_t i = 0; i < count; ++i) {
    sink(std::string(depth + 1, ' '));
    element(i, depth + 1);
    sink(i + 1 < count ? ",\n" : "\n");
  }
  sink(std::string(depth, ' ') + "]");
}

// One replay of report.json's "replays" list.
json replay_json(const VariantRun& vr, const VariantTimeline& v, const RunAnalysis& analysis, const ReplayTimeline& rt) {
  json rank_rows = json::array();
  for (const auto& w : rt.ranks) {
    rank_rows.push_back(json{{"rank", w.rank},
                             {"present", w.present},
                             {"offset_us", w.present ? json(us3(w.offset_us)) : json(nullptr)},
                             {"span_us", w.present ? json(us3(w.span_us)) : json(nullptr)},
                             {"ops", w.ops},
                             {"event_span_us", opt_json(w.event_span_us, 3)}});
  }
  json rt_vs_root = json::array();
  for (const auto& o : rt.overlap_vs_root) rt_vs_root.push_back(opt_json(o, 4));
  json rt_busy_vs_root = json::array();
  for (const auto& o : rt.busy_vs_root) rt_busy_vs_root.push_back(opt_json(o, 4));
  // The path of the median-span replay and of each outlier: every replay's would grow the file
  // by a few hundred lines per replay; `analyze --replay N` prints any other.
  const bool path_listed =
      rt.replay == v.critical_path.typical_replay ||
      std::any_of(v.outliers.begin(), v.outliers.end(), [&](const OutlierReplay& o) { return o.replay == rt.replay; });
  json path = path_listed ? json::array() : json(nullptr);
  for (const auto& l : path_listed ? rt.critical_path : std::vector<PathLink>{})
    path.push_back(json{{"kind", std::string(to_string(l.kind))},
                        {"node", l.node},
                        {"label", l.node >= 0 ? json(node_name(vr.graph, l.node)) : json(nullptr)},
                        {"held", l.held},
                        {"occupant", l.occupant},
                        {"us", us3(l.us)}});
  return json{{"replay", rt.replay},
              {"begin_us", rt.present ? json(us3(static_cast<double>(rt.begin_ns - analysis.base_ns) / 1000.0))
                                      : json(nullptr)},
              {"duration_us", rt.present ? json(us3(static_cast<double>(rt.end_ns - rt.begin_ns) / 1000.0))
                                         : json(nullptr)},
              {"overlap", opt_json(rt.overlap, 4)},
              {"overlap_vs_root", rt_vs_root},
              {"busy_overlap", opt_json(rt.busy_overlap, 4)},
              {"busy_vs_root", rt_busy_vs_root},
              {"verdict_overlap", opt_json(rt.verdict_overlap, 4)},
              {"verdict", std::string(to_string(rt.verdict))},
              {"span_us", rt.present ? json(us3(rt.span_us)) : json(nullptr)},
              {"ranks", rank_rows},
              {"critical_path", path}};
}

json variant_json(const RunData& run, const RunAnalysis& analysis, std::size_t i, const std::string& folder) {
  const VariantRun& vr = run.variants[i];
  const VariantTimeline& v = analysis.variants[i];
  json ranks = json::array();
  for (const auto& s : v.rank_summaries) {
    ranks.push_back(json{{"rank", s.rank},
                         {"device", s.device},
                         {"span_us", stats_json(s.span_us, 3)},
                         {"offset_us", stats_json(s.offset_us, 3)},
                         {"event_span_us", stats_json(s.event_span_us, 3)},
                         {"cupti_over_event", stats_json(s.cupti_over_event, 4)},
                         {"event_minus_cupti_us", stats_json(s.event_minus_cupti_us, 3)},
                         {"event_mismatch", s.event_mismatch}});
  }
  json vs_root = json::array();
  for (const auto& s : v.overlap_vs_root) vs_root.push_back(stats_json(s, 4));
  json counts = json::object();
  for (const Verdict verdict : {Verdict::overlapped, Verdict::partial, Verdict::serialized,
                                Verdict::single_rank, Verdict::no_data})
    counts[std::string(to_string(verdict))] = v.verdict_counts[static_cast<std::size_t>(verdict)];
  json waits = json::array();
  for (const auto& w : v.waits) {
    const Node& n = vr.graph.nodes[static_cast<std::size_t>(w.node)];
    waits.push_back(json{{"node", w.node},
                         {"label", n.label},
                         {"rank", n.rank},
                         {"kind", std::string(to_string(n.kind))},
                         {"waited_on", waited_on(vr, w.ready_from)},
                         {"waited_on_node", w.ready_from},
                         {"wait_us", stats_json(w.wait_us, 3)},
                         {"duration_us", stats_json(w.duration_us, 3)},
                         {"contention_us", stats_json(w.contention_us, 3)},
                         {"idle_us", stats_json(w.idle_us, 3)},
                         {"arrival_us", stats_json(w.arrival_us, 3)},
                         {"typical", json{{"replay", w.typical_replay},
                                          {"wait_us", us3(w.typical_wait_us)},
                                          {"contention_us", us3(w.typical.contention_us)},
                                          {"idle_us", us3(w.typical.idle_us)},
                                          {"arrival_us", us3(w.typical.arrival_us)},
                                          {"own_chain_node", w.typical.own_from},
                                          {"occupants", occupants_json(vr.graph, w.typical)},
                                          {"text", typical_parts_text(vr.graph, v, w)}}}});
  }
  const CriticalPathSummary& cp = v.critical_path;
  json path_nodes = json::array();
  for (const auto& p : cp.nodes)
    path_nodes.push_back(json{{"node", p.node},
                              {"label", node_name(vr.graph, p.node)},
                              {"replays_on_path", p.replays_on_path},
                              {"run_us", stats_json(p.run_us, 3)},
                              {"wait_us", stats_json(p.wait_us, 3)}});
  json outliers = json::array();
  for (const auto& o : v.outliers) {
    json row{{"replay", o.replay},
             {"span_us", us3(o.span_us)},
             {"verdict", std::string(to_string(o.verdict))},
             {"span_departs", o.span_departs},
             {"verdict_departs", o.verdict_departs},
             {"late_node", o.late_node},
             {"late_label", o.late_node >= 0 ? json(node_name(vr.graph, o.late_node)) : json(nullptr)},
             {"late_by_us", us3(o.late_by_us)},
             {"excess_wait_us", us3(o.excess_wait_us)},
             {"slow_node", o.slow_node},
             {"slow_label", o.slow_node >= 0 ? json(node_name(vr.graph, o.slow_node)) : json(nullptr)},
             {"slow_by_us", us3(o.slow_by_us)},
             {"text", outlier_text(vr, v, o)}};
    if (o.late_node >= 0) {
      const NodeTiming& t = v.timings[static_cast<std::size_t>(o.replay)][static_cast<std::size_t>(o.late_node)];
      row["late_wait"] = parts_json(vr.graph, t);
    }
    outliers.push_back(std::move(row));
  }
  const Steadiness& st = v.steadiness;
  const json steadiness =
      st.known ? json{{"known", true},
                      {"steady", st.steady},
                      {"quarter", st.quarter},
                      {"first_span_us", us3(st.first_span_us)},
                      {"last_span_us", us3(st.last_span_us)},
                      {"threshold_us", us3(st.threshold_us)},
                      {"first_verdict", std::string(to_string(st.first_verdict))},
                      {"last_verdict", std::string(to_string(st.last_verdict))},
                      {"text", steadiness_text(v)}}
               : json{{"known", false}, {"text", steadiness_text(v)}};
  json check = nullptr;
  if (vr.output_check) {
    const Comparison& c = *vr.output_check;
    check = json{{"passed", c.passed()},        {"vacuous", c.vacuous()},         {"compared", c.compared},
                 {"mismatches", c.mismatches},  {"nonzero", c.nonzero},           {"nan_count", c.nan_count},
                 {"absmax", c.absmax},          {"max_abs_err", c.max_abs_err},   {"max_rel_err", c.max_rel_err},
                 {"tolerance", c.tolerance}};
  }
  json notes = json::array();
  for (const auto& n : vr.notes) notes.push_back(n);
  const std::string shared = shared_gpu_note(run.env, v);
  return json{
      {"name", v.name},
      {"folder", folder},
      {"scenario", scenario_json(vr.scenario)},
      {"geometry", geometry_json(vr.scenario.geometry)},
      {"layers", v.layers},
      {"replays_analysed", v.replay_count},
      {"visible_devices", vr.visible_devices},
      {"rank_devices", v.rank_device},
      {"ranks_share_gpu", shares_gpu(vr, v)},
      {"ranks_share_gpu_note", shared},
      {"collection_clean", v.health.clean()},
      {"collection", health_json(v)},
      {"summary",
       json{{"verdict", std::string(to_string(v.verdict))},
            {"verdict_means", shared.empty() ? "concurrency of the ranks' GPUs" : "stream concurrency on one GPU"},
            {"verdict_basis", std::string(to_string(v.basis))},
            {"verdict_overlap", stats_json(v.verdict_overlap, 4)},
            {"verdict_text", verdict_basis_text(v)},
            {"window_verdict", std::string(to_string(v.window_verdict))},
            {"busy_verdict", std::string(to_string(v.busy_verdict))},
            {"verdict_counts", counts},
            {"overlap", stats_json(v.overlap, 4)},
            {"overlap_vs_root", vs_root},
            {"busy_overlap", stats_json(v.busy_overlap, 4)},
            {"span_us", stats_json(v.span_us, 3)},
            {"critical_path",
             json{{"typical_replay", cp.typical_replay},
                  {"speedup_node", cp.speedup_node},
                  {"speedup_label", cp.speedup_node >= 0 ? json(node_name(vr.graph, cp.speedup_node)) : json(nullptr)},
                  {"speedup_us", us3(cp.speedup_us)},
                  {"nodes", path_nodes}}},
            {"outlier_rule",
             json{{"mads", kOutlierMads},
                  {"fraction_of_median", kOutlierFraction},
                  {"span_mad_us", us3(v.span_mad_us)},
                  {"threshold_us", us3(v.outlier_threshold_us)},
                  {"text", outlier_rule_text(v)}}},
            {"outliers", outliers},
            {"steadiness", steadiness},
            {"ranks", ranks},
            {"host_launch_us", stats_json(v.host_launch_us, 3)},
            {"host_costs",
             json{{"capture_ms", round_to(vr.costs.capture_ms, 3)},
                  {"instantiate_ms", round_to(vr.costs.instantiate_ms, 3)},
                  {"queued_launch_us", stats_json(summarize(vr.costs.queued_launch_us), 3)}}},
            {"tracing",
             json{{"replay_us_untraced", us3(vr.replay_us_untraced)},
                  {"replay_us_traced", us3(vr.replay_us_traced)},
                  {"cost", opt_json(v.tracing_cost, 4)}}},
            {"node_waits", waits},
            {"output_check", check}}},
      {"replays", nullptr},  // streamed by write_report_json: one replay at a time
      {"notes", notes}};
}

}  // namespace

std::vector<std::string> variant_folder_names(const RunData& run) {
  std::vector<std::string> names;
  std::set<std::string> used;
  for (const auto& v : run.variants) {
    std::string base;
    for (const char c : v.scenario.name) {
      const bool safe = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                        c == '_' || c == '.';
      base += safe ? c : '_';
    }
    if (base.empty() || base.front() == '.') base = "variant" + base;
    std::string name = base;
    for (int n = 2; !used.insert(name).second; ++n) name = fmt::format("{}-{}", base, n);
    names.push_back(name);
  }
  return names;
}

std::string device_label(const RunEnvironment& env, int ordinal) {
  for (const auto& d : env.devices)
    if (d.ordinal == ordinal && !d.name.empty()) return fmt::format("GPU {}: {}", ordinal, d.name);
  return fmt::format("GPU {}", ordinal);
}

std::string shared_gpu_note(const RunEnvironment& env, const VariantTimeline& v) {
  std::map<int, std::vector<int>> ranks_of;
  for (std::size_t r = 0; r < v.rank_device.size(); ++r) ranks_of[v.rank_device[r]].push_back(static_cast<int>(r));
  std::string groups;
  for (const auto& [device, ranks] : ranks_of) {
    if (ranks.size() < 2) continue;
    std::string list;
    for (std::size_t i = 0; i < ranks.size(); ++i)
      list += fmt::format("{}{}", i == 0 ? "" : (i + 1 == ranks.size() ? " and " : ", "), ranks[i]);
    groups += fmt::format("{}ranks {} share {}", groups.empty() ? "" : "; ", list, device_label(env, device));
  }
  if (groups.empty() && !v.ranks_share_gpu) return "";
  if (groups.empty()) groups = "ranks share a GPU";
  return groups +
         " (separate streams): the verdict measures how far the ranks' streams ran concurrently on one GPU, "
         "not whether two GPUs overlapped";
}

std::string collection_banner(const VariantTimeline& v) {
  if (v.health.clean()) return "";
  return fmt::format("!!! COLLECTION NOT CLEAN: {} — the timeline below is incomplete !!!", v.health.problems());
}

std::string verdict_basis_text(const VariantTimeline& v) {
  if (v.ranks < 2) return "one rank: no verdict";
  if (v.verdict_overlap.count == 0) return "no overlap measured (a rank had no records)";
  const auto other = [](std::string_view name, const Stats& st, Verdict alone) {
    if (st.count == 0) return fmt::format("{} overlap not measured", name);
    return fmt::format("{} overlap {:.2f} (alone it would say {})", name, st.median, to_string(alone));
  };
  switch (v.basis) {
    case OverlapBasis::busy:
      return fmt::format(
          "{} on busy overlap {:.2f}: ranks share the root's GPU, so the verdict is on their kernels and copies "
          "running at the same time; {}",
          to_string(v.verdict), v.verdict_overlap.median, other("window", v.overlap, v.window_verdict));
    case OverlapBasis::window:
      return fmt::format("{} on window overlap {:.2f}: ranks on different GPUs; {}", to_string(v.verdict),
                         v.verdict_overlap.median, other("busy", v.busy_overlap, v.busy_verdict));
    case OverlapBasis::mixed:
      return fmt::format(
          "{} on overlap {:.2f}, busy overlap for ranks on the root's GPU and window overlap for the others; "
          "window {:.2f}, busy {:.2f}",
          to_string(v.verdict), v.verdict_overlap.median, v.overlap.median, v.busy_overlap.median);
  }
  return "";
}

std::string node_name(const LayerGraph& g, int node) {
  if (node < 0 || static_cast<std::size_t>(node) >= g.nodes.size()) return "replay start";
  return g.nodes[static_cast<std::size_t>(node)].label;
}

std::string occupant_name(const LayerGraph& g, const Occupant& o) {
  if (o.node < 0 || static_cast<std::size_t>(o.node) >= g.nodes.size()) return "work matching no node";
  return o.other_replay ? node_name(g, o.node) + " of another replay" : node_name(g, o.node);
}

std::string wait_parts_text(const LayerGraph& g, double wait_us, const WaitParts& parts, int ready_from) {
  std::string out = fmt::format("waited {:.1f} µs", wait_us);
  std::string split;
  if (parts.contention_us >= 0.05) {
    std::string who;
    double named = 0;
    for (const Occupant& o : parts.occupants) {
      who += fmt::format("{}{} {:.1f}", who.empty() ? "" : ", ", occupant_name(g, o), o.us);
      named += o.us;
    }
    if (parts.contention_us - named >= 0.05) who += fmt::format(", others {:.1f}", parts.contention_us - named);
    split += fmt::format("contention {:.1f} ({})", parts.contention_us, who);
  }
  if (parts.idle_us >= 0.05) split += fmt::format("{}idle {:.1f}", split.empty() ? "" : ", ", parts.idle_us);
  if (!split.empty()) out += ": " + split;
  if (parts.own_from >= 0 && parts.arrival_us >= 0.05)
    out += fmt::format("; arrival {:.1f} ({} ended after {})", parts.arrival_us, node_name(g, ready_from),
                       node_name(g, parts.own_from));
  return out;
}

std::string typical_wait_text(const LayerGraph& g, const VariantTimeline& v, const NodeWaitSummary& w) {
  return node_name(g, w.node) + " " + typical_parts_text(g, v, w);
}

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

std::string render_report_markdown(const RunData& run, const RunAnalysis& analysis) {
  std::string out;
  auto it = std::back_inserter(out);
  const auto folders = variant_folder_names(run);
  fmt::format_to(it, "# tpgraph run report\n\n");
  for (const auto& line : run_banners(run, analysis)) fmt::format_to(it, "**{}**\n\n", line);
  const std::string setup = common_setup(run);
  if (!setup.empty()) fmt::format_to(it, "{}\n\n", setup);
  fmt::format_to(it, "{}.\n\n", verdict_thresholds_text());

  fmt::format_to(it, "## Variants side by side\n\n");
  fmt::format_to(it,
                 "Medians over replays. Overlap: window overlap, median (min) over replays; busy: the busy "
                 "overlap (kernels and copies of both ranks running at the same time). cupti/event: CUPTI span over the "
                 "event-node span (`!` beyond {:.0f}%). Launch: host time of one launch call.\n\n",
                 kEventSpanTolerance * 100);
  out += summary_table(run, analysis, false).markdown();
  out += "\n";

  for (std::size_t i = 0; i < analysis.variants.size(); ++i) {
    const VariantTimeline& v = analysis.variants[i];
    const VariantRun& vr = run.variants[i];
    const Scenario& s = vr.scenario;
    fmt::format_to(it, "## {}\n\n", v.name);
    if (!s.description.empty()) fmt::format_to(it, "{}\n\n", s.description);
    const std::string banner = collection_banner(v);
    if (!banner.empty()) fmt::format_to(it, "**{}**\n\n", banner);
    const std::string shared = shared_gpu_note(run.env, v);
    if (!shared.empty()) fmt::format_to(it, "**NOTE: {}.**\n\n", shared);
    if (vr.graph.traced()) {
      fmt::format_to(it, "- {} launches analysed; outputs in `{}/`\n", v.replay_count, folders[i]);
      for (const auto& note : vr.notes)
        if (note.starts_with("traced ")) fmt::format_to(it, "- {}\n", note);
      fmt::format_to(it, "\n");
    } else
    fmt::format_to(it,
                   "- {}\n- peer copy {}, copy rows {}, join {}, layers {}, root busy {}, alloc {}, issue {}, "
                   "layout {}, weights {}\n- {} replays analysed ({} warm-up dropped); outputs in `{}/`\n\n",
                   geometry_text(s.geometry), to_string(s.peer_copy),
                   s.copy_rows ? fmt::format("{}", *s.copy_rows) : "all", to_string(s.join), s.layers, s.root_busy,
                   to_string(s.alloc), to_string(s.issue), to_string(s.layout), to_string(s.weights), v.replay_count,
                   s.warmup, folders[i]);

    fmt::format_to(it, "### Ranks (µs: min / median / p90)\n\n");
    Table ranks({"rank", "GPU", "start offset", "span", "event span", "cupti/event", "event - cupti"}, "llrrrrr");
    const auto triple = [](const Stats& st, int decimals) {
      if (st.count == 0) return std::string("-");
      return fmt::format("{:.{}f} / {:.{}f} / {:.{}f}", st.min, decimals, st.median, decimals, st.p90, decimals);
    };
    for (const auto& rs : v.rank_summaries) {
      ranks.row({fmt::format("r{}", rs.rank), device_label(run.env, rs.device), triple(rs.offset_us, 1),
                 triple(rs.span_us, 1), triple(rs.event_span_us, 1),
                 rs.cupti_over_event.count ? fmt::format("{:.4f}{}", rs.cupti_over_event.median,
                                                         rs.event_mismatch ? " (off by more than 2%)" : "")
                                           : "-",
                 triple(rs.event_minus_cupti_us, 1)});
    }
    out += ranks.markdown();
    fmt::format_to(it,
                   "\nThe event span runs from the rank's begin event-record node to its end node; CUPTI sees "
                   "only kernels and copies, so the event span also holds the gaps before the first and after "
                   "the last of them (the \"event - cupti\" column).\n\n");

    if (v.ranks >= 2) {
      fmt::format_to(it, "### Overlap\n\n");
      fmt::format_to(it, "Verdict {}.\n\n", verdict_basis_text(v));
      const auto stats_line = [&](std::string_view name, const Stats& st) {
        if (st.count == 0) return fmt::format("- {}: not measured\n", name);
        return fmt::format("- {}: median {:.4f}, min {:.4f}, p90 {:.4f}, max {:.4f}\n", name, st.median, st.min, st.p90,
                           st.max);
      };
      out += stats_line("window overlap (time the ranks' windows share / the shorter window)", v.overlap);
      out += stats_line("busy overlap (time both ranks had a kernel or copy running / the less busy rank's busy time)",
                        v.busy_overlap);
      fmt::format_to(it, "- replays: {} OVERLAPPED, {} PARTIAL, {} SERIALIZED, {} without data\n\n",
                     v.verdict_counts[static_cast<std::size_t>(Verdict::overlapped)],
                     v.verdict_counts[static_cast<std::size_t>(Verdict::partial)],
                     v.verdict_counts[static_cast<std::size_t>(Verdict::serialized)],
                     v.verdict_counts[static_cast<std::size_t>(Verdict::no_data)]);
      if (v.busy_overlap.count > 0 && v.overlap.count > 0 && v.busy_verdict != v.window_verdict)
        fmt::format_to(it,
                       "The windows overlap ({:.2f}) more than the work did ({:.2f}): the ranks' kernels took turns "
                       "for much of the time their windows shared.\n\n",
                       v.overlap.median, v.busy_overlap.median);
      if (v.ranks > 2) {
        for (std::size_t k = 1; k < v.overlap_vs_root.size(); ++k)
          fmt::format_to(it, "- r{} vs r0: window median {:.4f}, min {:.4f}\n", k, v.overlap_vs_root[k].median,
                         v.overlap_vs_root[k].min);
        out += "\n";
      }
    }

    fmt::format_to(it, "### Largest waits (µs)\n\n");
    fmt::format_to(it,
                   "Wait = start - the latest end of what the node depends on; it splits into contention (its GPU ran "
                   "other recorded work; the occupants named) and idle (nothing recorded ran). The breakdown is the "
                   "node's median replay's, so its parts add up to that replay's wait. Arrival: where the latest "
                   "predecessor is on another rank, how much later it ended than the node's own chain.\n\n");
    Table waits({"node", "rank", "kind", "waited on", "median", "p90", "max", "why (median replay)"}, "llllrrrl");
    for (std::size_t w = 0; w < std::min<std::size_t>(10, v.waits.size()); ++w) {
      const NodeWaitSummary& nw = v.waits[w];
      const Node& n = vr.graph.nodes[static_cast<std::size_t>(nw.node)];
      waits.row({n.label, fmt::format("r{}", n.rank), std::string(to_string(n.kind)), waited_on(vr, nw.ready_from),
                 fmt::format("{:.1f}", nw.wait_us.median), fmt::format("{:.1f}", nw.wait_us.p90),
                 fmt::format("{:.1f}", nw.wait_us.max),
                 fmt::format("replay {}: {}", nw.typical_replay, typical_parts_text(vr.graph, v, nw))});
    }
    out += waits.markdown();
    out += "\n";

    const CriticalPathSummary& cp = v.critical_path;
    fmt::format_to(it, "### Critical path\n\n");
    if (cp.typical_replay >= 0) {
      const ReplayTimeline& rt = v.replays[static_cast<std::size_t>(cp.typical_replay)];
      fmt::format_to(it,
                     "The chain of runs and waits that set each replay's span, walked back from the node that ended "
                     "last: through the predecessor that made a node ready, or through the node that held the GPU "
                     "while it waited (contention). Replay {} (median span {:.1f} µs):\n\n",
                     cp.typical_replay, rt.span_us);
      Table path({"#", "link", "µs", "share"}, "rlrr");
      for (std::size_t li = 0; li < rt.critical_path.size(); ++li) {
        const PathLink& l = rt.critical_path[li];
        path.row({fmt::format("{}", li + 1), link_text(vr.graph, l), fmt::format("{:.1f}", l.us),
                  fmt::format("{:.1f}%", rt.span_us > 0 ? 100.0 * l.us / rt.span_us : 0.0)});
      }
      out += path.markdown();
      fmt::format_to(it, "\nOver all replays (median µs on the path; 0 in replays where the node is off it):\n\n");
      Table nodes({"node", "on the path", "ran", "waited", "share of the median span"}, "lrrrr");
      for (std::size_t ni = 0; ni < std::min<std::size_t>(10, cp.nodes.size()); ++ni) {
        const PathNodeSummary& p = cp.nodes[ni];
        nodes.row({node_name(vr.graph, p.node), fmt::format("{}/{}", p.replays_on_path, v.span_us.count),
                   fmt::format("{:.1f}", p.run_us.median), fmt::format("{:.1f}", p.wait_us.median),
                   fmt::format("{:.1f}%", v.span_us.median > 0
                                               ? 100.0 * (p.run_us.median + p.wait_us.median) / v.span_us.median
                                               : 0.0)});
      }
      out += nodes.markdown();
      if (cp.speedup_node >= 0)
        fmt::format_to(it,
                       "\nSpeed up **{}** first: it ran {:.1f} µs on the critical path (median), the most of any "
                       "node; cutting it shortens the span by up to that while it stays on the path.\n\n",
                       node_name(vr.graph, cp.speedup_node), cp.speedup_us);
      else
        out += "\n";
    } else {
      fmt::format_to(it, "No replay has records.\n\n");
    }

    fmt::format_to(it, "### Outliers and steadiness\n\n");
    fmt::format_to(it, "Rule: {}. Median span {:.1f} µs, MAD {:.1f} µs.\n\n", outlier_rule_text(v), v.span_us.median,
                   v.span_mad_us);
    if (v.outliers.empty()) {
      fmt::format_to(it, "No outlier among {} replays.\n\n", v.span_us.count);
    } else {
      constexpr std::size_t kListed = 20;
      for (std::size_t o = 0; o < std::min(kListed, v.outliers.size()); ++o)
        fmt::format_to(it, "- {}\n", outlier_text(vr, v, v.outliers[o]));
      if (v.outliers.size() > kListed)
        fmt::format_to(it, "- ... and {} more (report.json lists every one)\n", v.outliers.size() - kListed);
      fmt::format_to(it, "\n`tpgraph analyze RUN --replay N` prints one replay in full.\n\n");
    }
    fmt::format_to(it, "Steadiness: {}.\n\n", steadiness_text(v));

    fmt::format_to(it, "### Costs and checks\n\n");
    if (v.host_launch_us.count)
      fmt::format_to(it, "- host launch call: median {:.1f} µs, p90 {:.1f} µs, max {:.1f} µs\n", v.host_launch_us.median,
                     v.host_launch_us.p90, v.host_launch_us.max);
    else
      fmt::format_to(it, "- host launch call: not measured\n");
    if (const std::string costs = host_costs_text(vr); !costs.empty()) fmt::format_to(it, "- {}\n", costs);
    if (v.tracing_cost)
      fmt::format_to(it, "- CUPTI tracing: {:.1f} µs per replay traced vs {:.1f} µs untraced ({:.3f}x)\n",
                     vr.replay_us_traced, vr.replay_us_untraced, *v.tracing_cost);
    else
      fmt::format_to(it, "- CUPTI tracing cost: not measured\n");
    fmt::format_to(it, "- collection: {} ({} records)\n",
                   v.health.clean() ? "clean" : "NOT CLEAN: " + v.health.problems(), v.health.records);
    if (vr.output_check) {
      const Comparison& c = *vr.output_check;
      fmt::format_to(it, "- output vs CPU reference: {} ({} values, {} mismatches, {} NaN, max rel err {:.3g}, tolerance {:.3g}){}\n",
                     c.passed() ? "passed" : "FAILED", c.compared, c.mismatches, c.nan_count, c.max_rel_err,
                     c.tolerance, c.vacuous() ? " — VACUOUS: the output is all zeros" : "");
    } else {
      fmt::format_to(it, "- output vs CPU reference: not checked\n");
    }
    for (const auto& n : vr.notes) fmt::format_to(it, "- note: {}\n", n);
    out += "\n";
  }

  fmt::format_to(it, "## Environment\n\n");
  fmt::format_to(it, "- tpgraph {} (git {})\n- host {}, started {}\n", run.env.tool_version, run.env.git_revision,
                 run.env.hostname.empty() ? "unknown" : run.env.hostname, run.env.started_at);
  fmt::format_to(it, "- CUDA driver {}, runtime {}, CUPTI API {}\n", version_text(run.env.driver_version),
                 version_text(run.env.runtime_version), run.env.cupti_version);
  for (const auto& d : run.env.devices)
    fmt::format_to(it, "- {} ({} SMs, {}, PCI {})\n", device_label(run.env, d.ordinal), d.sm_count,
                   format_bytes(d.memory_bytes), d.pci_bus_id);
  return out;
}

void write_report_json(const RunData& run, const RunAnalysis& analysis,
                       const std::function<void(std::string_view)>& sink) {
  const auto folders = variant_folder_names(run);
  json devices = json::array();
  for (const auto& d : run.env.devices)
    devices.push_back(json{{"ordinal", d.ordinal},
                           {"name", d.name},
                           {"sm_count", d.sm_count},
                           {"memory_bytes", d.memory_bytes},
                           {"pci_bus_id", d.pci_bus_id}});
  std::vector<json> variants;  // each with "replays" to be streamed
  for (std::size_t i = 0; i < analysis.variants.size(); ++i)
    variants.push_back(variant_json(run, analysis, i, folders[i]));
  json banners = json::array();
  for (const auto& line : run_banners(run, analysis)) banners.push_back(line);
  const json doc{
      {"schema_version", kReportSchemaVersion},
      {"kind", "tpgraph-report"},
      {"tool_version", run.env.tool_version},
      {"git_revision", run.env.git_revision},
      {"records_schema_version", run.schema_version},
      {"hostname", run.env.hostname},
      {"started_at", run.env.started_at},
      {"versions",
       json{{"driver", run.env.driver_version}, {"runtime", run.env.runtime_version}, {"cupti", run.env.cupti_version}}},
      {"devices", devices},
      {"thresholds",
       json{{"overlapped_at_least", kOverlappedAtLeast},
            {"serialized_at_most", kSerializedAtMost},
            {"event_span_tolerance", kEventSpanTolerance},
            {"outlier_mads", kOutlierMads},
            {"outlier_fraction_of_median", kOutlierFraction},
            {"text", verdict_thresholds_text()}}},
      {"collection_clean", analysis.collection_clean()},
      {"banners", banners},
      {"time_base_ns", analysis.base_ns},
      {"variants", json::array()}};  // streamed below
  // As doc.dump(1) prints it, with each variant's replays made and written one at a time: a trace
  // of half a million replays would otherwise hold every one as a JSON value, then as text.
  write_object(doc, 0, sink, [&](const std::string& key, std::size_t depth) {
    if (key != "variants") return false;
    write_array(variants.size(), depth, sink, [&](std::size_t i, std::size_t variant_depth) {
      write_object(variants[i], variant_depth, sink, [&](const std::string& member, std::size_t replays_depth) {
        if (member != "replays") return false;
        const VariantTimeline& v = analysis.variants[i];
        write_array(v.replays.size(), replays_depth, sink, [&](std::size_t r, std::size_t replay_depth) {
          sink(indented(replay_json(run.variants[i], v, analysis, v.replays[r]).dump(1), replay_depth));
        });
        return true;
      });
    });
    return true;
  });
  sink("\n");
}

std::string render_report_json(const RunData& run, const RunAnalysis& analysis) {
  std::string out;
  write_report_json(run, analysis, [&](std::string_view text) { out += text; });
  return out;
}

std::string render_replay_detail(const RunData& run, const RunAnalysis& analysis, int replay) {
  int replays = 0;
  for (const auto& v : analysis.variants) replays = std::max(replays, v.replay_count);
  if (replay < 0 || replay >= replays)
    throw InputError(fmt::format("--replay {}: not a replay of this run (it has replays 0..{})", replay,
                                 replays - 1));
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
      throw std::logic_error(fmt::format("replay {} was analysed without its detail (AnalysisOptions::replay)", replay));
    const ReplayTimeline& rt = v.replays[static_cast<std::size_t>(replay)];
    fmt::format_to(it, " · span {:.1f} µs (median {:.1f})", rt.span_us, v.span_us.median);
    const auto outlier = std::find_if(v.outliers.begin(), v.outliers.end(),
                                      [&](const OutlierReplay& o) { return o.replay == replay; });
    fmt::format_to(it, "{}\n", outlier != v.outliers.end() ? " · OUTLIER" : "");
    if (v.ranks >= 2) {
      const auto fraction = [](const std::optional<double>& x) { return x ? fmt::format("{:.4f}", *x) : std::string("-"); };
      fmt::format_to(it, "verdict {} on {} overlap {} (window {}, busy {}; variant: {})\n", to_string(rt.verdict),
                     to_string(v.basis), fraction(rt.verdict_overlap), fraction(rt.overlap),
                     fraction(rt.busy_overlap), to_string(v.verdict));
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
