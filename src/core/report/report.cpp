// The helpers every output of a run shares: folder names, device labels, banners, the verdict's
// basis and the texts that name nodes and explain their waits.
#include "core/report/report.hpp"

#include <fmt/core.h>
#include <fmt/format.h>

#include <map>
#include <set>

#include "core/report/report_common.hpp"

namespace tpgraph {

using namespace report_detail;

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
  if (o.node <= -2 && static_cast<std::size_t>(-2 - o.node) < g.outside_labels.size())
    return g.outside_labels[static_cast<std::size_t>(-2 - o.node)];  // another process's or graph's work
  if (o.node < 0 || static_cast<std::size_t>(o.node) >= g.nodes.size()) return "work matching no node";
  return o.other_replay ? node_name(g, o.node) + " of another replay" : node_name(g, o.node);
}

std::string wait_parts_text(const LayerGraph& g, double wait_us, const WaitParts& parts, int ready_from) {
  std::string out = fmt::format("waited {:.1f} µs", wait_us);
  std::string split;
  if (parts.contention_us >= kShownAtLeastUs) {
    std::string who;
    double named = 0;
    for (const Occupant& o : parts.occupants) {
      who += fmt::format("{}{} {:.1f}", who.empty() ? "" : ", ", occupant_name(g, o), o.us);
      named += o.us;
    }
    if (parts.contention_us - named >= kShownAtLeastUs)
      who += fmt::format(", others {:.1f}", parts.contention_us - named);
    split += fmt::format("contention {:.1f} ({})", parts.contention_us, who);
  }
  if (parts.idle_us >= kShownAtLeastUs) split += fmt::format("{}idle {:.1f}", split.empty() ? "" : ", ", parts.idle_us);
  if (!split.empty()) out += ": " + split;
  if (parts.own_from >= 0 && parts.arrival_us >= kShownAtLeastUs)
    out += fmt::format("; arrival {:.1f} ({} ended after {})", parts.arrival_us, node_name(g, ready_from),
                       node_name(g, parts.own_from));
  return out;
}

std::string typical_wait_text(const LayerGraph& g, const VariantTimeline& v, const NodeWaitSummary& w) {
  return node_name(g, w.node) + " " + typical_parts_text(g, v, w);
}

}  // namespace tpgraph
