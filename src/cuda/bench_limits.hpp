// This GPU's own limits, measured in the run that uses them: streaming read, write and copy
// bandwidth (each at the best of a sweep of launch shapes), the tensor-core peak of the grouped
// GEMM's instruction, and cuBLAS's fp16 GEMM beside it. bench states kernel rates as fractions of
// these, not of a datasheet.
#pragma once
#include <cstdint>

#include "core/analysis/bench_model.hpp"
#include "kernels/limits.hpp"

namespace tpgraph::cuda {

using bench::MemcpyRate;
using bench::MmaLimit;
using bench::StreamLimit;
using bench::TensorLimit;

// Sweeps block counts (1, 2, 4, 8 per SM) x vector widths (4, 8, 16 bytes) x accesses in flight
// (1, 2, 4) over a `bytes` buffer, `reps` timed launches each (stats::median), and keeps the fastest.
[[nodiscard]] StreamLimit measure_stream_limit(int device, bench::StreamKind kind, std::int64_t bytes, int reps);

// Sweeps N (64, 128, 160) x warpgroups per block (1, 2, 3) x blocks per SM (1, 2) of the wgmma
// peak kernel and keeps the fastest. Call only where kernels::mma_peak_built().
[[nodiscard]] MmaLimit measure_mma_peak(int device, int reps);

// A device-to-device cudaMemcpyAsync of `bytes`, captured in a graph and replayed `replays` times.
[[nodiscard]] MemcpyRate measure_memcpy(int device, std::int64_t bytes, int replays);

// cublasGemmEx, fp16 inputs (random, not zeros), fp32 output and accumulation, `reps` timed calls.
[[nodiscard]] TensorLimit measure_tensor_throughput(int device, int n, int reps);

// The L2 cache of `device` in bytes.
[[nodiscard]] std::int64_t l2_cache_bytes(int device);

// Every limit bench states its kernels against: read, write and copy over `stream_bytes` buffers,
// the MMA peak where the build has wgmma, cuBLAS's fp16 GEMM at 8192^3, a 2 GiB memcpy, the L2.
[[nodiscard]] bench::Limits measure_limits(int device, std::int64_t stream_bytes);

}  // namespace tpgraph::cuda
