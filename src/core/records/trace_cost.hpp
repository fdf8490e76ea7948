// What tracing cost a traced program, as measured (docs/trace.md, "The cost of tracing in every
// report"): two measurements, both real, neither an A/B of the program itself.
//
// 1. tpgraph's own work inside each traced process: the injection library times its CUPTI callbacks
//    (two clock reads each) and its processing of CUPTI's record buffers, and writes the totals as a
//    cost chunk of the record file (trace_file.hpp). Added within format version 1, like the
//    recording and nvtx chunks: files without it read as before, a reader that predates it skips it
//    with a note. Payload, JSON, one object; the last chunk of a file holds the totals:
//      {"callbacks": n, "callback_ns": t, "launch_callback_ns": t, "launches": n,
//       "buffers": n, "buffer_records": n, "buffer_ns": t}
// 2. CUPTI's activity records' cost per kernel node on the GPU the program used, calibrated by
//    `tpgraph trace` after the program exited (src/cuda/record_cost): a chain of short kernels in one
//    graph replayed with records off and on. Written to the trace folder as cost.json:
//      {"measured": true, "gpu": "NVIDIA H200", "device": 0, "nodes": 32, "kernel_us": 1.5,
//       "replays": 240, "off_us": 61.2, "on_us": 75.6, "per_node_us": 0.45}
//      {"measured": false, "reason": "--no-cost"}
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tpgraph {

namespace tracefile {

// A process's cost chunk: what tpgraph's own work in it took (host clock, ns).
struct SelfCost {
  bool present = false;                  // a cost chunk was read
  std::uint64_t callbacks = 0;           // CUPTI callbacks tpgraph handled
  std::uint64_t callback_ns = 0;         // time inside them, in all
  std::uint64_t launch_callback_ns = 0;  // ... of which in graph launch callbacks (entry and exit)
  std::uint64_t launches = 0;            // graph launches seen
  std::uint64_t buffers = 0;             // CUPTI record buffers processed (decoded and written)
  std::uint64_t buffer_records = 0;      // records in them
  std::uint64_t buffer_ns = 0;           // time processing them, on CUPTI's thread
  // A window or sampling turns CUPTI's activity kinds on and off around recorded launches: how often
  // (each switch turns every kind), and the time in CUPTI's enable and disable calls, on the program's
  // threads (part of the launch callbacks' time when a launch switched). 0 in files written before.
  std::uint64_t activity_switches = 0;
  std::uint64_t activity_switch_ns = 0;
};

// --- writing (the injection library) ---
[[nodiscard]] std::string self_cost_chunk(const SelfCost& cost);
// --- reading ---
// Reads one cost chunk into `cost` (a later chunk replaces an earlier one: each holds the totals so
// far); "" or what was wrong with it (the chunk is then skipped).
[[nodiscard]] std::string read_self_cost_chunk(std::string_view payload, SelfCost& cost);

}  // namespace tracefile

// The trace folder's calibration file.
inline constexpr std::string_view kCostFile = "cost.json";
// The calibration's graph: this many kernel nodes in a chain.
inline constexpr int kCalibrationNodes = 32;

// CUPTI's record cost per kernel node, as `tpgraph trace` calibrated it after the program exited.
struct CostCalibration {
  bool measured = false;
  std::string not_measured;  // why not (measured false)
  std::string gpu;           // the device's name
  int device = -1;           // tpgraph's ordinal of it
  int nodes = 0;             // kernel nodes in the calibration graph
  double kernel_us = 0;      // each kernel's spin
  int replays = 0;           // replays timed with records off, and as many on
  double off_us = 0;         // median wall time per replay, records off
  double on_us = 0;          // ... and on
  double per_node_us = 0;    // (on - off) / nodes, at least 0
};

// A calibration that was not made, and why.
[[nodiscard]] CostCalibration cost_not_measured(std::string why);

[[nodiscard]] std::string cost_file_json(const CostCalibration& c);
// cost.json's text (`origin` names it in what is wrong): never throws; a file that cannot be read as
// one gives a calibration not measured that says why.
[[nodiscard]] CostCalibration parse_cost_file(std::string_view text, std::string_view origin);
// Reading and writing the folder's file: read_cost_file and write_cost_file (traced_run.hpp).

// One traced process's own cost, by pid, for the report.
struct ProcessCost {
  std::int64_t pid = 0;
  tracefile::SelfCost self;
};

// What the report of a trace says tracing cost: the calibration, and per process its cost chunk
// ([the merge's process index], VariantRun::own_processes index it).
struct TracingCost {
  CostCalibration calibration;
  std::vector<ProcessCost> processes;
};

}  // namespace tpgraph
