// What the timeline analysis reads: one record per GPU activity (kernel, memcpy, memset), already
// tied to a layer-graph node and a replay by the CUPTI layer, in the core's own types so the
// analysis runs (and is tested) without a GPU. Raw records are saved with every run.
#pragma once
#include <cstdint>
#include <iosfwd>
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

}  // namespace tpgraph
