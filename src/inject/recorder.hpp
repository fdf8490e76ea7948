// What the injection library records when `trace` asks for less than everything (a window,
// sampling, a launch count, the flight recorder): the GPU-free decisions of core/records'
// recording::Window and recording::FlightRecorder, and the CUPTI side of them — turning the
// activity kinds on and off, remembering which launches were recorded, the dump signal. The
// tracer asks it per launch and per record buffer; with the default options it is never built.
#pragma once
#include <cupti.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/records/flight_recorder.hpp"
#include "core/records/recording_window.hpp"
#include "core/records/trace_file.hpp"
#include "inject/self_cost.hpp"

namespace tpgraph::inject {

// GRAPH_TRACE must never be among these: it replaces every per-node kernel record with one record
// per graph launch (measured on the H200).
inline constexpr std::array kActivityKinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                              CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET};

// The options from the environment `trace` sets (docs/trace.md): TPGRAPH_DELAY_MS,
// TPGRAPH_DURATION_MS, TPGRAPH_LAUNCHES, TPGRAPH_RANGE ("profiler" or "nvtx:NAME"), TPGRAPH_SAMPLE,
// TPGRAPH_KEEP_LAST, TPGRAPH_DUMP_ON (a signal number). A value that does not parse is ignored
// with a note (trace checked it already; a hand-set variable may be wrong).
recording::Options recording_options_from_env(std::vector<std::string>& problems);

class Recorder {
 public:
  // `cost`: where each switch of the activity kinds is counted and timed (outlives the recorder).
  Recorder(recording::Options options, std::uint64_t start_ns, SelfCostMeter& cost);
  // CUPTI is started with every activity kind on: turn them off now if the window is closed.
  void start();

  // A launch call begins on this thread: whether it is recorded. Turns the activity on for it
  // when it is recorded and the activity is off.
  bool launch_enter(std::uint32_t exec, std::uint64_t now_ns);
  // ... and returns: the activity as it should be between launches.
  void launch_exit();
  void profiler(bool start, std::uint64_t now_ns);
  // A range opened or closed: whether the window is open after it (NVTX ranges are recorded then).
  bool nvtx(std::string_view name, bool open, std::uint64_t now_ns);
  void tick(std::uint64_t now_ns);

  // The correlation id of a recorded launch (the runtime call's and its driver call's).
  void add_recorded(std::uint32_t correlation_id);
  // Per record: kept, or a graph record of a launch not recorded (dropped, counted). Eager records
  // are kept.
  [[nodiscard]] std::vector<bool> keep(const std::vector<tracefile::WireRecord>& records);

  [[nodiscard]] bool keeps_last() const { return options_.keep_last > 0; }
  // Only some launches of a graph are recorded (sampling, a launch count): NVTX ranges are kept
  // only where a recorded launch is made inside them (NvtxLog::open_deferred).
  [[nodiscard]] bool defers_ranges() const { return options_.some_launches(); }
  // The flight recorder, behind a lock of its own: the flush thread adds a buffer's records without
  // holding the tracer's state lock, which the program's launch callbacks take.
  void flight_add_records(const std::vector<tracefile::WireRecord>& records);
  void flight_add_launches(const std::vector<tracefile::WireLaunch>& launches);
  // The same, handed over from the tracer's state lock: the recorder's lock is taken, then `state`
  // let go, so the program's launch callbacks do not wait while older launches are evicted.
  void flight_add_launches(const std::vector<tracefile::WireLaunch>& launches, std::unique_lock<std::mutex>& state);
  [[nodiscard]] recording::FlightRecorder::Dump flight_take();

  // Window transitions since the last call, as recording chunks.
  [[nodiscard]] std::string take_event_chunks();
  // The counts chunk written at exit.
  [[nodiscard]] std::string counts_chunk();

  // Set from the dump signal's handler (async-signal-safe); the flush thread dumps.
  std::atomic<bool> dump_requested{false};
  [[nodiscard]] const recording::Options& options() const { return options_; }

 private:
  void set_activity_locked(bool on);

  recording::Options options_;
  std::mutex window_mutex_;  // guards window_ and activity_on_
  recording::Window window_;
  bool activity_on_ = true;               // start_cupti enabled the kinds
  recording::RecordedLaunches recorded_;  // lock-free: the launch callbacks add, the record thread asks
  std::atomic<std::uint64_t> filtered_{0};
  std::mutex flight_mutex_;  // guards flight_; taken after the tracer's state lock, never before
  recording::FlightRecorder flight_;
  SelfCostMeter& cost_;
};

}  // namespace tpgraph::inject
