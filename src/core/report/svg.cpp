#include "core/report/svg.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "core/report/report.hpp"

namespace tpgraph {

namespace {

// One colour per kind of work; red is kept for the waits.
std::string_view kind_colour(NodeKind k) {
  switch (k) {
    case NodeKind::busy: return "#9e9e9e";
    case NodeKind::quantize: return "#f2b134";
    case NodeKind::gemm: return "#3b7dd8";
    case NodeKind::swiglu: return "#4caf50";
    case NodeKind::combine: return "#8e5ac8";
    case NodeKind::reduce: return "#ef8a17";
    case NodeKind::copy: return "#17a2a2";
    case NodeKind::alloc: return "#795548";
    case NodeKind::free_mem: return "#795548";
    case NodeKind::event: return "#607d8b";
    case NodeKind::kernel: return "#3b7dd8";
    case NodeKind::memset: return "#17a2a2";
    case NodeKind::other: return "#607d8b";
  }
  return "#000000";
}

constexpr std::array kLegendKinds = {NodeKind::busy,   NodeKind::quantize, NodeKind::gemm,
                                     NodeKind::swiglu, NodeKind::combine,  NodeKind::reduce,
                                     NodeKind::copy,   NodeKind::kernel,   NodeKind::memset};

// A tick step of 1, 2 or 5 times a power of ten giving about eight ticks over `span`.
double tick_step(double span) {
  if (span <= 0) return 1;
  const double raw = span / 8;
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * magnitude) return m * magnitude;
  return 10 * magnitude;
}

std::size_t display_chars(std::string_view s) {
  return static_cast<std::size_t>(
      std::count_if(s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

struct Mark {
  int replay = 0;
  int node = 0;
  double wait_us = 0;
};

// A node's name to write inside its bar (which is wide enough for it), from x0.
struct Name {
  int rank = 0;
  double x0 = 0, y = 0;
  std::string text;
};

// Horizontal extents already taken in one row of labels.
class LabelRow {
 public:
  [[nodiscard]] bool fits(double x0, double x1) const {
    return std::none_of(taken_.begin(), taken_.end(), [&](const auto& r) { return x0 < r.second && r.first < x1; });
  }
  void take(double x0, double x1) { taken_.emplace_back(x0, x1); }

 private:
  std::vector<std::pair<double, double>> taken_;
};

}  // namespace

std::string xml_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters are not allowed in XML 1.0 text.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\n' && c != '\t') out += ' ';
        else out += c;
    }
  }
  return out;
}

namespace {

// Where everything goes: the time range shown and the picture's rows.
struct SvgLayout {
  std::uint64_t t0 = 0;
  std::uint64_t t1 = 0;
  double span_us = 1e-3;
  int width = 0;
  double left = 170, right = 30, plot_w = 0;
  double label_row_h = 12, lane_h = 0, lanes_top = 0, axis_y = 0, legend_y = 0, height = 0;
  double nvtx_top = 0;  // the NVTX rows, above the replay labels (none: lanes_top as without them)
  int ranks = 0;
  [[nodiscard]] double x_of(std::uint64_t t) const {
    // Subtract as integers: CUPTI timestamps (~1.7e18 ns) are beyond a double's exact range.
    const double us = t >= t0 ? static_cast<double>(t - t0) / 1000.0 : -static_cast<double>(t0 - t) / 1000.0;
    return left + us / span_us * plot_w;
  }
};

struct Line {
  std::string text;
  std::string_view style;
};

// The replays shown: the first ones with records (and with their detail kept, as the first are).
std::vector<int> shown_replays(const VariantTimeline& v, const SvgOptions& options) {
  std::vector<int> shown;
  for (const auto& rt : v.replays) {
    if (static_cast<int>(shown.size()) >= options.replays_shown) break;
    if (rt.present && v.has_detail(rt.replay)) shown.push_back(rt.replay);
  }
  return shown;
}

// Header lines: what this is, what it concluded, and anything that changes how to read it; long
// lines wrap at word boundaries (about 6.5 px per character at 12 px).
std::vector<Line> header_lines(const RunData& run, const VariantTimeline& v, const std::vector<int>& shown, int width) {
  std::vector<Line> header;
  std::string title = fmt::format("{} · {}", v.name, to_string(v.verdict));
  if (v.ranks >= 2 && v.verdict_overlap.count > 0)
    title += fmt::format(" (median {} overlap {:.2f})",
                         v.basis == OverlapBasis::mixed ? "deciding" : to_string(v.basis), v.verdict_overlap.median);
  header.push_back({title, "font-size=\"16\" font-weight=\"bold\""});
  if (v.ranks >= 2) header.push_back({"verdict " + verdict_basis_text(v), "fill=\"#222\""});
  const std::string banner = collection_banner(v);
  if (!banner.empty()) header.push_back({banner, "fill=\"#d32f2f\" font-weight=\"bold\""});
  const std::string shared = shared_gpu_note(run.env, v);
  if (!shared.empty()) header.push_back({"NOTE: " + shared, "fill=\"#8a4b00\""});
  header.push_back({verdict_thresholds_text(), "fill=\"#444\""});
  header.push_back({shown.empty() ? std::string("no replay has records")
                                  : fmt::format("replays {}..{} of {} shown; hatched red: time a node waited after "
                                                "everything the graph says it depends on had ended, labelled with "
                                                "what ran on its GPU meanwhile (contention) and the idle rest",
                                                shown.front(), shown.back(), v.replay_count),
                    "fill=\"#444\""});
  const auto max_chars = static_cast<std::size_t>((width - 24) / 6.5);
  std::vector<Line> wrapped;
  for (const Line& l : header) {
    std::string_view rest = l.text;
    while (display_chars(rest) > max_chars) {
      std::size_t cut = rest.rfind(' ', max_chars);
      if (cut == std::string_view::npos || cut == 0) {
        cut = max_chars;
        while (cut > 1 && (static_cast<unsigned char>(rest[cut]) & 0xC0) == 0x80) --cut;  // not inside a character
      }
      wrapped.push_back({std::string(rest.substr(0, cut)), l.style});
      rest = rest.substr(std::min(cut + 1, rest.size()));
    }
    wrapped.push_back({std::string(rest), l.style});
  }
  return wrapped;
}

// The time the replays shown take: the first one's begin to the last one's end.
std::pair<std::uint64_t, std::uint64_t> shown_span(const VariantTimeline& v, const std::vector<int>& shown) {
  std::uint64_t t0 = std::numeric_limits<std::uint64_t>::max();
  std::uint64_t t1 = 0;
  for (const int r : shown) {
    t0 = std::min(t0, v.replays[static_cast<std::size_t>(r)].begin_ns);
    t1 = std::max(t1, v.replays[static_cast<std::size_t>(r)].end_ns);
  }
  if (shown.empty()) t0 = t1 = 0;
  return {t0, t1};
}

SvgLayout make_layout(const VariantTimeline& v, const std::vector<int>& shown, const SvgOptions& options,
                      std::size_t header_lines, std::size_t nvtx_rows) {
  SvgLayout l;
  const auto [t0, t1] = shown_span(v, shown);
  l.t0 = t0;
  l.t1 = t1;
  l.span_us = std::max(static_cast<double>(t1 - t0) / 1000.0, 1e-3);
  l.width = std::max(options.width_px, 600);
  l.plot_w = l.width - l.left - l.right;
  const double header_h = 26 + 16.0 * static_cast<double>(header_lines);
  l.lane_h = 46 + l.label_row_h * kSvgWaitLabelRows;  // ops bar 24, wait bar 8, label rows
  l.ranks = v.ranks;
  l.nvtx_top = header_h + 4;
  // Room for the NVTX rows (and 8 px under them), then for the replay labels.
  l.lanes_top = header_h + 18 + (nvtx_rows > 0 ? kSvgNvtxRowPx * static_cast<double>(nvtx_rows) + 8 : 0);
  l.axis_y = l.lanes_top + l.ranks * l.lane_h + 6;
  l.legend_y = l.axis_y + 44;
  l.height = l.legend_y + 30;
  return l;
}

void draw_frame(std::string& out, const SvgLayout& l, const std::vector<Line>& header) {
  auto it = std::back_inserter(out);
  fmt::format_to(it,
                 "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                 "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{:.0f}\" viewBox=\"0 0 {} {:.0f}\" "
                 "font-family=\"sans-serif\" font-size=\"12\">\n",
                 l.width, l.height, l.width, l.height);
  out +=
      "<defs><pattern id=\"wait-hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#ffe5e5\"/>"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#d32f2f\" stroke-width=\"3\"/></pattern></defs>\n";
  fmt::format_to(it, "<rect width=\"{}\" height=\"{:.0f}\" fill=\"#ffffff\"/>\n", l.width, l.height);
  for (std::size_t i = 0; i < header.size(); ++i)
    fmt::format_to(it, "<text x=\"12\" y=\"{:.0f}\" {}>{}</text>\n", 22 + 16.0 * static_cast<double>(i),
                   header[i].style, xml_escape(header[i].text));
}

void draw_lanes(std::string& out, const RunData& run, const VariantTimeline& v, const std::vector<int>& shown,
                const SvgLayout& l) {
  auto it = std::back_inserter(out);
  for (int r = 0; r < l.ranks; ++r) {
    const double y = l.lanes_top + r * l.lane_h;
    fmt::format_to(it, "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\" fill=\"{}\"/>\n", l.left, y,
                   l.plot_w, l.lane_h - 4, r % 2 == 0 ? "#f5f7fa" : "#eef1f5");
    fmt::format_to(it, "<text x=\"12\" y=\"{:.1f}\" font-weight=\"bold\">rank {}</text>\n", y + 16, r);
    fmt::format_to(it, "<text x=\"12\" y=\"{:.1f}\" fill=\"#444\">{}</text>\n", y + 31,
                   xml_escape(device_label(run.env, v.rank_device[static_cast<std::size_t>(r)])));
  }
  // Replay boundaries.
  for (const int r : shown) {
    const double x = l.x_of(v.replays[static_cast<std::size_t>(r)].begin_ns);
    fmt::format_to(
        it,
        "<line x1=\"{:.2f}\" y1=\"{:.1f}\" x2=\"{:.2f}\" y2=\"{:.1f}\" stroke=\"#555\" stroke-dasharray=\"4 3\"/>\n"
        "<text x=\"{:.2f}\" y=\"{:.1f}\" fill=\"#555\" font-size=\"11\">replay {}</text>\n",
        x, l.lanes_top - 8, x, l.axis_y, x + 3, l.lanes_top - 10, r);
  }
}

// The ops' bars, then the names inside them: in time order per lane, each clear of the previous
// ones (bars of concurrent streams of one rank can overlap). Returns every drawn node's wait.
std::vector<Mark> draw_ops(std::string& out, const LayerGraph& g, const VariantTimeline& v,
                           const std::vector<int>& shown, const SvgLayout& l) {
  auto it = std::back_inserter(out);
  std::vector<Mark> marks;
  std::vector<Name> names;
  for (const int r : shown) {
    const auto& timings = v.timings[static_cast<std::size_t>(r)];
    for (std::size_t n = 0; n < timings.size(); ++n) {
      const NodeTiming& t = timings[n];
      if (!t.recorded) continue;
      const Node& node = g.nodes[n];
      const double x = l.x_of(t.start_ns);
      const double w = std::max(l.x_of(t.end_ns) - x, 0.6);
      const double y = l.lanes_top + node.rank * l.lane_h + 4;
      fmt::format_to(it,
                     "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"24\" fill=\"{}\" stroke=\"#ffffff\" "
                     "stroke-width=\"0.3\"><title>{}</title></rect>\n",
                     x, y, w, kind_colour(node.kind),
                     xml_escape(fmt::format("{} (replay {}): {:.1f} µs, waited {:.1f} µs", node.label, r,
                                            static_cast<double>(t.end_ns - t.start_ns) / 1000.0, t.wait_us)));
      if (w > 4 + kSvgLabelCharPx * static_cast<double>(display_chars(node.label)))
        names.push_back(Name{node.rank, x + 2, y + 16, node.label});
      marks.push_back(Mark{r, static_cast<int>(n), t.wait_us});
    }
  }
  std::stable_sort(names.begin(), names.end(), [](const Name& a, const Name& b) { return a.x0 < b.x0; });
  std::vector<LabelRow> name_rows(static_cast<std::size_t>(std::max(l.ranks, 1)));
  for (const Name& nm : names) {
    const double x1 = nm.x0 + kSvgLabelCharPx * static_cast<double>(display_chars(nm.text));
    auto& row = name_rows[static_cast<std::size_t>(nm.rank)];
    if (!row.fits(nm.x0, x1)) continue;
    row.take(nm.x0, x1);
    fmt::format_to(it, "<text x=\"{:.2f}\" y=\"{:.1f}\" fill=\"#ffffff\" font-size=\"10\">{}</text>\n", nm.x0, nm.y,
                   xml_escape(nm.text));
  }
  return marks;
}

// The largest waits, hatched from ready to start, labelled with why; the largest wait takes the
// first row where its label fits.
void draw_waits(std::string& out, const LayerGraph& g, const VariantTimeline& v, std::vector<Mark> marks,
                std::size_t replays_shown, const SvgOptions& options, const SvgLayout& l) {
  auto it = std::back_inserter(out);
  std::stable_sort(marks.begin(), marks.end(), [](const Mark& a, const Mark& b) { return a.wait_us > b.wait_us; });
  const double min_marked_us =
      std::max(1.0, 0.01 * l.span_us / std::max<double>(1, static_cast<double>(replays_shown)));
  std::vector<std::vector<LabelRow>> label_rows(static_cast<std::size_t>(std::max(l.ranks, 1)),
                                                std::vector<LabelRow>(kSvgWaitLabelRows));
  std::size_t marked = 0;
  for (const Mark& m : marks) {
    if (marked >= static_cast<std::size_t>(std::max(options.waits_marked, 0)) || m.wait_us < min_marked_us) break;
    ++marked;
    const NodeTiming& t = v.timings[static_cast<std::size_t>(m.replay)][static_cast<std::size_t>(m.node)];
    const Node& node = g.nodes[static_cast<std::size_t>(m.node)];
    const double x0 = l.x_of(t.ready_ns);
    const double x1 = l.x_of(t.start_ns);
    const double y = l.lanes_top + node.rank * l.lane_h + 31;
    const std::string label = node.label + " " + wait_parts_text(g, m.wait_us, t.parts, t.ready_from);
    fmt::format_to(it,
                   "<rect x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"8\" fill=\"url(#wait-hatch)\" "
                   "stroke=\"#d32f2f\" stroke-width=\"0.8\"><title>{}</title></rect>\n",
                   x0, y, std::max(x1 - x0, 1.0),
                   xml_escape(fmt::format("{} (replay {}, after {})", label, m.replay, node_name(g, t.ready_from))));
    // Anchored at the wait's start, or at its end when that keeps it inside the picture.
    const double w = kSvgLabelCharPx * static_cast<double>(display_chars(label));
    double lx0 = x0;
    if (lx0 + w > l.width - 4) lx0 = std::max(x1 - w, 4.0);
    const double lx1 = lx0 + w;
    auto& rows = label_rows[static_cast<std::size_t>(node.rank)];
    for (std::size_t row = 0; row < rows.size(); ++row) {
      if (!rows[row].fits(lx0, lx1)) continue;
      rows[row].take(lx0, lx1);
      fmt::format_to(
          it, "<text class=\"wait-label\" x=\"{:.2f}\" y=\"{:.1f}\" fill=\"#d32f2f\" font-size=\"10\">{}</text>\n", lx0,
          y + 19 + l.label_row_h * static_cast<double>(row), xml_escape(label));
      break;
    }
  }
}

// NVTX rows: per rank's process, per thread a row for each depth of its push/pop ranges (the first
// kSvgNvtxDepths) and a row per lane of its start/end ranges, where ranges overlap the time shown;
// at most kSvgNvtxRows rows in all.
struct NvtxRow {
  std::size_t rank = 0;
  const NvtxTimeline* timeline = nullptr;
  bool push = true;
  std::uint32_t thread = 0;  // push/pop rows
  std::uint16_t depth = 0;   // the depth, or the lane of start/end ranges
};

std::vector<NvtxRow> nvtx_rows(const VariantRun& vr, std::uint64_t t0, std::uint64_t t1) {
  std::vector<NvtxRow> rows;
  for (std::size_t k = 0; k < vr.nvtx.size(); ++k) {
    const NvtxTimeline* t = vr.nvtx[k].get();
    if (t == nullptr) continue;
    std::map<std::pair<bool, std::uint32_t>, std::uint16_t> depths;  // (start/end, thread) -> rows
    for (const auto& r : t->ranges) {
      if (r.start_ns > t1) break;  // ranges are by start
      if (r.end_ns < t0 || (r.push && r.depth >= kSvgNvtxDepths)) continue;
      auto& n = depths[{!r.push, r.push ? r.thread : 0}];
      n = std::max<std::uint16_t>(n, static_cast<std::uint16_t>(r.depth + 1));
    }
    for (const auto& [key, n] : depths)
      for (std::uint16_t d = 0; d < n && rows.size() < kSvgNvtxRows; ++d)
        rows.push_back({k, t, !key.first, key.second, d});
  }
  return rows;
}

void draw_nvtx(std::string& out, const std::vector<NvtxRow>& rows, const SvgLayout& l) {
  auto it = std::back_inserter(out);
  constexpr std::array kFill = {"#d1c4e9", "#b39ddb", "#9575cd"};
  std::size_t bars = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const NvtxRow& row = rows[i];
    const double y = l.nvtx_top + kSvgNvtxRowPx * static_cast<double>(i);
    const bool first = i == 0 || rows[i - 1].timeline != row.timeline || rows[i - 1].push != row.push ||
                       rows[i - 1].thread != row.thread;
    if (first)
      fmt::format_to(it, "<text x=\"12\" y=\"{:.1f}\" fill=\"#4a148c\" font-size=\"10\">{}</text>\n", y + 10,
                     row.push ? fmt::format("NVTX r{} thread {}", row.rank, row.thread)
                              : fmt::format("NVTX r{} start/end", row.rank));
    for (const auto& r : row.timeline->ranges) {
      if (r.start_ns > l.t1 || bars >= kSvgNvtxBars) break;
      if (r.end_ns < l.t0 || r.push != row.push || r.depth != row.depth || (r.push && r.thread != row.thread)) continue;
      ++bars;
      const double x0 = std::max(l.x_of(r.start_ns), l.left);
      const double w = std::max(std::min(l.x_of(r.end_ns), l.left + l.plot_w) - x0, 0.6);
      const std::string& name = row.timeline->names[r.name];
      fmt::format_to(it,
                     "<rect class=\"nvtx\" x=\"{:.2f}\" y=\"{:.1f}\" width=\"{:.2f}\" height=\"11\" fill=\"{}\" "
                     "stroke=\"#5e35b1\" stroke-width=\"0.5\"><title>{}</title></rect>\n",
                     x0, y + 1, w, kFill[std::min<std::size_t>(row.depth, kFill.size() - 1)],
                     xml_escape(fmt::format("NVTX {} (r{} thread {}): {:.1f} µs{}", name, row.rank, r.thread,
                                            static_cast<double>(r.end_ns - r.start_ns) / 1000.0,
                                            r.open ? ", not closed before the record file ended" : "")));
      if (w > 4 + kSvgLabelCharPx * static_cast<double>(display_chars(name)))
        fmt::format_to(it, "<text x=\"{:.2f}\" y=\"{:.1f}\" fill=\"#1a1a1a\" font-size=\"9\">{}</text>\n", x0 + 2,
                       y + 10, xml_escape(name));
    }
  }
}

// The time axis, then a legend of the kinds this graph has and the wait mark.
void draw_axis_and_legend(std::string& out, const LayerGraph& g, const SvgLayout& l, bool nvtx) {
  auto it = std::back_inserter(out);
  fmt::format_to(it, "<line x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\" stroke=\"#000\"/>\n", l.left,
                 l.axis_y, l.left + l.plot_w, l.axis_y);
  const double step = tick_step(l.span_us);
  for (double us = 0; us <= l.span_us + 1e-9; us += step) {
    const double x = l.left + us / l.span_us * l.plot_w;
    fmt::format_to(it,
                   "<line x1=\"{:.2f}\" y1=\"{:.1f}\" x2=\"{:.2f}\" y2=\"{:.1f}\" stroke=\"#000\"/>"
                   "<text x=\"{:.2f}\" y=\"{:.1f}\" font-size=\"10\" text-anchor=\"middle\">{:g}</text>\n",
                   x, l.axis_y, x, l.axis_y + 5, x, l.axis_y + 17, us);
  }
  fmt::format_to(it, "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" fill=\"#444\">{}</text>\n", l.left + l.plot_w,
                 l.axis_y + 32, xml_escape("µs from the first replay shown"));
  std::set<NodeKind> present;
  for (const auto& n : g.nodes) present.insert(n.kind);
  double lx = 12;
  for (const NodeKind k : kLegendKinds) {
    if (!present.count(k)) continue;
    fmt::format_to(it,
                   "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"14\" height=\"14\" fill=\"{}\"/>"
                   "<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n",
                   lx, l.legend_y, kind_colour(k), lx + 18, l.legend_y + 11, xml_escape(to_string(k)));
    lx += 34 + 7.5 * static_cast<double>(to_string(k).size());
  }
  fmt::format_to(
      it,
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"28\" height=\"14\" fill=\"url(#wait-hatch)\" stroke=\"#d32f2f\"/>"
      "<text x=\"{:.1f}\" y=\"{:.1f}\">wait (start - ready)</text>\n",
      lx, l.legend_y, lx + 32, l.legend_y + 11);
  if (nvtx)
    fmt::format_to(it,
                   "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"14\" height=\"14\" fill=\"#b39ddb\" stroke=\"#5e35b1\"/>"
                   "<text x=\"{:.1f}\" y=\"{:.1f}\">NVTX range open on the program's thread (host)</text>\n",
                   lx + 180, l.legend_y, lx + 198, l.legend_y + 11);
}

}  // namespace

std::string render_timeline_svg(const RunData& run, const RunAnalysis& analysis, std::size_t variant,
                                const SvgOptions& options) {
  const VariantRun& vr = run.variants.at(variant);
  const VariantTimeline& v = analysis.variants.at(variant);
  const std::vector<int> shown = shown_replays(v, options);
  const std::vector<Line> header = header_lines(run, v, shown, std::max(options.width_px, 600));
  const auto [t0, t1] = shown_span(v, shown);
  const std::vector<NvtxRow> nvtx = shown.empty() ? std::vector<NvtxRow>{} : nvtx_rows(vr, t0, t1);
  const SvgLayout layout = make_layout(v, shown, options, header.size(), nvtx.size());
  std::string out;
  draw_frame(out, layout, header);
  draw_nvtx(out, nvtx, layout);
  draw_lanes(out, run, v, shown, layout);
  std::vector<Mark> marks = draw_ops(out, vr.graph, v, shown, layout);
  draw_waits(out, vr.graph, v, std::move(marks), shown.size(), options, layout);
  draw_axis_and_legend(out, vr.graph, layout, !nvtx.empty());
  out += "</svg>\n";
  return out;
}

}  // namespace tpgraph
