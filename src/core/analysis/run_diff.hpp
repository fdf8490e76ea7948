// `tpgraph diff A B` and `tpgraph gate A B`: what changed between two runs (or traces, any mix), node
// by node, with how sure it is. GPU-free; docs/diff.md explains the statistics with a worked example.
//
// 1. Each run is reduced to a DiffRun (diff_side): per variant, its graph with a key per node that
//    the other run can match, every replay's figures (the analysis's series), and the steady part of
//    its replays (steady.hpp's rule), the only replays compared. The RunData and the analysis can go
//    before the other run is read: two ten-million-record traces are never in memory at once.
// 2. Variants are paired (match_variants): same name and same graph fingerprint, then the same
//    fingerprint under another name (a traced graph's id differs between runs), then the same name
//    (the graph changed), then the last unpaired variant on each side. Nodes are paired by key: the
//    label for a run's layer graph; for a traced graph the rank, kernel name, depth (longest path from
//    a source) and occurrence among equals, none of which a renumbering changes. Unpaired nodes of
//    one kind at one place (rank, depth) pair up as a renamed kernel.
// 3. Every figure (node duration, wait, its parts; each rank's span, the replay span, the host launch
//    cost) is compared with stats::median_shift over the steady replays: a change when the interval
//    excludes 0 (significant) and the shift passes both practical thresholds. The interval is
//    computed only where the shift passes them: below them no interval can make it a change.
// 4. Comparability comes first: runs not clean, not steady, on another GPU model or driver, traced
//    at another cost, or of different kinds (run vs trace) are not comparable; `gate` refuses them.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/analysis/steady.hpp"
#include "core/analysis/timeline.hpp"
#include "core/base/bootstrap.hpp"
#include "core/records/run_data.hpp"

namespace tpgraph {

struct DiffNode {
  std::string key;     // what pairs it with a node of the other run
  std::string label;   // what the outputs call it
  std::string kernel;  // a traced kernel's name; "" otherwise
  int rank = 0;
  int depth = 0;  // longest path from a node without predecessors
  NodeKind kind = NodeKind::kernel;
  bool timed = false;    // leaves a record (kernel, copy, memset)
  std::string occupant;  // the typical replay's largest occupant during its wait ("" none)
};

struct DiffVariant {
  std::string name;
  std::uint64_t fingerprint = 0;  // node keys and kinds and edges, whatever the ids
  // A traced graph's identity as the merge named it (capture site, NVTX ranges at capture, shape:
  // tracefile::graph_identity); "" for a run's variant or a graph without one.
  std::string identity;
  bool traced = false;
  bool waits_known = true;  // a traced graph without topology has no waits
  LayerGraph graph;
  std::vector<DiffNode> nodes;                   // [graph node]
  std::vector<NodeSeries> series;                // [graph node][replay]
  std::vector<std::vector<float>> rank_span_us;  // [rank][replay]; NaN: rank absent
  std::vector<float> span_us;                    // [replay]; NaN: replay absent
  std::vector<float> launch_us;                  // [replay] host launch cost; empty: not measured
  std::size_t replays = 0;
  SteadyWindow steady;         // over the present replays' spans
  std::size_t first_used = 0;  // the first replay of the steady part (the last is replays - 1)
  std::size_t used = 0;        // present replays compared
  bool clean = true;
  std::string problems;  // TimelineHealth::problems
  Verdict verdict = Verdict::no_data;
  std::vector<int> path_nodes;  // on the critical path in more than half the replays used
  std::optional<double> tracing_cost;
};

struct DiffRun {
  std::string origin;        // the folder as given
  bool trace = false;        // a `tpgraph trace` folder
  std::string completeness;  // a trace's CLEAN / NOT CLEAN line
  bool clean = true;
  RunEnvironment env;
  std::vector<DiffVariant> variants;
};

// `analysis` must have been computed with AnalysisOptions::keep_series; its series move into the result.
[[nodiscard]] DiffRun diff_side(const RunData& run, RunAnalysis analysis, std::string origin);

struct DiffOptions {
  double practical_fraction = 0.02;  // a change moves the median by at least this share of A's ...
  double practical_us = 0.5;         // ... and at least this many µs
  // The host launch cost is a CPU figure of each process: two processes of one build on one H200
  // differed by up to 8.7% (1.1 µs of 12 µs) in 8 to 13 of 20 pairs. Its change needs more.
  double launch_fraction = 0.15;
  double launch_us = 2.0;
  // What a launch-cost change needs: these, or --threshold / --min-us where those ask for more.
  [[nodiscard]] double launch_fraction_used() const { return std::max(launch_fraction, practical_fraction); }
  [[nodiscard]] double launch_us_used() const { return std::max(launch_us, practical_us); }
  double max_tracing_cost_change = 0.05;  // |B's tracing cost / A's - 1| beyond this: not comparable
  std::uint64_t seed = 1;
  int resamples = stats::kDefaultResamples;
  double confidence = stats::kDefaultConfidence;
};

enum class Metric { duration, wait, contention, idle, arrival, rank_span, replay_span, launch };
[[nodiscard]] std::string_view to_string(Metric m);  // "duration", ..., "rank span", "span", "launch"
[[nodiscard]] inline std::string_view format_as(Metric m) { return to_string(m); }

struct MetricDiff {
  std::string variant;  // A's variant name
  std::string subject;  // the node's label (B's), "r1" for a rank, "replay" for span and launch
  Metric metric = Metric::duration;
  stats::MedianShift shift;
  double relative = 0;  // shift over max(|median A|, practical_us)
  bool practical = false;
  bool significant = false;  // the interval excludes 0
  // A shift that would be a change but that the order of concurrent work explains ("" when not): two
  // concurrent nodes on one GPU, ready together, started in one order in A and the other in B, and
  // this node comes after exactly one of them (run_diff.cpp, order_flips). Shown, never counted or gated.
  std::string explained;
  [[nodiscard]] bool change() const { return practical && significant && explained.empty(); }
};

enum class StructureKind {
  variant_only_a,
  variant_only_b,
  node_removed,
  node_added,
  kernel_renamed,
  edge_removed,
  edge_added
};
[[nodiscard]] std::string_view to_string(StructureKind k);
[[nodiscard]] inline std::string_view format_as(StructureKind k) { return to_string(k); }
struct StructuralChange {
  StructureKind kind = StructureKind::node_added;
  std::string variant;
  std::string what;  // a label, "a -> b" for an edge, "old -> new" for a rename
};

// A node's share of the span's change: the mean of its time on the critical path (run and wait
// links), B minus A. The links of a replay partition its span, so over all nodes (and the links no
// node owns) these shares add up to the change of the mean span exactly.
struct PathShare {
  std::string label;
  double a_us = 0, b_us = 0;
  [[nodiscard]] double shift_us() const { return b_us - a_us; }
};

struct VariantDiff {
  std::string a, b;        // variant names
  std::string matched_by;  // "capture site and graph", "name and graph", "graph fingerprint", "name", ...
  std::size_t a_first = 0, a_used = 0, a_replays = 0;
  std::size_t b_first = 0, b_used = 0, b_replays = 0;
  Verdict verdict_a = Verdict::no_data, verdict_b = Verdict::no_data;
  std::vector<std::string> path_joined, path_left;  // labels
  double span_mean_a_us = 0, span_mean_b_us = 0;
  std::vector<PathShare> explains;         // largest |shift| first, until they account for the span's change
  double other_path_us = 0;                // the rest of the change: nodes not listed, links of no node
  std::vector<std::string> cause_changes;  // "r1.gate's wait: idle -40.1 µs, contention +38.0 µs (by r0.gate)"
};

struct Comparability {
  bool comparable = true;
  std::vector<std::string> reasons;        // why not
  std::vector<std::string> agreed;         // what was compared and found the same
  std::vector<std::string> unchecked;      // what neither run recorded, so nothing was compared
  [[nodiscard]] std::string line() const;  // "COMPARABLE: ..." or "NOT COMPARABLE: ...": the first line
};

struct RunDiff {
  std::string a_origin, b_origin;
  DiffOptions options;
  Comparability comparability;
  std::vector<VariantDiff> variants;
  std::vector<MetricDiff> metrics;  // changes first (durations, spans, then waits; largest first), then the rest
  std::vector<StructuralChange> structure;
  [[nodiscard]] std::size_t change_count() const;
};

[[nodiscard]] RunDiff diff_runs(const DiffRun& a, const DiffRun& b, const DiffOptions& options = {});

// tpgraph gate: which way it went, and one line per failure naming the figure.
struct GateBudget {
  double max_slowdown = 0.03;               // node durations and the launch cost
  std::optional<double> max_span_slowdown;  // rank and replay spans; unset: max_slowdown
};
enum class GateOutcome { pass, regression, not_comparable };
struct GateResult {
  GateOutcome outcome = GateOutcome::pass;
  std::vector<std::string> failures;
};
[[nodiscard]] GateResult gate_runs(const RunDiff& diff, const GateBudget& budget);

}  // namespace tpgraph
