#include "cli/device_limits.hpp"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <fmt/core.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "core/half.hpp"
#include "cuda/error.hpp"
#include "cuda/owners.hpp"

namespace tpgraph::cli {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

void check_cublas(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw std::runtime_error(fmt::format("{} failed: cuBLAS status {}", what, static_cast<int>(status)));
  }
}

// Times `launch` (which enqueues on `stream`) with events around each call.
template <class Launch>
std::vector<double> time_calls(cudaStream_t stream, int device, int warmup, int reps, Launch&& launch) {
  const cuda::Event start = cuda::make_event(device);
  const cuda::Event stop = cuda::make_event(device);
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

}  // namespace

CopyLimit measure_copy_bandwidth(int device, std::int64_t bytes, int replays) {
  const cuda::DeviceScope scope(device);
  const auto n = static_cast<std::size_t>(bytes);
  const cuda::DeviceBuffer<std::uint8_t> src(device, n);
  const cuda::DeviceBuffer<std::uint8_t> dst(device, n);
  TPG_CUDA(cudaMemset(src.get(), 0x5a, n));
  TPG_CUDA(cudaMemset(dst.get(), 0, n));
  const cuda::Stream stream = cuda::make_stream(device);
  cudaGraph_t raw = nullptr;
  TPG_CUDA(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
  TPG_CUDA(cudaMemcpyAsync(dst.get(), src.get(), n, cudaMemcpyDeviceToDevice, stream.get()));
  TPG_CUDA(cudaStreamEndCapture(stream.get(), &raw));
  const cuda::Graph graph(raw, device);
  const cuda::GraphExec exec = cuda::instantiate(graph);
  const auto us = time_calls(stream.get(), device, 3, replays,
                             [&] { TPG_CUDA(cudaGraphLaunch(exec.get(), stream.get())); });
  CopyLimit limit;
  limit.bytes = bytes;
  limit.median_us = median(us);
  limit.tbps = 2.0 * static_cast<double>(bytes) / (limit.median_us * 1e-6) / 1e12;
  return limit;
}

TensorLimit measure_tensor_throughput(int device, int n, int reps) {
  const cuda::DeviceScope scope(device);
  const auto elems = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  // Random data: zeros run faster than real data on this GPU (METHOD.md).
  std::vector<std::uint16_t> host(elems);
  std::uint64_t state = 0x9E3779B97F4A7C15ULL;
  for (auto& h : host) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const auto u = static_cast<float>(static_cast<double>(state >> 40) * 0x1p-24);
    h = float_to_half(2.0f * u - 1.0f);
  }
  const auto a = cuda::to_device<std::uint16_t>(device, host);
  const auto b = cuda::to_device<std::uint16_t>(device, host);
  const cuda::DeviceBuffer<float> c(device, elems);
  const cuda::Stream stream = cuda::make_stream(device);
  cublasHandle_t handle = nullptr;
  check_cublas(cublasCreate(&handle), "cublasCreate");
  TensorLimit limit;
  try {
    check_cublas(cublasSetStream(handle, stream.get()), "cublasSetStream");
    const float alpha = 1.0f;
    const float beta = 0.0f;
    const auto us = time_calls(stream.get(), device, 3, reps, [&] {
      check_cublas(cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &alpha, a.get(), CUDA_R_16F, n, b.get(),
                                CUDA_R_16F, n, &beta, c.get(), CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT),
                   "cublasGemmEx");
    });
    limit.n = n;
    limit.median_us = median(us);
    limit.tflops = 2.0 * static_cast<double>(n) * n * n / (limit.median_us * 1e-6) / 1e12;
  } catch (...) {
    cublasDestroy(handle);
    throw;
  }
  cublasDestroy(handle);
  return limit;
}

}  // namespace tpgraph::cli
