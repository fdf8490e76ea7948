#include "inject/recorder.hpp"

#include <signal.h>

#include <algorithm>
#include <cstdlib>
#include <utility>

#include "core/base/whole_number.hpp"
#include "core/records/trace_recording.hpp"

namespace tpgraph::inject {

namespace {

std::optional<std::uint64_t> env_whole(const char* name, std::vector<std::string>& problems) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0') return std::nullopt;
  const auto n = whole_number<std::uint64_t>(v);
  if (!n) problems.push_back(std::string(name) + "=" + v + " is not a whole number: ignored");
  return n;
}

}  // namespace

recording::Options recording_options_from_env(std::vector<std::string>& problems) {
  recording::Options o;
  constexpr std::uint64_t kMs = 1'000'000;
  if (const auto v = env_whole("TPGRAPH_DELAY_MS", problems)) o.delay_ns = *v * kMs;
  if (const auto v = env_whole("TPGRAPH_DURATION_MS", problems)) o.duration_ns = *v * kMs;
  if (const auto v = env_whole("TPGRAPH_LAUNCHES", problems)) o.launches_per_graph = static_cast<std::uint32_t>(*v);
  if (const auto v = env_whole("TPGRAPH_SAMPLE", problems); v && *v > 0)
    o.sample_every = static_cast<std::uint32_t>(*v);
  if (const auto v = env_whole("TPGRAPH_KEEP_LAST", problems)) o.keep_last = static_cast<std::uint32_t>(*v);
  if (const char* range = std::getenv("TPGRAPH_RANGE"); range != nullptr && range[0] != '\0') {
    const std::string text = range;
    if (text == "profiler") {
      o.range = recording::RangeTrigger::profiler;
    } else if (text.starts_with("nvtx:") && text.size() > 5) {
      o.range = recording::RangeTrigger::nvtx;
      o.nvtx_range = text.substr(5);
    } else {
      problems.push_back("TPGRAPH_RANGE=" + text + " is neither profiler nor nvtx:NAME: ignored");
    }
  }
  if (const auto v = env_whole("TPGRAPH_DUMP_ON", problems))
    o.dump_on = *v == SIGUSR1 ? "SIGUSR1" : *v == SIGUSR2 ? "SIGUSR2" : "signal " + std::to_string(*v);
  return o;
}

Recorder::Recorder(recording::Options options, std::uint64_t start_ns, SelfCostMeter& cost)
    : options_(options), window_(std::move(options), start_ns), flight_(options_.keep_last), cost_(cost) {}

void Recorder::start() {
  const std::lock_guard guard(window_mutex_);
  set_activity_locked(window_.activity_between_launches());
}

void Recorder::set_activity_locked(bool on) {
  if (on == activity_on_) return;
  activity_on_ = on;
  // Activity records are decided when work is submitted: kernels submitted while a kind is off
  // leave no record, so toggling costs nothing to the work outside (docs/trace.md).
  const std::uint64_t start = monotonic_ns();
  for (const CUpti_ActivityKind kind : kActivityKinds)
    (void)(on ? cuptiActivityEnable(kind) : cuptiActivityDisable(kind));
  cost_.add_activity_switch(monotonic_ns() - start);
}

bool Recorder::launch_enter(std::uint32_t exec, std::uint64_t now_ns) {
  const std::lock_guard guard(window_mutex_);
  const recording::LaunchDecision d = window_.launch(exec, now_ns);
  set_activity_locked(d.activity);
  return d.record;
}

void Recorder::launch_exit() {
  const std::lock_guard guard(window_mutex_);
  set_activity_locked(window_.activity_between_launches());
}

void Recorder::profiler(bool start, std::uint64_t now_ns) {
  const std::lock_guard guard(window_mutex_);
  window_.profiler(start, now_ns);
  set_activity_locked(window_.activity_between_launches());
}

bool Recorder::nvtx(std::string_view name, bool open, std::uint64_t now_ns) {
  const std::lock_guard guard(window_mutex_);
  window_.nvtx(name, open, now_ns);
  window_.tick(now_ns);  // a time gate passed since the last launch or tick
  set_activity_locked(window_.activity_between_launches());
  return window_.open();
}

void Recorder::tick(std::uint64_t now_ns) {
  const std::lock_guard guard(window_mutex_);
  window_.tick(now_ns);
  set_activity_locked(window_.activity_between_launches());
}

void Recorder::add_recorded(std::uint32_t correlation_id) { recorded_.add(correlation_id); }

std::vector<bool> Recorder::keep(const std::vector<tracefile::WireRecord>& records) {
  std::vector<bool> out(records.size(), true);
  std::uint64_t filtered = 0;
  for (std::size_t i = 0; i < records.size(); ++i)
    if (records[i].graph_node_id != 0 && !recorded_.contains(records[i].correlation_id)) {
      out[i] = false;
      ++filtered;
    }
  filtered_.fetch_add(filtered, std::memory_order_relaxed);
  return out;
}

std::string Recorder::take_event_chunks() {
  std::vector<recording::WindowEvent> events;
  {
    const std::lock_guard guard(window_mutex_);
    events = window_.take_events();
  }
  std::string out;
  for (const auto& e : events)
    out += tracefile::recording_event_chunk(e.open ? "open" : "close", e.at_ns, recording::reason_name(e.reason));
  return out;
}

std::string Recorder::counts_chunk() {
  std::vector<tracefile::RecordingCount> counts;
  std::uint64_t left_out = 0;
  {
    const std::lock_guard guard(window_mutex_);
    for (const auto& [exec, c] : window_.counts()) counts.push_back({exec, c.seen, c.in_window, c.recorded});
    left_out = window_.transitions_left_out();
  }
  std::sort(counts.begin(), counts.end(), [](const auto& a, const auto& b) { return a.exec < b.exec; });
  const std::uint64_t filtered = filtered_.load(std::memory_order_relaxed);
  std::uint64_t evicted = 0;
  {
    const std::lock_guard guard(flight_mutex_);
    evicted = flight_.launches_evicted();
  }
  return tracefile::recording_counts_chunk(counts, filtered, evicted, left_out);
}

void Recorder::flight_add_records(const std::vector<tracefile::WireRecord>& records) {
  const std::lock_guard guard(flight_mutex_);
  flight_.add_records(records);
}

void Recorder::flight_add_launches(const std::vector<tracefile::WireLaunch>& launches) {
  const std::lock_guard guard(flight_mutex_);
  for (const tracefile::WireLaunch& launch : launches) flight_.add_launch(launch);
}

void Recorder::flight_add_launches(const std::vector<tracefile::WireLaunch>& launches,
                                   std::unique_lock<std::mutex>& state) {
  if (launches.empty()) return;
  const std::lock_guard guard(flight_mutex_);
  state.unlock();
  for (const tracefile::WireLaunch& launch : launches) flight_.add_launch(launch);
}

recording::FlightRecorder::Dump Recorder::flight_take() {
  const std::lock_guard guard(flight_mutex_);
  return flight_.take();
}

}  // namespace tpgraph::inject
