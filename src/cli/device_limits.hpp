// This GPU's own ceilings, measured in the run that uses them: device copy bandwidth and fp16
// tensor throughput. bench states kernel rates as fractions of these, not of a datasheet.
#pragma once
#include <cstdint>

namespace tpgraph::cli {

struct CopyLimit {
  std::int64_t bytes = 0;  // one copy's size; read + write moves twice that
  double median_us = 0;
  double tbps = 0;         // (read + write) / median
};
// A device-to-device cudaMemcpyAsync of `bytes`, captured in a graph and replayed `replays` times.
[[nodiscard]] CopyLimit measure_copy_bandwidth(int device, std::int64_t bytes, int replays);

struct TensorLimit {
  int n = 0;               // n x n x n
  double median_us = 0;
  double tflops = 0;       // 2 n^3 / median
};
// cublasGemmEx, fp16 inputs (random, not zeros), fp32 output and accumulation, `reps` timed calls.
[[nodiscard]] TensorLimit measure_tensor_throughput(int device, int n, int reps);

}  // namespace tpgraph::cli
