// A work queue over std::thread for the CPU reference and the weight generator. Items are handed out
// by a shared counter; each item's result depends only on the item, never on which worker ran it or
// how many workers there are.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace tpgraph {

[[nodiscard]] inline int worker_count(std::int64_t items) {
  const auto hw = static_cast<std::int64_t>(std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<int>(std::max<std::int64_t>(1, std::min(hw, items)));
}

// body(item, worker) for item in [0, count); worker in [0, workers) indexes per-worker scratch.
// The first exception thrown by a body stops the hand-out and is rethrown here.
template <class Body>
void parallel_for(std::int64_t count, int workers, Body&& body) {
  if (count <= 0) return;
  std::atomic<std::int64_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto work = [&](int worker) {
    for (std::int64_t item = next.fetch_add(1); item < count; item = next.fetch_add(1)) {
      try {
        body(item, worker);
      } catch (...) {
        const std::lock_guard lock(failure_mutex);
        if (!failure) failure = std::current_exception();
        next.store(count);
      }
    }
  };
  if (workers <= 1) {
    work(0);
  } else {
    std::vector<std::thread> threads;
    threads.reserve(static_cast<std::size_t>(workers - 1));
    for (int w = 1; w < workers; ++w) threads.emplace_back(work, w);
    work(0);
    for (auto& t : threads) t.join();
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace tpgraph
