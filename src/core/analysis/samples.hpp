// Private to the timeline analysis (timeline.cpp, samples.cpp, timeline_summary.cpp): one node in
// one replay as the summaries over replays need it, how records are placed into these samples, the
// summaries that only traced graphs have (conditional bodies, graphs without topology), and the
// summaries over replays that every variant has (ranks, waits, outliers, steadiness, critical path).
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "core/analysis/timeline.hpp"

namespace tpgraph::timeline_detail {

[[nodiscard]] inline double ns_to_us(std::uint64_t later, std::uint64_t earlier) {
  // Subtract as integers: CUPTI timestamps (~1.7e18 ns) are beyond a double's exact range.
  const auto diff = later >= earlier ? static_cast<double>(later - earlier) : -static_cast<double>(earlier - later);
  return diff / 1000.0;
}

// CUPTI reports kernels and copies; allocation, free and event-record nodes leave no record.
[[nodiscard]] inline bool leaves_record(NodeKind k) {
  const CudaNodeType t = cuda_node_type(k);
  return t == CudaNodeType::kernel || t == CudaNodeType::memcpy || t == CudaNodeType::memset;
}

// 48 bytes where a NodeTiming with its occupants takes over 100 (a trace of ten million records
// keeps one per record).
struct Sample {
  std::uint64_t start_ns = 0;  // 0: no record
  std::uint64_t end_ns = 0;
  std::uint64_t ready_ns = 0;
  std::uint64_t contention_ns = 0;
  double arrival_us = 0;
  int ready_from = -1;
  std::uint32_t count = 0;  // records placed here: a while body's iterations, else 1
  [[nodiscard]] bool recorded() const { return start_ns != 0; }
  [[nodiscard]] double wait_us() const { return ns_to_us(start_ns, ready_ns); }
  [[nodiscard]] double duration_us() const { return ns_to_us(end_ns, start_ns); }
  [[nodiscard]] double contention_us() const { return static_cast<double>(contention_ns) / 1000.0; }
  // As split_wait computes it: 0 when the node did not wait.
  [[nodiscard]] double idle_us() const {
    return start_ns > ready_ns ? static_cast<double>(start_ns - ready_ns - contention_ns) / 1000.0 : 0.0;
  }
};
static_assert(sizeof(Sample) == 48);

// Every record in its [replay * nodes + node] sample, counting in `health` what does not fit. A
// node in a while body (NestedNode::repeats) takes several records per replay as iterations: its
// sample spans the first start to the last end. Nodes of a conditional body may leave none.
[[nodiscard]] std::vector<Sample> place_records(const VariantRun& v, std::size_t replays, TimelineHealth& health);

// Per conditional node: iterations or bodies run, over the present replays.
[[nodiscard]] std::vector<ConditionalSummary> summarize_conditionals(const VariantRun& v,
                                                                     const std::vector<Sample>& samples,
                                                                     const std::vector<ReplayTimeline>& replays);
// A graph without topology: per node its stream, durations and the gaps on its stream.
[[nodiscard]] std::vector<StreamNodeSummary> summarize_streams(const VariantRun& v, const std::vector<Sample>& samples,
                                                               std::size_t replays);

// Per node, [present replay]: (time it ran on the critical path, time it waited on it).
using PathTimes = std::map<int, std::pair<std::vector<double>, std::vector<double>>>;
// VariantTimeline::series from the samples (waits and their parts filled in) and the path times.
[[nodiscard]] std::vector<NodeSeries> node_series(const std::vector<Sample>& samples, std::size_t node_count,
                                                  const std::vector<ReplayTimeline>& replays, const PathTimes& on_path);

// The summaries over replays, in this order once every replay is analysed (timeline_summary.cpp):
// each reads what the ones before it filled in.
// Per rank its span, offset and event-span cross-check; the window, busy and deciding overlaps, the
// verdicts they give and which overlap decides (VariantTimeline::basis).
void summarize_ranks(VariantTimeline& out);
// Per recorded node its wait and the wait's parts, largest median wait first (waits, wait_index);
// each node's typical breakdown is filled in once its replay has full detail. Returns each node's
// median start offset in its replay, [node], which the outliers compare against.
[[nodiscard]] std::vector<double> summarize_waits(const VariantRun& v, const std::vector<Sample>& samples,
                                                  VariantTimeline& out);
// The spans, the outlier allowance, and the replays whose span or verdict departs from the rest,
// each with the node whose wait exceeded its median wait most and the one that ran longest beyond
// its median duration.
void find_outliers(const std::vector<Sample>& samples, const std::vector<double>& median_offset, VariantTimeline& out);
// Whether the first and last quarter of the present replays agree on span and verdict.
[[nodiscard]] Steadiness steadiness_of(const VariantTimeline& out);
// Each node's time on the critical path over the present replays, the replay whose path is shown,
// and the node whose speed-up would shorten the span most.
[[nodiscard]] CriticalPathSummary summarize_critical_path(const VariantRun& v, const PathTimes& on_path,
                                                          const std::vector<ReplayTimeline>& replays);

}  // namespace tpgraph::timeline_detail
