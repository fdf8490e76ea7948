// The deterministic router of the hand-made harness tpgraph replaces (so the shapes match its), and
// the CSR grouping of pairs by expert.
//
// Pair p in [0, tokens*top_k) belongs to token p / top_k. Its expert comes from a 64-bit mix of p
// (route_expert). Its routing weight: raw(p) = 0.5 + ((mix(p) >> 3) & 255) / 256, bits the expert
// pick does not use, normalised over the token's top_k pairs in pair order (fp32, left to right).
#pragma once
#include <cstdint>
#include <vector>

#include "core/numerics/geometry.hpp"

namespace tpgraph {

[[nodiscard]] std::uint64_t route_mix(std::uint64_t pair);
[[nodiscard]] int route_expert(std::uint64_t pair, int experts);

struct Routing {
  int tokens = 0;
  int top_k = 0;
  int experts = 0;
  // CSR: active experts in ascending id; offsets[i]..offsets[i+1] are the rows of active_experts[i]
  // in `pairs` (pair ids ascending within an expert).
  std::vector<std::int32_t> active_experts;
  std::vector<std::int32_t> offsets;      // n_active + 1
  std::vector<std::int32_t> pairs;        // CSR row -> pair id
  std::vector<std::int32_t> row_token;    // CSR row -> token (pairs[row] / top_k)
  std::vector<std::int32_t> pair_row;     // pair id -> CSR row (the inverse of `pairs`)
  std::vector<float> pair_weight;         // pair id -> routing weight
  std::vector<std::int32_t> expert_rows;  // expert id -> rows routed to it (0 if inactive)

  [[nodiscard]] std::int64_t n_pairs() const { return static_cast<std::int64_t>(pairs.size()); }
  [[nodiscard]] int n_active() const { return static_cast<int>(active_experts.size()); }
};

[[nodiscard]] Routing build_routing(const Geometry& g);

struct RoutingStats {
  std::int64_t n_pairs = 0;
  int n_active = 0;
  int min_rows = 0;  // over active experts
  double median_rows = 0;
  int max_rows = 0;
};
[[nodiscard]] RoutingStats routing_stats(const Routing& r);

// Rows per expert without the per-pair arrays: what plan reports, in memory of O(experts) and
// time linear in the pairs (spread over the cores), so the documented extremes (2^31 pairs) plan
// in seconds. Same counts as build_routing's expert_rows.
struct ExpertCounts {
  std::int64_t n_pairs = 0;
  std::vector<std::int64_t> expert_rows;  // expert id -> rows routed to it
  [[nodiscard]] int n_active() const;
};
[[nodiscard]] ExpertCounts count_expert_rows(const Geometry& g);
[[nodiscard]] RoutingStats routing_stats(const ExpertCounts& c);

}  // namespace tpgraph
