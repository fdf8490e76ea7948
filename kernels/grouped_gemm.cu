// The grouped GEMM over NVFP4 expert weights: y[i][o] = (xs[i] * ts_e) * sum_k x16[i][k] * w16_e[o][k]
// for every routed row i of expert e.
//
// Weights sit on the MMA's M side and routed rows (tokens) on N, because an expert has few rows
// at decode sizes (1-3 at t=43). One block computes 64*warp_m16 weight rows x 8*n8 routed rows of
// one expert over all of K: no split-K, no atomics. K streams through shared memory in 64-column
// chunks (one NVFP4 chunk) with a cp.async pipeline; each warp decodes its weight fragments in
// registers (nvfp4_decode.cuh) and reuses them for every n8 tile of the block.
//
// Determinism and batch invariance: every output element is one fp32 accumulator updated by
// m16n8k16 MMAs in k order 0, 16, 32, ... with the same operands whatever the tile, the layout, the
// row's position in its block or the number of tokens. v1 and v2 differ only in how the bytes
// reach the registers.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>

#include "kernels/kernels.hpp"
#include "kernels/launch.cuh"
#include "kernels/nvfp4_decode.cuh"

namespace tpgraph::kernels {
namespace {

using detail::cp_async16;
using detail::cp_async_commit;
using detail::cp_async_wait;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kChunkElems = 64;
constexpr int kChunkBytes = 36;       // 32 bytes of E2M1 + 4 UE4M3 scales per 64 columns
constexpr int kUnitBytes = 576;        // 16 rows x one chunk
constexpr int kItemInts = 3;

struct TileSpec {
  int warp_m16;  // m16 tiles per warp (4 warps along the weight rows)
  int n8;        // n8 tiles per block (routed rows)
  int depth;     // 64-column chunks of weights in flight per warp (registers)
  int min_blocks;  // blocks per SM the registers must allow (__launch_bounds__)
};
// Index = GemmTile index. Small tiles stream weights (deep prefetch); large ones reuse them.
// Tile 0 asks for 8 blocks per SM (64 registers, no spills) instead of the 7 that 72+ registers
// allowed: at t=43 gate and up launch 1960 equal blocks, 2.12 waves of 924 at 7 per SM, whose last
// 0.12 wave costs a whole block's duration; at 8 per SM they are 1.86 waves of 1056. Tile 1 spills
// at 64 registers even with depth 5, so it keeps 7 per SM.
constexpr std::array<TileSpec, 6> kTiles{
    {{1, 1, 6, 8}, {1, 2, 6, 0}, {1, 4, 4, 0}, {2, 4, 4, 0}, {2, 8, 3, 0}, {4, 8, 2, 0}}};
constexpr int kBStages = 4;            // routed-row chunks in the shared-memory ring
constexpr int kBRowStride = 144;       // 128 bytes + 16 of padding: ldmatrix rows hit distinct banks

constexpr int b_stage_bytes(int n8) { return 8 * n8 * kBRowStride; }

__device__ __forceinline__ uint4 load_stream16(const std::uint8_t* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}
__device__ __forceinline__ uint2 load_stream8(const std::uint8_t* p) {
  uint2 v;
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "l"(p));
  return v;
}
__device__ __forceinline__ std::uint32_t load_word(const std::uint8_t* p) {
  std::uint32_t v;
  asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// One lane's weights of one 16-row tile and 64-column chunk: its four fragment words (one per k16
// block) and the UE4M3 codes of rows g and g+8.
struct Fragment {
  uint4 values;
  uint2 scales;
};

// v2: the unit is contiguous; the lane's words are 16 bytes at 16 * lane, its scales at 512 + 8g.
__device__ __forceinline__ Fragment load_fragment_v2(const std::uint8_t* unit, int lane) {
  return Fragment{load_stream16(unit + 16 * lane), load_stream8(unit + 512 + 8 * (lane / 4))};
}

// v1: rows g and g+8 of the tile, row-major; the same words assembled from byte t of each row word.
__device__ __forceinline__ Fragment load_fragment_v1(const std::uint8_t* row_g, const std::uint8_t* row_g8,
                                                     std::uint32_t select_t) {
  std::uint32_t w[4];
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const std::uint32_t lo = detail::prmt(load_word(row_g + 8 * kk), load_word(row_g8 + 8 * kk), select_t);
    const std::uint32_t hi = detail::prmt(load_word(row_g + 8 * kk + 4), load_word(row_g8 + 8 * kk + 4), select_t);
    w[kk] = detail::prmt(lo, hi, 0x5410u);  // (g, t), (g+8, t), (g, t+4), (g+8, t+4)
  }
  return Fragment{make_uint4(w[0], w[1], w[2], w[3]), make_uint2(load_word(row_g + 32), load_word(row_g8 + 32))};
}

template <bool kV2, int kWarpM16, int kN8, int kDepth, int kMinBlocks>
__global__ void __launch_bounds__(kThreads, kMinBlocks)
    grouped_gemm_kernel(const std::uint16_t* __restrict__ x16_bits, const float* __restrict__ xs,
                        const std::uint8_t* __restrict__ weights, const float* __restrict__ tensor_scale,
                        int out_rows, int in_cols, const std::int32_t* __restrict__ active_experts,
                        const std::int32_t* __restrict__ offsets, const std::int32_t* __restrict__ items,
                        int tile_index, float* __restrict__ y) {
  constexpr int kStageBytes = b_stage_bytes(kN8);
  constexpr int kBlockTokens = 8 * kN8;
  constexpr int kPieces = kBlockTokens * 8;  // 16-byte pieces of routed rows per chunk
  constexpr int kPiecesPerThread = (kPieces + kThreads - 1) / kThreads;
  extern __shared__ __align__(128) std::uint8_t smem[];

  // A plan cut for another tile would index the wrong rows: fail loudly.
  if (items[0] != tile_index) __trap();
  const std::int32_t* item = items + 1 + kItemInts * blockIdx.x;
  const int active = item[0];
  const int row_block = item[1];
  const int token_block = item[2];
  const int expert = active_experts[active];
  const int row_begin = offsets[active] + token_block * kBlockTokens;
  const int block_rows = min(kBlockTokens, offsets[active + 1] - row_begin);
  const int chunks = in_cols / kChunkElems;
  const int tiles = out_rows / 16;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int warp_tile = row_block * kWarps * kWarpM16 + warp * kWarpM16;  // this warp's first m16 tile
  const std::uint8_t* matrix =
      weights + static_cast<std::int64_t>(expert) * out_rows * chunks * kChunkBytes;

  // Routed rows: each thread copies the same pieces of every chunk; rows past the expert's end are
  // zero-filled (cp.async with 0 source bytes).
  const __half* x16 = reinterpret_cast<const __half*>(x16_bits);
  const __half* piece_src[kPiecesPerThread];
  int piece_dst[kPiecesPerThread];
  int piece_bytes[kPiecesPerThread];
#pragma unroll
  for (int i = 0; i < kPiecesPerThread; ++i) {
    const int p = threadIdx.x + i * kThreads;
    const int n = p / 8;
    const int q = p % 8;
    const bool valid = p < kPieces && n < block_rows;
    piece_src[i] = x16 + static_cast<std::int64_t>(valid ? row_begin + n : 0) * in_cols + q * 8;
    piece_dst[i] = p < kPieces ? n * kBRowStride + q * 16 : -1;
    piece_bytes[i] = valid ? 16 : 0;
  }
  auto load_b = [&](int chunk) {
    std::uint8_t* stage = smem + (chunk % kBStages) * kStageBytes;
#pragma unroll
    for (int i = 0; i < kPiecesPerThread; ++i) {
      if (piece_dst[i] >= 0) cp_async16(stage + piece_dst[i], piece_src[i] + chunk * kChunkElems, piece_bytes[i]);
    }
  };

  // Weights: each warp streams its own tiles into registers, kDepth chunks ahead.
  const std::uint8_t* a_ptr[kWarpM16];
  const std::uint8_t* a_row_g8[kWarpM16];
  bool tile_valid[kWarpM16];
#pragma unroll
  for (int j = 0; j < kWarpM16; ++j) {
    const int tile = warp_tile + j;
    tile_valid[j] = tile < tiles;
    const int safe_tile = tile_valid[j] ? tile : 0;
    if constexpr (kV2) {
      a_ptr[j] = matrix + static_cast<std::int64_t>(safe_tile) * chunks * kUnitBytes;
      a_row_g8[j] = nullptr;
    } else {
      a_ptr[j] = matrix + (static_cast<std::int64_t>(safe_tile) * 16 + g) * chunks * kChunkBytes;
      a_row_g8[j] = a_ptr[j] + 8 * static_cast<std::int64_t>(chunks) * kChunkBytes;
    }
  }
  const std::uint32_t select_t = static_cast<std::uint32_t>(t) | (static_cast<std::uint32_t>(4 + t) << 4);
  auto load_a = [&](Fragment (&f)[kWarpM16], int chunk) {
#pragma unroll
    for (int j = 0; j < kWarpM16; ++j) {
      if (!tile_valid[j]) continue;
      if constexpr (kV2) {
        f[j] = load_fragment_v2(a_ptr[j] + static_cast<std::int64_t>(chunk) * kUnitBytes, lane);
      } else {
        const std::int64_t at = static_cast<std::int64_t>(chunk) * kChunkBytes;
        f[j] = load_fragment_v1(a_ptr[j] + at, a_row_g8[j] + at, select_t);
      }
    }
  };

  float acc[kWarpM16][kN8][4];
#pragma unroll
  for (int j = 0; j < kWarpM16; ++j)
#pragma unroll
    for (int n = 0; n < kN8; ++n)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[j][n][v] = 0.0f;

  // ldmatrix row addresses: x4 covers n8 tiles (2p, 2p+1) x k 0-7 / 8-15; x2 the last odd tile.
  const int mat = lane / 8;
  const std::uint32_t b_base = detail::smem_address(smem);
  const std::uint32_t lane_x4 =
      static_cast<std::uint32_t>(((mat / 2) * 8 + lane % 8) * kBRowStride + (mat % 2) * 16);
  const std::uint32_t lane_x2 =
      static_cast<std::uint32_t>(((kN8 - 1) * 8 + lane % 8) * kBRowStride + (mat % 2) * 16);

  auto compute = [&](const Fragment (&f)[kWarpM16], int chunk) {
    const std::uint32_t stage = b_base + static_cast<std::uint32_t>((chunk % kBStages) * kStageBytes);
    auto k16_step = [&](auto kk_constant) {
      constexpr int kk = decltype(kk_constant)::value;
      std::uint32_t b[kN8][2];
#pragma unroll
      for (int n = 0; n + 1 < kN8; n += 2) {
        std::uint32_t r[4];
        detail::ldmatrix_x4_at(r, stage + lane_x4 + static_cast<std::uint32_t>(n * 8 * kBRowStride + kk * 32));
        b[n][0] = r[0];
        b[n][1] = r[1];
        b[n + 1][0] = r[2];
        b[n + 1][1] = r[3];
      }
      if constexpr (kN8 % 2 == 1) {
        detail::ldmatrix_x2_at(b[kN8 - 1], stage + lane_x2 + static_cast<std::uint32_t>(kk * 32));
      }
#pragma unroll
      for (int j = 0; j < kWarpM16; ++j) {
        if (tile_valid[j]) {
          const std::uint32_t word = kk == 0 ? f[j].values.x : kk == 1 ? f[j].values.y : kk == 2 ? f[j].values.z
                                                                                                 : f[j].values.w;
          std::uint32_t a[4];
          detail::decode_a_fragment<kk>(word, f[j].scales.x, f[j].scales.y, a);
#pragma unroll
          for (int n = 0; n < kN8; ++n) detail::mma_16816(acc[j][n], a, b[n]);
        }
      }
    };
    k16_step(std::integral_constant<int, 0>{});
    k16_step(std::integral_constant<int, 1>{});
    k16_step(std::integral_constant<int, 2>{});
    k16_step(std::integral_constant<int, 3>{});
  };

  Fragment ring[kDepth][kWarpM16];
#pragma unroll
  for (int d = 0; d < kDepth; ++d) {
    if (d < chunks) load_a(ring[d], d);
  }
#pragma unroll
  for (int s = 0; s < kBStages - 1; ++s) {
    if (s < chunks) load_b(s);
    cp_async_commit();
  }
  for (int base = 0; base < chunks; base += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      const int chunk = base + d;
      if (chunk < chunks) {
        cp_async_wait<kBStages - 2>();
        __syncthreads();  // the chunk's rows are in; every warp is done with the stage refilled next
        if (chunk + kBStages - 1 < chunks) load_b(chunk + kBStages - 1);
        cp_async_commit();
        compute(ring[d], chunk);
        if (chunk + kDepth < chunks) load_a(ring[d], chunk + kDepth);
      }
    }
  }
  cp_async_wait<0>();

  const float ts = tensor_scale[expert];
#pragma unroll
  for (int j = 0; j < kWarpM16; ++j) {
    if (!tile_valid[j]) continue;
    const int o = (warp_tile + j) * 16 + g;
#pragma unroll
    for (int n = 0; n < kN8; ++n) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int col = n * 8 + 2 * t + c;
        if (col < block_rows) {
          const std::int64_t row = row_begin + col;
          const float scale = __fmul_rn(xs[row], ts);
          // The decoded weights carry 2^-14 (nvfp4_decode.cuh): scaling the sum back is exact.
          float* out = y + row * out_rows + o;
          out[0] = __fmul_rn(scale, __fmul_rn(acc[j][n][c], 16384.0f));
          out[8] = __fmul_rn(scale, __fmul_rn(acc[j][n][2 + c], 16384.0f));
        }
      }
    }
  }
}

template <bool kV2, int kTile>
void launch_tile(const std::uint16_t* x16, const float* xs, const ExpertBank& w, const DeviceRouting& routing,
                 const DeviceGemmPlan& plan, float* y, cudaStream_t stream) {
  constexpr TileSpec spec = kTiles[kTile];
  constexpr int smem = kBStages * b_stage_bytes(spec.n8);
  auto* kernel = grouped_gemm_kernel<kV2, spec.warp_m16, spec.n8, spec.depth, spec.min_blocks>;
  static_assert(smem <= 48 * 1024, "the routed-row ring fits the default shared-memory limit");
  kernel<<<static_cast<unsigned int>(plan.grid), kThreads, smem, stream>>>(
      x16, xs, w.bytes, w.tensor_scale, w.rows, w.cols, routing.active_experts, routing.offsets, plan.items,
      plan.tile, y);
  detail::check_launch("grouped_gemm");
}

template <bool kV2>
void launch_layout(const std::uint16_t* x16, const float* xs, const ExpertBank& w, const DeviceRouting& routing,
                   const DeviceGemmPlan& plan, float* y, cudaStream_t stream) {
  switch (plan.tile) {
    case 0: return launch_tile<kV2, 0>(x16, xs, w, routing, plan, y, stream);
    case 1: return launch_tile<kV2, 1>(x16, xs, w, routing, plan, y, stream);
    case 2: return launch_tile<kV2, 2>(x16, xs, w, routing, plan, y, stream);
    case 3: return launch_tile<kV2, 3>(x16, xs, w, routing, plan, y, stream);
    case 4: return launch_tile<kV2, 4>(x16, xs, w, routing, plan, y, stream);
    case 5: return launch_tile<kV2, 5>(x16, xs, w, routing, plan, y, stream);
    default: throw std::invalid_argument("grouped_gemm: tile " + std::to_string(plan.tile) + " out of range");
  }
}

}  // namespace

int gemm_tile_count() { return static_cast<int>(kTiles.size()); }

GemmTile gemm_tile(int index) {
  if (index < 0 || index >= gemm_tile_count()) {
    throw std::invalid_argument("gemm_tile: index " + std::to_string(index) + " out of range 0.." +
                                std::to_string(gemm_tile_count() - 1));
  }
  return GemmTile{kTiles[static_cast<std::size_t>(index)].warp_m16, kTiles[static_cast<std::size_t>(index)].n8};
}

int choose_gemm_tile(std::int64_t routed_rows, int active_experts, int out_rows) {
  const double per_expert =
      active_experts > 0 ? static_cast<double>(routed_rows) / static_cast<double>(active_experts) : 0.0;
  // From bench --all-tiles on the H200 (docs/kernel-notes.md): 64x8 while an expert has a few
  // rows (t=43), 64x16 to a dozen (t=416), 128x32 to a few dozen (t=576), 128x64 beyond (t=4096).
  if (per_expert <= 6.0) return 0;
  if (per_expert <= 12.0) return 1;
  if (out_rows % 128 != 0) return 2;
  if (per_expert <= 40.0) return 3;
  return 4;
}

GemmPlan plan_grouped_gemm(const Routing& routing, int out_rows, int in_cols) {
  return plan_grouped_gemm(routing, out_rows, in_cols,
                           choose_gemm_tile(routing.n_pairs(), routing.n_active(), out_rows));
}

GemmPlan plan_grouped_gemm(const Routing& routing, int out_rows, int in_cols, int tile) {
  if (out_rows <= 0 || out_rows % 16 != 0 || in_cols <= 0 || in_cols % kChunkElems != 0) {
    throw std::invalid_argument("plan_grouped_gemm: " + std::to_string(out_rows) + " x " + std::to_string(in_cols) +
                                " weights; out rows must be a multiple of 16 and in cols of 64");
  }
  const GemmTile shape = gemm_tile(tile);
  const int row_blocks = (out_rows + shape.block_rows() - 1) / shape.block_rows();
  // Experts with the most rows first: the hardware hands blocks out in order, so the longest work
  // starts first and the short tail fills in (longest-processing-time scheduling).
  std::vector<int> order(static_cast<std::size_t>(routing.n_active()));
  std::iota(order.begin(), order.end(), 0);
  auto rows_of = [&](int a) { return routing.offsets[static_cast<std::size_t>(a) + 1] - routing.offsets[static_cast<std::size_t>(a)]; };
  std::stable_sort(order.begin(), order.end(), [&](int l, int r) { return rows_of(l) > rows_of(r); });

  GemmPlan plan;
  plan.tile = tile;
  plan.items.push_back(tile);
  for (const int a : order) {
    const int token_blocks = (rows_of(a) + shape.block_tokens() - 1) / shape.block_tokens();
    for (int rb = 0; rb < row_blocks; ++rb) {
      for (int tb = 0; tb < token_blocks; ++tb) {
        plan.items.push_back(a);
        plan.items.push_back(rb);
        plan.items.push_back(tb);
      }
    }
  }
  plan.grid = static_cast<int>((plan.items.size() - 1) / kItemInts);
  return plan;
}

void grouped_gemm(const std::uint16_t* x16, const float* xs, const ExpertBank& w, const DeviceRouting& routing,
                  const DeviceGemmPlan& plan, float* y, Stream stream) {
  if (w.rows % 16 != 0 || w.cols % kChunkElems != 0) {
    throw std::invalid_argument("grouped_gemm: weights " + std::to_string(w.rows) + " x " + std::to_string(w.cols) +
                                "; rows must be a multiple of 16 and cols of 64");
  }
  if (plan.grid <= 0) return;  // no routed rows: nothing to write
  if (w.layout == Layout::v2) {
    launch_layout<true>(x16, xs, w, routing, plan, y, stream);
  } else {
    launch_layout<false>(x16, xs, w, routing, plan, y, stream);
  }
}

void grouped_gemm(const std::uint16_t* x16, const float* xs, const ExpertBank& w, const DeviceRouting& routing,
                  const std::int32_t* plan_items, int plan_grid, float* y, Stream stream) {
  const DeviceGemmPlan plan{plan_items, plan_grid, choose_gemm_tile(routing.n_rows, routing.n_active, w.rows)};
  grouped_gemm(x16, xs, w, routing, plan, y, stream);
}

}  // namespace tpgraph::kernels
