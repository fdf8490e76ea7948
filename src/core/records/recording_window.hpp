// What the injection library records of a program that may never exit (`tpgraph trace --delay,
// --duration, --launches, --profiler-range, --nvtx-range, --sample`): one GPU-free state machine
// fed the process's clock, its graph launches and the ranges the program opens, answering per launch
// whether that launch is recorded and whether CUPTI's activity should be on. The injection library
// turns CUPTI's activity kinds on and off to follow it (docs/trace.md, "Windows, sampling and the
// flight recorder"); the unit tests feed it fabricated sequences.
//
// The window is open while every gate the options set is open:
//   time    [start + delay, start + delay + duration) on the process's clock (duration 0: no end)
//   range   the program's own range: between cudaProfilerStart and cudaProfilerStop, or while an
//           NVTX range of the given name is open on any thread
// A launch is recorded when the window is open at its call, its graph has had fewer than
// `launches_per_graph` launches recorded (0: no limit), and it is the k-th launch of its graph inside
// the window with k % sample_every == 0 (the first of each N, so a graph launched once is seen).
//
// Activity: on while the window is open, except that with sampling or a launch count it is on only
// during the call of a launch that is recorded (a graph launched less often than the count would
// otherwise keep it on, and every eager kernel of the program recorded, for as long as the window
// stays open); off outside the window, so the program runs at its untraced speed there.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tpgraph::recording {

enum class RangeTrigger : std::uint8_t { none, profiler, nvtx };

struct Options {
  std::uint64_t delay_ns = 0;
  std::uint64_t duration_ns = 0;         // 0: the window never closes on time
  std::uint32_t launches_per_graph = 0;  // 0: no limit
  RangeTrigger range = RangeTrigger::none;
  std::string nvtx_range;          // the range's name when range == nvtx
  std::uint32_t sample_every = 1;  // 1: every launch
  std::uint32_t keep_last = 0;     // flight recorder: launches kept per graph (0: write as recorded)
  std::string dump_on;             // flight recorder: the signal that writes it ("SIGUSR1"), "" none

  // Sampling or a launch count: only some launches of a graph are recorded, so CUPTI's activity is
  // on only in their calls and NVTX ranges are kept only around them.
  [[nodiscard]] bool some_launches() const { return sample_every > 1 || launches_per_graph > 0; }
  // No window, no sampling, no flight recorder: record everything as it comes (the default).
  [[nodiscard]] bool records_everything() const {
    return delay_ns == 0 && duration_ns == 0 && launches_per_graph == 0 && range == RangeTrigger::none &&
           sample_every <= 1 && keep_last == 0;
  }
  // One line for the report: "window 20 s after start for 5 s; 1 launch in 100 of each graph".
  [[nodiscard]] std::string describe() const;
};

// Why the window opened or closed.
enum class Reason : std::uint8_t {
  start,             // open from the start
  delay_elapsed,     // --delay passed
  duration_elapsed,  // --duration passed
  profiler_start,    // cudaProfilerStart
  profiler_stop,     // cudaProfilerStop
  nvtx_open,         // the named NVTX range opened
  nvtx_close,        // ... and closed
};
[[nodiscard]] std::string_view reason_name(Reason r);

struct WindowEvent {
  bool open = false;
  std::uint64_t at_ns = 0;
  Reason reason = Reason::start;
};

struct LaunchDecision {
  bool record = false;    // this launch's records are kept
  bool activity = false;  // CUPTI's activity on while the launch call runs
};

// Launches of one executable graph: seen at all, inside the window, recorded.
struct LaunchCount {
  std::uint64_t seen = 0;
  std::uint64_t in_window = 0;
  std::uint64_t recorded = 0;
};

class Window {
 public:
  Window(Options options, std::uint64_t start_ns);

  // The clock moved on (the flush thread calls it; launches and ranges call it too).
  void tick(std::uint64_t now_ns);
  void profiler(bool start, std::uint64_t now_ns);
  // A range opened (true) or closed on some thread; `name` is compared with the option's name.
  void nvtx(std::string_view name, bool open, std::uint64_t now_ns);

  // At the call of a launch of executable `exec` (0: unknown).
  LaunchDecision launch(std::uint32_t exec, std::uint64_t now_ns);
  // Activity between launches (also right after a launch call returns).
  [[nodiscard]] bool activity_between_launches() const;
  [[nodiscard]] bool open() const { return open_; }

  // Transitions since the last call, oldest first: the first kMaxTransitions of the run (a range
  // window of a server opens and closes at every step), the rest only counted.
  static constexpr std::uint64_t kMaxTransitions = 64;
  [[nodiscard]] std::vector<WindowEvent> take_events();
  [[nodiscard]] std::uint64_t transitions_left_out() const { return transitions_left_out_; }
  [[nodiscard]] const std::unordered_map<std::uint32_t, LaunchCount>& counts() const { return counts_; }
  [[nodiscard]] const Options& options() const { return options_; }

 private:
  [[nodiscard]] bool time_gate(std::uint64_t now_ns) const;
  [[nodiscard]] bool range_gate() const;
  void update(std::uint64_t now_ns, Reason range_reason);

  Options options_;
  std::uint64_t start_ns_ = 0;
  bool open_ = false;
  bool time_open_ = false;
  bool profiler_open_ = false;
  std::int64_t nvtx_open_ = 0;  // matching ranges open on all threads
  std::unordered_map<std::uint32_t, LaunchCount> counts_;
  std::vector<WindowEvent> events_;
  std::uint64_t transitions_ = 0;
  std::uint64_t transitions_left_out_ = 0;
  void transition(WindowEvent e);
};

// The correlation ids of recorded launches, so graph records of launches that were not recorded
// (a launch caught half-way at a window's edge, a launch of another thread inside a sampled
// launch's call) are dropped rather than analysed as incomplete replays. Lock-free: the program's
// launch callbacks add while the record thread asks, neither waits for the other. One slot per id
// modulo `slots` (a power of two): an id is forgotten once a later id of the same slot is added,
// `slots` correlation ids on (CUDA calls, not launches; records arrive within seconds of their
// launch). Never a false "recorded": a slot answers only for the id it holds.
class RecordedLaunches {
 public:
  explicit RecordedLaunches(std::size_t slots = std::size_t{1} << 20);
  void add(std::uint32_t correlation_id) noexcept;
  [[nodiscard]] bool contains(std::uint32_t correlation_id) const noexcept;

 private:
  std::size_t mask_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> slots_;  // 0: empty (CUPTI's correlation ids start at 1)
};

}  // namespace tpgraph::recording
