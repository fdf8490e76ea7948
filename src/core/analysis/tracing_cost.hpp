// What tracing cost a traced program, itemised from the two measurements a trace holds
// (records/trace_cost.hpp): per process, tpgraph's own host time per graph launch and per record;
// per graph, an estimate per launch
//   records per launch x CUPTI's calibrated cost per kernel node + tpgraph's callbacks per launch,
// and its share of the graph's median span. The CUPTI share comes from a chain of short kernels on
// the same GPU model after the run, not from an A/B of this program: where a graph's nodes run in
// parallel branches their record costs overlap, so it is an upper estimate there.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/records/run_data.hpp"

namespace tpgraph {

// One process's own cost: measured where its file has a cost chunk.
struct ProcessTracingCost {
  std::int64_t pid = 0;
  std::string not_measured;                        // "" when measured; else why not
  std::uint64_t launches = 0;                      // graph launches the process made
  std::optional<double> us_per_launch;             // its launch callbacks' time per launch (none: no launch)
  double other_callbacks_ms = 0;                   // its other callbacks (instantiation, contexts, captures), in all
  std::uint64_t records = 0;                       // records it processed
  std::optional<double> processing_us_per_record;  // on CUPTI's thread (none: no record)
  std::uint64_t activity_switches = 0;             // CUPTI's activity turned on or off (a window, sampling)
  std::optional<double> us_per_activity_switch;    // time in CUPTI's calls per switch (none: no switch)
};

struct TracingCostAnalysis {
  CostCalibration calibration;
  std::vector<ProcessTracingCost> processes;  // in the merge's process order
  // Nothing was measured (a trace folder older than the measurement): the report says so in one line.
  [[nodiscard]] bool nothing_measured() const;
};

// One graph's estimated cost per launch; a part not measured is absent and said why.
struct GraphTracingCost {
  double records_per_launch = 0;        // median over launches with records (a while body's per iteration)
  std::optional<double> cupti_us;       // records_per_launch x calibration.per_node_us
  double cupti_us_per_node = 0;         // the calibration's
  std::string gpu;                      // the GPU it was calibrated on
  std::optional<double> tpgraph_us;     // the launch callbacks' time per launch, the slowest of its processes
  double total_us = 0;                  // the parts measured
  std::optional<double> span_fraction;  // total_us / median span (none: no span)
  std::string cupti_not_measured;       // why cupti_us is absent
  std::string tpgraph_not_measured;     // why tpgraph_us is absent
};

// The calibration from the wall times of the replays made with records off and on: the medians,
// and their difference per node clamped at 0 (records cannot make a graph faster; a negative
// difference is noise). Not measured when either list is empty or holds a time that is not a
// positive finite number.
[[nodiscard]] CostCalibration calibration_from_walls(const std::vector<double>& off_us,
                                                     const std::vector<double>& on_us, int nodes);

[[nodiscard]] TracingCostAnalysis analyze_tracing_cost(const TracingCost& cost);
// The process's figures from its cost chunk.
[[nodiscard]] ProcessTracingCost process_tracing_cost(const ProcessCost& process);
// A graph's estimate, or nullopt when neither part was measured for it. `records_per_launch` and
// `median_span_us` (0: none) are the analysis's.
[[nodiscard]] std::optional<GraphTracingCost> graph_tracing_cost(const TracingCostAnalysis& cost,
                                                                 const std::vector<int>& own_processes,
                                                                 double records_per_launch, double median_span_us);
// The median over replays of a variant's records per replay (replays without a record left out).
[[nodiscard]] double records_per_launch(const VariantRun& v);

}  // namespace tpgraph
