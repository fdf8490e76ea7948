#include "cli/trace_cost.hpp"

#include <fmt/core.h>

#include <exception>
#include <memory>
#include <string>

#include "cuda/devices.hpp"
#include "cuda/record_cost.hpp"
#include "cupti/collector.hpp"

namespace tpgraph::cli {

namespace {

// The GPU the program's graphs ran on: the first process with graph records, its first device.
int program_device(const TracedRun& traced) {
  for (const auto& p : traced.processes) {
    if (p.graph_records == 0) continue;
    for (const auto& uuid : p.device_uuids)
      if (const int d = cuda::device_with_uuid(uuid); d >= 0) return d;
    return 0;
  }
  return 0;
}

// Why there is nothing to calibrate, or "".
std::string nothing_to_calibrate(const TracedRun& traced, bool skip) {
  if (skip) return "--no-cost";
  if (!traced.run.trace || traced.run.trace->records == 0) return "the program's trace recorded no graph record";
  if (cuda::query_devices().empty()) return "no CUDA GPU is visible to tpgraph";
  return {};
}

CostCalibration calibrate(int device) {
  std::unique_ptr<cupti::Collector> records;
  try {
    records = std::make_unique<cupti::Collector>(cupti::Collector::Coverage::trace_records);
  } catch (const std::exception& e) {
    return cost_not_measured(fmt::format("CUPTI cannot be subscribed: {}", e.what()));
  }
  return cuda::calibrate_record_cost(device, [&](bool on) { records->set_tracing(on); });
}

}  // namespace

CostCalibration calibrate_for_trace(const TracedRun& traced, bool skip) noexcept {
  try {
    if (std::string why = nothing_to_calibrate(traced, skip); !why.empty()) return cost_not_measured(std::move(why));
    return calibrate(program_device(traced));
  } catch (const std::exception& e) {
    try {
      return cost_not_measured(e.what());
    } catch (...) {
    }
  } catch (...) {
  }
  return {};
}

}  // namespace tpgraph::cli
