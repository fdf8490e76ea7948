#include "core/records/nvtx_timeline.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <unordered_map>
#include <utility>

#include "core/records/trace_file.hpp"

namespace tpgraph {

namespace {

using tracefile::NvtxKind;

// Ranges a thread keeps open around one another, as far as depths and launch contexts follow them
// (a hostile file may claim a million): deeper ones share the last depth and name no context.
constexpr std::size_t kMaxStack = 256;
// Lanes of start/end ranges per process; past them, ranges share the last lane.
constexpr std::size_t kMaxLanes = 64;

std::uint64_t shifted(std::uint64_t t, std::int64_t offset) {
  if (t == 0 || offset == 0) return t;
  return offset >= 0 ? t + static_cast<std::uint64_t>(offset) : t - static_cast<std::uint64_t>(-offset);
}

// Opens paired with closes; unclosed ranges end at `last_ns`.
NvtxTimeline pair_events(const tracefile::NvtxLog& log, std::uint64_t last_ns) {
  NvtxTimeline out;
  out.names.emplace_back("(unnamed)");
  std::unordered_map<std::uint32_t, std::uint32_t> name_index;  // the file's id -> names
  std::unordered_map<std::uint64_t, std::size_t> open_push, open_start;
  for (const auto& e : log.events) {
    if (e.at_ns == 0) continue;  // CUPTI could not tell the time
    const auto kind = static_cast<NvtxKind>(e.kind);
    const bool push = kind == NvtxKind::push || kind == NvtxKind::pop;
    auto& open = push ? open_push : open_start;
    if (kind == NvtxKind::push || kind == NvtxKind::start) {
      NvtxRange r;
      r.start_ns = e.at_ns;
      r.thread = e.thread;
      r.push = push;
      r.open = true;
      if (const auto named = log.names.find(e.name); named != log.names.end()) {
        const auto [it, added] = name_index.try_emplace(e.name, static_cast<std::uint32_t>(out.names.size()));
        if (added) out.names.push_back(named->second);
        r.name = it->second;
      }
      open[e.range] = out.ranges.size();  // a number opened twice: the first stays open to the end
      out.ranges.push_back(r);
      continue;
    }
    const auto it = open.find(e.range);
    if (it == open.end()) {
      ++out.unmatched_closes;
      continue;
    }
    NvtxRange& r = out.ranges[it->second];
    r.end_ns = std::max(e.at_ns, r.start_ns);
    r.open = false;
    open.erase(it);
  }
  for (auto& r : out.ranges)
    if (r.open) r.end_ns = std::max(last_ns, r.start_ns);
  return out;
}

// Depths: per thread, the push/pop ranges still open at each one's start; lanes for start/end.
void assign_depths(std::vector<NvtxRange>& ranges) {
  std::unordered_map<std::uint32_t, std::vector<std::uint64_t>> ends;  // thread -> ends of ranges around
  std::vector<std::uint64_t> lane_end;
  for (auto& r : ranges) {
    if (r.push) {
      auto& stack = ends[r.thread];
      while (!stack.empty() && stack.back() <= r.start_ns) stack.pop_back();
      r.depth = static_cast<std::uint16_t>(std::min<std::size_t>(stack.size(), kMaxStack));
      if (stack.size() < kMaxStack) stack.push_back(r.end_ns);
      continue;
    }
    std::size_t lane = 0;
    while (lane < lane_end.size() && lane_end[lane] > r.start_ns) ++lane;
    if (lane == lane_end.size()) {
      if (lane_end.size() < kMaxLanes) lane_end.push_back(0);
      else lane = kMaxLanes - 1;
    }
    lane_end[lane] = std::max(lane_end[lane], r.end_ns);
    r.depth = static_cast<std::uint16_t>(lane);
  }
}

}  // namespace

std::shared_ptr<const NvtxTimeline> process_nvtx(const tracefile::ProcessFile& file, std::int64_t offset_ns) {
  if (file.nvtx.events.empty()) return nullptr;
  std::uint64_t last = file.end_ns;
  for (const auto& l : file.launches) last = std::max(last, l.host_end_ns);
  for (const auto& e : file.nvtx.events) last = std::max(last, e.at_ns);
  NvtxTimeline t = pair_events(file.nvtx, last);
  if (t.ranges.empty() && t.unmatched_closes == 0) return nullptr;
  for (auto& r : t.ranges) {
    r.start_ns = shifted(r.start_ns, offset_ns);
    r.end_ns = shifted(r.end_ns, offset_ns);
  }
  std::stable_sort(t.ranges.begin(), t.ranges.end(), [](const NvtxRange& a, const NvtxRange& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.end_ns > b.end_ns;
  });
  assign_depths(t.ranges);
  t.by_end.resize(t.ranges.size());
  std::iota(t.by_end.begin(), t.by_end.end(), 0u);
  std::sort(t.by_end.begin(), t.by_end.end(), [&](std::uint32_t a, std::uint32_t b) {
    return t.ranges[a].end_ns != t.ranges[b].end_ns ? t.ranges[a].end_ns < t.ranges[b].end_ns : a > b;
  });
  return std::make_shared<const NvtxTimeline>(std::move(t));
}

namespace {

// The ranges open at each of `starts` (sorted), as name indices outermost first: one sweep over the
// ranges' starts and ends in time order. Per thread a stack of open push/pop ranges; `tops` orders
// the threads by the start of their innermost open range, so the latest is found at once.
std::map<std::vector<std::uint32_t>, std::uint64_t> contexts_of(const NvtxTimeline& t,
                                                                const std::vector<std::uint64_t>& starts) {
  const auto& ranges = t.ranges;
  const auto& by_end = t.by_end;
  std::unordered_map<std::uint32_t, std::vector<std::uint32_t>> stacks;  // thread -> open ranges, outermost first
  std::set<std::pair<std::uint64_t, std::uint32_t>> tops;                // (innermost start, thread)
  std::set<std::uint32_t> open_start_end;                                // indices: by start
  const auto set_top = [&](std::uint32_t thread, bool on) {
    const auto& stack = stacks[thread];
    if (stack.empty()) return;
    if (on) tops.emplace(ranges[stack.back()].start_ns, thread);
    else tops.erase({ranges[stack.back()].start_ns, thread});
  };
  const auto opened = [&](std::uint32_t i) {
    const NvtxRange& r = ranges[i];
    if (!r.push) return (void)open_start_end.insert(i);
    if (stacks[r.thread].size() >= kMaxStack) return;
    set_top(r.thread, false);
    stacks[r.thread].push_back(i);
    set_top(r.thread, true);
  };
  const auto closed = [&](std::uint32_t i) {
    const NvtxRange& r = ranges[i];
    if (!r.push) return (void)open_start_end.erase(i);
    auto& stack = stacks[r.thread];
    const auto it = std::find(stack.rbegin(), stack.rend(), i);
    if (it == stack.rend()) return;
    set_top(r.thread, false);
    stack.erase(std::next(it).base());
    set_top(r.thread, true);
  };
  std::map<std::vector<std::uint32_t>, std::uint64_t> counts;
  std::size_t next_open = 0, next_close = 0;
  for (const std::uint64_t at : starts) {
    // A range holds the instants from its start to its end, both included. Opens and closes before
    // `at` are taken in time order, so a thread's stack holds only what is open together.
    for (;;) {
      const bool can_open = next_open < ranges.size() && ranges[next_open].start_ns <= at;
      const bool can_close = next_close < by_end.size() && ranges[by_end[next_close]].end_ns < at;
      if (can_close && (!can_open || ranges[by_end[next_close]].end_ns < ranges[next_open].start_ns)) {
        if (by_end[next_close] < next_open) closed(by_end[next_close]);
        ++next_close;
      } else if (can_open) {
        opened(static_cast<std::uint32_t>(next_open++));
      } else {
        break;
      }
    }
    std::vector<std::uint32_t> chain;
    if (!tops.empty()) {
      for (const std::uint32_t i : stacks[tops.rbegin()->second]) chain.push_back(ranges[i].name);
    } else {
      for (const std::uint32_t i : open_start_end) chain.push_back(ranges[i].name);
    }
    if (chain.size() > kMaxNvtxContextDepth)
      chain.erase(chain.begin(), chain.end() - static_cast<std::ptrdiff_t>(kMaxNvtxContextDepth));
    ++counts[chain];
  }
  return counts;
}

std::string share_text(std::uint64_t n, std::uint64_t total) {
  if (n == total) return "all";
  const double pct = 100.0 * static_cast<double>(n) / static_cast<double>(total);
  return pct < 1.0 ? "<1%" : fmt::format("{:.0f}%", std::min(pct, 99.0));
}

}  // namespace

NvtxLaunches nvtx_launches(const std::vector<RankLaunches>& ranks) {
  NvtxLaunches out;
  std::map<std::vector<std::string>, std::uint64_t> counts;
  for (const auto& rank : ranks) {
    out.launches += rank.starts.size();
    if (rank.timeline == nullptr) {
      if (!rank.starts.empty()) counts[{}] += rank.starts.size();
      continue;
    }
    if (rank.starts.empty()) continue;
    std::vector<std::uint64_t> starts = rank.starts;
    std::sort(starts.begin(), starts.end());
    for (const auto& [chain, n] : contexts_of(*rank.timeline, starts)) {
      std::vector<std::string> names;
      for (const std::uint32_t i : chain) names.push_back(rank.timeline->names[i]);
      counts[names] += n;
    }
  }
  for (auto& [names, n] : counts) out.contexts.push_back({names, n});
  // The most frequent first; equal counts in the order of their names (a stable report).
  std::stable_sort(out.contexts.begin(), out.contexts.end(),
                   [](const NvtxContext& a, const NvtxContext& b) { return a.launches > b.launches; });
  if (out.contexts.size() > kMaxNvtxContexts) out.contexts.resize(kMaxNvtxContexts);
  return out;
}

std::string nvtx_launches_text(const NvtxLaunches& l) {
  if (l.launches == 0) return {};
  std::string out;
  for (std::size_t i = 0; i < l.contexts.size(); ++i) {
    const NvtxContext& c = l.contexts[i];
    std::string where;
    for (const auto& name : c.ranges) where += (where.empty() ? "" : " > ") + name;
    out += fmt::format("{}{} ({}{})", i == 0 ? "launched " : "; ",
                       where.empty() ? "outside any NVTX range" : "inside NVTX " + where,
                       share_text(c.launches, l.launches),
                       i == 0 ? fmt::format(" of {} launch{}", l.launches, l.launches == 1 ? "" : "es") : "");
  }
  return out;
}

}  // namespace tpgraph
