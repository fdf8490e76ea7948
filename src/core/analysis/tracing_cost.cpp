#include "core/analysis/tracing_cost.hpp"

#include <algorithm>
#include <cmath>

#include "core/base/stats.hpp"

namespace tpgraph {

namespace {

constexpr double kNsPerUs = 1000.0;

bool all_positive(const std::vector<double>& values) {
  for (const double v : values)
    if (!std::isfinite(v) || v <= 0) return false;
  return true;
}

// The tpgraph part of a graph's estimate: the slowest of its processes per launch; why not otherwise.
std::optional<double> slowest_launch_cost(const TracingCostAnalysis& cost, const std::vector<int>& own_processes,
                                          std::string& why_not) {
  std::optional<double> slowest;
  for (const int p : own_processes) {
    if (p < 0 || static_cast<std::size_t>(p) >= cost.processes.size()) continue;
    const ProcessTracingCost& pc = cost.processes[static_cast<std::size_t>(p)];
    if (!pc.not_measured.empty()) {
      why_not = pc.not_measured;
      return std::nullopt;  // one process not measured: no figure that claims to be the slowest
    }
    if (pc.us_per_launch) slowest = std::max(slowest.value_or(0.0), *pc.us_per_launch);
  }
  if (!slowest && why_not.empty()) why_not = "no graph launch of its processes was timed";
  return slowest;
}

}  // namespace

CostCalibration calibration_from_walls(const std::vector<double>& off_us, const std::vector<double>& on_us, int nodes) {
  if (off_us.empty() || on_us.empty() || nodes <= 0) return cost_not_measured("the calibration replays gave no time");
  if (!all_positive(off_us) || !all_positive(on_us))
    return cost_not_measured("the calibration replays gave a time that is not a positive number");
  CostCalibration c;
  c.measured = true;
  c.nodes = nodes;
  c.replays = static_cast<int>(std::min(off_us.size(), on_us.size()));
  c.off_us = stats::median(off_us);
  c.on_us = stats::median(on_us);
  c.per_node_us = std::max(0.0, (c.on_us - c.off_us) / nodes);
  return c;
}

bool TracingCostAnalysis::nothing_measured() const {
  return !calibration.measured &&
         std::none_of(processes.begin(), processes.end(), [](const auto& p) { return p.not_measured.empty(); });
}

ProcessTracingCost process_tracing_cost(const ProcessCost& process) {
  ProcessTracingCost out;
  out.pid = process.pid;
  const tracefile::SelfCost& s = process.self;
  if (!s.present) {
    out.not_measured = "its record file has no cost chunk (written by an older tpgraph, or the process did not exit)";
    return out;
  }
  out.launches = s.launches;
  if (s.launches > 0)
    out.us_per_launch = static_cast<double>(s.launch_callback_ns) / kNsPerUs / static_cast<double>(s.launches);
  out.other_callbacks_ms = static_cast<double>(s.callback_ns - s.launch_callback_ns) / 1e6;
  out.records = s.buffer_records;
  if (s.buffer_records > 0)
    out.processing_us_per_record = static_cast<double>(s.buffer_ns) / kNsPerUs / static_cast<double>(s.buffer_records);
  out.activity_switches = s.activity_switches;
  if (s.activity_switches > 0)
    out.us_per_activity_switch =
        static_cast<double>(s.activity_switch_ns) / kNsPerUs / static_cast<double>(s.activity_switches);
  return out;
}

TracingCostAnalysis analyze_tracing_cost(const TracingCost& cost) {
  TracingCostAnalysis out;
  out.calibration = cost.calibration;
  for (const auto& p : cost.processes) out.processes.push_back(process_tracing_cost(p));
  return out;
}

std::optional<GraphTracingCost> graph_tracing_cost(const TracingCostAnalysis& cost,
                                                   const std::vector<int>& own_processes, double records_per_launch,
                                                   double median_span_us) {
  GraphTracingCost g;
  g.records_per_launch = records_per_launch;
  if (cost.calibration.measured) {
    g.cupti_us_per_node = cost.calibration.per_node_us;
    g.cupti_us = records_per_launch * g.cupti_us_per_node;
    g.gpu = cost.calibration.gpu;
  } else {
    g.cupti_not_measured = cost.calibration.not_measured;
  }
  g.tpgraph_us = slowest_launch_cost(cost, own_processes, g.tpgraph_not_measured);
  if (!g.cupti_us && !g.tpgraph_us) return std::nullopt;
  g.total_us = g.cupti_us.value_or(0.0) + g.tpgraph_us.value_or(0.0);
  if (median_span_us > 0) g.span_fraction = g.total_us / median_span_us;
  return g;
}

double records_per_launch(const VariantRun& v) {
  std::vector<double> counts;  // [replay]
  for (const auto& r : v.records) {
    if (r.replay < 0 || r.node < 0) continue;
    const auto replay = static_cast<std::size_t>(r.replay);
    if (replay >= counts.size()) counts.resize(replay + 1, 0.0);
    counts[replay] += 1;
  }
  std::erase(counts, 0.0);
  return counts.empty() ? 0.0 : stats::median(std::move(counts));
}

}  // namespace tpgraph
