// The timeline analysis: from a variant's CUPTI records (already tied to layer-graph nodes and
// replays) to what the tool exists to say — when each rank began and ended in every replay, how
// much the ranks' windows overlapped, a verdict, and per node how long it waited after everything
// the graph says it depends on had finished. GPU-free; every output writer reads its result.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/run_data.hpp"

namespace tpgraph {

// Verdict thresholds on the overlap fraction (shared time of two ranks' windows / the shorter
// window). Serialized ranks still share a few percent (a copy or the launch of the next rank's
// first kernel under the tail of the other), hence 5% rather than 0; at 50% or more at least half
// of the shorter rank ran alongside the other. docs/reading-a-report.md explains the choice.
inline constexpr double kOverlappedAtLeast = 0.50;
inline constexpr double kSerializedAtMost = 0.05;
// CUPTI span vs event-node span of a rank: flagged when the median ratio is off by more than this.
inline constexpr double kEventSpanTolerance = 0.02;

enum class Verdict { overlapped, partial, serialized, single_rank, no_data };
[[nodiscard]] std::string_view to_string(Verdict v);  // "OVERLAPPED", ..., "ONE RANK", "NO DATA"
[[nodiscard]] Verdict verdict_of(std::optional<double> overlap, int ranks);
// One line naming the thresholds, printed in every output.
[[nodiscard]] std::string verdict_thresholds_text();

// Shared time of [a_start, a_end) and [b_start, b_end) over the shorter of the two; 0 when the
// shorter one is empty.
[[nodiscard]] double overlap_fraction(std::uint64_t a_start, std::uint64_t a_end, std::uint64_t b_start,
                                      std::uint64_t b_end);

// Busy overlap of two sets of [start, end) intervals (a rank's kernels and copies in one replay):
// the time covered by both unions over the smaller union; 0 when either is empty.
[[nodiscard]] double busy_overlap_fraction(std::vector<std::pair<std::uint64_t, std::uint64_t>> a,
                                           std::vector<std::pair<std::uint64_t, std::uint64_t>> b);

// min, median, p90, max over replays; percentiles interpolate linearly between ranks.
struct Stats {
  int count = 0;
  double min = 0, median = 0, p90 = 0, max = 0;
};
[[nodiscard]] Stats summarize(std::vector<double> values);

// One rank in one replay, on CUPTI's time base (ns).
struct RankReplay {
  int rank = 0;
  bool present = false;  // false: no record of this rank in this replay
  std::uint64_t first_start_ns = 0;
  std::uint64_t last_end_ns = 0;
  double span_us = 0;
  double offset_us = 0;  // first start - the earliest rank's first start
  int ops = 0;           // records in the window
  std::optional<double> event_span_us;  // the event-record nodes' span, when measured
};

struct ReplayTimeline {
  int replay = 0;
  bool present = false;
  std::uint64_t begin_ns = 0;  // earliest start of any rank
  std::uint64_t end_ns = 0;    // latest end
  std::vector<RankReplay> ranks;
  // [rank]: overlap with the root's (rank 0) window, summed over layers; empty for the root.
  std::vector<std::optional<double>> overlap_vs_root;
  std::optional<double> overlap;  // the smallest rank-vs-root overlap
  Verdict verdict = Verdict::no_data;
  // The smallest busy overlap of a rank with the root (busy_overlap_fraction of their records'
  // intervals). The window overlap above says whether the ranks' windows coincided; this says
  // whether their kernels and copies actually ran at the same time (on one shared GPU whose
  // streams take turns, the first is near 1 and this near 0).
  std::optional<double> busy_overlap;
};

// One node in one replay.
struct NodeTiming {
  bool recorded = false;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint64_t ready_ns = 0;  // latest end among its recorded ancestors, else the replay's begin
  int ready_from = -1;         // the node whose end set ready_ns; -1: the replay's begin
  double wait_us = 0;          // start - ready (negative only if clocks of two engines disagree)
};

struct NodeWaitSummary {
  int node = 0;
  Stats wait_us;
  int ready_from = -1;  // the most common ready_from over replays
};

struct RankSummary {
  int rank = 0;
  int device = 0;
  Stats span_us;
  Stats offset_us;
  Stats event_span_us;                 // count 0: not measured
  Stats cupti_over_event;              // CUPTI span / event span per replay
  Stats event_minus_cupti_us;          // event span - CUPTI span per replay
  bool event_mismatch = false;         // |median ratio - 1| > kEventSpanTolerance
};

// What the analysis itself saw in the records, next to what the CUPTI layer counted.
struct TimelineHealth {
  CollectionHealth collected;  // counted by the CUPTI layer during the run
  std::uint64_t records = 0;                // records in the data
  std::uint64_t unmatched_seen = 0;         // node id out of the graph (or -1)
  std::uint64_t no_timestamp_seen = 0;      // start or end 0, or end before start
  std::uint64_t replay_out_of_range = 0;    // replay index not in 0..N-1
  std::uint64_t duplicate = 0;              // a second record for one node in one replay
  std::uint64_t missing = 0;                // a kernel/copy node with no record in a replay
  [[nodiscard]] bool clean() const;
  // "" when clean, else one line naming every non-zero count.
  [[nodiscard]] std::string problems() const;
};

struct VariantTimeline {
  std::string name;
  int ranks = 0;
  int layers = 1;
  int replay_count = 0;
  bool ranks_share_gpu = false;
  std::vector<int> rank_device;  // [rank]: the GPU each rank ran on (from the graph)
  std::vector<ReplayTimeline> replays;
  std::vector<std::vector<NodeTiming>> timings;  // [replay][node]
  std::vector<RankSummary> rank_summaries;        // [rank]
  std::vector<Stats> overlap_vs_root;             // [rank]; root's has count 0
  Stats overlap;
  Stats busy_overlap;                  // of ReplayTimeline::busy_overlap
  Verdict verdict = Verdict::no_data;  // of the median overlap
  std::array<int, 5> verdict_counts{};  // replays per Verdict value
  std::vector<NodeWaitSummary> waits;   // recorded nodes, largest median wait first
  Stats host_launch_us;
  std::optional<double> tracing_cost;  // replay time traced / untraced
  TimelineHealth health;
};

struct RunAnalysis {
  std::vector<VariantTimeline> variants;  // in RunData order
  std::uint64_t base_ns = 0;  // the run's first timestamp: trace times are relative to it
  [[nodiscard]] bool collection_clean() const;
};

// Throws InputError when the graph has a cycle (a corrupt records file).
[[nodiscard]] VariantTimeline analyze_variant(const VariantRun& v);
[[nodiscard]] RunAnalysis analyze_run(const RunData& run);

}  // namespace tpgraph
