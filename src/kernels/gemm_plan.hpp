// The grouped GEMM's planner: which block tile a GEMM runs with and the static work list of its
// blocks. Plain C++ over core's Routing, with no CUDA in it, so it is tested without a GPU.
#pragma once
#include <cstdint>
#include <vector>

#include "core/numerics/router.hpp"

namespace tpgraph::kernels {

// The static work list of one grouped GEMM, built on the host from the routing (so every graph
// replay launches identical parameters). The caller uploads `items` and passes the device copy.
// `items` = [tile, 0, 0, 0, then (expert, first row block | row blocks << 16, first routed row,
// routed rows) per launched block]; an expert's routed rows split evenly into blocks of at most
// the tile's tokens, heaviest experts' blocks first so an expert's weights are shared through L2
// while they run.
struct GemmPlan {
  std::vector<std::int32_t> items;  // kernel-defined encoding of the tiles
  int grid = 0;                     // blocks to launch
  int tile = 0;                     // GemmTile index the items were cut for
  bool paired = false;              // some blocks also compute a partner GEMM's rows (plan_gate_up)
};
[[nodiscard]] GemmPlan plan_grouped_gemm(const Routing& routing, int out_rows, int in_cols);

// Gate and up: two GEMMs of the same shape over the same routed rows. Where the tile leaves each
// expert a last row block at most half full (640 rows = 2.5 blocks of 256), the first plan's block
// for it computes that row block of both GEMMs (the warpgroups past the first GEMM's rows take the
// second's) and the second plan leaves it out, so no block runs with idle warpgroups. The first is
// launched with the second's weights and output as its partner (kernels.hpp). Elsewhere both plans
// are plan_grouped_gemm's. `tile` < 0: choose_gemm_tile's.
struct GemmPlanPair {
  GemmPlan first;
  GemmPlan second;
};
[[nodiscard]] GemmPlanPair plan_gate_up(const Routing& routing, int out_rows, int in_cols, int tile = -1);
// Bit 30 of an item's second int: the block is a pair block (the first GEMM's partial row block
// and the partner's).
inline constexpr std::int32_t kPairItemBit = 1 << 30;

// Block tiles of the grouped GEMM: `rows` weight rows x up to `tokens` routed rows (tokens) per
// block; an expert's rows are split evenly into blocks of at most `tokens`. Every tile sums each
// output in the same order (k ascending, one fp32 accumulator), so the choice changes speed only,
// never a bit of the output.
struct GemmTile {
  int rows = 64;
  int tokens = 8;
  bool wgmma = false;
  [[nodiscard]] int block_rows() const { return rows; }
  [[nodiscard]] int block_tokens() const { return tokens; }
};
[[nodiscard]] int gemm_tile_count();
// Throws std::invalid_argument for an index outside 0..gemm_tile_count()-1.
[[nodiscard]] GemmTile gemm_tile(int index);
// The tile plan_grouped_gemm picks from the routed rows per active expert and the weights' shape.
[[nodiscard]] int choose_gemm_tile(std::int64_t routed_rows, int active_experts, int out_rows, int in_cols);
// A plan cut for a given tile (bench compares them).
[[nodiscard]] GemmPlan plan_grouped_gemm(const Routing& routing, int out_rows, int in_cols, int tile);

}  // namespace tpgraph::kernels
