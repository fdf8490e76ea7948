#include "kernels/gemm_plan.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>

#include "kernels/gemm_tiles.hpp"

namespace tpgraph::kernels {

using gemm::kTiles;

int gemm_tile_count() { return static_cast<int>(kTiles.size()); }

GemmTile gemm_tile(int index) {
  if (index < 0 || index >= gemm_tile_count()) {
    throw std::invalid_argument("gemm_tile: index " + std::to_string(index) + " out of range 0.." +
                                std::to_string(gemm_tile_count() - 1));
  }
  const gemm::TileSpec& s = kTiles[static_cast<std::size_t>(index)];
  return GemmTile{gemm::spec_rows(s), gemm::spec_tokens(s), s.wgmma};
}

int choose_gemm_tile(std::int64_t routed_rows, int active_experts, int out_rows, int in_cols) {
  const double per_expert =
      active_experts > 0 ? static_cast<double>(routed_rows) / static_cast<double>(active_experts) : 0.0;
  // Thresholds from bench --all-tiles on the H200 (docs/kernel-notes.md).
  if (per_expert <= 6.0) return 1;
  // Short K (the down GEMM, K = 640: ten chunks a block): 128-row blocks halve the block starts
  // (t=416: down 170.8 us against 174.0 with 64 rows; gate and up, K = 4096, prefer 64 rows).
  const bool short_k = in_cols <= 1024 && out_rows % 128 == 0;
  if (per_expert <= 12.0) return short_k ? 6 : 2;
  if (per_expert <= 40.0) return out_rows % 128 == 0 ? 6 : 2;
#ifdef TPGRAPH_NO_WGMMA
  return out_rows % 128 == 0 ? 6 : 2;  // no sm_90a code in this build: the best mma.sync tile
#else
  return 4;  // also where out rows are not a multiple of 256: the idle half-block costs less than 128x128
#endif
}

GemmPlan plan_grouped_gemm(const Routing& routing, int out_rows, int in_cols) {
  return plan_grouped_gemm(routing, out_rows, in_cols,
                           choose_gemm_tile(routing.n_pairs(), routing.n_active(), out_rows, in_cols));
}

namespace {

// What a plan does with an expert's partial last row block (out rows not a multiple of the
// tile's): its own block, a pair block that also computes the partner GEMM's rows, or nothing.
enum class PartialRows { own, paired, none };

GemmPlan cut_plan(const Routing& routing, int out_rows, int in_cols, int tile, PartialRows partial) {
  if (out_rows <= 0 || out_rows % 16 != 0 || in_cols <= 0 || in_cols % gemm::kChunkElems != 0) {
    throw std::invalid_argument("plan_grouped_gemm: " + std::to_string(out_rows) + " x " + std::to_string(in_cols) +
                                " weights; out rows must be a multiple of 16 and in cols of 64");
  }
  const GemmTile shape = gemm_tile(tile);
  const int row_blocks = (out_rows + shape.block_rows() - 1) / shape.block_rows();
  // Experts with the most rows first: the hardware hands blocks out in order, so the longest work
  // starts first and the short tail fills in (longest-processing-time scheduling).
  std::vector<int> order(static_cast<std::size_t>(routing.n_active()));
  std::iota(order.begin(), order.end(), 0);
  auto rows_of = [&](int a) {
    return routing.offsets[static_cast<std::size_t>(a) + 1] - routing.offsets[static_cast<std::size_t>(a)];
  };
  std::stable_sort(order.begin(), order.end(), [&](int l, int r) { return rows_of(l) > rows_of(r); });

  GemmPlan plan;
  plan.tile = tile;
  plan.paired = partial == PartialRows::paired && row_blocks > out_rows / shape.block_rows();
  auto push4 = [&](int a, int b, int c, int d) {
    plan.items.push_back(a);
    plan.items.push_back(b);
    plan.items.push_back(c);
    plan.items.push_back(d);
  };
  // Row-block ranges: a wgmma block walks several consecutive full row blocks of an expert when K
  // is short (at least kWgTargetChunks chunks per block), so its pipelines run across them; a
  // partial last row block (idle warpgroups, or the partner's rows) is a range of its own. mma
  // blocks: one row block.
  const int chunks = in_cols / gemm::kChunkElems;
  const int full_blocks = out_rows / shape.block_rows();
  std::vector<std::pair<int, int>> ranges;  // first row block (| kPairItemBit), count
  if (shape.wgmma && full_blocks > 0) {
    const int per = 2 * chunks >= gemm::kWgTargetChunks
                        ? 1
                        : std::clamp((gemm::kWgTargetChunks + chunks - 1) / chunks, 1, full_blocks);
    const int count = (full_blocks + per - 1) / per;
    for (int r = 0; r < count; ++r) {
      const int first = r * full_blocks / count;
      ranges.emplace_back(first, (r + 1) * full_blocks / count - first);
    }
  } else {
    for (int rb = 0; rb < full_blocks; ++rb) ranges.emplace_back(rb, 1);
  }
  if (row_blocks > full_blocks && partial != PartialRows::none) {
    ranges.emplace_back(full_blocks | (partial == PartialRows::paired ? kPairItemBit : 0), 1);
  }
  push4(tile, 0, 0, 0);  // header: 16 bytes, so items stay aligned
  for (const int a : order) {
    const int token_blocks = gemm::token_blocks_of(rows_of(a), shape.block_tokens());
    for (const auto& [first, count] : ranges) {
      for (int tb = 0; tb < token_blocks; ++tb) {
        const int begin = routing.offsets[static_cast<std::size_t>(a)] + tb * rows_of(a) / token_blocks;
        const int end = routing.offsets[static_cast<std::size_t>(a)] + (tb + 1) * rows_of(a) / token_blocks;
        push4(routing.active_experts[static_cast<std::size_t>(a)], first | (count << 16), begin, end - begin);
      }
    }
  }
  plan.grid = static_cast<int>(plan.items.size() / gemm::kItemInts - 1);
  return plan;
}

}  // namespace

GemmPlan plan_grouped_gemm(const Routing& routing, int out_rows, int in_cols, int tile) {
  return cut_plan(routing, out_rows, in_cols, tile, PartialRows::own);
}

GemmPlanPair plan_gate_up(const Routing& routing, int out_rows, int in_cols, int tile) {
  if (tile < 0) tile = choose_gemm_tile(routing.n_pairs(), routing.n_active(), out_rows, in_cols);
  const GemmTile shape = gemm_tile(tile);
  const int partial_rows = out_rows % shape.block_rows();
  // A pair block holds both GEMMs' partial rows: they must fit one block's warpgroups together.
  if (!shape.wgmma || partial_rows == 0 || 2 * partial_rows > shape.block_rows()) {
    GemmPlan plan = plan_grouped_gemm(routing, out_rows, in_cols, tile);
    return GemmPlanPair{plan, plan};
  }
  return GemmPlanPair{cut_plan(routing, out_rows, in_cols, tile, PartialRows::paired),
                      cut_plan(routing, out_rows, in_cols, tile, PartialRows::none)};
}

}  // namespace tpgraph::kernels
