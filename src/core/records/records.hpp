// What the timeline analysis reads: one record per GPU activity (kernel, memcpy, memset), already
// tied to a layer-graph node and a replay by the CUPTI layer, in the core's own types so the
// analysis runs (and is tested) without a GPU. Raw records are saved with every run.
#pragma once
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/enum_format.hpp"

namespace tpgraph {

enum class ActivityKind : std::uint8_t { kernel, memcpy, memcpy_peer, memset };
[[nodiscard]] constexpr std::string_view to_string(ActivityKind k) {
  switch (k) {
    case ActivityKind::kernel: return "kernel";
    case ActivityKind::memcpy: return "memcpy";
    case ActivityKind::memcpy_peer: return "memcpy_peer";
    case ActivityKind::memset: return "memset";
  }
  return "unknown";
}
[[nodiscard]] constexpr std::string_view format_as(ActivityKind k) { return to_string(k); }

// A kernel or copy name, its text stored once per process however many records carry it: a traced
// program's ten million records hold a pointer each, not a string each. Interning takes a lock
// (the CUPTI buffer thread and the reader both make names); copying and comparing a RecordName do not.
// Names are never freed: a process sees a few thousand distinct ones.
class RecordName {
 public:
  RecordName() = default;
  RecordName(std::string_view text);  // NOLINT(google-explicit-constructor): records are filled from strings
  RecordName(const char* text) : RecordName(std::string_view(text)) {}         // NOLINT(google-explicit-constructor)
  RecordName(const std::string& text) : RecordName(std::string_view(text)) {}  // NOLINT(google-explicit-constructor)

  [[nodiscard]] const std::string& str() const;
  [[nodiscard]] bool empty() const { return text_ == nullptr; }
  // One text, one pointer: equal names are the same object.
  friend bool operator==(const RecordName& a, const RecordName& b) { return a.text_ == b.text_; }
  friend bool operator==(const RecordName& a, std::string_view b) { return a.str() == b; }
  friend bool operator==(const RecordName& a, const char* b) { return a.str() == std::string_view(b); }
  friend std::ostream& operator<<(std::ostream& out, const RecordName& name);

 private:
  const std::string* text_ = nullptr;  // nullptr: the empty name
};

// Fields ordered largest first: ten million records are 640 MB, not 960.
struct ActivityRecord {
  std::uint64_t start_ns = 0;  // CUPTI's timestamp: one host time base for all GPUs
  std::uint64_t end_ns = 0;
  std::uint64_t graph_node_id = 0;  // the instantiated node's id
  std::int64_t bytes = 0;           // memcpy/memset
  RecordName name;                  // kernel name, or the copy's kind
  std::uint32_t stream_id = 0;
  std::uint32_t correlation_id = 0;
  std::uint32_t graph_id = 0;
  int node = -1;    // layer-graph node id; -1: matched no node
  int replay = -1;  // replay index (warm-up replays are dropped before analysis)
  std::int16_t device = 0;
  ActivityKind kind = ActivityKind::kernel;
};

// A run's collection health: any non-zero count makes every output say so.
struct CollectionHealth {
  std::uint64_t dropped = 0;       // cuptiActivityGetNumDroppedRecords
  std::uint64_t no_timestamp = 0;  // start or end was 0
  std::uint64_t unmatched = 0;     // graph node id matched no captured node
  [[nodiscard]] bool clean() const { return dropped == 0 && no_timestamp == 0 && unmatched == 0; }
};

// Per replay and rank, the span measured by the event-record nodes in the graph (ms), used to
// cross-check CUPTI's spans.
struct EventSpan {
  int replay = 0;
  int rank = 0;
  double span_ms = 0;
};

// What the host pays to build and launch a variant's graph (steady clock, measured with tracing off).
struct HostCosts {
  double capture_ms = 0;      // begin capture to end capture, every node issued; 0: not captured (eager)
  double instantiate_ms = 0;  // cudaGraphInstantiate
  // Per launch of a burst issued back to back without waiting (the GPU still busy with earlier
  // launches): the host time of each launch call. Empty: not measured.
  std::vector<double> queued_launch_us;
};

// A run's records hold about one record per kernel node per replay; the analysis keeps a slot
// (~50 bytes) per (replay, node). More slots than a few per record and per node the input holds
// (plus a floor for small runs) mean a replay count the input cannot fill: a hostile file asking
// for gigabytes with a few bytes (a records.json's scenario.replays, a trace's launches of a wide
// graph). Nodes that leave no record (events) count per node.
inline constexpr std::uint64_t kSlotsPerRecord = 4;
inline constexpr std::uint64_t kSlotsPerNode = 16;
inline constexpr std::uint64_t kSlotFloor = 1 << 20;

// A record this far from the body of a trace's records is not from the run: the trace's time base
// is the earliest record, and one stray record at t = 1 ns would push every timestamp out of a
// double's precision.
inline constexpr std::uint64_t kStrayRecordNs = 3'600'000'000'000ULL;  // one hour

// The body of a trace's records in time: the start times are split wherever two consecutive ones
// (in time order) lie more than kStrayRecordNs apart, and the group holding the most is the body
// (the earliest of equal ones). Its first and last start; nullopt when `starts` is empty. A stray
// record cannot stretch the body: it is a group of its own. O(n log n).
struct StartWindow {
  std::uint64_t first = 0;
  std::uint64_t last = 0;
  // A start further than kStrayRecordNs outside the window.
  [[nodiscard]] bool stray(std::uint64_t start) const {
    return (start < first && first - start > kStrayRecordNs) || (start > last && start - last > kStrayRecordNs);
  }
};
[[nodiscard]] std::optional<StartWindow> body_of_records(std::vector<std::uint64_t> starts);

}  // namespace tpgraph
