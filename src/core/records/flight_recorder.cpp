#include "core/records/flight_recorder.hpp"

#include <algorithm>

namespace tpgraph::recording {

using tracefile::WireLaunch;
using tracefile::WireRecord;

void FlightRecorder::add_records(const std::vector<WireRecord>& records) {
  for (const WireRecord& r : records) {
    if (r.graph_node_id == 0) {
      ++eager_dropped_;
      continue;
    }
    if (const auto it = kept_.find(r.correlation_id); it != kept_.end()) {
      it->second.records.push_back(r);
      continue;
    }
    auto [wait, added] = waiting_.try_emplace(r.correlation_id);
    if (added) waiting_order_.push_back(r.correlation_id);
    wait->second.push_back(r);
    ++waiting_records_;
  }
  // Bounded: records whose launch never comes (a launch not recorded, the other id of a runtime
  // launch's driver call) leave in the order they came.
  while (waiting_records_ > kMaxWaitingRecords && !waiting_order_.empty()) {
    const auto it = waiting_.find(waiting_order_.front());
    waiting_order_.pop_front();
    if (it == waiting_.end()) continue;
    waiting_records_ -= it->second.size();
    records_dropped_ += it->second.size();
    waiting_.erase(it);
  }
}

void FlightRecorder::add_launch(const WireLaunch& launch) {
  if (keep_last_ == 0) return;
  Kept k{launch, {}};
  if (const auto it = waiting_.find(launch.correlation_id); it != waiting_.end()) {
    k.records = std::move(it->second);
    waiting_records_ -= k.records.size();
    waiting_.erase(it);  // its entry in waiting_order_ is skipped when it comes up
  }
  if (const auto old = kept_.find(launch.correlation_id); old != kept_.end()) {
    // The same id twice (ids wrapped around): the older launch leaves.
    records_dropped_ += old->second.records.size();
    auto& ids = ring_[old->second.launch.exec];
    ids.erase(std::remove(ids.begin(), ids.end(), launch.correlation_id), ids.end());
    kept_.erase(old);
    ++launches_evicted_;
  }
  auto& ids = ring_[launch.exec];
  ids.push_back(launch.correlation_id);
  kept_.emplace(launch.correlation_id, std::move(k));
  while (ids.size() > keep_last_) {
    const auto gone = kept_.find(ids.front());
    ids.pop_front();
    if (gone == kept_.end()) continue;
    kept_.erase(gone);
    ++launches_evicted_;
  }
  if (waiting_order_.size() > 2 * kMaxWaitingRecords) {
    // Ids whose records were claimed: compact the order list now and then.
    std::erase_if(waiting_order_, [&](std::uint32_t id) { return waiting_.count(id) == 0; });
  }
}

FlightRecorder::Dump FlightRecorder::take() {
  Dump out;
  std::vector<const Kept*> order;
  order.reserve(kept_.size());
  for (const auto& [id, k] : kept_) order.push_back(&k);
  std::sort(order.begin(), order.end(), [](const Kept* a, const Kept* b) {
    return a->launch.host_start_ns != b->launch.host_start_ns ? a->launch.host_start_ns < b->launch.host_start_ns
                                                              : a->launch.correlation_id < b->launch.correlation_id;
  });
  for (const Kept* k : order) {
    out.launches.push_back(k->launch);
    out.records.insert(out.records.end(), k->records.begin(), k->records.end());
  }
  kept_.clear();
  ring_.clear();
  return out;
}

std::size_t FlightRecorder::launches_held() const { return kept_.size(); }

}  // namespace tpgraph::recording
