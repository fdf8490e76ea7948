// The producer warps' NVFP4 pipes of the warp-specialised wgmma kernel (gemm_wgmma_ws.cu): one
// warp's kTiles consecutive 16-row tiles, one chunk per stage, in kStages shared-memory stages of
// kTiles x 576 bytes, and the lane's weight fragment of a tile read back from a stage (the same
// Fragment the main kernel's pipes hand over, so the decode is the same).
//
// Chunk c of row block `item` of the warp's tiles is `item` x kTileStep tiles on from the first
// (row blocks follow each other along the matrix, as in gemm_wgmma.cu's WgWeights).
#pragma once
#include <cstdint>

#include "kernels/gemm_common.cuh"

namespace tpgraph::kernels::gemm {

template <bool kV2, int kTiles, int kStages, int kTileStep>
struct WsRaw;

// Layout v2: a tile's chunk is one 576-byte unit, so a stage is kTiles bulk copies completing on
// the stage's mbarrier (lane 0 issues them; every lane waits).
template <int kTiles, int kStages, int kTileStep>
struct WsRaw<true, kTiles, kStages, kTileStep> {
  static constexpr int kStageBytes = kTiles * kUnitBytes;
  const std::uint8_t* first;  // the warp's first tile stream, row block 0
  std::uint32_t stages;       // stage 0
  std::uint32_t bars;         // stage 0's barrier, the others 8 bytes apart
  int chunks;

  __device__ __forceinline__ WsRaw(const std::uint8_t* matrix, int tile, int chunks_, std::uint32_t stages_,
                                   std::uint32_t bars_, int)
      : first(matrix + static_cast<std::int64_t>(tile) * chunks_ * kUnitBytes),
        stages(stages_),
        bars(bars_),
        chunks(chunks_) {}

  __device__ __forceinline__ void load(int stage, int item, int c, int lane) const {
    if (lane != 0) return;
    const std::uint32_t bar = bars + 8 * static_cast<std::uint32_t>(stage);
    detail::mbar_expect_tx(bar, kStageBytes);
    const std::uint32_t dst = stages + static_cast<std::uint32_t>(stage * kStageBytes);
    const std::uint8_t* src = first + (static_cast<std::int64_t>(item) * kTileStep * chunks + c) * kUnitBytes;
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      detail::bulk_copy(dst + static_cast<std::uint32_t>(j * kUnitBytes),
                        src + static_cast<std::int64_t>(j) * chunks * kUnitBytes, kUnitBytes, bar);
    }
  }
  __device__ __forceinline__ void skip() const {}
  __device__ __forceinline__ void wait(int stage, std::uint32_t phase) const {
    detail::mbar_wait(bars + 8 * static_cast<std::uint32_t>(stage), phase);
  }
  __device__ __forceinline__ Fragment fragment(int stage, int j, int lane) const {
    return load_unit_fragment(stages + static_cast<std::uint32_t>(stage * kStageBytes + j * kUnitBytes), lane);
  }
};

// Layout v1 (row-major, 36 bytes per row and chunk, 4-byte aligned): a tile's chunk is 16 rows
// strided by the row length, which bulk copies cannot take, so the lanes copy its 144 words with
// cp.async in 4-byte pieces into the stage, packed as [row][36 bytes]; word w is row w / 9, bytes
// 4 (w % 9), lane L copies words L, L + 32, ... Each chunk's copies are one cp.async group per
// lane (one per chunk even where nothing is copied, so the wait depth stays kStages - 1). The
// fragment is then assembled from the stage as V1WeightStream assembles it from global memory.
template <int kTiles, int kStages, int kTileStep>
struct WsRaw<false, kTiles, kStages, kTileStep> {
  static constexpr int kStageBytes = kTiles * kUnitBytes;
  static constexpr int kPieces = (16 * kChunkBytes / 4 + 31) / 32;  // 5 per lane, the last for lanes 0..15
  const std::uint8_t* first;  // the warp's first tile's row 0, chunk 0, row block 0
  std::uint32_t stages;
  int chunks;

  __device__ __forceinline__ WsRaw(const std::uint8_t* matrix, int tile, int chunks_, std::uint32_t stages_,
                                   std::uint32_t, int)
      : first(matrix + static_cast<std::int64_t>(tile) * 16 * chunks_ * kChunkBytes),
        stages(stages_),
        chunks(chunks_) {}

  // Word lane + 32 m of a tile's chunk: row w / 9, bytes 4 (w % 9) (divisions by a constant).
  __device__ __forceinline__ int piece_src(int m, int lane) const {
    const int w = lane + 32 * m;
    return w / 9 * chunks * kChunkBytes + 4 * (w % 9);
  }
  __device__ __forceinline__ void load(int stage, int item, int c, int lane) const {
    const std::uint32_t dst = stages + static_cast<std::uint32_t>(stage * kStageBytes + 4 * lane);
    const std::uint8_t* src = first + (static_cast<std::int64_t>(item) * kTileStep * 16 * chunks) * kChunkBytes +
                              static_cast<std::int64_t>(c) * kChunkBytes;
#pragma unroll
    for (int j = 0; j < kTiles; ++j) {
      const std::uint8_t* tile = src + static_cast<std::int64_t>(j) * 16 * chunks * kChunkBytes;
#pragma unroll
      for (int m = 0; m < kPieces; ++m) {
        if (lane + 32 * m < 16 * kChunkBytes / 4) {
          detail::cp_async4_at(dst + static_cast<std::uint32_t>(j * kUnitBytes + 128 * m), tile + piece_src(m, lane),
                               4);
        }
      }
    }
    detail::cp_async_commit();
  }
  __device__ __forceinline__ void skip() const { detail::cp_async_commit(); }
  __device__ __forceinline__ void wait(int, std::uint32_t) const {
    detail::cp_async_wait<kStages - 1>();
    __syncwarp();  // every lane's pieces of the chunk are in
  }
  __device__ __forceinline__ Fragment fragment(int stage, int j, int lane) const {
    const int g = lane / 4;
    const int t = lane % 4;
    const std::uint32_t row_g =
        stages + static_cast<std::uint32_t>(stage * kStageBytes + j * kUnitBytes + g * kChunkBytes);
    const std::uint32_t row_g8 = row_g + 8 * kChunkBytes;
    const std::uint32_t select_t = static_cast<std::uint32_t>(t) | (static_cast<std::uint32_t>(4 + t) << 4);
    std::uint32_t w[4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const std::uint32_t lo = detail::prmt(detail::lds32(row_g + 8 * kk), detail::lds32(row_g8 + 8 * kk), select_t);
      const std::uint32_t hi =
          detail::prmt(detail::lds32(row_g + 8 * kk + 4), detail::lds32(row_g8 + 8 * kk + 4), select_t);
      w[kk] = detail::prmt(lo, hi, 0x5410u);  // (g, t), (g+8, t), (g, t+4), (g+8, t+4)
    }
    return Fragment{make_uint4(w[0], w[1], w[2], w[3]),
                    make_uint2(detail::lds32(row_g + 32), detail::lds32(row_g8 + 32))};
  }
};

}  // namespace tpgraph::kernels::gemm
