// tpgraph plan [SCENARIO] [options] [--json]: what a run of the scenario would do, without a GPU.
#include <fmt/core.h>

#include <array>
#include <cstdio>
#include <iterator>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.hpp"
#include "cli/scenario_options.hpp"
#include "core/model/layer_graph.hpp"
#include "core/numerics/router.hpp"

namespace tpgraph::cli {
namespace {

struct PlanArgs {
  std::string scenario;
  ScenarioOptions overrides;
  bool json = false;
};

constexpr std::array kKinds{NodeKind::busy,     NodeKind::quantize, NodeKind::gemm, NodeKind::swiglu,
                            NodeKind::combine,  NodeKind::reduce,   NodeKind::copy, NodeKind::alloc,
                            NodeKind::free_mem, NodeKind::event};
constexpr std::array kCudaTypes{CudaNodeType::kernel, CudaNodeType::memcpy, CudaNodeType::mem_alloc,
                                CudaNodeType::mem_free, CudaNodeType::event_record};

struct RankSummary {
  int device = 0;
  std::array<int, kKinds.size()> by_kind{};
  std::array<int, kCudaTypes.size()> by_type{};
  double flops = 0;
  std::int64_t bytes = 0;
};

std::vector<RankSummary> summarize(const LayerGraph& graph) {
  std::vector<RankSummary> out(static_cast<std::size_t>(graph.ranks));
  for (const auto& n : graph.nodes) {
    auto& r = out[static_cast<std::size_t>(n.rank)];
    r.device = n.device;
    for (std::size_t i = 0; i < kKinds.size(); ++i)
      if (kKinds[i] == n.kind) ++r.by_kind[i];
    for (std::size_t i = 0; i < kCudaTypes.size(); ++i)
      if (kCudaTypes[i] == cuda_node_type(n.kind)) ++r.by_type[i];
    if (cuda_node_type(n.kind) == CudaNodeType::kernel) {
      r.flops += n.flops;
      r.bytes += n.bytes;
    }
  }
  return out;
}

int cross_rank_edges(const LayerGraph& graph) {
  int count = 0;
  for (const auto& e : graph.edges) count += graph.cross_rank(e) ? 1 : 0;
  return count;
}

std::string copy_rows_text(const Scenario& s) {
  return s.copy_rows ? fmt::format("{} rows", s.copy_row_count()) : std::string("all rows");
}

void print_text(const Scenario& s, int visible, const RoutingStats& rs, const LayerGraph& graph) {
  std::string out;
  auto w = std::back_inserter(out);
  const auto& g = s.geometry;
  fmt::format_to(w, "scenario   {}: {}\n", s.name, s.description);
  fmt::format_to(w, "geometry   experts {}, top-k {}, hidden {}, ff {} per rank, tokens {}, ranks {}\n", g.experts,
                 g.top_k, g.hidden, g.ff, g.tokens, g.ranks);
  fmt::format_to(w, "variant    layers {}, peer copy {}{}, join {}, root busy {}, alloc {}, issue {}\n", s.layers,
                 s.peer_copy, s.peer_copy == PeerCopy::none ? std::string{} : " (" + copy_rows_text(s) + ")", s.join,
                 s.root_busy, s.alloc, s.issue);
  fmt::format_to(w, "run        replays {} after {} warm-up, layout {}, weights {}{}, seed {}\n", s.replays,
                 warmup_text(s.warmup), s.layout, s.weights,
                 s.weights == WeightsKind::zeros ? " (numerics VACUOUS)" : "", s.seed);
  fmt::format_to(w, "devices    ");
  for (int r = 0; r < g.ranks; ++r)
    fmt::format_to(w, "{}rank {} -> GPU {}", r == 0 ? "" : ", ", r, s.device_of(r, visible));
  if (s.devices.empty()) fmt::format_to(w, "  (no --devices: plan assumes one GPU per rank)");
  out += "\n";
  fmt::format_to(w,
                 "routing    pairs {}, active experts {} of {}, rows per active expert min {} / median {} / max {}\n",
                 rs.n_pairs, rs.n_active, g.experts, rs.min_rows, rs.median_rows, rs.max_rows);

  out += "memory     per rank:\n";
  for (int r = 0; r < g.ranks; ++r) {
    const auto m = memory_of_rank(s, r);
    fmt::format_to(w, "             rank {} (GPU {}): {} = weights {} + activations {} + routing {}", r,
                   s.device_of(r, visible), format_bytes(m.total()), format_bytes(m.weights),
                   format_bytes(m.activations), format_bytes(m.routing));
    if (m.staging > 0) fmt::format_to(w, " + join staging {}", format_bytes(m.staging));
    if (m.pool > 0) fmt::format_to(w, " + in-graph pool {}", format_bytes(m.pool));
    out += "\n";
  }
  const auto per_device = memory_per_device(s, visible);
  out += "           per GPU:";
  for (std::size_t i = 0; i < per_device.size(); ++i)
    fmt::format_to(w, "{} GPU {} {}", i == 0 ? "" : ",", per_device[i].first, format_bytes(per_device[i].second));
  if (static_cast<int>(per_device.size()) < g.ranks) out += " (ranks share a GPU: their needs add up)";
  out += "\n";

  const auto ranks = summarize(graph);
  fmt::format_to(w, "graph      {} nodes, {} edges ({} cross-rank){}\n", graph.nodes.size(), graph.edges.size(),
                 cross_rank_edges(graph),
                 graph.end_joins.empty()
                     ? std::string{}
                     : fmt::format("; {} stream(s) rejoin the root at the end", graph.end_joins.size()));
  // Only the kinds this graph has, so the table stays narrow.
  std::vector<std::size_t> shown;
  for (std::size_t i = 0; i < kKinds.size(); ++i) {
    for (const auto& rk : ranks) {
      if (rk.by_kind[i] > 0) {
        shown.push_back(i);
        break;
      }
    }
  }
  out += "           rank  GPU";
  for (auto i : shown) fmt::format_to(w, " {:>8}", kKinds[i]);
  out += "  nodes   GFLOP  kernel bytes\n";
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const auto& rk = ranks[r];
    fmt::format_to(w, "           {:>4} {:>4}", r, rk.device);
    int total = 0;
    for (auto i : shown) fmt::format_to(w, " {:>8}", rk.by_kind[i]);
    for (int c : rk.by_kind) total += c;
    fmt::format_to(w, "  {:>5} {:>7.1f}  {:>12}\n", total, rk.flops / 1e9, format_bytes(rk.bytes));
  }
  out += "           CUDA nodes:";
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    fmt::format_to(w, "{} rank {}", r == 0 ? "" : ";", r);
    bool first = true;
    for (std::size_t i = 0; i < kCudaTypes.size(); ++i) {
      if (ranks[r].by_type[i] == 0) continue;
      fmt::format_to(w, "{} {} {}", first ? "" : ",", kCudaTypes[i], ranks[r].by_type[i]);
      first = false;
    }
  }
  out += "\n";
  (void)std::fwrite(out.data(), 1, out.size(), stdout);  // all of it, NULs too
}

void print_json(const Scenario& s, int visible, const RoutingStats& rs, const LayerGraph& graph) {
  using nlohmann::ordered_json;
  ordered_json j;
  j["scenario"] = ordered_json::parse(scenario_to_json(s));
  j["n_pairs"] = rs.n_pairs;
  j["n_active"] = rs.n_active;
  j["routing"] = {{"n_pairs", rs.n_pairs},
                  {"n_active", rs.n_active},
                  {"min_rows", rs.min_rows},
                  {"median_rows", rs.median_rows},
                  {"max_rows", rs.max_rows}};
  j["devices_assumed"] = s.devices.empty();
  ordered_json per_rank = ordered_json::array();
  for (int r = 0; r < s.geometry.ranks; ++r) {
    const auto m = memory_of_rank(s, r);
    per_rank.push_back({{"rank", r},
                        {"device", s.device_of(r, visible)},
                        {"weights", m.weights},
                        {"activations", m.activations},
                        {"routing", m.routing},
                        {"staging", m.staging},
                        {"pool", m.pool},
                        {"total", m.total()}});
  }
  ordered_json per_device = ordered_json::array();
  for (const auto& [device, bytes] : memory_per_device(s, visible))
    per_device.push_back({{"device", device}, {"total", bytes}});
  j["memory"] = {{"per_rank", per_rank}, {"per_device", per_device}};

  ordered_json ranks = ordered_json::array();
  const auto summary = summarize(graph);
  for (std::size_t r = 0; r < summary.size(); ++r) {
    ordered_json by_kind, by_type;
    for (std::size_t i = 0; i < kKinds.size(); ++i) by_kind[std::string(to_string(kKinds[i]))] = summary[r].by_kind[i];
    for (std::size_t i = 0; i < kCudaTypes.size(); ++i)
      by_type[std::string(to_string(kCudaTypes[i]))] = summary[r].by_type[i];
    ranks.push_back({{"rank", r},
                     {"device", summary[r].device},
                     {"nodes_by_kind", by_kind},
                     {"nodes_by_cuda_type", by_type},
                     {"kernel_flops", summary[r].flops},
                     {"kernel_bytes", summary[r].bytes}});
  }
  j["graph"] = {{"nodes", graph.nodes.size()},
                {"edges", graph.edges.size()},
                {"cross_rank_edges", cross_rank_edges(graph)},
                {"end_joins", graph.end_joins.size()},
                {"ranks", ranks}};
  const auto text = j.dump(2) + "\n";
  (void)std::fwrite(text.data(), 1, text.size(), stdout);  // all of it, NULs too
}

int run_plan(const PlanArgs& args) {
  const Scenario s = scenario_from(args.scenario, args.overrides);
  const int visible = assumed_visible_devices(s);
  const ExpertCounts counts = count_expert_rows(s.geometry);
  const RoutingStats rs = routing_stats(counts);
  const LayerGraph graph = build_layer_graph(s, counts.n_pairs, counts.n_active(), visible);
  if (args.json) print_json(s, visible, rs, graph);
  else print_text(s, visible, rs, graph);
  return 0;
}

}  // namespace

Command add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  auto* cmd = app.add_subcommand("plan", "geometry, memory, routing and the layer graph of a scenario (no GPU)");
  add_scenario_argument(*cmd, args->scenario);
  add_scenario_options(*cmd, args->overrides);
  cmd->add_flag("--json", args->json, "print the plan as JSON");
  return {cmd, [args] { return run_plan(*args); }};
}

}  // namespace tpgraph::cli
