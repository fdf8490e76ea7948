// A variant's timeline as Chrome trace JSON (the "JSON object" form Perfetto and chrome://tracing
// open): a process per rank and its GPU, a thread per CUDA stream, one complete ("X") event per
// CUPTI record (its wait and the wait's parts in args), flows for the graph's cross-rank edges and
// from the node that held the GPU to each node that waited on it (contention), and the verdict,
// its basis and the collection's health in metadata. A traced program's NVTX ranges around the
// replays shown get tracks of their own in each rank's process: one per thread (push/pop ranges,
// nested) and one per lane of start/end ranges.
#pragma once
#include <cstddef>
#include <string>

#include "core/analysis/timeline.hpp"
#include "core/records/run_data.hpp"

namespace tpgraph {

// Perfetto and chrome://tracing load a JSON trace whole: a trace of a million launches would not
// open. The trace keeps the first `max_replays` replays and every outlier replay; the metadata says
// how many it shows. 0: every replay. Waits and contention arrows are drawn where the analysis kept
// the replay's detail: the first kDetailReplays and the outliers, so the two limits are one.
inline constexpr int kTraceMaxReplays = kDetailReplays;
struct ChromeTraceOptions {
  int max_replays = kTraceMaxReplays;
};

// Timestamps are µs with 3 decimals relative to the run's first timestamp (analysis.base_ns), so
// the traces of one run's variants share one time axis.
[[nodiscard]] std::string render_chrome_trace(const RunData& run, const RunAnalysis& analysis, std::size_t variant,
                                              const ChromeTraceOptions& options = {});

}  // namespace tpgraph
