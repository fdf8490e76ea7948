// CUPTI's activity records' cost per kernel node on one GPU, calibrated by `tpgraph trace` after
// the traced program exited (docs/trace.md, "The cost of tracing in every report"): a graph of
// kKernelNodes short spin kernels in a chain, instantiated once and replayed in alternating blocks
// with the records off and on; the cost per node is the difference of the two median wall times per
// replay over the node count (core's calibration_from_walls). This floor does not link CUPTI: the
// caller hands the switch of the records (cupti::Collector::set_tracing).
#pragma once
#include <functional>
#include <string_view>

#include "core/analysis/tracing_cost.hpp"

namespace tpgraph::cuda {

struct CalibrationShape {
  int nodes = kCalibrationNodes;
  double kernel_us = 1.5;      // each node's spin: short, as the nodes whose records cost the most
  int blocks = 12;             // alternating off, on, off, ...: drifting clocks hit both alike
  int replays_per_block = 40;  // the first of each block is not timed (the switch just happened)
};

// Calibrates on `device`. `set_records(on)` turns CUPTI's activity records on or off; it is left
// off. Throws cuda::CudaError for a failed CUDA call (the caller turns it into "not measured").
[[nodiscard]] CostCalibration calibrate_record_cost(int device, const std::function<void(bool on)>& set_records,
                                                    const CalibrationShape& shape = {});

// tpgraph's ordinal of the visible GPU whose UUID is `uuid` ("GPU-8-4-4-4-12" hex digits, as
// nvidia-smi and the record files write it), or -1 when none is.
[[nodiscard]] int device_with_uuid(std::string_view uuid);

}  // namespace tpgraph::cuda
