#include "core/records/recording_window.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <bit>
#include <utility>

namespace tpgraph::recording {

namespace {

std::string seconds(std::uint64_t ns) { return fmt::format("{:g} s", static_cast<double>(ns) / 1e9); }

}  // namespace

std::string Options::describe() const {
  std::vector<std::string> parts;
  if (delay_ns > 0 || duration_ns > 0)
    parts.push_back(fmt::format("window from {} after start{}", seconds(delay_ns),
                                duration_ns > 0 ? " for " + seconds(duration_ns) : std::string()));
  if (range == RangeTrigger::profiler) parts.emplace_back("between the program's cudaProfilerStart and Stop");
  if (range == RangeTrigger::nvtx) parts.push_back(fmt::format("while NVTX range \"{}\" is open", nvtx_range));
  if (launches_per_graph > 0) parts.push_back(fmt::format("the first {} launches of each graph", launches_per_graph));
  if (sample_every > 1) parts.push_back(fmt::format("sampled: 1 launch in {} of each graph", sample_every));
  if (keep_last > 0)
    parts.push_back(fmt::format("flight recorder: the last {} launches of each graph, written at exit{}", keep_last,
                                dump_on.empty() ? std::string() : ", crash or " + dump_on));
  if (parts.empty()) return "everything";
  std::string out;
  for (const auto& p : parts) out += (out.empty() ? "" : "; ") + p;
  return out;
}

std::string_view reason_name(Reason r) {
  switch (r) {
    case Reason::start: return "start";
    case Reason::delay_elapsed: return "delay elapsed";
    case Reason::duration_elapsed: return "duration elapsed";
    case Reason::profiler_start: return "cudaProfilerStart";
    case Reason::profiler_stop: return "cudaProfilerStop";
    case Reason::nvtx_open: return "NVTX range opened";
    case Reason::nvtx_close: return "NVTX range closed";
  }
  return "unknown";
}

Window::Window(Options options, std::uint64_t start_ns) : options_(std::move(options)), start_ns_(start_ns) {
  time_open_ = time_gate(start_ns);
  open_ = time_open_ && range_gate();
  if (open_) transition({true, start_ns, Reason::start});
}

void Window::transition(WindowEvent e) {
  if (transitions_++ < kMaxTransitions) events_.push_back(e);
  else ++transitions_left_out_;
}

bool Window::time_gate(std::uint64_t now_ns) const {
  const std::uint64_t elapsed = now_ns > start_ns_ ? now_ns - start_ns_ : 0;
  if (elapsed < options_.delay_ns) return false;
  return options_.duration_ns == 0 || elapsed - options_.delay_ns < options_.duration_ns;
}

bool Window::range_gate() const {
  switch (options_.range) {
    case RangeTrigger::none: return true;
    case RangeTrigger::profiler: return profiler_open_;
    case RangeTrigger::nvtx: return nvtx_open_ > 0;
  }
  return true;
}

void Window::update(std::uint64_t now_ns, Reason range_reason) {
  const bool time_now = time_gate(now_ns);
  const bool time_changed = time_now != time_open_;
  time_open_ = time_now;
  const bool now_open = time_open_ && range_gate();
  if (now_open == open_) return;
  open_ = now_open;
  Reason reason = range_reason;
  if (time_changed) reason = time_open_ ? Reason::delay_elapsed : Reason::duration_elapsed;
  transition({open_, now_ns, reason});
}

void Window::tick(std::uint64_t now_ns) { update(now_ns, Reason::start); }

void Window::profiler(bool start, std::uint64_t now_ns) {
  profiler_open_ = start;
  update(now_ns, start ? Reason::profiler_start : Reason::profiler_stop);
}

void Window::nvtx(std::string_view name, bool open, std::uint64_t now_ns) {
  if (options_.range != RangeTrigger::nvtx || name != options_.nvtx_range) return;
  nvtx_open_ += open ? 1 : -1;
  if (nvtx_open_ < 0) nvtx_open_ = 0;  // a close whose open came before the library started
  update(now_ns, open ? Reason::nvtx_open : Reason::nvtx_close);
}

LaunchDecision Window::launch(std::uint32_t exec, std::uint64_t now_ns) {
  update(now_ns, Reason::start);
  LaunchCount& c = counts_[exec];
  ++c.seen;
  LaunchDecision d;
  if (open_) {
    const bool under_limit = options_.launches_per_graph == 0 || c.recorded < options_.launches_per_graph;
    const bool sampled = options_.sample_every <= 1 || c.in_window % options_.sample_every == 0;
    ++c.in_window;
    d.record = under_limit && sampled;
    if (d.record) ++c.recorded;
  }
  d.activity = d.record || activity_between_launches();
  return d;
}

bool Window::activity_between_launches() const { return open_ && !options_.some_launches(); }

std::vector<WindowEvent> Window::take_events() { return std::exchange(events_, {}); }

RecordedLaunches::RecordedLaunches(std::size_t slots)
    : mask_(std::bit_ceil(std::max<std::size_t>(slots, 1)) - 1), slots_(new std::atomic<std::uint32_t>[mask_ + 1]) {
  for (std::size_t i = 0; i <= mask_; ++i) slots_[i].store(0, std::memory_order_relaxed);
}

void RecordedLaunches::add(std::uint32_t correlation_id) noexcept {
  slots_[correlation_id & mask_].store(correlation_id, std::memory_order_release);
}

bool RecordedLaunches::contains(std::uint32_t correlation_id) const noexcept {
  return correlation_id != 0 && slots_[correlation_id & mask_].load(std::memory_order_acquire) == correlation_id;
}

}  // namespace tpgraph::recording
