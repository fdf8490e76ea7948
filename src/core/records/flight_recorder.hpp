// The flight recorder of `tpgraph trace --keep-last N`: the last N launches of each executable graph
// and their records, held in the process's memory instead of being written, and handed out whole
// when the program exits, crashes or receives the signal the user named. GPU-free; the injection
// library feeds it what it would otherwise write, the unit tests feed it fabricated launches.
//
// Records usually arrive before the launch they belong to is known (the library decides a launch's
// correlation id from its first records), so records wait by correlation id until their launch
// comes; waiting records are bounded (the oldest are dropped and counted past kMaxWaitingRecords).
// Eager records (no graph node) are not kept: the recorder answers "what did the last replays
// look like". Memory: N x (nodes of the graph) x 56 bytes per graph, plus the waiting records.
#pragma once
#include <cstdint>
#include <deque>
#include <map>
#include <unordered_map>
#include <vector>

#include "core/records/trace_file.hpp"

namespace tpgraph::recording {

class FlightRecorder {
 public:
  static constexpr std::size_t kMaxWaitingRecords = std::size_t{1} << 18;

  explicit FlightRecorder(std::uint32_t keep_last) : keep_last_(keep_last) {}

  // Records as decoded from a CUPTI buffer (graph records kept, eager ones counted and dropped).
  void add_records(const std::vector<tracefile::WireRecord>& records);
  // A launch with the correlation id its records carry; older launches of its graph past
  // keep_last are forgotten with their records.
  void add_launch(const tracefile::WireLaunch& launch);

  struct Dump {
    std::vector<tracefile::WireLaunch> launches;  // in launch order
    std::vector<tracefile::WireRecord> records;   // those of the launches above
  };
  // Everything kept, oldest launch first; the recorder starts empty again (a later dump writes only
  // launches made since).
  [[nodiscard]] Dump take();

  [[nodiscard]] std::uint64_t launches_evicted() const { return launches_evicted_; }
  [[nodiscard]] std::uint64_t records_dropped() const { return records_dropped_; }
  [[nodiscard]] std::uint64_t eager_dropped() const { return eager_dropped_; }
  [[nodiscard]] std::size_t launches_held() const;

 private:
  struct Kept {
    tracefile::WireLaunch launch;
    std::vector<tracefile::WireRecord> records;
  };
  std::uint32_t keep_last_;
  std::map<std::uint32_t, std::deque<std::uint32_t>> ring_;  // [exec] correlation ids, oldest first
  std::unordered_map<std::uint32_t, Kept> kept_;             // [correlation id]
  std::unordered_map<std::uint32_t, std::vector<tracefile::WireRecord>> waiting_;
  std::deque<std::uint32_t> waiting_order_;  // correlation ids in the order their first record came
  std::size_t waiting_records_ = 0;
  std::uint64_t launches_evicted_ = 0;
  std::uint64_t records_dropped_ = 0;
  std::uint64_t eager_dropped_ = 0;
};

}  // namespace tpgraph::recording
