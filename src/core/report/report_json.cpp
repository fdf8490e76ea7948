// report.json: every figure of the other reports and every replay's, streamed one replay at a time.

#include <algorithm>
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "core/report/report.hpp"
#include "core/report/report_common.hpp"

namespace tpgraph {

using namespace report_detail;
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

bool shares_gpu(const VariantRun& run, const VariantTimeline& v) {
  if (run.ranks_share_gpu) return true;
  std::set<int> devices(v.rank_device.begin(), v.rank_device.end());
  return devices.size() < v.rank_device.size();
}

json scenario_json(const Scenario& s) { return json::parse(scenario_to_json(s)); }

json geometry_json(const Geometry& g) {
  return json{{"experts", g.experts}, {"top_k", g.top_k},   {"hidden", g.hidden},
              {"ff", g.ff},           {"tokens", g.tokens}, {"ranks", g.ranks}};
}

json opt_json(const std::optional<double>& x, int decimals) { return x ? json(round_to(*x, decimals)) : json(nullptr); }

json occupants_json(const LayerGraph& g, const WaitParts& p) {
  json out = json::array();
  for (const auto& o : p.occupants)
    out.push_back(
        json{{"node", o.node}, {"label", occupant_name(g, o)}, {"other_replay", o.other_replay}, {"us", us3(o.us)}});
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

// A trace's completeness, rank rule and profiler lines: report.md's first line and header.
json trace_json(const TraceCompleteness& t) {
  return json{{"clean", t.clean()},           {"line", t.line()},
              {"graph_records", t.records},   {"unmatched", t.unmatched},
              {"no_topology", t.no_topology}, {"truncated", t.truncated},
              {"device_launched", t.unseen},  {"rank_rule", t.rank_rule},
              {"profiler", t.profiler},       {"recording", t.recording}};
}

// What tracing cost (tracing_cost.hpp): the calibration, each process's own work, the header lines.
json tracing_cost_json(const TracingCostAnalysis& cost) {
  const CostCalibration& c = cost.calibration;
  json calibration{{"measured", c.measured}, {"not_measured", c.measured ? json(nullptr) : json(c.not_measured)}};
  if (c.measured)
    calibration.update(json{{"gpu", c.gpu},
                            {"device", c.device},
                            {"nodes", c.nodes},
                            {"kernel_us", round_to(c.kernel_us, 3)},
                            {"replays", c.replays},
                            {"off_us", round_to(c.off_us, 3)},
                            {"on_us", round_to(c.on_us, 3)},
                            {"per_node_us", round_to(c.per_node_us, 4)}});
  json processes = json::array();
  for (const auto& p : cost.processes)
    processes.push_back(json{{"pid", p.pid},
                             {"measured", p.not_measured.empty()},
                             {"not_measured", p.not_measured.empty() ? json(nullptr) : json(p.not_measured)},
                             {"launches", p.launches},
                             {"callback_us_per_launch", opt_json(p.us_per_launch, 4)},
                             {"other_callbacks_ms", round_to(p.other_callbacks_ms, 3)},
                             {"records", p.records},
                             {"processing_us_per_record", opt_json(p.processing_us_per_record, 4)},
                             {"activity_switches", p.activity_switches},
                             {"us_per_activity_switch", opt_json(p.us_per_activity_switch, 3)}});
  return json{{"calibration", calibration}, {"processes", processes}, {"lines", tracing_cost_lines(cost)}};
}

// A traced graph's estimated cost per launch; null where nothing of it was measured.
json graph_tracing_cost_json(const std::optional<GraphTracingCost>& g) {
  if (!g) return nullptr;
  const auto reason = [](const std::string& why) { return why.empty() ? json(nullptr) : json(why); };
  return json{{"records_per_launch", round_to(g->records_per_launch, 1)},
              {"cupti_us", opt_json(g->cupti_us, 3)},
              {"tpgraph_us", opt_json(g->tpgraph_us, 3)},
              {"total_us", round_to(g->total_us, 3)},
              {"span_fraction", opt_json(g->span_fraction, 4)},
              {"cupti_not_measured", reason(g->cupti_not_measured)},
              {"tpgraph_not_measured", reason(g->tpgraph_not_measured)},
              {"text", graph_tracing_cost_text(*g)}};
}

// A traced graph's own members: no topology and its per-stream nodes, conditional bodies, and the NVTX
// ranges open around its launches where its processes recorded NVTX ranges.
void add_traced_json(json& out, const VariantRun& vr, const VariantTimeline& v) {
  out["no_topology"] = v.no_topology.empty() ? json(nullptr) : json(v.no_topology);
  json streams = json::array();
  for (const auto& s : v.stream_nodes)
    streams.push_back(json{{"node", vr.graph.nodes[static_cast<std::size_t>(s.node)].label},
                           {"stream", s.stream},
                           {"duration_us", stats_json(s.duration_us, 3)},
                           {"gap_us", stats_json(s.gap_us, 3)}});
  out["stream_nodes"] = streams;
  json conditionals = json::array();
  for (const auto& c : v.conditionals) {
    const char* kind = c.kind == NestedNode::Conditional::while_ ? "while"
                       : c.kind == NestedNode::Conditional::if_  ? "if"
                                                                 : "switch";
    conditionals.push_back(json{{"node", vr.graph.nodes[static_cast<std::size_t>(c.node)].label},
                                {"kind", kind},
                                {"launches", c.launches},
                                {"iterations", stats_json(c.iterations, 1)},
                                {"body_ran_in_launches", c.ran_in}});
  }
  out["conditionals"] = conditionals;
  if (vr.nvtx.empty()) return;  // no process of the graph recorded an NVTX range
  json contexts = json::array();
  for (const auto& c : vr.nvtx_launches.contexts)
    contexts.push_back(json{{"ranges", c.ranges}, {"launches", c.launches}});
  out["nvtx_launches"] = json{
      {"launches", vr.nvtx_launches.launches}, {"contexts", contexts}, {"text", nvtx_launches_text(vr.nvtx_launches)}};
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
json replay_json(const VariantRun& vr, const VariantTimeline& v, const RunAnalysis& analysis,
                 const ReplayTimeline& rt) {
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
              {"begin_us",
               rt.present ? json(us3(static_cast<double>(rt.begin_ns - analysis.base_ns) / 1000.0)) : json(nullptr)},
              {"duration_us",
               rt.present ? json(us3(static_cast<double>(rt.end_ns - rt.begin_ns) / 1000.0)) : json(nullptr)},
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

json ranks_json(const VariantTimeline& v) {
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
  return ranks;
}

json node_waits_json(const VariantRun& vr, const VariantTimeline& v) {
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
  return waits;
}

json critical_path_json(const VariantRun& vr, const VariantTimeline& v) {
  const CriticalPathSummary& cp = v.critical_path;
  json path_nodes = json::array();
  for (const auto& p : cp.nodes)
    path_nodes.push_back(json{{"node", p.node},
                              {"label", node_name(vr.graph, p.node)},
                              {"replays_on_path", p.replays_on_path},
                              {"run_us", stats_json(p.run_us, 3)},
                              {"wait_us", stats_json(p.wait_us, 3)}});
  return json{{"typical_replay", cp.typical_replay},
              {"speedup_node", cp.speedup_node},
              {"speedup_label", cp.speedup_node >= 0 ? json(node_name(vr.graph, cp.speedup_node)) : json(nullptr)},
              {"speedup_us", us3(cp.speedup_us)},
              {"nodes", path_nodes}};
}

json outliers_json(const VariantRun& vr, const VariantTimeline& v) {
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
  return outliers;
}

json steadiness_json(const VariantTimeline& v) {
  const Steadiness& st = v.steadiness;
  return st.known ? json{{"known", true},
                         {"steady", st.steady},
                         {"quarter", st.quarter},
                         {"first_span_us", us3(st.first_span_us)},
                         {"last_span_us", us3(st.last_span_us)},
                         {"threshold_us", us3(st.threshold_us)},
                         {"first_verdict", std::string(to_string(st.first_verdict))},
                         {"last_verdict", std::string(to_string(st.last_verdict))},
                         {"text", steadiness_text(v)}}
                  : json{{"known", false}, {"text", steadiness_text(v)}};
}

json output_check_json(const VariantRun& vr) {
  json check = nullptr;
  if (vr.output_check) {
    const Comparison& c = *vr.output_check;
    check = json{{"passed", c.passed()},       {"vacuous", c.vacuous()},       {"compared", c.compared},
                 {"mismatches", c.mismatches}, {"nonzero", c.nonzero},         {"nan_count", c.nan_count},
                 {"absmax", c.absmax},         {"max_abs_err", c.max_abs_err}, {"max_rel_err", c.max_rel_err},
                 {"tolerance", c.tolerance}};
  }
  return check;
}

json variant_json(const RunData& run, const RunAnalysis& analysis, std::size_t i, const std::string& folder) {
  const VariantRun& vr = run.variants[i];
  const VariantTimeline& v = analysis.variants[i];
  json vs_root = json::array();
  for (const auto& s : v.overlap_vs_root) vs_root.push_back(stats_json(s, 4));
  json counts = json::object();
  for (const Verdict verdict :
       {Verdict::overlapped, Verdict::partial, Verdict::serialized, Verdict::single_rank, Verdict::no_data})
    counts[std::string(to_string(verdict))] = v.verdict_counts[static_cast<std::size_t>(verdict)];
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
            {"critical_path", critical_path_json(vr, v)},
            {"outlier_rule", json{{"mads", kOutlierMads},
                                  {"fraction_of_median", kOutlierFraction},
                                  {"span_mad_us", us3(v.span_mad_us)},
                                  {"threshold_us", us3(v.outlier_threshold_us)},
                                  {"text", outlier_rule_text(v)}}},
            {"outliers", outliers_json(vr, v)},
            {"steadiness", steadiness_json(v)},
            {"ranks", ranks_json(v)},
            {"host_launch_us", stats_json(v.host_launch_us, 3)},
            {"host_costs", json{{"capture_ms", round_to(vr.costs.capture_ms, 3)},
                                {"instantiate_ms", round_to(vr.costs.instantiate_ms, 3)},
                                {"queued_launch_us", stats_json(summarize(vr.costs.queued_launch_us), 3)}}},
            {"tracing", json{{"replay_us_untraced", us3(vr.replay_us_untraced)},
                             {"replay_us_traced", us3(vr.replay_us_traced)},
                             {"cost", opt_json(v.tracing_cost, 4)}}},
            {"node_waits", node_waits_json(vr, v)},
            {"output_check", output_check_json(vr)}}},
      {"replays", nullptr},  // streamed by write_report_json: one replay at a time
      {"notes", notes}};
}

}  // namespace

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
  for (std::size_t i = 0; i < analysis.variants.size(); ++i) {
    variants.push_back(variant_json(run, analysis, i, folders[i]));
    if (run.variants[i].graph.traced()) add_traced_json(variants.back(), run.variants[i], analysis.variants[i]);
    if (analysis.tracing_cost)
      variants.back()["tracing_cost_estimate"] = graph_tracing_cost_json(analysis.variants[i].trace_cost);
  }
  json banners = json::array();
  for (const auto& line : run_banners(run, analysis)) banners.push_back(line);
  json doc{{"schema_version", kReportSchemaVersion},
           {"kind", "tpgraph-report"},
           {"tool_version", run.env.tool_version},
           {"git_revision", run.env.git_revision},
           {"records_schema_version", run.schema_version},
           {"hostname", run.env.hostname},
           {"started_at", run.env.started_at},
           {"versions", json{{"driver", run.env.driver_version},
                             {"runtime", run.env.runtime_version},
                             {"cupti", run.env.cupti_version}}},
           {"devices", devices},
           {"thresholds", json{{"overlapped_at_least", kOverlappedAtLeast},
                               {"serialized_at_most", kSerializedAtMost},
                               {"event_span_tolerance", kEventSpanTolerance},
                               {"outlier_mads", kOutlierMads},
                               {"outlier_fraction_of_median", kOutlierFraction},
                               {"text", verdict_thresholds_text()}}},
           {"collection_clean", analysis.collection_clean()},
           {"banners", banners},
           {"time_base_ns", analysis.base_ns},
           {"variants", json::array()}};  // streamed below
  if (run.trace) doc["trace"] = trace_json(*run.trace);
  if (run.trace && analysis.tracing_cost) doc["trace"]["tracing_cost"] = tracing_cost_json(*analysis.tracing_cost);
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

}  // namespace tpgraph
