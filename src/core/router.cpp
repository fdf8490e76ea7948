#include "core/router.hpp"

#include <algorithm>
#include <cmath>

namespace tpgraph {

std::uint64_t route_mix(std::uint64_t pair) {
  std::uint64_t h = pair * 0x9E3779B97F4A7C15ULL;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ULL;
  h ^= h >> 32;
  return h;
}

int route_expert(std::uint64_t pair, int experts) {
  const double u = static_cast<double>(route_mix(pair) >> 11) / 9007199254740992.0;  // 2^53
  const auto e = static_cast<std::int64_t>(std::pow(u, 1.35) * experts);
  return static_cast<int>(std::min<std::int64_t>(e, experts - 1));
}

Routing build_routing(const Geometry& g) {
  Routing r;
  r.tokens = g.tokens;
  r.top_k = g.top_k;
  r.experts = g.experts;
  const std::int64_t n = g.pairs();
  std::vector<std::int32_t> expert_of(static_cast<std::size_t>(n));
  r.expert_rows.assign(static_cast<std::size_t>(g.experts), 0);
  for (std::int64_t p = 0; p < n; ++p) {
    const int e = route_expert(static_cast<std::uint64_t>(p), g.experts);
    expert_of[static_cast<std::size_t>(p)] = e;
    ++r.expert_rows[static_cast<std::size_t>(e)];
  }
  // Counting sort by expert keeps pair ids ascending within each expert.
  std::vector<std::int32_t> start(static_cast<std::size_t>(g.experts) + 1, 0);
  for (int e = 0; e < g.experts; ++e) start[e + 1] = start[e] + r.expert_rows[e];
  r.offsets.push_back(0);
  for (int e = 0; e < g.experts; ++e) {
    if (r.expert_rows[e] == 0) continue;
    r.active_experts.push_back(e);
    r.offsets.push_back(start[e + 1]);
  }
  r.pairs.resize(static_cast<std::size_t>(n));
  r.row_token.resize(static_cast<std::size_t>(n));
  r.pair_row.resize(static_cast<std::size_t>(n));
  std::vector<std::int32_t> cursor(start.begin(), start.end() - 1);
  for (std::int64_t p = 0; p < n; ++p) {
    const auto row = cursor[expert_of[static_cast<std::size_t>(p)]]++;
    r.pairs[row] = static_cast<std::int32_t>(p);
    r.row_token[row] = static_cast<std::int32_t>(p / g.top_k);
    r.pair_row[static_cast<std::size_t>(p)] = row;
  }
  r.pair_weight.resize(static_cast<std::size_t>(n));
  for (std::int64_t t = 0; t < g.tokens; ++t) {
    float sum = 0.0f;
    const std::int64_t first = t * g.top_k;
    for (int j = 0; j < g.top_k; ++j) {
      const float raw =
          0.5f + static_cast<float>((route_mix(static_cast<std::uint64_t>(first + j)) >> 3) & 255u) / 256.0f;
      r.pair_weight[static_cast<std::size_t>(first + j)] = raw;
      sum += raw;
    }
    for (int j = 0; j < g.top_k; ++j) r.pair_weight[static_cast<std::size_t>(first + j)] /= sum;
  }
  return r;
}

RoutingStats routing_stats(const Routing& r) {
  RoutingStats s;
  s.n_pairs = r.n_pairs();
  s.n_active = r.n_active();
  if (s.n_active == 0) return s;
  std::vector<int> rows;
  rows.reserve(static_cast<std::size_t>(s.n_active));
  for (int i = 0; i < s.n_active; ++i) rows.push_back(r.offsets[i + 1] - r.offsets[i]);
  std::sort(rows.begin(), rows.end());
  s.min_rows = rows.front();
  s.max_rows = rows.back();
  const std::size_t m = rows.size();
  s.median_rows = (m % 2 == 1) ? rows[m / 2] : 0.5 * (rows[m / 2 - 1] + rows[m / 2]);
  return s;
}

}  // namespace tpgraph
