// Kernels that measure this GPU's limits (limits.hpp): streaming read, write and copy, the
// tensor-core peak of wgmma m64nNk16 f32.f16.f16 with A from registers, the grouped GEMM's
// instruction, and a spin of a given length. Each does nothing but the work it measures.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/launch.cuh"
#include "kernels/limits.hpp"
#include "kernels/ptx.cuh"

namespace tpgraph::kernels {
namespace {

// A value a fold of the fill never gives (the fills are bytes 0x5a), so the guarded store never
// happens but the compiler cannot drop the loads.
constexpr std::uint32_t kNever = 0x9e3779b9u;

template <int kBytes>
struct VectorOf;
template <>
struct VectorOf<4> {
  using type = std::uint32_t;
  __device__ static std::uint32_t fold(type v) { return v; }
  __device__ static type fill() { return 0x5a5a5a5au; }
};
template <>
struct VectorOf<8> {
  using type = uint2;
  __device__ static std::uint32_t fold(type v) { return v.x ^ v.y; }
  __device__ static type fill() { return make_uint2(0x5a5a5a5au, 0x5a5a5a5au); }
};
template <>
struct VectorOf<16> {
  using type = uint4;
  __device__ static std::uint32_t fold(type v) { return v.x ^ v.y ^ v.z ^ v.w; }
  __device__ static type fill() { return make_uint4(0x5a5a5a5au, 0x5a5a5a5au, 0x5a5a5a5au, 0x5a5a5a5au); }
};

// Grid-stride over n vectors, kUnroll accesses issued before any is used.
template <StreamKind kKind, int kBytes, int kUnroll>
__global__ void stream_kernel(const typename VectorOf<kBytes>::type* __restrict__ src,
                              typename VectorOf<kBytes>::type* __restrict__ dst, std::int64_t n,
                              std::uint32_t* __restrict__ sink) {
  using V = VectorOf<kBytes>;
  using T = typename V::type;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  std::uint32_t acc = 0;
  for (; i + (kUnroll - 1) * stride < n; i += kUnroll * stride) {
    if constexpr (kKind == StreamKind::write) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) dst[i + u * stride] = V::fill();
    } else {
      T v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) v[u] = src[i + u * stride];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        if constexpr (kKind == StreamKind::copy) {
          dst[i + u * stride] = v[u];
        } else {
          acc ^= V::fold(v[u]);
        }
      }
    }
  }
  for (; i < n; i += stride) {
    if constexpr (kKind == StreamKind::write) {
      dst[i] = V::fill();
    } else if constexpr (kKind == StreamKind::copy) {
      dst[i] = src[i];
    } else {
      acc ^= V::fold(src[i]);
    }
  }
  if (kKind == StreamKind::read && acc == kNever) sink[0] = acc;
}

template <StreamKind kKind, int kBytes, int kUnroll>
void launch_stream(const void* src, void* dst, std::int64_t bytes, const StreamShape& shape, std::uint32_t* sink,
                   cudaStream_t stream) {
  using T = typename VectorOf<kBytes>::type;
  stream_kernel<kKind, kBytes, kUnroll>
      <<<static_cast<unsigned int>(shape.blocks), static_cast<unsigned int>(shape.threads), 0, stream>>>(
          static_cast<const T*>(src), static_cast<T*>(dst), bytes / kBytes, sink);
  detail::check_launch("stream_memory");
}

template <StreamKind kKind>
void launch_stream_kind(const void* src, void* dst, std::int64_t bytes, const StreamShape& shape, std::uint32_t* sink,
                        cudaStream_t stream) {
  const int key = shape.vector_bytes * 10 + shape.unroll;
  switch (key) {
    case 41: return launch_stream<kKind, 4, 1>(src, dst, bytes, shape, sink, stream);
    case 42: return launch_stream<kKind, 4, 2>(src, dst, bytes, shape, sink, stream);
    case 44: return launch_stream<kKind, 4, 4>(src, dst, bytes, shape, sink, stream);
    case 81: return launch_stream<kKind, 8, 1>(src, dst, bytes, shape, sink, stream);
    case 82: return launch_stream<kKind, 8, 2>(src, dst, bytes, shape, sink, stream);
    case 84: return launch_stream<kKind, 8, 4>(src, dst, bytes, shape, sink, stream);
    case 161: return launch_stream<kKind, 16, 1>(src, dst, bytes, shape, sink, stream);
    case 162: return launch_stream<kKind, 16, 2>(src, dst, bytes, shape, sink, stream);
    case 164: return launch_stream<kKind, 16, 4>(src, dst, bytes, shape, sink, stream);
    default:
      throw std::invalid_argument("stream_memory: " + std::to_string(shape.vector_bytes) + "-byte vectors x " +
                                  std::to_string(shape.unroll) + " in flight; accepted: 4, 8 or 16 bytes x 1, 2 or 4");
  }
}

// The peak kernel: B is one stage of kN routed-row-like rows in shared memory, A a fixed fragment
// in registers; neither changes, so the loop is wgmma alone. Non-zero f16 values throughout: the
// tensor cores run faster on zeros than on real data.
constexpr int kPeakMaxThreads = 384;
// With `clocks`, thread 0 of block 0 adds the SM's clock cycles and the global timer's nanoseconds
// over its loop: summed over launches, the SM clock the tensor cores ran at.
template <int kN>
__global__ void __launch_bounds__(kPeakMaxThreads)
    mma_peak_kernel(int iterations, float* __restrict__ sink, unsigned long long* __restrict__ clocks) {
  __shared__ __align__(1024) __half b[kN * 64];
  for (int i = threadIdx.x; i < kN * 64; i += blockDim.x) b[i] = __float2half(static_cast<float>(i % 13 - 6) * 0.0625f);
  detail::fence_proxy_async_shared();  // wgmma reads B through the asynchronous proxy
  __syncthreads();
  const int lane = threadIdx.x % 32;
  std::uint32_t a[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const __half2 h = __floats2half2_rn(static_cast<float>((lane + j) % 7 - 3) * 0.03125f,
                                        static_cast<float>((lane + 2 * j) % 5 - 2) * 0.03125f);
    __builtin_memcpy(&a[j], &h, sizeof(h));
  }
  float acc[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;
  const std::uint32_t base = detail::smem_address(b);
  const bool timed = clocks != nullptr && blockIdx.x == 0 && threadIdx.x == 0;
  const std::uint64_t ns0 = timed ? detail::global_timer_ns() : 0;
  const long long clk0 = timed ? clock64() : 0;
  for (int it = 0; it < iterations; ++it) {
    // Each group opens with a fence, as the GEMM's do: without it ptxas cannot prove the
    // accumulators untouched across the loop and serialises the warpgroup itself.
    detail::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      detail::Wgmma<kN>::mma(acc, a, detail::smem_desc_sw128(base + static_cast<std::uint32_t>(kk * 32)));
    }
    detail::wgmma_commit();
    detail::wgmma_wait<1>();
  }
  detail::wgmma_wait<0>();
  if (timed) {
    atomicAdd(&clocks[0], static_cast<unsigned long long>(clock64() - clk0));
    atomicAdd(&clocks[1], static_cast<unsigned long long>(detail::global_timer_ns() - ns0));
  }
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) sum += acc[i];
  if (sum == static_cast<float>(kNever)) sink[blockIdx.x] = sum;
}

template <int kN>
void launch_peak(const MmaPeakShape& shape, int iterations, float* sink, unsigned long long* clocks,
                 cudaStream_t stream) {
  mma_peak_kernel<kN>
      <<<static_cast<unsigned int>(shape.blocks), static_cast<unsigned int>(128 * shape.warpgroups), 0, stream>>>(
          iterations, sink, clocks);
  detail::check_launch("mma_peak");
}

}  // namespace

void stream_memory(StreamKind kind, const void* src, void* dst, std::int64_t bytes, const StreamShape& shape,
                   std::uint32_t* sink, Stream stream) {
  if (bytes <= 0 || bytes % 16 != 0 || shape.blocks < 1 || shape.threads < 32 || shape.threads > 1024) {
    throw std::invalid_argument("stream_memory: " + std::to_string(bytes) + " bytes in " +
                                std::to_string(shape.blocks) + " x " + std::to_string(shape.threads) +
                                "; accepted: a positive multiple of 16 bytes, >= 1 block of 32..1024 threads");
  }
  switch (kind) {
    case StreamKind::read: return launch_stream_kind<StreamKind::read>(src, dst, bytes, shape, sink, stream);
    case StreamKind::write: return launch_stream_kind<StreamKind::write>(src, dst, bytes, shape, sink, stream);
    case StreamKind::copy: return launch_stream_kind<StreamKind::copy>(src, dst, bytes, shape, sink, stream);
  }
}

bool mma_peak_built() {
#ifdef TPGRAPH_NO_WGMMA
  return false;
#else
  return true;
#endif
}

void mma_peak(const MmaPeakShape& shape, int iterations, float* sink, Stream stream, unsigned long long* clocks) {
  if (!mma_peak_built()) {
    throw std::invalid_argument(
        "mma_peak: this build has no sm_90a code (wgmma): build with CMAKE_CUDA_ARCHITECTURES=90a");
  }
  if (shape.blocks < 1 || shape.warpgroups < 1 || 128 * shape.warpgroups > kPeakMaxThreads || iterations < 1) {
    throw std::invalid_argument("mma_peak: " + std::to_string(shape.blocks) + " blocks of " +
                                std::to_string(shape.warpgroups) + " warpgroups, " + std::to_string(iterations) +
                                " iterations; accepted: >= 1 block of 1..3 warpgroups, >= 1 iteration");
  }
  switch (shape.n) {
    case 64: return launch_peak<64>(shape, iterations, sink, clocks, stream);
    case 128: return launch_peak<128>(shape, iterations, sink, clocks, stream);
    case 160: return launch_peak<160>(shape, iterations, sink, clocks, stream);
    default: throw std::invalid_argument("mma_peak: N " + std::to_string(shape.n) + "; accepted: 64, 128 or 160");
  }
}

double mma_peak_flops(const MmaPeakShape& shape, int iterations) {
  return 2.0 * 64.0 * shape.n * 16.0 * 4.0 * static_cast<double>(iterations) * shape.warpgroups * shape.blocks;
}

namespace {

__global__ void spin_kernel(std::int64_t ns, std::uint32_t* sink) {
  const std::uint64_t start = detail::global_timer_ns();
  std::uint64_t now = 0;
  do {
    now = detail::global_timer_ns();
  } while (now >= start && static_cast<std::int64_t>(now - start) < ns);
  if (now < start && threadIdx.x == 0) *sink = static_cast<std::uint32_t>(now);
}

}  // namespace

void spin(std::int64_t ns, std::uint32_t* sink, Stream stream) {
  if (ns < 1 || ns > 1'000'000'000)
    throw std::invalid_argument("spin: " + std::to_string(ns) + " ns; accepted: 1 to 1000000000");
  spin_kernel<<<1, 32, 0, stream>>>(ns, sink);
  detail::check_launch("spin_kernel");
}

}  // namespace tpgraph::kernels
