// The grouped GEMM's tile table and the geometry its kernels and its planner share. Plain C++
// (constexpr data, no CUDA syntax): the planner (gemm_plan.cpp) is host code the GPU-free tests
// link, and the kernels (gemm_mma.cu, gemm_wgmma.cu) take their template arguments from here.
#pragma once
#include <array>
#include <cstdint>

namespace tpgraph::kernels::gemm {

// NVFP4 rows come in chunks of 64 columns: 32 bytes of E2M1 values and 4 UE4M3 scales. Layout v2
// stores a 16-row tile's chunk as one 576-byte unit (the fragments of 32 lanes, then the scales).
constexpr int kChunkElems = 64;
constexpr int kChunkBytes = 36;
constexpr int kUnitBytes = 576;

// A plan item per launched block: expert, row blocks (first | count << 16), first routed row,
// routed rows. The plan's first item is a header naming the tile the plan was cut for.
constexpr int kItemInts = 4;

// Routed rows per wgmma block: the largest N of the block's wgmma m64nNk16.
constexpr int kWgmmaMaxTokens = 160;
// Chunks a wgmma block walks at least, over several row blocks of one expert, where one row block
// has fewer than half of them (the down GEMM, K = 640: ten chunks a row block): the weight and
// routed-row pipelines keep running across row blocks instead of filling and draining for each
// (t=4096 on the H200: down 482 us at 80, 496 at 60, 502 at 40). Where K is long (gate and up,
// 64 chunks) one row block a block is faster: walking two cost them 5%.
constexpr int kWgTargetChunks = 80;

// A block tile. mma.sync tiles: `warps` x 16 weight rows and up to 8 * n8 routed rows. wgmma
// tiles: `warpgroups` x 64 weight rows and up to kWgmmaMaxTokens routed rows.
struct TileSpec {
  bool wgmma;
  int n8;          // mma: n8 tiles of the largest variant
  int warpgroups;  // wgmma: warpgroups per block
  int warps;       // mma: warps per block (16 weight rows each)
  int min_blocks;  // blocks per SM the registers must allow (0: no minimum)
};

// Indexed by GemmTile index (bench --tile, --all-tiles). docs/kernel-notes.md says which token
// counts each one serves.
inline constexpr std::array<TileSpec, 7> kTiles{{
    {false, 1, 1, 4, 8},  // 64 x <=8
    {false, 2, 1, 4, 8},  // 64 x <=16
    {false, 4, 1, 4, 0},  // 64 x <=32
    {true, 0, 2, 4, 2},   // 128 x <=160
    {true, 0, 4, 4, 1},   // 256 x <=160
    {false, 2, 1, 8, 4},  // 128 x <=16
    {false, 4, 1, 8, 4},  // 128 x <=32
}};

constexpr int spec_rows(const TileSpec& s) { return s.wgmma ? 64 * s.warpgroups : 16 * s.warps; }
constexpr int spec_tokens(const TileSpec& s) { return s.wgmma ? kWgmmaMaxTokens : 8 * s.n8; }

// An expert's routed rows split evenly into ceil(rows / max_tokens) blocks.
constexpr int token_blocks_of(int rows, int max_tokens) { return (rows + max_tokens - 1) / max_tokens; }

}  // namespace tpgraph::kernels::gemm
