// `tpgraph trace`'s last GPU step: CUPTI's record cost per kernel node calibrated on the GPU the
// program used, after it exited (src/cuda/record_cost), or why not. Never throws: a trace is not
// lost to its cost's measurement.
#pragma once
#include "core/records/trace_cost.hpp"
#include "core/records/traced_run.hpp"

namespace tpgraph::cli {

// Not measured, with the reason, where there is nothing to calibrate for (`skip`: --no-cost; the
// trace recorded no graph record), no GPU, or CUPTI cannot be subscribed; else the calibration on
// the device of the first process that recorded graph work (device 0 where its UUID is not
// visible to tpgraph).
[[nodiscard]] CostCalibration calibrate_for_trace(const TracedRun& traced, bool skip) noexcept;

}  // namespace tpgraph::cli
