// What tpgraph's own work costs inside the traced process: the time in its CUPTI callbacks (on the
// program's threads) and in processing CUPTI's record buffers (on CUPTI's thread), written at exit
// as the record file's cost chunk (core/records/trace_cost.hpp). A callback pays two reads of the
// monotonic clock (vDSO, no system call) and two relaxed atomic adds: no lock, nothing thread-local.
#pragma once
#include <atomic>
#include <cstdint>

#include "core/records/trace_cost.hpp"

namespace tpgraph::inject {

// CLOCK_MONOTONIC in ns: what the meter's spans are taken on (not CUPTI's clock, whose read is a
// library call).
[[nodiscard]] std::uint64_t monotonic_ns() noexcept;

class SelfCostMeter {
 public:
  // Times one callback from construction to destruction.
  class Callback {
   public:
    Callback(SelfCostMeter& meter, bool launch) noexcept : meter_(meter), launch_(launch), start_(monotonic_ns()) {}
    ~Callback() { meter_.add_callback(monotonic_ns() - start_, launch_); }
    Callback(const Callback&) = delete;
    Callback& operator=(const Callback&) = delete;

   private:
    SelfCostMeter& meter_;
    bool launch_;
    std::uint64_t start_;
  };

  void add_callback(std::uint64_t ns, bool launch) noexcept;
  void add_buffer(std::uint64_t ns, std::uint64_t records) noexcept;
  // One switch of CUPTI's activity kinds on or off (a window's edge, a sampled launch).
  void add_activity_switch(std::uint64_t ns) noexcept;
  // The totals so far, with the graph launches the tracer counted.
  [[nodiscard]] tracefile::SelfCost totals(std::uint64_t launches) const noexcept;

 private:
  std::atomic<std::uint64_t> callbacks_{0};
  std::atomic<std::uint64_t> callback_ns_{0};
  std::atomic<std::uint64_t> launch_callback_ns_{0};
  std::atomic<std::uint64_t> buffers_{0};
  std::atomic<std::uint64_t> buffer_records_{0};
  std::atomic<std::uint64_t> buffer_ns_{0};
  std::atomic<std::uint64_t> activity_switches_{0};
  std::atomic<std::uint64_t> activity_switch_ns_{0};
};

}  // namespace tpgraph::inject
