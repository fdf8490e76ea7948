#include "cuda/record_cost.hpp"

#include <cuda_runtime_api.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/records/trace_file.hpp"
#include "cuda/capture.hpp"
#include "cuda/owners.hpp"
#include "kernels/limits.hpp"

namespace tpgraph::cuda {

namespace {

// The wall time of one replay, from the launch call to the end of its work (µs).
double timed_replay(const GraphExec& exec, cudaStream_t stream) {
  const auto start = std::chrono::steady_clock::now();
  TPG_CUDA(cudaGraphLaunch(exec.get(), stream));
  TPG_CUDA(cudaStreamSynchronize(stream));
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

// The chain: `nodes` spins, each after the one before (one stream, so the capture orders them).
GraphExec chain_graph(int device, cudaStream_t stream, const CalibrationShape& shape, std::uint32_t* sink) {
  const auto ns = static_cast<std::int64_t>(shape.kernel_us * 1000.0);
  const Graph graph = capture_graph(stream, device, [&] {
    for (int n = 0; n < shape.nodes; ++n) kernels::spin(ns, sink, stream);
  });
  return instantiate(graph);
}

}  // namespace

CostCalibration calibrate_record_cost(int device, const std::function<void(bool on)>& set_records,
                                      const CalibrationShape& shape) {
  const DeviceScope scope(device);
  const Stream stream = make_stream(device);
  const DeviceBuffer<std::uint32_t> sink(device, 1);
  const GraphExec exec = chain_graph(device, stream.get(), shape, sink.get());
  set_records(false);
  for (int r = 0; r < shape.replays_per_block; ++r) (void)timed_replay(exec, stream.get());  // warm-up
  std::vector<double> off;
  std::vector<double> on;
  for (int b = 0; b < shape.blocks; ++b) {
    const bool records = b % 2 == 1;
    set_records(records);
    (void)timed_replay(exec, stream.get());
    for (int r = 1; r < shape.replays_per_block; ++r) (records ? on : off).push_back(timed_replay(exec, stream.get()));
  }
  set_records(false);
  CostCalibration c = calibration_from_walls(off, on, shape.nodes);
  cudaDeviceProp props{};
  TPG_CUDA(cudaGetDeviceProperties(&props, device));
  c.gpu = props.name;
  c.device = device;
  c.kernel_us = shape.kernel_us;
  return c;
}

int device_with_uuid(std::string_view uuid) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp props{};
    if (cudaGetDeviceProperties(&props, d) == cudaSuccess && tracefile::uuid_text(props.uuid.bytes) == uuid) return d;
  }
  (void)cudaGetLastError();
  return -1;
}

}  // namespace tpgraph::cuda
