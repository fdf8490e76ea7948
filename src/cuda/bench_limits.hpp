// This GPU's own limits, measured in the run that uses them: streaming read, write and copy
// bandwidth (each at the best of a sweep of launch shapes), the tensor-core peak of the grouped
// GEMM's instruction, and cuBLAS's fp16 GEMM beside it. bench states kernel rates as fractions of
// these, not of a datasheet.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/limits.hpp"

namespace tpgraph::cuda {

struct StreamTrial {
  kernels::StreamShape shape;
  double median_us = 0;
  double tbps = 0;
};
struct StreamLimit {
  kernels::StreamKind kind = kernels::StreamKind::read;
  std::int64_t buffer_bytes = 0;  // the buffer read, written or copied
  std::int64_t moved_bytes = 0;   // per launch: copy counts read + write
  StreamTrial best;
  std::vector<StreamTrial> trials;  // every shape tried
};
// Sweeps block counts (1, 2, 4, 8 per SM) x vector widths (4, 8, 16 bytes) x accesses in flight
// (1, 2, 4) over a `bytes` buffer, `reps` timed launches each (stats::median), and keeps the fastest.
[[nodiscard]] StreamLimit measure_stream_limit(int device, kernels::StreamKind kind, std::int64_t bytes, int reps);
[[nodiscard]] std::string to_string(kernels::StreamKind kind);
// "256 blocks x 256 threads, 16-byte vectors x 4"
[[nodiscard]] std::string describe(const kernels::StreamShape& shape);

struct MmaTrial {
  kernels::MmaPeakShape shape;
  double median_us = 0;
  double tflops = 0;
};
struct MmaLimit {
  int iterations = 0;  // k16 x 4 steps per warpgroup per launch
  MmaTrial best;
  std::vector<MmaTrial> trials;
};
// Sweeps N (64, 128, 160) x warpgroups per block (1, 2, 3) x blocks per SM (1, 2) of the wgmma
// peak kernel and keeps the fastest. Call only where kernels::mma_peak_built().
[[nodiscard]] MmaLimit measure_mma_peak(int device, int reps);
// "wgmma m64n160k16 f32.f16.f16, 264 blocks x 2 warpgroups"
[[nodiscard]] std::string describe(const kernels::MmaPeakShape& shape);

struct MemcpyRate {
  std::int64_t bytes = 0;  // one copy's size; read + write moves twice that
  double median_us = 0;
  double tbps = 0;  // (read + write) / median
};
// A device-to-device cudaMemcpyAsync of `bytes`, captured in a graph and replayed `replays` times.
[[nodiscard]] MemcpyRate measure_memcpy(int device, std::int64_t bytes, int replays);

struct TensorLimit {
  int n = 0;  // n x n x n
  double median_us = 0;
  double tflops = 0;  // 2 n^3 / median
};
// cublasGemmEx, fp16 inputs (random, not zeros), fp32 output and accumulation, `reps` timed calls.
[[nodiscard]] TensorLimit measure_tensor_throughput(int device, int n, int reps);

// The L2 cache of `device` in bytes.
[[nodiscard]] std::int64_t l2_cache_bytes(int device);

}  // namespace tpgraph::cuda
