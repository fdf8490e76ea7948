#include "core/numerics/router.hpp"

#include <algorithm>
#include <cmath>

#include "core/base/parallel.hpp"

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

namespace {

// route_expert by table: the boundaries u_e = (e / E)^(1 / 1.35) where floor(u^1.35 * E) steps
// to e, and per 1/65536 of u the first expert it can be. Where u lies within 1e-9 of a boundary,
// the rounding of pow (or of the boundary) could decide differently, so it asks route_expert;
// elsewhere the answer is the same by construction (the margin is six orders of magnitude above
// either rounding). About ten times faster than calling pow for every pair.
class ExpertTable {
 public:
  explicit ExpertTable(int experts) : experts_(experts), bound_(static_cast<std::size_t>(experts) + 1) {
    for (int e = 1; e < experts; ++e)
      bound_[static_cast<std::size_t>(e)] = std::pow(static_cast<double>(e) / experts, 1.0 / 1.35);
    bound_[static_cast<std::size_t>(experts)] = 2.0;  // above every u: ends the scan
    first_.resize(kBuckets);
    int e = 0;
    for (std::size_t b = 0; b < kBuckets; ++b) {
      const double u = static_cast<double>(b) / kBuckets;
      while (e + 1 < experts && bound_[static_cast<std::size_t>(e) + 1] <= u) ++e;
      first_[b] = e;
    }
  }

  [[nodiscard]] int expert(std::uint64_t pair) const {
    const double u = static_cast<double>(route_mix(pair) >> 11) / 9007199254740992.0;  // 2^53
    auto e = static_cast<std::size_t>(first_[static_cast<std::size_t>(u * kBuckets)]);
    while (bound_[e + 1] <= u) ++e;
    if (u - bound_[e] < kMargin || bound_[e + 1] - u < kMargin) return route_expert(pair, experts_);
    return static_cast<int>(e);
  }

 private:
  static constexpr std::size_t kBuckets = 1 << 16;
  static constexpr double kMargin = 1e-9;
  int experts_;
  std::vector<double> bound_;  // [e]: the smallest u of expert e (0 for e = 0); [E]: 2
  std::vector<int> first_;     // [bucket]: the largest e whose bound is <= the bucket's start
};

}  // namespace

int ExpertCounts::n_active() const {
  return static_cast<int>(std::count_if(expert_rows.begin(), expert_rows.end(), [](std::int64_t n) { return n > 0; }));
}

ExpertCounts count_expert_rows(const Geometry& g) {
  ExpertCounts c;
  c.n_pairs = g.pairs();
  const auto experts = static_cast<std::size_t>(g.experts);
  // Chunks of pairs, one histogram per worker, summed at the end: the sum does not depend on
  // which worker counted which chunk.
  constexpr std::int64_t kChunk = 1 << 20;
  const std::int64_t chunks = (c.n_pairs + kChunk - 1) / kChunk;
  const int workers = worker_count(chunks);
  std::vector<std::vector<std::int64_t>> partial(static_cast<std::size_t>(workers),
                                                 std::vector<std::int64_t>(experts, 0));
  const ExpertTable table(g.experts);
  parallel_for(chunks, workers, [&](std::int64_t chunk, int worker) {
    auto& rows = partial[static_cast<std::size_t>(worker)];
    const std::int64_t end = std::min(c.n_pairs, (chunk + 1) * kChunk);
    for (std::int64_t p = chunk * kChunk; p < end; ++p)
      ++rows[static_cast<std::size_t>(table.expert(static_cast<std::uint64_t>(p)))];
  });
  c.expert_rows.assign(experts, 0);
  for (const auto& rows : partial)
    for (std::size_t e = 0; e < experts; ++e) c.expert_rows[e] += rows[e];
  return c;
}

RoutingStats routing_stats(const ExpertCounts& c) {
  RoutingStats s;
  s.n_pairs = c.n_pairs;
  std::vector<std::int64_t> rows;
  for (const std::int64_t n : c.expert_rows)
    if (n > 0) rows.push_back(n);
  s.n_active = static_cast<int>(rows.size());
  if (rows.empty()) return s;
  std::sort(rows.begin(), rows.end());
  // Rows per expert fit int: pairs are under 2^31 (validate(Geometry)).
  s.min_rows = static_cast<int>(rows.front());
  s.max_rows = static_cast<int>(rows.back());
  const std::size_t m = rows.size();
  s.median_rows =
      (m % 2 == 1) ? static_cast<double>(rows[m / 2]) : 0.5 * static_cast<double>(rows[m / 2 - 1] + rows[m / 2]);
  return s;
}

}  // namespace tpgraph
