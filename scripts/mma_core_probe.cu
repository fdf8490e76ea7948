// The wgmma kernel's compute core alone (docs/kernel-notes.md, "What is known to cost time"): per
// k16 step a warp reads its weight unit from shared memory, decodes it to the A fragment
// (nvfp4_decode.cuh) and issues wgmma m64nNk16 against routed rows fixed in shared memory, with no
// copies, barriers, ring or stores around it; one block of 2-4 warpgroups per SM. It says how close
// the kernel's loop structure (k16 steps per commit group, groups left in flight, the decode) can
// come to the MMA peak where nothing else waits. Not part of the build; on a GPU machine:
//
//   nvcc -std=c++20 -O3 -arch=sm_90a -Isrc scripts/mma_core_probe.cu -o mma_core_probe && ./mma_core_probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/gemm_common.cuh"
#include "kernels/nvfp4_decode.cuh"
#include "kernels/ptx.cuh"
#include "kernels/wgmma_ops.cuh"
using namespace tpgraph::kernels;
using namespace tpgraph::kernels::gemm;

template <int kN, int kSteps, int kPending, int kDecode, int kWG>
__global__ void __launch_bounds__(128 * kWG, 1) probe(int iters, float* sink) {
  extern __shared__ __align__(1024) std::uint8_t smem[];
  __half* b = reinterpret_cast<__half*>(smem);
  std::uint8_t* w = smem + kN * 128;
  for (int i = threadIdx.x; i < kN * 64; i += blockDim.x) b[i] = __float2half(static_cast<float>(i % 13 - 6) * 0.0625f);
  for (int i = threadIdx.x; i < 576 * 4 * kWG; i += blockDim.x) w[i] = static_cast<std::uint8_t>((i * 37) & 0x77);
  detail::fence_proxy_async_shared();
  __syncthreads();
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const std::uint32_t base = detail::smem_address(b);
  const std::uint32_t unit = detail::smem_address(w) + 576u * warp;
  float acc[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;
  for (int it = 0; it < iters; ++it) {
    const Fragment f = load_unit_fragment(unit, lane);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      std::uint32_t a[4];
      if constexpr (kDecode) {
        detail::decode_a_fragment<true>(word_of(f, kk), f.scales.x, f.scales.y, kk, a);
      } else {
        a[0] = a[2] = word_of(f, kk) & 0x3bff3bffu;
        a[1] = f.scales.x & 0x3bff3bffu;
        a[3] = f.scales.y & 0x3bff3bffu;
      }
      if (kk % kSteps == 0) detail::wgmma_fence();
      detail::Wgmma<kN>::mma(acc, a, detail::smem_desc_sw128(base + static_cast<std::uint32_t>(kk * 32)));
      if (kk % kSteps == kSteps - 1) {
        detail::wgmma_commit();
        detail::wgmma_wait<kPending>();
      }
    }
  }
  detail::wgmma_wait<0>();
  float s = 0.0f;
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) s += acc[i];
  if (s == 12345.678f) sink[blockIdx.x] = s;
}

void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "mma_core_probe: %s: %s\n", what, cudaGetErrorString(status));
  std::exit(1);
}

// The median of six timed launches (after one untimed) of `sms` blocks, as TFLOP/s.
template <int kN, int kSteps, int kPending, int kDecode, int kWG>
void run(const char* name, float* sink, int sms) {
  auto* kernel = probe<kN, kSteps, kPending, kDecode, kWG>;
  const int smem = kN * 128 + 576 * 4 * kWG;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem), "cudaFuncSetAttribute");
  const int iters = 4096;
  cudaEvent_t e0, e1;
  check(cudaEventCreate(&e0), "cudaEventCreate");
  check(cudaEventCreate(&e1), "cudaEventCreate");
  std::vector<float> ms;
  for (int r = 0; r < 7; ++r) {
    check(cudaEventRecord(e0), "cudaEventRecord");
    kernel<<<sms, 128 * kWG, smem>>>(iters, sink);
    check(cudaGetLastError(), name);
    check(cudaEventRecord(e1), "cudaEventRecord");
    check(cudaEventSynchronize(e1), name);
    float t = 0;
    check(cudaEventElapsedTime(&t, e0, e1), "cudaEventElapsedTime");
    if (r > 0) ms.push_back(t);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(ms.begin(), ms.end());
  const double flops = 2.0 * 64 * kN * 16 * 4.0 * iters * kWG * sms;
  std::printf("%-34s N=%3d steps/commit=%d pending=%d decode=%d wg=%d: %7.1f TFLOP/s\n", name, kN, kSteps, kPending,
              kDecode, kWG, flops / (ms[ms.size() / 2] * 1e-3) / 1e12);
}

int main() {
  int sms = 0;
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
  float* sink = nullptr;
  check(cudaMalloc(&sink, 4096 * 4), "cudaMalloc");
  run<112, 4, 1, 0, 4>("peak-like (4 steps, no decode)", sink, sms);
  run<112, 1, 1, 0, 4>("kernel-like, no decode", sink, sms);
  run<112, 1, 1, 1, 4>("kernel-like (1 step, decode)", sink, sms);
  run<112, 2, 1, 1, 4>("2 steps per group, decode", sink, sms);
  run<112, 4, 1, 1, 4>("4 steps per group, decode", sink, sms);
  run<112, 1, 2, 1, 4>("1 step, 2 pending, decode", sink, sms);
  run<112, 1, 1, 1, 3>("kernel-like, 3 WGs", sink, sms);
  run<112, 1, 1, 1, 2>("kernel-like, 2 WGs", sink, sms);
  run<160, 1, 1, 1, 4>("kernel-like N=160", sink, sms);
  run<64, 1, 1, 1, 4>("kernel-like N=64", sink, sms);
  run<112, 1, 0, 1, 4>("1 step, 0 pending, decode", sink, sms);
  check(cudaFree(sink), "cudaFree");
  return 0;
}
