// The chain's kernels around the GEMMs: quantize (with and without the gather), swiglu, combine and
// the root's join. Each follows src/core/numerics/reference.hpp's contract with the same fp32 operations in
// the same order (__fmul_rn and friends so nvcc cannot fuse what the CPU, built with
// -ffp-contract=off, does not), so they match the CPU bit for bit, swiglu's expf aside.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>

#include "kernels/kernels.hpp"
#include "kernels/launch.cuh"
#include "kernels/ptx.cuh"

namespace tpgraph::kernels {
namespace {

// Every kernel here may be launched programmatically (launch.cuh): each lets the next kernel launch
// as it starts and waits for the kernels before it before reading anything; none has work worth
// doing before that wait.

constexpr int kThreads = 256;
constexpr int kRowsPerBlock = kThreads / 32;  // one warp per row

__device__ __forceinline__ std::uint32_t as_bits(__half2 h) {
  std::uint32_t bits;
  __builtin_memcpy(&bits, &h, sizeof(bits));
  return bits;
}

__device__ __forceinline__ float amax4(float amax, float4 q) {
  return fmaxf(amax, fmaxf(fmaxf(fabsf(q.x), fabsf(q.y)), fmaxf(fabsf(q.z), fabsf(q.w))));
}

// Contract step 4 on one 16-column block: x16 = half_rn(x * inv), stored in the grouped GEMM's k
// order (kernels.hpp): within each 16 columns, half2 slot t holds columns (2t, 2t+8) and slot 4+t
// columns (2t+1, 2t+9). `x` is the row, `block` the 16-column block.
struct Block16 {
  uint4 lo;
  uint4 hi;
};
__device__ __forceinline__ Block16 quantize_block16(const float4* x, int block, float inv) {
  float v[16];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float4 q = x[4 * block + i];
    v[4 * i] = q.x;
    v[4 * i + 1] = q.y;
    v[4 * i + 2] = q.z;
    v[4 * i + 3] = q.w;
  }
  std::uint32_t slot[8];
#pragma unroll
  for (int t = 0; t < 4; ++t) {
    slot[t] = as_bits(__floats2half2_rn(__fmul_rn(v[2 * t], inv), __fmul_rn(v[2 * t + 8], inv)));
    slot[4 + t] = as_bits(__floats2half2_rn(__fmul_rn(v[2 * t + 1], inv), __fmul_rn(v[2 * t + 9], inv)));
  }
  return Block16{make_uint4(slot[0], slot[1], slot[2], slot[3]), make_uint4(slot[4], slot[5], slot[6], slot[7])};
}

// Contract steps 1 and 4 without the gather: s = max|x| (1 if 0), inv = 1/s, x16 = half_rn(x * inv).
// One warp per row; max is exact in any order, so the row's scale does not depend on the reduction
// tree. Lane l owns the row's 16-column blocks l, l + 32, ...; its first block stays in registers
// from the max to the conversion (all of the row where cols <= 512), so only the blocks past it
// are read twice.
__global__ void __launch_bounds__(kThreads)
    quantize_rows_kernel(const float* __restrict__ src, int cols, std::int64_t rows, __half2* __restrict__ dst,
                         float* __restrict__ scale) {
  detail::allow_dependent_launch();
  detail::wait_for_prerequisite_grids();
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const auto* x = reinterpret_cast<const float4*>(src + row * cols);
  const int blocks = cols / 16;
  float4 held[4] = {};
  if (lane < blocks) {
#pragma unroll
    for (int i = 0; i < 4; ++i) held[i] = __ldg(x + 4 * lane + i);
  }
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) amax = amax4(amax, held[i]);
  for (int block = lane + 32; block < blocks; block += 32) {
#pragma unroll
    for (int i = 0; i < 4; ++i) amax = amax4(amax, __ldg(x + 4 * block + i));
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  const float s = amax > 0.0f ? amax : 1.0f;
  const float inv = __fdiv_rn(1.0f, s);
  auto* out = reinterpret_cast<uint4*>(dst + row * (cols / 2));
  if (lane < blocks) {
    const Block16 q = quantize_block16(held, 0, inv);
    out[2 * lane] = q.lo;
    out[2 * lane + 1] = q.hi;
  }
  for (int block = lane + 32; block < blocks; block += 32) {
    const Block16 q = quantize_block16(x, block, inv);
    out[2 * block] = q.lo;
    out[2 * block + 1] = q.hi;
  }
  if (lane == 0) scale[row] = s;
}

// Contract steps 1 and 4 with the gather, one block per (token, group of its pairs): the token's
// row is read from z once for all the group's routed rows, its scale reduced over the block (max:
// exact in any order), the row converted once into shared memory, and the f16 row copied from there
// to each of the group's CSR rows with 16-byte stores, a warp writing 512 contiguous bytes per
// instruction (each thread storing its own 32-byte block16 wrote every 32-byte sector in two halves:
// 147 us at t=4096, 57% of the copy rate). Every routed row of a token gets the same bits whatever
// the grouping, so the launch shape cannot change the output.
__global__ void __launch_bounds__(kThreads)
    gather_quantize_kernel(const float* __restrict__ z, int cols, const std::int32_t* __restrict__ pair_row, int top_k,
                           int pairs_per_block, uint4* __restrict__ dst, float* __restrict__ scale) {
  detail::allow_dependent_launch();
  detail::wait_for_prerequisite_grids();
  extern __shared__ uint4 row16[];  // cols / 8: the token's f16 row in k order
  __shared__ float warp_max[kThreads / 32];
  const int groups = (top_k + pairs_per_block - 1) / pairs_per_block;
  const std::int64_t token = blockIdx.x / static_cast<unsigned int>(groups);
  const int first = static_cast<int>(blockIdx.x % static_cast<unsigned int>(groups)) * pairs_per_block;
  const int last = min(top_k, first + pairs_per_block);
  const auto* x = reinterpret_cast<const float4*>(z + token * cols);
  // The thread's first 16-column block stays in registers from the max to the conversion (all of
  // the row where cols <= 16 * kThreads); blocks past it are read again, from L1 or L2.
  const int blocks = cols / 16;
  const int own = static_cast<int>(threadIdx.x);
  float4 held[4] = {};
  if (own < blocks) {
#pragma unroll
    for (int i = 0; i < 4; ++i) held[i] = __ldg(x + 4 * own + i);
  }
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) amax = amax4(amax, held[i]);
  for (int block = own + kThreads; block < blocks; block += kThreads) {
#pragma unroll
    for (int i = 0; i < 4; ++i) amax = amax4(amax, __ldg(x + 4 * block + i));
  }
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) amax = fmaxf(amax, warp_max[w]);
  const float s = amax > 0.0f ? amax : 1.0f;
  const float inv = __fdiv_rn(1.0f, s);
  if (own < blocks) {
    const Block16 q = quantize_block16(held, 0, inv);
    row16[2 * own] = q.lo;
    row16[2 * own + 1] = q.hi;
  }
  for (int block = own + kThreads; block < blocks; block += kThreads) {
    const Block16 q = quantize_block16(x, block, inv);
    row16[2 * block] = q.lo;
    row16[2 * block + 1] = q.hi;
  }
  __syncthreads();
  const int vectors = cols / 8;
  const std::int32_t* rows = pair_row + token * top_k;
  for (int j = first; j < last; ++j) {
    uint4* out = dst + static_cast<std::int64_t>(__ldg(rows + j)) * vectors;
#pragma unroll 4
    for (int v = threadIdx.x; v < vectors; v += kThreads) out[v] = row16[v];
  }
  for (int j = first + static_cast<int>(threadIdx.x); j < last; j += kThreads) scale[rows[j]] = s;
}

// Contract step 3: a = (g / (1 + expf(-g))) * u, on 16-byte vectors, kSwigluVectors of them per
// thread loaded before the first is used (one scalar load per thread: 80 us at t=4096, 79% of copy).
constexpr int kSwigluVectors = 4;

__device__ __forceinline__ float swiglu1(float g, float u) {
  return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}

__global__ void __launch_bounds__(kThreads) swiglu_kernel(const float4* __restrict__ g, const float4* __restrict__ u,
                                                          std::int64_t vectors, float4* __restrict__ a) {
  detail::allow_dependent_launch();
  detail::wait_for_prerequisite_grids();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * kThreads * kSwigluVectors;
  for (std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * kThreads * kSwigluVectors + threadIdx.x;
       base < vectors; base += stride) {
    float4 gv[kSwigluVectors];
    float4 uv[kSwigluVectors];
#pragma unroll
    for (int i = 0; i < kSwigluVectors; ++i) {
      const std::int64_t at = base + static_cast<std::int64_t>(i) * kThreads;
      if (at < vectors) {
        gv[i] = __ldg(g + at);
        uv[i] = __ldg(u + at);
      }
    }
#pragma unroll
    for (int i = 0; i < kSwigluVectors; ++i) {
      const std::int64_t at = base + static_cast<std::int64_t>(i) * kThreads;
      if (at < vectors) {
        a[at] = make_float4(swiglu1(gv[i].x, uv[i].x), swiglu1(gv[i].y, uv[i].y), swiglu1(gv[i].z, uv[i].z),
                            swiglu1(gv[i].w, uv[i].w));
      }
    }
  }
}

// The elements past the last whole vector (n % 4 of them), and every element where a pointer is not
// 16-byte aligned.
__global__ void swiglu_scalar_kernel(const float* __restrict__ g, const float* __restrict__ u, std::int64_t n,
                                     float* __restrict__ a) {
  detail::allow_dependent_launch();
  detail::wait_for_prerequisite_grids();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    a[i] = swiglu1(g[i], u[i]);
  }
}

// Contract step 6: a token's pairs j = 0..k-1 in order, each an fmaf into one accumulator.
__global__ void combine_kernel(const float* __restrict__ y, int hidden, const std::int32_t* __restrict__ pair_row,
                               const float* __restrict__ pair_weight, int tokens, int top_k, float* __restrict__ out) {
  detail::allow_dependent_launch();
  detail::wait_for_prerequisite_grids();
  const int vectors = hidden / 4;
  const std::int64_t total = static_cast<std::int64_t>(tokens) * vectors;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += stride) {
    const std::int64_t token = i / vectors;
    const int v = static_cast<int>(i % vectors);
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int j = 0; j < top_k; ++j) {
      const std::int64_t pair = token * top_k + j;
      const float w = pair_weight[pair];
      const float4 q = reinterpret_cast<const float4*>(y + static_cast<std::int64_t>(pair_row[pair]) * hidden)[v];
      acc.x = __fmaf_rn(w, q.x, acc.x);
      acc.y = __fmaf_rn(w, q.y, acc.y);
      acc.z = __fmaf_rn(w, q.z, acc.z);
      acc.w = __fmaf_rn(w, q.w, acc.w);
    }
    reinterpret_cast<float4*>(out + token * hidden)[v] = acc;
  }
}

// Contract step 7: out += partials[0], then += partials[1], ... in that order.
__global__ void join_reduce_kernel(const float* const* __restrict__ partials, int count, std::int64_t n,
                                   float* __restrict__ out) {
  detail::allow_dependent_launch();
  detail::wait_for_prerequisite_grids();
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    float acc = out[i];
    for (int r = 0; r < count; ++r) acc = __fadd_rn(acc, partials[r][i]);
    out[i] = acc;
  }
}

void check_cols(int cols, const char* what) {
  if (cols <= 0 || cols % 64 != 0) {
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(cols) +
                                " columns; a positive multiple of 64 is needed");
  }
}

// Blocks per SM the gather aims for: 8 blocks of kThreads fill an SM's 2048 threads.
constexpr int kGatherBlocksPerSm = 8;

int multiprocessors() {
  int device = 0;
  detail::check_call(cudaGetDevice(&device), "cudaGetDevice");
  int count = 0;
  detail::check_call(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device),
                     "cudaDeviceGetAttribute(multiprocessors)");
  return count;
}

unsigned int row_blocks(std::int64_t rows) {
  return static_cast<unsigned int>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

}  // namespace

void x16_to_natural_order(std::span<std::uint16_t> values, int cols) {
  if (cols <= 0 || cols % 16 != 0 || values.size() % static_cast<std::size_t>(cols) != 0) {
    throw std::invalid_argument("x16_to_natural_order: " + std::to_string(values.size()) + " values in rows of " +
                                std::to_string(cols));
  }
  for (std::size_t base = 0; base < values.size(); base += 16) {
    std::uint16_t natural[16];
    for (int t = 0; t < 4; ++t) {
      const auto* slot = &values[base];
      natural[2 * t] = slot[2 * t];
      natural[2 * t + 8] = slot[2 * t + 1];
      natural[2 * t + 1] = slot[8 + 2 * t];
      natural[2 * t + 9] = slot[8 + 2 * t + 1];
    }
    std::copy(natural, natural + 16, values.begin() + static_cast<std::ptrdiff_t>(base));
  }
}

void gather_quantize(const float* z, int hidden, const DeviceRouting& routing, std::uint16_t* x16, float* xs,
                     Stream stream) {
  check_cols(hidden, "gather_quantize");
  // Every routed row is some token's pair: the kernel writes rows through pair_row only.
  if (static_cast<std::int64_t>(routing.tokens) * routing.top_k != routing.n_rows) {
    throw std::invalid_argument("gather_quantize: " + std::to_string(routing.n_rows) + " routed rows for " +
                                std::to_string(routing.tokens) + " tokens x top-k " + std::to_string(routing.top_k) +
                                "; every token needs its k rows");
  }
  if (routing.tokens <= 0 || routing.top_k <= 0) return;
  // A token's pairs are split over several blocks when there are too few tokens to give every SM
  // kGatherBlocksPerSm blocks (t=416 on 132 SMs: 3 groups of at most 3 pairs); each block reads the
  // row again, from L2.
  const std::int64_t wanted = std::int64_t{kGatherBlocksPerSm} * multiprocessors();
  const auto groups =
      static_cast<int>(std::clamp<std::int64_t>((wanted + routing.tokens - 1) / routing.tokens, 1, routing.top_k));
  const int pairs_per_block = (routing.top_k + groups - 1) / groups;
  const int blocks_per_token = (routing.top_k + pairs_per_block - 1) / pairs_per_block;
  const int smem = hidden * 2;
  detail::prepare_smem(reinterpret_cast<const void*>(gather_quantize_kernel), smem, "gather_quantize");
  detail::launch("gather_quantize", gather_quantize_kernel,
                 static_cast<unsigned int>(std::int64_t{routing.tokens} * blocks_per_token), kThreads, smem, stream, z,
                 hidden, routing.pair_row, routing.top_k, pairs_per_block, reinterpret_cast<uint4*>(x16), xs);
}

void quantize_rows(const float* a, int cols, std::int64_t rows, std::uint16_t* a16, float* as, Stream stream) {
  check_cols(cols, "quantize_rows");
  if (rows <= 0) return;
  detail::launch("quantize_rows", quantize_rows_kernel, row_blocks(rows), kThreads, 0, stream, a, cols, rows,
                 reinterpret_cast<__half2*>(a16), as);
}

void swiglu(const float* g, const float* u, std::int64_t n, float* a, Stream stream) {
  if (n <= 0) return;
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16 == 0; };
  std::int64_t done = 0;
  if (aligned(g) && aligned(u) && aligned(a)) {
    const std::int64_t vectors = n / 4;
    if (vectors > 0) {
      detail::launch("swiglu", swiglu_kernel, detail::grid_for(vectors, kThreads, kSwigluVectors), kThreads, 0, stream,
                     reinterpret_cast<const float4*>(g), reinterpret_cast<const float4*>(u), vectors,
                     reinterpret_cast<float4*>(a));
    }
    done = vectors * 4;
  }
  if (done < n) {
    detail::launch("swiglu", swiglu_scalar_kernel, detail::grid_for(n - done, kThreads, 4), kThreads, 0, stream,
                   g + done, u + done, n - done, a + done);
  }
}

void combine(const float* y, int hidden, const DeviceRouting& routing, float* out, Stream stream) {
  check_cols(hidden, "combine");
  if (routing.tokens <= 0) return;
  const std::int64_t work = static_cast<std::int64_t>(routing.tokens) * (hidden / 4);
  detail::launch("combine", combine_kernel, detail::grid_for(work, kThreads, 1), kThreads, 0, stream, y, hidden,
                 routing.pair_row, routing.pair_weight, routing.tokens, routing.top_k, out);
}

void join_reduce(const float* const* partials, int count, std::int64_t n, float* out, Stream stream) {
  if (n <= 0 || count <= 0) return;
  detail::launch("join_reduce", join_reduce_kernel, detail::grid_for(n, kThreads, 4), kThreads, 0, stream, partials,
                 count, n, out);
}

}  // namespace tpgraph::kernels
