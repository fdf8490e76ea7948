// The timeline analysis: from a variant's CUPTI records (already tied to graph nodes and replays)
// to what the tool exists to say — when each rank began and ended in every replay, whether the
// ranks' work overlapped (a verdict), per node how long it waited after everything the graph says
// it depends on had finished and why, the chain of nodes and waits that set each replay's span,
// and the replays that departed from the rest. GPU-free; every output writer reads its result. It
// reads any LayerGraph: the built-in layer's and a traced program's alike (no role or label is
// looked at), so `run` and `trace` share it.
//
// Why a node waited. For a recorded node n in one replay, with d = the GPU n runs on:
//   ready  = the latest end among n's recorded ancestors (walking through nodes that leave no
//            record), else the replay's first start;  wait = start - ready.
//   [ready, start) splits exactly into
//     contention = the time within it that d was running other recorded work (any node, any
//                  replay, records that match no node); each instant goes to one occupant, the
//                  one running then that started first, so the occupants' shares add up to it;
//     idle       = the rest: d ran nothing of what was recorded (launch and scheduling latency,
//                  the host, a copy engine's queue).
//   So contention + idle = wait (both 0 when wait <= 0, which only clock disagreement produces).
//   arrival applies where the predecessor that set `ready` is on another rank and n also has a
//   recorded predecessor on its own rank (own_ready, the latest such end): arrival = ready -
//   own_ready, how much later the other rank's work ended than n's own chain. It lies before
//   `ready`, so the whole delay of n behind its own chain is arrival + contention + idle =
//   start - own_ready; the wait itself stays start - ready. Per device the work is swept once
//   (sorted intervals -> disjoint segments, each owned by one occupant); a wait then reads only the
//   segments inside its window.
//
// Critical path of a replay (first start to last end): walk back in time from the node that ended
// last, with a cursor t. On reaching node n at t, n's run [n.start, t) is a link; at n.start its
// wait window [ready, n.start) is read backwards: an idle stretch is an idle link of n; the first
// stretch owned by another node of this replay moves the walk to that node (the occupant held the
// GPU, so its run is what delayed n: "contention"); stretches owned by work outside the replay are
// contention links of n. At `ready` the walk moves to the predecessor that set it. The links
// partition [first start, last end), so their shares of the span add up to 1.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/analysis/tracing_cost.hpp"
#include "core/base/enum_format.hpp"
#include "core/records/run_data.hpp"

namespace tpgraph {

// Verdict thresholds on the overlap fraction that decides (below). Serialized ranks still share a
// few percent (a copy or the launch of the next rank's first kernel under the tail of the other),
// hence 5% rather than 0; at 50% or more at least half of the shorter rank ran alongside the
// other. docs/reading-a-report.md explains the choice.
inline constexpr double kOverlappedAtLeast = 0.50;
inline constexpr double kSerializedAtMost = 0.05;
// CUPTI span vs event-node span of a rank: flagged when the median ratio is off by more than this.
inline constexpr double kEventSpanTolerance = 0.02;
// Outlier replays: span further than max(kOutlierMads * MAD, kOutlierFraction * median) from the
// median span. The same rule compares the first and last quarter of the replays (steadiness).
inline constexpr double kOutlierMads = 3.0;
inline constexpr double kOutlierFraction = 0.05;
// Steadiness compares the first and last quarter of the replays: judged from this many replays on.
inline constexpr std::size_t kSteadinessMinReplays = 8;
// Occupants kept per node and replay (largest first); the rest of the contention is "others".
inline constexpr std::size_t kOccupantsKept = 3;
// Replays whose node timings (with occupants) are kept in full, from the first: the trace shows
// these. Every replay enters the summaries; beyond these only the replays the outputs name keep
// their detail (see AnalysisOptions), so ten million records fit in a bounded memory.
inline constexpr int kDetailReplays = 500;

enum class Verdict { overlapped, partial, serialized, single_rank, no_data };
[[nodiscard]] std::string_view to_string(Verdict v);  // "OVERLAPPED", ..., "ONE RANK", "NO DATA"
[[nodiscard]] inline std::string_view format_as(Verdict v) { return to_string(v); }
[[nodiscard]] Verdict verdict_of(std::optional<double> overlap, int ranks);

// Which overlap decides the verdict. A rank on the root's GPU is judged on busy overlap: streams of
// one GPU take turns, so their windows coincide (window overlap near 1) while their kernels do not
// run at the same time. A rank on another GPU is judged on window overlap, busy overlap beside it.
enum class OverlapBasis { window, busy, mixed };           // mixed: some ranks share the root's GPU, some not
[[nodiscard]] std::string_view to_string(OverlapBasis b);  // "window", "busy", "busy or window per rank"
[[nodiscard]] inline std::string_view format_as(OverlapBasis b) { return to_string(b); }
// One line naming the thresholds and which overlap decides, printed in every output.
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
  double offset_us = 0;                 // first start - the earliest rank's first start
  int ops = 0;                          // records in the window
  std::optional<double> event_span_us;  // the event-record nodes' span, when measured
};

// What ran on a node's GPU while the node waited: a node (of this replay or another) or work that
// matches no node.
struct Occupant {
  int node = -1;              // -1: records that match no node
  bool other_replay = false;  // a node of another replay (or a record outside the replays)
  double us = 0;              // the part of the wait attributed to it
};

// A node's wait in one replay, split (the rule is at the top of this file).
struct WaitParts {
  double contention_us = 0;  // + idle_us = the wait (when the wait is positive)
  double idle_us = 0;
  double arrival_us = 0;            // ready - own_ready where the latest predecessor is on another rank
  int own_from = -1;                // the own-rank node that set own_ready; -1: arrival does not apply
  std::vector<Occupant> occupants;  // largest first, at most kOccupantsKept
};

// One link of a replay's critical path, in time order.
enum class PathLinkKind {
  run,         // `node` ran; `held` >= 0 when it is on the path because it held the GPU while `held` waited
  idle,        // `node` waited and its GPU ran nothing recorded
  contention,  // `node` waited while work outside this replay ran (`occupant`, -1: no node)
  unexplained  // the walk could not go further back (clocks that disagree): the rest of the span
};
[[nodiscard]] std::string_view to_string(PathLinkKind k);
[[nodiscard]] inline std::string_view format_as(PathLinkKind k) { return to_string(k); }

struct PathLink {
  PathLinkKind kind = PathLinkKind::run;
  int node = -1;
  int held = -1;
  int occupant = -1;
  double us = 0;
};

struct ReplayTimeline {
  int replay = 0;
  bool present = false;
  std::uint64_t begin_ns = 0;  // earliest start of any rank
  std::uint64_t end_ns = 0;    // latest end
  double span_us = 0;          // end - begin
  std::vector<RankReplay> ranks;
  // [rank]: overlap with the root's (rank 0) window, summed over layers; empty for the root.
  std::vector<std::optional<double>> overlap_vs_root;
  std::optional<double> overlap;  // the smallest rank-vs-root window overlap
  // [rank]: busy overlap with the root (busy_overlap_fraction of their records' intervals); the
  // window overlap says whether the ranks' windows coincided, this whether their kernels and
  // copies actually ran at the same time.
  std::vector<std::optional<double>> busy_vs_root;
  std::optional<double> busy_overlap;  // the smallest of busy_vs_root
  // The smallest of each rank's deciding figure (busy on the root's GPU, window elsewhere).
  std::optional<double> verdict_overlap;
  Verdict verdict = Verdict::no_data;
  // Links in time order; their us add up to span_us. Kept where VariantTimeline::has_detail says
  // so; empty for the other replays.
  std::vector<PathLink> critical_path;
};

// One node in one replay.
struct NodeTiming {
  bool recorded = false;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint64_t ready_ns = 0;  // latest end among its recorded ancestors, else the replay's begin
  int ready_from = -1;         // the node whose end set ready_ns; -1: the replay's begin
  double wait_us = 0;          // start - ready (negative only if clocks of two engines disagree)
  WaitParts parts;
};

struct NodeWaitSummary {
  int node = 0;
  Stats wait_us;
  int ready_from = -1;  // the most common ready_from over replays
  Stats duration_us;
  Stats contention_us, idle_us, arrival_us;
  // The replay whose wait is the median (the lower one for an even count): its parts are the
  // node's typical breakdown, and they add up to its wait exactly.
  int typical_replay = -1;
  double typical_wait_us = 0;
  WaitParts typical;
};

// A node's place on the critical paths, over replays (0 in replays where it is off the path).
struct PathNodeSummary {
  int node = 0;
  int replays_on_path = 0;
  Stats run_us;   // time it ran on the path
  Stats wait_us;  // its idle and outside-contention links on the path
};

struct CriticalPathSummary {
  int typical_replay = -1;             // the replay of median span: its path is the one shown
  std::vector<PathNodeSummary> nodes;  // nodes ever on the path, largest median run + wait first
  // The node whose speed-up would shorten the span most, to first order: the largest median time
  // on the path (a node cut by x shortens the span by up to x while it stays on the path).
  int speedup_node = -1;
  double speedup_us = 0;
};

// A replay whose span or verdict departs from the rest (kOutlierMads, kOutlierFraction).
struct OutlierReplay {
  int replay = 0;
  double span_us = 0;
  Verdict verdict = Verdict::no_data;
  bool span_departs = false;
  bool verdict_departs = false;
  // The node whose wait exceeded its median wait the most: where this replay lost its time.
  int late_node = -1;
  double late_by_us = 0;      // its start offset in the replay minus its median start offset
  double excess_wait_us = 0;  // its wait minus its median wait
  // The node that ran longest beyond its median duration (a slower GPU lengthens every wait too).
  int slow_node = -1;
  double slow_by_us = 0;  // its duration minus its median duration
};

struct Steadiness {
  bool known = false;  // false with fewer than kSteadinessMinReplays replays
  bool steady = true;
  int quarter = 0;                             // replays per quarter
  double first_span_us = 0, last_span_us = 0;  // median span of the first and last quarter
  double threshold_us = 0;                     // the outlier rule's allowance
  Verdict first_verdict = Verdict::no_data, last_verdict = Verdict::no_data;
};

struct RankSummary {
  int rank = 0;
  int device = 0;
  Stats span_us;
  Stats offset_us;
  Stats event_span_us;          // count 0: not measured
  Stats cupti_over_event;       // CUPTI span / event span per replay
  Stats event_minus_cupti_us;   // event span - CUPTI span per replay
  bool event_mismatch = false;  // |median ratio - 1| > kEventSpanTolerance
};

// What the analysis itself saw in the records, next to what the CUPTI layer counted.
struct TimelineHealth {
  CollectionHealth collected;             // counted by the CUPTI layer during the run
  std::uint64_t records = 0;              // records in the data
  std::uint64_t unmatched_seen = 0;       // node id out of the graph (or -1)
  std::uint64_t no_timestamp_seen = 0;    // start or end 0, or end before start
  std::uint64_t replay_out_of_range = 0;  // replay index not in 0..N-1
  std::uint64_t duplicate = 0;            // a second record for one node in one replay (not in a while body)
  std::uint64_t missing = 0;              // a kernel/copy node with no record in a replay
  [[nodiscard]] bool clean() const;
  // "" when clean, else one line naming every non-zero count.
  [[nodiscard]] std::string problems() const;
};

// A conditional node of a traced graph over its launches: a while loop's iterations per launch (the
// most records any node directly in its body left in that launch), or for if and switch how many
// launches ran each body (any record of a node inside it).
struct ConditionalSummary {
  int node = 0;
  NestedNode::Conditional kind = NestedNode::Conditional::none;
  int launches = 0;         // launches with any record of the graph
  Stats iterations;         // while: per launch
  std::vector<int> ran_in;  // if, switch: [body] launches in which it ran
};

// A node of a graph without topology (VariantRun::topology_error): its stream, how long it ran and
// the gap on its stream before it (start - the end of the stream's previous record in the launch;
// none for the stream's first). Measured, not a wait: nothing says what it depended on.
struct StreamNodeSummary {
  int node = 0;
  std::uint32_t stream = 0;
  Stats duration_us;
  Stats gap_us;
};

// Every replay's figures of one node, [replay], kept under AnalysisOptions::keep_series (tpgraph diff
// compares them replay by replay): NaN where the node has no record in that replay. Floats: ten
// million samples take 240 MB, and a µs figure of a GPU timing needs no more than 7 digits.
struct NodeSeries {
  std::vector<float> duration_us, wait_us, contention_us, idle_us, arrival_us;
  std::vector<float> path_us;   // its run and wait links on the replay's critical path; 0 off the path
  std::vector<float> start_us;  // its start after the replay's first start
};

struct VariantTimeline {
  std::string name;
  int ranks = 0;
  int layers = 1;
  int replay_count = 0;
  bool ranks_share_gpu = false;
  std::vector<int> rank_device;  // [rank]: the GPU each rank ran on (from the graph)
  std::vector<ReplayTimeline> replays;
  // [replay][node]; empty for a replay without detail: the first AnalysisOptions::detail_replays,
  // the median-span and median-wait replays, the outliers and the one asked for have it.
  std::vector<std::vector<NodeTiming>> timings;
  std::vector<RankSummary> rank_summaries;  // [rank]
  std::vector<Stats> overlap_vs_root;       // [rank]; root's has count 0
  Stats overlap;                            // window overlap
  Stats busy_overlap;                       // of ReplayTimeline::busy_overlap
  OverlapBasis basis = OverlapBasis::window;
  Stats verdict_overlap;                      // of ReplayTimeline::verdict_overlap: what decides
  Verdict verdict = Verdict::no_data;         // of the median verdict_overlap
  Verdict window_verdict = Verdict::no_data;  // what the median window overlap alone would say
  Verdict busy_verdict = Verdict::no_data;    // ... and the median busy overlap
  std::array<int, 5> verdict_counts{};        // replays per Verdict value
  Stats span_us;                              // replay spans (first start to last end)
  std::vector<NodeWaitSummary> waits;         // recorded nodes, largest median wait first
  std::vector<int> wait_index;                // [node]: index into waits, -1 when never recorded
  CriticalPathSummary critical_path;
  std::vector<OutlierReplay> outliers;  // in replay order
  double span_mad_us = 0;               // median absolute deviation of the spans
  double outlier_threshold_us = 0;      // max(kOutlierMads * MAD, kOutlierFraction * median)
  Steadiness steadiness;
  Stats host_launch_us;
  std::optional<double> tracing_cost;          // replay time traced / untraced
  std::optional<GraphTracingCost> trace_cost;  // a trace: its estimated cost per launch (tracing_cost.hpp)
  TimelineHealth health;
  std::string no_topology;                       // VariantRun::topology_error: no wait or critical path was computed
  std::vector<ConditionalSummary> conditionals;  // traced graphs' conditional nodes, in node order
  std::vector<StreamNodeSummary> stream_nodes;   // a graph without topology: per node, by stream
  std::vector<NodeSeries> series;                // [node], under AnalysisOptions::keep_series; else empty

  [[nodiscard]] const NodeWaitSummary* wait_of(int node) const;
  [[nodiscard]] bool has_detail(int replay) const;  // timings[replay] is filled
};

struct RunAnalysis {
  std::vector<VariantTimeline> variants;            // in RunData order
  std::uint64_t base_ns = 0;                        // the run's first timestamp: trace times are relative to it
  std::optional<TracingCostAnalysis> tracing_cost;  // a trace analysed from its folder
  [[nodiscard]] bool collection_clean() const;
};

struct AnalysisOptions {
  int detail_replays = kDetailReplays;  // < 0: every replay
  std::optional<int> replay;            // also keep this replay's detail and critical path
  bool keep_series = false;             // fill VariantTimeline::series
};

// Throws InputError when the graph has a cycle (a corrupt records file).
[[nodiscard]] VariantTimeline analyze_variant(const VariantRun& v, const AnalysisOptions& options = {});
[[nodiscard]] RunAnalysis analyze_run(const RunData& run, const AnalysisOptions& options = {});

}  // namespace tpgraph
