// Device code the grouped GEMM kernels share: the weight fragment a lane decodes, layout v1's
// byte-gathering weight stream, the v2 weight pipes' geometry, the block's work item, and what
// both wgmma kernels use (ring order, a row block's stores from registers, the routed rows' map).
#pragma once
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/gemm_launch.hpp"
#include "kernels/gemm_tiles.hpp"
#include "kernels/nvfp4_decode.cuh"
#include "kernels/ptx.cuh"

namespace tpgraph::kernels::gemm {

// One lane's weights of one 16-row tile and 64-column chunk: its four fragment words (one per k16
// block) and the UE4M3 codes of rows g and g+8.
struct Fragment {
  uint4 values;
  uint2 scales;
};

__device__ __forceinline__ std::uint32_t word_of(const Fragment& f, int kk) {
  return kk == 0 ? f.values.x : kk == 1 ? f.values.y : kk == 2 ? f.values.z : f.values.w;
}

// Layout v1's weight fragments of one 16-row tile, chunk after chunk: rows g and g+8 of the tile,
// row-major; the fragment words assembled from byte t of each row word (v2 stores them ready-made).
struct V1WeightStream {
  const std::uint8_t* p;   // row g
  const std::uint8_t* p8;  // row g+8
  std::uint32_t select_t;

  __device__ __forceinline__ V1WeightStream(const std::uint8_t* matrix, int tile, int chunks, int lane) {
    const int g = lane / 4;
    const int t = lane % 4;
    p = matrix + (static_cast<std::int64_t>(tile) * 16 + g) * chunks * kChunkBytes;
    p8 = p + 8 * static_cast<std::int64_t>(chunks) * kChunkBytes;
    select_t = static_cast<std::uint32_t>(t) | (static_cast<std::uint32_t>(4 + t) << 4);
  }

  // The next chunk's fragment; the stream moves on by one chunk.
  __device__ __forceinline__ Fragment next() {
    std::uint32_t w[4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const std::uint32_t lo = detail::prmt(detail::load_word(p + 8 * kk), detail::load_word(p8 + 8 * kk), select_t);
      const std::uint32_t hi =
          detail::prmt(detail::load_word(p + 8 * kk + 4), detail::load_word(p8 + 8 * kk + 4), select_t);
      w[kk] = detail::prmt(lo, hi, 0x5410u);  // (g, t), (g+8, t), (g, t+4), (g+8, t+4)
    }
    const Fragment f{make_uint4(w[0], w[1], w[2], w[3]),
                     make_uint2(detail::load_word(p + 32), detail::load_word(p8 + 32))};
    p += kChunkBytes;
    p8 += kChunkBytes;
    return f;
  }
};

// Layout v2's weight pipe of one warp: its tile is one contiguous stream of 576-byte units, so
// kPipeGroup units at a time come with one bulk asynchronous copy (the Tensor Memory Accelerator)
// into one of the warp's kPipeStages shared-memory stages, each with an mbarrier; the lanes wait
// on the barrier and read their 16 + 8 bytes with two shared loads. The copy engine keeps the bytes
// in flight without occupying the load units or registers. Both kernels walk chunks in unrolled
// rounds of kPipeRound (chunk = round * kPipeRound + d), so stage and unit are constants.

constexpr int kPipeGroup = 4;                                          // chunks per bulk copy
constexpr int kPipeStages = 2;                                         // bulk copies in flight per warp
constexpr int kPipeRound = kPipeGroup * kPipeStages;                   // 8 chunks
constexpr int kPipeWarpBytes = kPipeStages * kPipeGroup * kUnitBytes;  // 4608

// The pipes of `warps` warps in shared memory: every warp's stages, then every warp's barriers.
struct PipeLayout {
  std::uint32_t base;  // shared-window address of warp 0's first stage
  int warps;
  __device__ __forceinline__ std::uint32_t stage(int warp, int stage_index) const {
    return base + static_cast<std::uint32_t>(warp * kPipeWarpBytes + stage_index * kPipeGroup * kUnitBytes);
  }
  __device__ __forceinline__ std::uint32_t barrier(int warp, int stage_index) const {
    return base + static_cast<std::uint32_t>(warps * kPipeWarpBytes + (warp * kPipeStages + stage_index) * 8);
  }
};
// Shared memory the pipes of `warps` warps take (v2; v1 needs none).
constexpr int pipe_smem_bytes(int warps) { return warps * (kPipeWarpBytes + kPipeStages * 8); }

// A lane's fragment in a v2 unit: 16 bytes of values per lane, then 8 bytes of scales per row pair.
__device__ __forceinline__ Fragment load_unit_fragment(std::uint32_t unit, int lane) {
  return Fragment{detail::lds128(unit + 16 * lane), detail::lds64(unit + 512 + 8 * (lane / 4))};
}

struct BlockWork {
  int expert;
  int row_block;  // the first row block
  int items;      // consecutive row blocks (wgmma tiles; 1 for mma tiles)
  int begin;      // first routed row
  int rows;       // routed rows, 1..max_tokens
  bool pair;      // the partial row block of this GEMM and of the partner (wgmma tiles, gemm_plan.hpp)
};

// GemmWait::before_inputs (kernels.hpp): the block waits for the kernels before it here, once its
// weights' first copies are in flight and before it reads the routed rows, and lets the next kernel
// launch only past this wait, so that when it launches every kernel before this one is complete.
__device__ __forceinline__ void wait_before_inputs(const GemmArgs& args) {
  if (args.wait != GemmWait::before_inputs) return;
  detail::wait_for_prerequisite_grids();
  detail::allow_dependent_launch();
}

// The plan holds each block's work ready-made (one 16-byte load, no dependent lookups before the
// weights can be requested); items[0] is the tile the plan was cut for.
__device__ __forceinline__ BlockWork block_work(const GemmArgs& args) {
  // A plan cut for another tile would index the wrong rows: fail loudly.
  if (args.items[0] != args.tile_index) __trap();
  const int4 item = reinterpret_cast<const int4*>(args.items)[1 + blockIdx.x];
  return BlockWork{item.x, item.y & 0xffff, (item.y >> 16) & 0x3fff, item.z, item.w, (item.y & kPairItemBit) != 0};
}

// A ring of kStages slots filled and drained in order (the routed-row stages, a warp's weight
// stages): its n-th use takes slot n % kStages, and the barrier of that slot completes with phase
// parity (n / kStages) & 1. Static functions of the use count: the kernel keeps one counter (gc)
// for every ring it walks, and an object per ring changed the generated SASS.
template <int kStages>
struct RingOrder {
  [[nodiscard]] __device__ __forceinline__ static int stage(int n) {
    return static_cast<int>(static_cast<unsigned>(n) % kStages);
  }
  [[nodiscard]] __device__ __forceinline__ static std::uint32_t phase(int n) {
    return (static_cast<unsigned>(n) / kStages) & 1u;
  }
};

// A row block before the last: its outputs straight from registers (the next row block's weights
// and routed rows are already on their way), then the accumulators start again from zero.
template <int kN>
__device__ __forceinline__ void store_row_block(const GemmArgs& args, float (&acc)[kN / 2], const float* xs_s,
                                                int row_begin, int block_rows, int tile, int g, int t) {
  detail::wgmma_wait<0>();
  {
    // One running address (the compiler would otherwise keep every store's address live).
    float* out = args.y + static_cast<std::int64_t>(row_begin + 2 * t) * args.out_rows + tile * 16 + g;
    const std::int64_t step = static_cast<std::int64_t>(args.out_rows);
#pragma unroll
    for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int n = j * 8 + 2 * t + c;
        const float scale = xs_s[n];
        detail::store_if(out, __fmul_rn(scale, acc[4 * j + c]), __fmul_rn(scale, acc[4 * j + 2 + c]), n < block_rows);
        out += c == 0 ? step : 7 * step;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;
}

// The routed rows (x16: `rows` x `cols` f16 bits, row-major) as a tensor for the wgmma kernels'
// copies: boxes of `box_rows` rows x 64 columns (one chunk), 128-byte swizzle, zeros past the last
// row (gemm_wgmma.cu).
CUtensorMap routed_rows_map(const std::uint16_t* x16, std::int64_t rows, int cols, int box_rows = 16);

}  // namespace tpgraph::kernels::gemm
