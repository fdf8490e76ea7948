// The grouped GEMM's work list (plan_grouped_gemm, host code): every (expert, row block, routed
// row) is computed by exactly one block, whatever the tile, and the blocks' fields stay in range;
// and the launcher's argument checks, which run before any device call.
#include "catch.hpp"

#include <cstdint>
#include <stdexcept>
#include <vector>

#include "core/numerics/router.hpp"
#include "kernels/gemm_plan.hpp"
#include "kernels/kernels.hpp"

using namespace tpgraph;

namespace {

struct Item {
  int expert;
  int row_block;  // first row block
  int row_blocks;
  int begin;
  int rows;
  bool pair;  // also the partner GEMM's rows of the row block (plan_gate_up)
};

std::vector<Item> decode(const kernels::GemmPlan& plan) {
  REQUIRE(plan.items.size() == static_cast<std::size_t>(plan.grid + 1) * 4);
  REQUIRE(plan.items[0] == plan.tile);  // the header names the tile the plan was cut for
  std::vector<Item> out;
  for (int b = 0; b < plan.grid; ++b) {
    const auto* p = plan.items.data() + 4 * (b + 1);
    out.push_back(Item{p[0], p[1] & 0xffff, (p[1] >> 16) & 0x3fff, p[2], p[3], (p[1] & kernels::kPairItemBit) != 0});
  }
  return out;
}

// Per (GEMM, row block, routed row) of the given plans (one GEMM, or gate and up from
// plan_gate_up): how many blocks compute it.
void check_cover(const Routing& r, int out_rows, int tile, const std::vector<kernels::GemmPlan>& plans) {
  const kernels::GemmTile shape = kernels::gemm_tile(tile);
  const int row_blocks = (out_rows + shape.block_rows() - 1) / shape.block_rows();
  const std::size_t gemms = plans.size();
  std::vector<int> expert_of_row(static_cast<std::size_t>(r.n_pairs()), -1);
  for (int a = 0; a < r.n_active(); ++a) {
    for (int row = r.offsets[static_cast<std::size_t>(a)]; row < r.offsets[static_cast<std::size_t>(a) + 1]; ++row) {
      expert_of_row[static_cast<std::size_t>(row)] = r.active_experts[static_cast<std::size_t>(a)];
    }
  }
  const std::size_t per_gemm = static_cast<std::size_t>(row_blocks) * static_cast<std::size_t>(r.n_pairs());
  std::vector<int> hits(gemms * per_gemm, 0);
  std::int64_t bad_items = 0;
  const bool partial = out_rows % shape.block_rows() != 0;
  for (std::size_t gemm = 0; gemm < gemms; ++gemm) {
    REQUIRE(plans[gemm].tile == tile);
    for (const Item& it : decode(plans[gemm])) {
      const bool fields_ok = it.rows >= 1 && it.rows <= shape.block_tokens() && it.row_blocks >= 1 &&
                             it.row_block >= 0 && it.row_block + it.row_blocks <= row_blocks &&
                             (shape.wgmma || it.row_blocks == 1) &&
                             // several row blocks only where all are full (no idle warpgroups)
                             (it.row_blocks == 1 || (it.row_block + it.row_blocks) * shape.block_rows() <= out_rows) &&
                             it.begin >= 0 && it.begin + it.rows <= r.n_pairs() &&
                             // a pair block: the partial last row block of the first of two GEMMs, half a block or less
                             (!it.pair || (gemms == 2 && gemm == 0 && plans[0].paired && shape.wgmma && partial &&
                                           it.row_block == row_blocks - 1 && it.row_blocks == 1 &&
                                           2 * (out_rows % shape.block_rows()) <= shape.block_rows()));
      if (!fields_ok) {
        ++bad_items;
        continue;
      }
      for (int row = it.begin; row < it.begin + it.rows; ++row) {
        if (expert_of_row[static_cast<std::size_t>(row)] != it.expert) ++bad_items;  // one expert's rows only
        for (std::size_t computed = gemm; computed < (it.pair ? gemms : gemm + 1); ++computed) {
          for (int rb = it.row_block; rb < it.row_block + it.row_blocks; ++rb) {
            ++hits[computed * per_gemm + static_cast<std::size_t>(rb) * static_cast<std::size_t>(r.n_pairs()) +
                   static_cast<std::size_t>(row)];
          }
        }
      }
    }
  }
  CHECK(bad_items == 0);
  std::int64_t wrong = 0;
  for (const int h : hits) wrong += h != 1;
  CHECK(wrong == 0);
}

}  // namespace

TEST_CASE("the grouped GEMM plan computes every output exactly once, every tile", "[plan]") {
  for (const int t : {1, 43, 416, 4096}) {
    Geometry g;
    g.tokens = t;
    const Routing r = build_routing(g);
    for (int tile = 0; tile < kernels::gemm_tile_count(); ++tile) {
      DYNAMIC_SECTION("t=" << t << " tile " << tile) {
        // gate and up: 640 rows, a partial last row block; alone, and as plan_gate_up's pair
        check_cover(r, g.ff, tile, {kernels::plan_grouped_gemm(r, g.ff, g.hidden, tile)});
        const auto ffn = kernels::plan_gate_up(r, g.ff, g.hidden, tile);
        check_cover(r, g.ff, tile, {ffn.first, ffn.second});
        // down: 4096 rows, K = 640 (ten chunks)
        check_cover(r, g.hidden, tile, {kernels::plan_grouped_gemm(r, g.hidden, g.ff, tile)});
      }
    }
  }
}

TEST_CASE("wgmma blocks walk several row blocks where K is short", "[plan]") {
  Geometry g;
  g.tokens = 4096;
  const Routing r = build_routing(g);
  const int tile = kernels::choose_gemm_tile(r.n_pairs(), r.n_active(), g.hidden, g.ff);
  REQUIRE(kernels::gemm_tile(tile).wgmma);
  const auto down = decode(kernels::plan_grouped_gemm(r, g.hidden, g.ff, tile));
  const auto gate = decode(kernels::plan_grouped_gemm(r, g.ff, g.hidden, tile));
  // Down (ten chunks per row block): several row blocks per block, so fewer blocks than
  // (expert, row block) pairs; gate (64 chunks): one row block each.
  CHECK(down.size() < static_cast<std::size_t>(r.n_active()) * (g.hidden / kernels::gemm_tile(tile).block_rows()));
  // (16 row blocks of 256 in two blocks of 8: at least kWgTargetChunks = 80 chunks a block, gemm_tiles.hpp).
  for (const Item& it : down) CHECK(it.row_blocks == 8);
  for (const Item& it : gate) CHECK(it.row_blocks == 1);
  // An expert's rows are split into as few token blocks as the tile allows: ceil(rows / tokens).
  std::size_t expected = 0;
  for (int a = 0; a < r.n_active(); ++a) {
    const int rows = r.offsets[static_cast<std::size_t>(a) + 1] - r.offsets[static_cast<std::size_t>(a)];
    const int tokens = kernels::gemm_tile(tile).block_tokens();
    expected += static_cast<std::size_t>((rows + tokens - 1) / tokens);
  }
  const int gate_row_blocks =
      (g.ff + kernels::gemm_tile(tile).block_rows() - 1) / kernels::gemm_tile(tile).block_rows();
  CHECK(gate.size() == expected * static_cast<std::size_t>(gate_row_blocks));
}

TEST_CASE("the planner picks 128-row mma blocks for the short-K down GEMM at t=416", "[plan]") {
  Geometry g;
  g.tokens = 416;
  const Routing r = build_routing(g);
  const int gate = kernels::choose_gemm_tile(r.n_pairs(), r.n_active(), g.ff, g.hidden);
  const int down = kernels::choose_gemm_tile(r.n_pairs(), r.n_active(), g.hidden, g.ff);
  CHECK(kernels::gemm_tile(gate).block_rows() == 64);
  CHECK(kernels::gemm_tile(down).block_rows() == 128);
  CHECK_FALSE(kernels::gemm_tile(down).wgmma);
  CHECK(kernels::gemm_tile(gate).block_tokens() == kernels::gemm_tile(down).block_tokens());
}

TEST_CASE("gate's plan takes up's partial row blocks where the wgmma tile leaves them half idle", "[plan]") {
  Geometry g;
  g.tokens = 4096;
  const Routing r = build_routing(g);
  const auto ffn = kernels::plan_gate_up(r, g.ff, g.hidden);
  const kernels::GemmTile shape = kernels::gemm_tile(ffn.first.tile);
  REQUIRE(shape.wgmma);
  REQUIRE(g.ff % shape.block_rows() * 2 == shape.block_rows());  // 640 = 2.5 x 256
  CHECK(ffn.first.paired);
  CHECK_FALSE(ffn.second.paired);
  const auto gate = decode(ffn.first);
  const auto up = decode(ffn.second);
  const auto alone = decode(kernels::plan_grouped_gemm(r, g.ff, g.hidden, ffn.first.tile));
  std::size_t pairs = 0;
  for (const Item& it : gate) pairs += it.pair ? 1 : 0;
  for (const Item& it : up) CHECK(!it.pair);
  for (const Item& it : up) CHECK((it.row_block + 1) * shape.block_rows() <= g.ff);  // full row blocks only
  // Gate's plan is the GEMM's own with its partial blocks marked; up's lacks them.
  CHECK(gate.size() == alone.size());
  CHECK(pairs > 0);
  CHECK(up.size() + pairs == alone.size());

  // Where the partial row block is more than half a block, or an mma tile is chosen, no pairs.
  const auto wide = kernels::plan_gate_up(r, 704, g.hidden, ffn.first.tile);  // 704 = 2 x 256 + 192
  CHECK_FALSE(wide.first.paired);
  CHECK(wide.first.items == wide.second.items);
  Geometry small;
  small.tokens = 43;
  const Routing rs = build_routing(small);
  const auto mma = kernels::plan_gate_up(rs, small.ff, small.hidden);
  CHECK_FALSE(kernels::gemm_tile(mma.first.tile).wgmma);
  CHECK_FALSE(mma.first.paired);
  CHECK(mma.first.items == mma.second.items);
}

// grouped_gemm's launcher checks its arguments before it touches the device: a bank whose expert
// count is not known cannot bound the wgmma kernel's weight copies, and a pair needs a partner
// bank of the same experts.
TEST_CASE("grouped_gemm refuses a bank without experts and a partner of another count") {
  kernels::ExpertBank bank;
  bank.rows = 640;
  bank.cols = 4096;
  const kernels::DeviceRouting routing{};
  kernels::DeviceGemmPlan plan{nullptr, 1, 4, false};
  float y = 0.0f;
  REQUIRE_THROWS_AS(kernels::grouped_gemm(nullptr, nullptr, bank, routing, plan, &y, nullptr), std::invalid_argument);
  bank.experts = 2;
  kernels::ExpertBank partner = bank;
  partner.experts = 3;
  plan.paired = true;
  REQUIRE_THROWS_AS(kernels::grouped_gemm(nullptr, nullptr, bank, routing, plan, &y, nullptr, &partner, &y),
                    std::invalid_argument);
}
