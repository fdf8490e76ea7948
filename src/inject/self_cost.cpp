#include "inject/self_cost.hpp"

#include <time.h>

#include <algorithm>

namespace tpgraph::inject {

std::uint64_t monotonic_ns() noexcept {
  timespec t{};
  if (clock_gettime(CLOCK_MONOTONIC, &t) != 0) return 0;
  return static_cast<std::uint64_t>(t.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(t.tv_nsec);
}

void SelfCostMeter::add_callback(std::uint64_t ns, bool launch) noexcept {
  callbacks_.fetch_add(1, std::memory_order_relaxed);
  callback_ns_.fetch_add(ns, std::memory_order_relaxed);
  if (launch) launch_callback_ns_.fetch_add(ns, std::memory_order_relaxed);
}

void SelfCostMeter::add_buffer(std::uint64_t ns, std::uint64_t records) noexcept {
  buffers_.fetch_add(1, std::memory_order_relaxed);
  buffer_records_.fetch_add(records, std::memory_order_relaxed);
  buffer_ns_.fetch_add(ns, std::memory_order_relaxed);
}

void SelfCostMeter::add_activity_switch(std::uint64_t ns) noexcept {
  activity_switches_.fetch_add(1, std::memory_order_relaxed);
  activity_switch_ns_.fetch_add(ns, std::memory_order_relaxed);
}

tracefile::SelfCost SelfCostMeter::totals(std::uint64_t launches) const noexcept {
  tracefile::SelfCost c;
  c.present = true;
  c.callbacks = callbacks_.load(std::memory_order_relaxed);
  c.callback_ns = callback_ns_.load(std::memory_order_relaxed);
  // A callback that ends between these loads may be in one and not the other: never more than all.
  c.launch_callback_ns = std::min(launch_callback_ns_.load(std::memory_order_relaxed), c.callback_ns);
  c.launches = launches;
  c.buffers = buffers_.load(std::memory_order_relaxed);
  c.buffer_records = buffer_records_.load(std::memory_order_relaxed);
  c.buffer_ns = buffer_ns_.load(std::memory_order_relaxed);
  c.activity_switches = activity_switches_.load(std::memory_order_relaxed);
  c.activity_switch_ns = activity_switch_ns_.load(std::memory_order_relaxed);
  return c;
}

}  // namespace tpgraph::inject
