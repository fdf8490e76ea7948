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
#include <atomic>
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
using detail::cp_async4;
using detail::cp_async_commit;
using detail::cp_async_wait;

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kChunkElems = 64;
constexpr int kChunkBytes = 36;       // 32 bytes of E2M1 + 4 UE4M3 scales per 64 columns
constexpr int kUnitBytes = 576;        // 16 rows x one chunk
constexpr int kBRowBytes = 128;        // 64 fp16 of one routed row per stage
constexpr int kItemInts = 3;

struct TileSpec {
  int warp_m16;
  int n8;
  int stages;
};
// Index = GemmTile index. Deeper pipelines for the small tiles, which are bound by weight bytes.
constexpr std::array<TileSpec, 5> kTiles{{{1, 1, 8}, {1, 2, 6}, {1, 4, 5}, {2, 4, 4}, {2, 8, 4}}};

constexpr int stage_bytes(int warp_m16, int n8) { return kWarps * warp_m16 * kUnitBytes + 8 * n8 * kBRowBytes; }

template <bool kV2, int kWarpM16, int kN8, int kStages>
__global__ void __launch_bounds__(kThreads)
    grouped_gemm_kernel(const std::uint16_t* __restrict__ x16_bits, const float* __restrict__ xs,
                        const std::uint8_t* __restrict__ weights, const float* __restrict__ tensor_scale,
                        int out_rows, int in_cols, const std::int32_t* __restrict__ active_experts,
                        const std::int32_t* __restrict__ offsets, const std::int32_t* __restrict__ items,
                        int tile_index, float* __restrict__ y) {
  constexpr int kABytes = kWarps * kWarpM16 * kUnitBytes;
  constexpr int kStageBytes = stage_bytes(kWarpM16, kN8);
  constexpr int kBlockTokens = 8 * kN8;
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
  const int first_tile = row_block * kWarps * kWarpM16;
  const std::uint8_t* matrix =
      weights + static_cast<std::int64_t>(expert) * out_rows * chunks * kChunkBytes;
  const __half* x16 = reinterpret_cast<const __half*>(x16_bits);

  auto load_stage = [&](int stage, int chunk) {
    std::uint8_t* a_smem = smem + stage * kStageBytes;
    auto* b_smem = reinterpret_cast<__half*>(a_smem + kABytes);
    if constexpr (kV2) {
      // Each 16-row tile's chunk is one contiguous 576-byte unit.
      for (int p = threadIdx.x; p < kWarps * kWarpM16 * 36; p += kThreads) {
        const int j = p / 36;
        const int piece = p % 36;
        if (first_tile + j < tiles) {
          cp_async16(a_smem + j * kUnitBytes + piece * 16,
                     matrix + (static_cast<std::int64_t>(first_tile + j) * chunks + chunk) * kUnitBytes + piece * 16);
        }
      }
    } else {
      // v1: 16 rows of 36 bytes each, only 4-byte aligned; kept row-major in shared memory.
      for (int p = threadIdx.x; p < kWarps * kWarpM16 * 144; p += kThreads) {
        const int j = p / 144;
        const int r = (p % 144) / 9;
        const int word = p % 9;
        if (first_tile + j < tiles) {
          const std::int64_t row = static_cast<std::int64_t>(first_tile + j) * 16 + r;
          cp_async4(a_smem + j * kUnitBytes + r * 36 + word * 4,
                    matrix + (row * chunks + chunk) * kChunkBytes + word * 4);
        }
      }
    }
    // Routed rows: 8 pieces of 16 bytes per row, the piece index XOR-swizzled by the row so that
    // ldmatrix's eight rows fall in distinct banks. Rows past the expert's end read as zeros.
    for (int p = threadIdx.x; p < kBlockTokens * 8; p += kThreads) {
      const int n = p / 8;
      const int q = p % 8;
      const bool valid = n < block_rows;
      const __half* src = x16 + static_cast<std::int64_t>(valid ? row_begin + n : 0) * in_cols +
                          chunk * kChunkElems + q * 8;
      cp_async16(b_smem + n * 64 + ((q ^ (n & 7)) * 8), src, valid ? 16 : 0);
    }
  };

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;

  float acc[kWarpM16][kN8][4];
#pragma unroll
  for (int j = 0; j < kWarpM16; ++j)
#pragma unroll
    for (int n = 0; n < kN8; ++n)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[j][n][v] = 0.0f;

  auto compute_stage = [&](int stage) {
    const std::uint8_t* a_smem = smem + stage * kStageBytes;
    const auto* b_smem = reinterpret_cast<const __half*>(a_smem + kABytes);
    std::uint32_t values[kWarpM16][4];
    std::uint32_t scales[kWarpM16][2];
#pragma unroll
    for (int j = 0; j < kWarpM16; ++j) {
      const std::uint8_t* unit = a_smem + (warp * kWarpM16 + j) * kUnitBytes;
      if constexpr (kV2) {
        const uint4 v = *reinterpret_cast<const uint4*>(unit + lane * 16);
        const uint2 s = *reinterpret_cast<const uint2*>(unit + 512 + g * 8);
        values[j][0] = v.x;
        values[j][1] = v.y;
        values[j][2] = v.z;
        values[j][3] = v.w;
        scales[j][0] = s.x;
        scales[j][1] = s.y;
      } else {
        const std::uint8_t* row_g = unit + g * 36;
        const std::uint8_t* row_g8 = unit + (g + 8) * 36;
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          values[j][kk] = std::uint32_t{row_g[kk * 8 + t]} | (std::uint32_t{row_g8[kk * 8 + t]} << 8) |
                          (std::uint32_t{row_g[kk * 8 + t + 4]} << 16) |
                          (std::uint32_t{row_g8[kk * 8 + t + 4]} << 24);
        }
        scales[j][0] = *reinterpret_cast<const std::uint32_t*>(row_g + 32);
        scales[j][1] = *reinterpret_cast<const std::uint32_t*>(row_g8 + 32);
      }
    }
    auto k16_step = [&](auto kk_constant) {
      constexpr int kk = decltype(kk_constant)::value;
      std::uint32_t b[kN8][2];
#pragma unroll
      for (int n = 0; n + 1 < kN8; n += 2) {
        const int mat = lane / 8;
        const int row = (n + mat / 2) * 8 + lane % 8;
        const int piece = kk * 2 + (mat & 1);
        std::uint32_t r[4];
        detail::ldmatrix_x4(r, b_smem + row * 64 + ((piece ^ (row & 7)) * 8));
        b[n][0] = r[0];
        b[n][1] = r[1];
        b[n + 1][0] = r[2];
        b[n + 1][1] = r[3];
      }
      if constexpr (kN8 % 2 == 1) {
        const int mat = (lane / 8) & 1;
        const int row = (kN8 - 1) * 8 + lane % 8;
        const int piece = kk * 2 + mat;
        detail::ldmatrix_x2(b[kN8 - 1], b_smem + row * 64 + ((piece ^ (row & 7)) * 8));
      }
#pragma unroll
      for (int n = 0; n < kN8; ++n) detail::permute_b_fragment(b[n]);
#pragma unroll
      for (int j = 0; j < kWarpM16; ++j) {
        if (first_tile + warp * kWarpM16 + j < tiles) {
          std::uint32_t a[4];
          detail::decode_a_fragment<kk>(values[j][kk], scales[j][0], scales[j][1], a);
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

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < chunks) load_stage(s, s);
    cp_async_commit();
  }
  for (int chunk = 0; chunk < chunks; ++chunk) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // the chunk's stage is complete for all, and everyone left the stage refilled next
    const int next = chunk + kStages - 1;
    if (next < chunks) load_stage(next % kStages, next);
    cp_async_commit();
    compute_stage(chunk % kStages);
  }
  cp_async_wait<0>();

  const float ts = tensor_scale[expert];
#pragma unroll
  for (int j = 0; j < kWarpM16; ++j) {
    const int tile = first_tile + warp * kWarpM16 + j;
    if (tile >= tiles) continue;
    const int o = tile * 16 + g;
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
  constexpr int smem = spec.stages * stage_bytes(spec.warp_m16, spec.n8);
  auto* kernel = grouped_gemm_kernel<kV2, spec.warp_m16, spec.n8, spec.stages>;
  // The attribute is per device; setting it once per device and kernel keeps launches capturable.
  static std::array<std::atomic<bool>, 64> configured{};
  int device = 0;
  detail::check_call(cudaGetDevice(&device), "cudaGetDevice");
  if (device >= static_cast<int>(configured.size()) || !configured[device].load()) {
    detail::check_call(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem),
                       "cudaFuncSetAttribute (grouped_gemm)");
    if (device < static_cast<int>(configured.size())) configured[device].store(true);
  }
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
  if (per_expert <= 6.0) return 0;
  if (per_expert <= 12.0) return 1;
  if (per_expert <= 40.0 || out_rows % 128 != 0) return 2;
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
