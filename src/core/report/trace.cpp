#include "core/report/trace.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/report/report.hpp"

namespace tpgraph {

using nlohmann::json;

namespace {

double rel_us(std::uint64_t t, std::uint64_t base) {
  // Subtract as integers: CUPTI timestamps (~1.7e18 ns) are beyond a double's exact range.
  const double us = t >= base ? static_cast<double>(t - base) / 1000.0 : -static_cast<double>(base - t) / 1000.0;
  return std::round(us * 1000.0) / 1000.0;
}

bool leaves_record(NodeKind k) {
  const CudaNodeType t = cuda_node_type(k);
  return t == CudaNodeType::kernel || t == CudaNodeType::memcpy || t == CudaNodeType::memset;
}

// For each node, the nodes with records it depends on directly or through nodes that leave none
// (event, alloc, free): the ends a flow arrow can join. Built once in topological order, each node
// from its predecessors' sets, so a long chain of record-less nodes costs linear time.
std::vector<std::set<int>> recorded_predecessors(const LayerGraph& g) {
  const std::size_t n = g.nodes.size();
  std::vector<std::vector<int>> pred(n), succ(n);
  std::vector<int> indegree(n, 0);
  for (const auto& e : g.edges) {
    pred[static_cast<std::size_t>(e.to)].push_back(e.from);
    succ[static_cast<std::size_t>(e.from)].push_back(e.to);
    ++indegree[static_cast<std::size_t>(e.to)];
  }
  std::vector<int> order;
  order.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    if (indegree[i] == 0) order.push_back(static_cast<int>(i));
  for (std::size_t head = 0; head < order.size(); ++head)
    for (const int next : succ[static_cast<std::size_t>(order[head])])
      if (--indegree[static_cast<std::size_t>(next)] == 0) order.push_back(next);
  std::vector<std::set<int>> out(n);
  for (const int id : order) {  // a cycle (refused by the analysis) leaves its nodes without arrows
    auto& mine = out[static_cast<std::size_t>(id)];
    for (const int p : pred[static_cast<std::size_t>(id)]) {
      const auto pi = static_cast<std::size_t>(p);
      if (leaves_record(g.nodes[pi].kind)) {
        mine.insert(p);
      } else {
        mine.insert(out[pi].begin(), out[pi].end());
      }
    }
  }
  return out;
}

struct Placed {
  int pid = 0;
  std::uint32_t tid = 0;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
};

// Events as the text of a JSON array's elements, each serialised as it is made: a trace of
// hundreds of thousands of slices is held as its text, never as a document of objects (which
// takes twenty times as much memory).
struct EventText {
  std::string text;
  void add(const json& event) {
    if (!text.empty()) text += ',';
    text += event.dump();
  }
  void add(const EventText& more) {
    if (more.text.empty()) return;
    if (!text.empty()) text += ',';
    text += more.text;
  }
};

// The slices of the records shown, the streams each track holds, and where each node of a replay
// with full detail was placed (the ends of the arrows).
struct Slices {
  EventText events;
  std::map<int, std::set<std::uint32_t>> streams_of;  // pid -> stream ids
  std::map<std::pair<int, int>, Placed> placed;       // (replay, node) -> first record's place
};

json wait_args(const LayerGraph& g, const NodeTiming& t, json args) {
  const auto us3 = [](double x) { return std::round(x * 1000.0) / 1000.0; };
  args["wait_us"] = us3(t.wait_us);
  args["waited_on"] = node_name(g, t.ready_from);
  args["contention_us"] = us3(t.parts.contention_us);
  args["idle_us"] = us3(t.parts.idle_us);
  if (t.parts.own_from >= 0) args["arrival_us"] = us3(t.parts.arrival_us);
  if (!t.parts.occupants.empty()) args["waited_for"] = occupant_name(g, t.parts.occupants.front());
  args["why"] = wait_parts_text(g, t.wait_us, t.parts, t.ready_from);
  return args;
}

Slices record_slices(const VariantRun& vr, const VariantTimeline& v, std::uint64_t base,
                     const std::function<bool(int)>& shown) {
  const LayerGraph& g = vr.graph;
  const int unmatched_pid = v.ranks + 1;  // records that match no node get a process of their own
  Slices out;
  for (const auto& a : vr.records) {
    if (a.start_ns == 0 || a.end_ns == 0 || a.end_ns < a.start_ns || a.start_ns < base) continue;
    if (a.replay >= 0 && !shown(a.replay)) continue;
    const bool matched = a.node >= 0 && static_cast<std::size_t>(a.node) < g.nodes.size();
    const bool in_range = a.replay >= 0 && a.replay < v.replay_count;
    const int pid = matched ? g.nodes[static_cast<std::size_t>(a.node)].rank + 1 : unmatched_pid;
    out.streams_of[pid].insert(a.stream_id);
    json args{
        {"replay", a.replay}, {"activity", std::string(to_string(a.kind))}, {"bytes", a.bytes}, {"device", a.device}};
    std::string name = a.name.empty() ? std::string(to_string(a.kind)) : a.name.str();
    std::string category = "unmatched";
    if (matched) {
      const Node& n = g.nodes[static_cast<std::size_t>(a.node)];
      name = n.label;
      category = std::string(to_string(n.kind));
      args["node"] = a.node;
      args["kind"] = category;
      if (!a.name.empty()) args["kernel"] = a.name.str();
      if (in_range && v.has_detail(a.replay)) {
        args = wait_args(g, v.timings[static_cast<std::size_t>(a.replay)][static_cast<std::size_t>(a.node)],
                         std::move(args));
        out.placed.emplace(std::make_pair(a.replay, a.node), Placed{pid, a.stream_id, a.start_ns, a.end_ns});
      }
    }
    out.events.add(json{{"name", name},
                        {"cat", category},
                        {"ph", "X"},
                        {"ts", rel_us(a.start_ns, base)},
                        {"dur", std::round(static_cast<double>(a.end_ns - a.start_ns)) / 1000.0},
                        {"pid", pid},
                        {"tid", a.stream_id},
                        {"args", args}});
  }
  return out;
}

// Track names: processes (ranks, and the unmatched records' own), their labels and streams.
EventText track_names(const RunData& run, const VariantTimeline& v, const Slices& slices, const std::string& shared) {
  const int unmatched_pid = v.ranks + 1;
  EventText events;
  for (const auto& [pid, streams] : slices.streams_of) {
    std::string pname = "unmatched records (no graph node)";
    if (pid != unmatched_pid) {
      const int rank = pid - 1;
      pname = fmt::format("rank {} ({})", rank, device_label(run.env, v.rank_device[static_cast<std::size_t>(rank)]));
    }
    events.add(json{{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"tid", 0}, {"args", {{"name", pname}}}});
    events.add(
        json{{"ph", "M"}, {"name", "process_sort_index"}, {"pid", pid}, {"tid", 0}, {"args", {{"sort_index", pid}}}});
    if (!shared.empty() && pid != unmatched_pid)
      events.add(json{{"ph", "M"},
                      {"name", "process_labels"},
                      {"pid", pid},
                      {"tid", 0},
                      {"args", {{"labels", "shares a GPU with another rank"}}}});
    for (const std::uint32_t s : streams)
      events.add(json{{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", pid},
                      {"tid", s},
                      {"args", {{"name", fmt::format("stream {}", s)}}}});
  }
  return events;
}

// Arrows: from the end of a recorded node to the start of a recorded node on another rank that
// depends on it; and from the node that held the GPU longest while a node waited to that node's
// start (from the occupant's end, or from the waiting node's start where the occupant still ran),
// for occupants of 1 µs or more.
EventText flow_arrows(const LayerGraph& g, const VariantTimeline& v, const Slices& slices, std::uint64_t base) {
  EventText events;
  std::uint64_t flow_id = 0;
  // One arrow: its start at `s_ts` on the source's track, its end bound to the target's start.
  const auto add_flow = [&](const std::string& name, const char* category, const Placed& from, std::uint64_t s_ts,
                            const Placed& to) {
    ++flow_id;
    events.add(json{{"ph", "s"},
                    {"id", flow_id},
                    {"name", name},
                    {"cat", category},
                    {"pid", from.pid},
                    {"tid", from.tid},
                    {"ts", rel_us(s_ts, base)}});
    events.add(json{{"ph", "f"},
                    {"bp", "e"},
                    {"id", flow_id},
                    {"name", name},
                    {"cat", category},
                    {"pid", to.pid},
                    {"tid", to.tid},
                    {"ts", rel_us(to.start_ns, base)}});
  };
  const auto preds = recorded_predecessors(g);
  for (const auto& [key, to] : slices.placed) {
    const auto [replay, node] = key;
    const Node& target = g.nodes[static_cast<std::size_t>(node)];
    for (const int p : preds[static_cast<std::size_t>(node)]) {
      if (g.nodes[static_cast<std::size_t>(p)].rank == target.rank) continue;
      const auto from_it = slices.placed.find({replay, p});
      if (from_it == slices.placed.end()) continue;
      const Placed& from = from_it->second;
      // A flow start binds to the slice enclosing its timestamp: one ns before the source ends.
      const std::uint64_t s_ts = from.end_ns > from.start_ns ? from.end_ns - 1 : from.start_ns;
      add_flow(fmt::format("{} -> {}", g.nodes[static_cast<std::size_t>(p)].label, target.label), "cross-rank", from,
               s_ts, to);
    }
  }
  for (const auto& [key, to] : slices.placed) {
    const auto [replay, node] = key;
    const NodeTiming& t = v.timings[static_cast<std::size_t>(replay)][static_cast<std::size_t>(node)];
    // Under a µs of contention is a kernel tail, not a reason to wait: no arrow.
    if (t.parts.occupants.empty() || t.parts.occupants.front().other_replay || t.parts.occupants.front().us < 1.0)
      continue;
    const int occupant = t.parts.occupants.front().node;
    const auto from_it = slices.placed.find({replay, occupant});
    if (occupant < 0 || from_it == slices.placed.end()) continue;
    const Placed& from = from_it->second;
    const std::uint64_t last_ns = from.end_ns > from.start_ns ? from.end_ns - 1 : from.start_ns;
    const std::uint64_t s_ts = std::max(from.start_ns, std::min(last_ns, to.start_ns));
    const std::string name = fmt::format("{} held the GPU: {} waited {:.1f} µs", node_name(g, occupant),
                                         node_name(g, node), t.parts.occupants.front().us);
    add_flow(name, "contention", from, s_ts, to);
  }
  return events;
}

// NVTX tracks: a thread id per track clear of CUDA's stream ids (small counters), sorted above them.
constexpr std::uint32_t kNvtxTid = 900'000'000;
// Ranges shown per trace, and how long before a replay a range may end and still be shown: the
// launch call (inside the range) comes before the GPU work.
constexpr std::size_t kTraceMaxNvtxRanges = 100'000;
constexpr std::uint64_t kNvtxLeadNs = 1'000'000;

// The time windows of the replays shown, each from kNvtxLeadNs before a replay to its end; replays
// shown one after another form one window (with the time between them), then sorted and merged.
std::vector<std::pair<std::uint64_t, std::uint64_t>> shown_windows(const VariantTimeline& v,
                                                                   const std::function<bool(int)>& shown) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> raw;
  int previous = -2;
  for (int r = 0; r < v.replay_count && static_cast<std::size_t>(r) < v.replays.size(); ++r) {
    const ReplayTimeline& rt = v.replays[static_cast<std::size_t>(r)];
    if (!rt.present || !shown(r)) continue;
    const std::uint64_t begin = rt.begin_ns > kNvtxLeadNs ? rt.begin_ns - kNvtxLeadNs : 0;
    if (previous == r - 1 && !raw.empty()) raw.back().second = std::max(raw.back().second, rt.end_ns);
    else raw.emplace_back(begin, rt.end_ns);
    previous = r;
  }
  std::sort(raw.begin(), raw.end());
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
  for (const auto& w : raw) {
    if (!out.empty() && w.first <= out.back().second) out.back().second = std::max(out.back().second, w.second);
    else out.push_back(w);
  }
  return out;
}

struct NvtxTracks {
  EventText names;   // track names, before any slice
  EventText slices;  // the ranges
  std::size_t shown = 0;
  std::size_t overlapping = 0;  // ranges of the windows, shown or past kTraceMaxNvtxRanges
};

// Each rank's process's NVTX ranges around the replays shown, on the rank's process: a track per
// thread with its push/pop ranges (complete events, nested by depth) and a track per lane of its
// start/end ranges (which may overlap one another, so each lane holds ranges that do not).
NvtxTracks nvtx_tracks(const RunData& run, const VariantRun& vr, const VariantTimeline& v, const Slices& slices,
                       const std::vector<std::pair<std::uint64_t, std::uint64_t>>& windows, std::uint64_t base) {
  NvtxTracks out;
  const auto overlaps = [&](const NvtxRange& r) {
    const auto w = std::lower_bound(windows.begin(), windows.end(), r.start_ns,
                                    [](const auto& window, std::uint64_t t) { return window.second < t; });
    return w != windows.end() && w->first <= r.end_ns;
  };
  for (std::size_t k = 0; k < vr.nvtx.size(); ++k) {
    const NvtxTimeline* t = vr.nvtx[k].get();
    if (t == nullptr) continue;
    std::vector<const NvtxRange*> chosen;
    std::set<std::uint32_t> threads;
    std::set<std::uint16_t> lanes;
    for (const auto& r : t->ranges) {
      if (!overlaps(r)) continue;
      ++out.overlapping;
      if (out.shown >= kTraceMaxNvtxRanges) continue;
      ++out.shown;
      chosen.push_back(&r);
      if (r.push) threads.insert(r.thread);
      else lanes.insert(r.depth);
    }
    if (chosen.empty()) continue;
    const int pid = static_cast<int>(k) + 1;
    if (!slices.streams_of.count(pid) && k < v.rank_device.size())
      out.names.add(
          json{{"ph", "M"},
               {"name", "process_name"},
               {"pid", pid},
               {"tid", 0},
               {"args", {{"name", fmt::format("rank {} ({})", k, device_label(run.env, v.rank_device[k]))}}}});
    std::map<std::pair<bool, std::uint32_t>, std::uint32_t> tid_of;  // (start/end, thread or lane) -> tid
    for (const std::uint32_t th : threads) tid_of[{false, th}] = kNvtxTid + static_cast<std::uint32_t>(tid_of.size());
    for (const std::uint16_t lane : lanes) tid_of[{true, lane}] = kNvtxTid + static_cast<std::uint32_t>(tid_of.size());
    for (const auto& [key, tid] : tid_of) {
      const std::string name = !key.first        ? fmt::format("NVTX (thread {})", key.second)
                               : key.second == 0 ? std::string("NVTX start/end")
                                                 : fmt::format("NVTX start/end (lane {})", key.second);
      out.names.add(json{{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", name}}}});
      out.names.add(json{{"ph", "M"},
                         {"name", "thread_sort_index"},
                         {"pid", pid},
                         {"tid", tid},
                         {"args", {{"sort_index", static_cast<int>(tid - kNvtxTid) - 1000}}}});
    }
    for (const NvtxRange* r : chosen) {
      // A range that began before the trace's time base is drawn from it (Perfetto's time starts there).
      const std::uint64_t from = std::max(r->start_ns, base);
      json args{{"thread", r->thread}, {"kind", r->push ? "push/pop" : "start/end"}, {"depth", r->depth}};
      if (r->open) args["open_at_end"] = "not closed before the process's record file ended";
      if (r->start_ns < base) args["began_us_before_trace"] = rel_us(base, r->start_ns);
      out.slices.add(json{{"name", t->names[r->name]},
                          {"cat", "nvtx"},
                          {"ph", "X"},
                          {"ts", rel_us(from, base)},
                          {"dur", r->end_ns > from ? std::round(static_cast<double>(r->end_ns - from)) / 1000.0 : 0.0},
                          {"pid", pid},
                          {"tid", tid_of.at({!r->push, r->push ? r->thread : r->depth})},
                          {"args", args}});
    }
  }
  return out;
}

}  // namespace

std::string render_chrome_trace(const RunData& run, const RunAnalysis& analysis, std::size_t variant,
                                const ChromeTraceOptions& options) {
  const VariantRun& vr = run.variants.at(variant);
  const VariantTimeline& v = analysis.variants.at(variant);
  const std::uint64_t base = analysis.base_ns;
  // Replays shown: the first max_replays and every outlier (records outside the replays are shown).
  std::set<int> outlier_replays;
  for (const auto& o : v.outliers) outlier_replays.insert(o.replay);
  const auto shown = [&](int replay) {
    return options.max_replays <= 0 || replay < options.max_replays || outlier_replays.count(replay) > 0;
  };
  int replays_shown = 0;
  for (int r = 0; r < v.replay_count; ++r) replays_shown += shown(r) ? 1 : 0;

  const Slices slices = record_slices(vr, v, base, shown);
  // Names first, so viewers label the tracks before any slice arrives.
  const std::string shared = shared_gpu_note(run.env, v);
  EventText events = track_names(run, v, slices, shared);
  NvtxTracks nvtx;
  if (!vr.nvtx.empty()) nvtx = nvtx_tracks(run, vr, v, slices, shown_windows(v, shown), base);
  events.add(nvtx.names);
  events.add(slices.events);
  events.add(nvtx.slices);
  events.add(flow_arrows(vr.graph, v, slices, base));
  const std::string banner = collection_banner(v);
  if (!banner.empty())
    events.add(json{{"ph", "i"}, {"s", "g"}, {"name", banner}, {"pid", 1}, {"tid", 0}, {"ts", rel_us(base, base)}});

  json other{{"tool", fmt::format("tpgraph {} ({})", run.env.tool_version, run.env.git_revision)},
             {"variant", v.name},
             {"verdict", std::string(to_string(v.verdict))},
             {"verdict_basis", std::string(to_string(v.basis))},
             {"verdict_text", verdict_basis_text(v)},
             {"window_overlap", v.overlap.count ? fmt::format("{:.4f}", v.overlap.median) : "-"},
             {"busy_overlap", v.busy_overlap.count ? fmt::format("{:.4f}", v.busy_overlap.median) : "-"},
             {"thresholds", verdict_thresholds_text()},
             {"ranks_share_gpu", shared.empty() ? "no" : shared},
             {"collection_clean", v.health.clean() ? "true" : "false"},
             {"collection", v.health.clean() ? "clean" : banner},
             {"time_base_ns", fmt::format("{}", base)},
             {"replays_shown", fmt::format("{} of {} (the first {} and every outlier)", replays_shown, v.replay_count,
                                           options.max_replays)},
             {"started_at", run.env.started_at}};
  if (!vr.nvtx.empty())
    other["nvtx_ranges_shown"] = fmt::format("{} of the {} around the replays shown (at most {})", nvtx.shown,
                                             nvtx.overlapping, kTraceMaxNvtxRanges);
  // The document's keys in the order a JSON object of them is written (sorted).
  std::string out = R"({"displayTimeUnit":"ns","otherData":)";
  out += other.dump();
  out += R"(,"traceEvents":[)";
  out += events.text;
  out += "]}\n";
  return out;
}

}  // namespace tpgraph
