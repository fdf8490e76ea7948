#include "catch.hpp"

#include <algorithm>
#include <numeric>

#include "core/numerics/router.hpp"

using namespace tpgraph;

namespace {
Geometry with_tokens(int t) {
  Geometry g;
  g.tokens = t;
  return g;
}
}  // namespace

TEST_CASE("router reproduces the harness's figures", "[router]") {
  SECTION("t=43: 344 pairs on 196 active experts") {
    const auto r = build_routing(with_tokens(43));
    CHECK(r.n_pairs() == 344);
    CHECK(r.n_active() == 196);
  }
  for (int t : {416, 576, 4096}) {
    DYNAMIC_SECTION("t=" << t << ": all 288 experts active") {
      const auto r = build_routing(with_tokens(t));
      CHECK(r.n_pairs() == std::int64_t{t} * 8);
      CHECK(r.n_active() == 288);
    }
  }
}

TEST_CASE("CSR groups pairs by ascending expert and inverts", "[router]") {
  const Geometry g = with_tokens(100);
  const auto r = build_routing(g);
  REQUIRE(r.offsets.size() == r.active_experts.size() + 1);
  REQUIRE(r.offsets.back() == r.n_pairs());
  CHECK(std::is_sorted(r.active_experts.begin(), r.active_experts.end()));
  for (int i = 0; i < r.n_active(); ++i) {
    REQUIRE(r.offsets[i + 1] > r.offsets[i]);
    for (int row = r.offsets[i]; row < r.offsets[i + 1]; ++row) {
      const int p = r.pairs[row];
      CHECK(route_expert(static_cast<std::uint64_t>(p), g.experts) == r.active_experts[i]);
      CHECK(r.row_token[row] == p / g.top_k);
      CHECK(r.pair_row[p] == row);
      if (row > r.offsets[i]) CHECK(r.pairs[row - 1] < p);
    }
  }
}

TEST_CASE("routing weights are positive and sum to one per token", "[router]") {
  const auto r = build_routing(with_tokens(37));
  for (int t = 0; t < 37; ++t) {
    float sum = 0;
    for (int j = 0; j < 8; ++j) {
      const float w = r.pair_weight[t * 8 + j];
      CHECK(w > 0.0f);
      sum += w;
    }
    CHECK(sum == Approx(1.0f).epsilon(1e-6));
  }
}

TEST_CASE("routing stats", "[router]") {
  const auto s = routing_stats(build_routing(with_tokens(43)));
  CHECK(s.n_pairs == 344);
  CHECK(s.n_active == 196);
  CHECK(s.min_rows >= 1);
  CHECK(s.max_rows >= s.median_rows);
}
