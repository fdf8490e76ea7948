#include "cuda/bench_limits.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/base/stats.hpp"
#include "core/numerics/half.hpp"
#include "cuda/capture.hpp"
#include "cuda/owners.hpp"
#include "cuda_error/error.hpp"
#include "cuda_error/error_cublas.hpp"

namespace tpgraph::cuda {
namespace {

using stats::median;

// The cuBLAS handle's owner: destroyed on every path out of the measurement.
class CublasHandle {
 public:
  CublasHandle() { check(cublasCreate(&handle_), "cublasCreate"); }
  ~CublasHandle() {
    if (cublasDestroy(handle_) != CUBLAS_STATUS_SUCCESS) {
      std::fprintf(stderr, "tpgraph: warning: cublasDestroy failed\n");
    }
  }
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;
  [[nodiscard]] cublasHandle_t get() const { return handle_; }

 private:
  cublasHandle_t handle_ = nullptr;
};

// Times `launch` (which enqueues on `stream`) with events around each call; `warmup` untimed
// calls first.
template <class Launch>
std::vector<double> time_calls(cudaStream_t stream, int device, int warmup, int reps, Launch&& launch) {
  const Event start = make_event(device);
  const Event stop = make_event(device);
  for (int i = 0; i < warmup; ++i) launch();
  TPG_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> us;
  for (int i = 0; i < reps; ++i) {
    TPG_CUDA(cudaEventRecord(start.get(), stream));
    launch();
    TPG_CUDA(cudaEventRecord(stop.get(), stream));
    TPG_CUDA(cudaEventSynchronize(stop.get()));
    float ms = 0;
    TPG_CUDA(cudaEventElapsedTime(&ms, start.get(), stop.get()));
    us.push_back(static_cast<double>(ms) * 1e3);
  }
  return us;
}

int sm_count(int device) {
  int sms = 0;
  TPG_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

}  // namespace

StreamLimit measure_stream_limit(int device, bench::StreamKind kind, std::int64_t bytes, int reps) {
  const DeviceScope scope(device);
  const auto n = static_cast<std::size_t>(bytes);
  // A buffer many times the L2, so every launch streams from and to device memory.
  DeviceBuffer<std::uint8_t> src;
  DeviceBuffer<std::uint8_t> dst;
  if (kind != bench::StreamKind::write) {
    src = DeviceBuffer<std::uint8_t>(device, n);
    TPG_CUDA(cudaMemset(src.get(), 0x5a, n));
  }
  if (kind != bench::StreamKind::read) {
    dst = DeviceBuffer<std::uint8_t>(device, n);
    TPG_CUDA(cudaMemset(dst.get(), 0, n));
  }
  const DeviceBuffer<std::uint32_t> sink(device, 1);
  const Stream stream = make_stream(device);
  const int sms = sm_count(device);
  StreamLimit limit;
  limit.kind = kind;
  limit.buffer_bytes = bytes;
  limit.moved_bytes = kind == bench::StreamKind::copy ? 2 * bytes : bytes;
  for (const int per_sm : {1, 2, 4, 8}) {
    for (const int vector_bytes : {4, 8, 16}) {
      for (const int unroll : {1, 2, 4}) {
        const kernels::StreamShape shape{sms * per_sm, 256, vector_bytes, unroll};
        const auto us = time_calls(stream.get(), device, 2, reps, [&] {
          kernels::stream_memory(kind, src.get(), dst.get(), bytes, shape, sink.get(), stream.get());
        });
        bench::StreamTrial trial{shape, median(us), 0.0};
        trial.tbps = static_cast<double>(limit.moved_bytes) / (trial.median_us * 1e-6) / 1e12;
        limit.trials.push_back(trial);
        if (trial.tbps > limit.best.tbps) limit.best = trial;
      }
    }
  }
  return limit;
}

MmaLimit measure_mma_peak(int device, int reps) {
  const DeviceScope scope(device);
  const int sms = sm_count(device);
  const DeviceBuffer<float> sink(device, static_cast<std::size_t>(2 * sms));
  // Block 0's SM cycles and global-timer nanoseconds, summed over a shape's launches: the clock the
  // tensor cores ran at (a limit read at a clock the GEMMs never see would flatter them).
  const DeviceBuffer<unsigned long long> clocks(device, 2);
  const Stream stream = make_stream(device);
  MmaLimit limit;
  // About 1-2 ms a launch at the H200's rate: long against launch overhead, short against clocks
  // that drop under sustained load.
  limit.iterations = 2048;
  for (const int n : {64, 128, 160}) {
    for (const int warpgroups : {1, 2, 3}) {
      for (const int per_sm : {1, 2}) {
        const kernels::MmaPeakShape shape{n, warpgroups, sms * per_sm};
        TPG_CUDA(cudaMemsetAsync(clocks.get(), 0, clocks.bytes(), stream.get()));
        const auto us = time_calls(stream.get(), device, 2, reps, [&] {
          kernels::mma_peak(shape, limit.iterations, sink.get(), stream.get(), clocks.get());
        });
        bench::MmaTrial trial{shape, median(us), 0.0, 0.0};
        trial.tflops = kernels::mma_peak_flops(shape, limit.iterations) / (trial.median_us * 1e-6) / 1e12;
        const auto sums = clocks.download();  // cycles, nanoseconds
        if (sums[1] > 0) trial.sm_ghz = static_cast<double>(sums[0]) / static_cast<double>(sums[1]);
        limit.trials.push_back(trial);
        if (trial.tflops > limit.best.tflops) limit.best = trial;
      }
    }
  }
  return limit;
}

MemcpyRate measure_memcpy(int device, std::int64_t bytes, int replays) {
  const DeviceScope scope(device);
  const auto n = static_cast<std::size_t>(bytes);
  const DeviceBuffer<std::uint8_t> src(device, n);
  const DeviceBuffer<std::uint8_t> dst(device, n);
  TPG_CUDA(cudaMemset(src.get(), 0x5a, n));
  TPG_CUDA(cudaMemset(dst.get(), 0, n));
  const Stream stream = make_stream(device);
  const Graph graph = capture_graph(stream.get(), device, [&] {
    TPG_CUDA(cudaMemcpyAsync(dst.get(), src.get(), n, cudaMemcpyDeviceToDevice, stream.get()));
  });
  const GraphExec exec = instantiate(graph);
  const auto us =
      time_calls(stream.get(), device, 3, replays, [&] { TPG_CUDA(cudaGraphLaunch(exec.get(), stream.get())); });
  MemcpyRate limit;
  limit.bytes = bytes;
  limit.median_us = median(us);
  limit.tbps = 2.0 * static_cast<double>(bytes) / (limit.median_us * 1e-6) / 1e12;
  return limit;
}

TensorLimit measure_tensor_throughput(int device, int n, int reps) {
  const DeviceScope scope(device);
  const auto elems = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  // Random data: cuBLAS runs faster on all-zero inputs than on real data on this GPU, which would
  // overstate the limit.
  std::vector<std::uint16_t> host(elems);
  std::uint64_t state = 0x9E3779B97F4A7C15ULL;
  for (auto& h : host) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto u = static_cast<float>(static_cast<double>(state >> 40) * 0x1p-24);
    h = float_to_half(2.0f * u - 1.0f);
  }
  const auto a = to_device<std::uint16_t>(device, host);
  const auto b = to_device<std::uint16_t>(device, host);
  const DeviceBuffer<float> c(device, elems);
  const Stream stream = make_stream(device);
  const CublasHandle handle;
  check(cublasSetStream(handle.get(), stream.get()), "cublasSetStream");
  const float alpha = 1.0f;
  const float beta = 0.0f;
  const auto us = time_calls(stream.get(), device, 3, reps, [&] {
    check(cublasGemmEx(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.get(), CUDA_R_16F, n, b.get(),
                       CUDA_R_16F, n, &beta, c.get(), CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
  });
  TensorLimit limit;
  limit.n = n;
  limit.median_us = median(us);
  limit.tflops = 2.0 * static_cast<double>(n) * n * n / (limit.median_us * 1e-6) / 1e12;
  return limit;
}

std::int64_t l2_cache_bytes(int device) {
  int l2 = 0;
  TPG_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
  return l2;
}

bench::Limits measure_limits(int device, std::int64_t stream_bytes) {
  bench::Limits limits;
  limits.measured = true;
  limits.read = measure_stream_limit(device, bench::StreamKind::read, stream_bytes, 10);
  limits.write = measure_stream_limit(device, bench::StreamKind::write, stream_bytes, 10);
  limits.copy = measure_stream_limit(device, bench::StreamKind::copy, stream_bytes, 10);
  if (kernels::mma_peak_built()) limits.mma = measure_mma_peak(device, 10);
  limits.cublas = measure_tensor_throughput(device, 8192, 20);
  limits.memcpy = measure_memcpy(device, std::int64_t{1} << 31, 20);
  limits.l2_bytes = l2_cache_bytes(device);
  return limits;
}

}  // namespace tpgraph::cuda
