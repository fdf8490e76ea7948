// A traced process's NVTX ranges as the outputs show them: the nvtx chunks' opens and closes
// (trace_nvtx.hpp) paired into ranges on the merged time base, each with its depth, and which
// ranges were open around a graph's launches. GPU-free; the merge builds them, the Perfetto trace,
// the SVG and the report read them.
//
// Pairing: an open and a close of the same kind (push/pop, start/end) with the same range number.
// A close whose open is not in the file (the range opened before recording began, or outside a
// window) is ignored and counted. A range never closed in the file ends at the process's last
// timestamp (the footer's end, the last launch call's exit or the last NVTX event, the latest) and is
// marked open.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tpgraph {

namespace tracefile {
struct ProcessFile;
}

struct NvtxRange {
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint32_t name = 0;    // index in NvtxTimeline::names
  std::uint32_t thread = 0;  // the OS thread that opened it
  // push/pop: how many of its thread's push/pop ranges were open around it (0: outermost);
  // start/end: its lane among the process's start/end ranges (ranges of one lane do not overlap).
  std::uint16_t depth = 0;
  bool push = true;   // push/pop, nested per thread; false: start/end, which may end on another thread
  bool open = false;  // not closed in the file: it ends at the process's last timestamp
};

struct NvtxTimeline {
  std::vector<std::string> names;  // [0]: "(unnamed)", for a range whose name was not recorded
  std::vector<NvtxRange> ranges;   // by start, the longer first where two start together
  // Indices of `ranges` by end, the later started first where two end together: the order in which
  // a sweep over time closes them (as a thread's stack unwinds).
  std::vector<std::uint32_t> by_end;
  std::uint64_t unmatched_closes = 0;
};

// The ranges of one process's file, shifted by `offset_ns` (the clock alignment of its host); null
// when the file holds no NVTX event.
[[nodiscard]] std::shared_ptr<const NvtxTimeline> process_nvtx(const tracefile::ProcessFile& file,
                                                               std::int64_t offset_ns);

// The ranges around a graph's launches: per launch, the innermost ranges open at the launch call's
// entry. A launch names no thread, so among the process's threads with a push/pop range open then,
// the one whose innermost open range began last is taken (the launching thread is usually inside
// the range it opened last); start/end ranges count only where no push/pop range is open.
struct NvtxContext {
  std::vector<std::string> ranges;  // outermost first, at most kMaxNvtxContextDepth; empty: none open
  std::uint64_t launches = 0;
};
struct NvtxLaunches {
  std::vector<NvtxContext> contexts;  // the most frequent first, at most kMaxNvtxContexts
  std::uint64_t launches = 0;         // launches looked at (every rank's)
};
inline constexpr std::size_t kMaxNvtxContexts = 3;
inline constexpr std::size_t kMaxNvtxContextDepth = 4;

// One rank of a graph: its process's ranges (null: none recorded) and its launches' entry times.
struct RankLaunches {
  std::shared_ptr<const NvtxTimeline> timeline;
  std::vector<std::uint64_t> starts;
};
[[nodiscard]] NvtxLaunches nvtx_launches(const std::vector<RankLaunches>& ranks);
// "launched inside NVTX decode_step > execute_model (98% of 1000 launches); outside any NVTX range
// (2%)"; "" when no launch was looked at.
[[nodiscard]] std::string nvtx_launches_text(const NvtxLaunches& launches);

}  // namespace tpgraph
