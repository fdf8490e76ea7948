#include "core/report.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

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
  return fmt::format("{} {}/{}", to_string(v.verdict), v.verdict_counts[static_cast<std::size_t>(v.verdict)],
                     v.replay_count);
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

std::string top_waits_text(const VariantRun& run, const VariantTimeline& v, std::size_t count) {
  std::string out;
  for (std::size_t i = 0; i < std::min(count, v.waits.size()); ++i) {
    const NodeWaitSummary& w = v.waits[i];
    out += out.empty() ? "" : " · ";
    out += fmt::format("{} {:.1f} µs after {}", node_label(run, w.node), w.wait_us.median,
                       waited_on(run, w.ready_from));
  }
  return out.empty() ? "none recorded" : out;
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
    if (waits_as_lines) t.line(fmt::format("    top waits: {}", top_waits_text(vr, v, 3)));
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
  return lines;
}

// One geometry and replay count for the whole run, or empty when variants differ.
std::string common_setup(const RunData& run) {
  if (run.variants.empty()) return "no variants";
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
                         {"wait_us", stats_json(w.wait_us, 3)}});
  }
  json replays = json::array();
  for (const auto& rt : v.replays) {
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
    replays.push_back(json{{"replay", rt.replay},
                           {"begin_us", rt.present ? json(us3(static_cast<double>(rt.begin_ns - analysis.base_ns) / 1000.0))
                                                   : json(nullptr)},
                           {"duration_us", rt.present ? json(us3(static_cast<double>(rt.end_ns - rt.begin_ns) / 1000.0))
                                                      : json(nullptr)},
                           {"overlap", opt_json(rt.overlap, 4)},
                           {"overlap_vs_root", rt_vs_root},
                           {"busy_overlap", opt_json(rt.busy_overlap, 4)},
                           {"verdict", std::string(to_string(rt.verdict))},
                           {"ranks", rank_rows}});
  }
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
            {"verdict_counts", counts},
            {"overlap", stats_json(v.overlap, 4)},
            {"overlap_vs_root", vs_root},
            {"busy_overlap", stats_json(v.busy_overlap, 4)},
            {"ranks", ranks},
            {"host_launch_us", stats_json(v.host_launch_us, 3)},
            {"tracing",
             json{{"replay_us_untraced", us3(vr.replay_us_untraced)},
                  {"replay_us_traced", us3(vr.replay_us_traced)},
                  {"cost", opt_json(v.tracing_cost, 4)}}},
            {"node_waits", waits},
            {"output_check", check}}},
      {"replays", replays},
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
                 "(! beyond {:.0f}%); wait: start - latest end of what the graph says it depends on\n\n",
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
      fmt::format_to(it, "Verdict **{}** (median overlap {:.4f}; min {:.4f}, p90 {:.4f}, max {:.4f}).", to_string(v.verdict),
                     v.overlap.median, v.overlap.min, v.overlap.p90, v.overlap.max);
      fmt::format_to(it, " Replays: {} OVERLAPPED, {} PARTIAL, {} SERIALIZED, {} without data.\n\n",
                     v.verdict_counts[static_cast<std::size_t>(Verdict::overlapped)],
                     v.verdict_counts[static_cast<std::size_t>(Verdict::partial)],
                     v.verdict_counts[static_cast<std::size_t>(Verdict::serialized)],
                     v.verdict_counts[static_cast<std::size_t>(Verdict::no_data)]);
      if (v.busy_overlap.count > 0) {
        fmt::format_to(it,
                       "Busy overlap (time both ranks had a kernel or copy running, over the less busy rank's "
                       "busy time): median {:.4f}, min {:.4f}, max {:.4f}.{}\n\n",
                       v.busy_overlap.median, v.busy_overlap.min, v.busy_overlap.max,
                       v.busy_overlap.median <= kSerializedAtMost && v.overlap.count > 0 &&
                               v.overlap.median >= kOverlappedAtLeast
                           ? " The windows overlap but the work took turns: the ranks' kernels did not run at "
                             "the same time."
                           : "");
      }
      if (v.ranks > 2) {
        for (std::size_t k = 1; k < v.overlap_vs_root.size(); ++k)
          fmt::format_to(it, "- r{} vs r0: median {:.4f}, min {:.4f}\n", k, v.overlap_vs_root[k].median,
                         v.overlap_vs_root[k].min);
        out += "\n";
      }
    }

    fmt::format_to(it, "### Largest waits (µs)\n\n");
    Table waits({"node", "rank", "kind", "waited on", "min", "median", "p90", "max"}, "llllrrrr");
    for (std::size_t w = 0; w < std::min<std::size_t>(10, v.waits.size()); ++w) {
      const NodeWaitSummary& nw = v.waits[w];
      const Node& n = vr.graph.nodes[static_cast<std::size_t>(nw.node)];
      waits.row({n.label, fmt::format("r{}", n.rank), std::string(to_string(n.kind)), waited_on(vr, nw.ready_from),
                 fmt::format("{:.1f}", nw.wait_us.min), fmt::format("{:.1f}", nw.wait_us.median),
                 fmt::format("{:.1f}", nw.wait_us.p90), fmt::format("{:.1f}", nw.wait_us.max)});
    }
    out += waits.markdown();
    out += "\n";

    fmt::format_to(it, "### Costs and checks\n\n");
    if (v.host_launch_us.count)
      fmt::format_to(it, "- host launch call: median {:.1f} µs, p90 {:.1f} µs, max {:.1f} µs\n", v.host_launch_us.median,
                     v.host_launch_us.p90, v.host_launch_us.max);
    else
      fmt::format_to(it, "- host launch call: not measured\n");
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

std::string render_report_json(const RunData& run, const RunAnalysis& analysis) {
  const auto folders = variant_folder_names(run);
  json devices = json::array();
  for (const auto& d : run.env.devices)
    devices.push_back(json{{"ordinal", d.ordinal},
                           {"name", d.name},
                           {"sm_count", d.sm_count},
                           {"memory_bytes", d.memory_bytes},
                           {"pci_bus_id", d.pci_bus_id}});
  json variants = json::array();
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
            {"text", verdict_thresholds_text()}}},
      {"collection_clean", analysis.collection_clean()},
      {"banners", banners},
      {"time_base_ns", analysis.base_ns},
      {"variants", variants}};
  return doc.dump(1) + "\n";
}

}  // namespace tpgraph
