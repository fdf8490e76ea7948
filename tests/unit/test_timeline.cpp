#include <algorithm>

#include "catch.hpp"
#include "core/analysis/timeline.hpp"
#include "run_fixture.hpp"

using namespace tpgraph;
using namespace tpgraph::testing;

namespace {

const NodeWaitSummary& wait_of(const VariantRun& run, const VariantTimeline& v, std::string_view label) {
  const Node* n = run.graph.find(label);
  REQUIRE(n != nullptr);
  const auto it =
      std::find_if(v.waits.begin(), v.waits.end(), [&](const NodeWaitSummary& w) { return w.node == n->id; });
  REQUIRE(it != v.waits.end());
  return *it;
}

// A graph small enough to reason about: r0: a -> ev -> b; r1: c waits on ev (a cross-rank edge
// through an event node, which leaves no record), d after c.
VariantRun tiny_variant() {
  VariantRun v;
  v.scenario = small_scenario("tiny", 1);
  v.graph.ranks = 2;
  v.graph.layers = 1;
  const auto add = [&](int rank, NodeKind kind, std::string label) {
    Node n;
    n.id = static_cast<int>(v.graph.nodes.size());
    n.rank = rank;
    n.stream = rank;
    n.kind = kind;
    n.role = kind == NodeKind::event ? Role::span_end : Role::gate;
    n.label = std::move(label);
    v.graph.nodes.push_back(n);
    return n.id;
  };
  const int a = add(0, NodeKind::gemm, "a");
  const int ev = add(0, NodeKind::event, "ev");
  const int b = add(0, NodeKind::gemm, "b");
  const int c = add(1, NodeKind::gemm, "c");
  const int d = add(1, NodeKind::gemm, "d");
  v.graph.edges = {{a, ev}, {ev, b}, {ev, c}, {c, d}};
  const auto rec = [&](int node, std::uint64_t start_us, std::uint64_t end_us) {
    ActivityRecord r;
    r.start_ns = kClock0 + start_us * 1000;
    r.end_ns = kClock0 + end_us * 1000;
    r.node = node;
    r.replay = 0;
    v.records.push_back(r);
  };
  rec(a, 0, 10);
  rec(b, 15, 20);    // ready at 10 (a's end, through ev): waited 5
  rec(c, 100, 110);  // ready at 10 on the other rank: waited 90
  rec(d, 111, 120);  // 1 after c
  return v;
}

}  // namespace

TEST_CASE("overlap is the shared time over the shorter window", "[timeline]") {
  CHECK(overlap_fraction(0, 100, 50, 150) == Approx(0.5));
  CHECK(overlap_fraction(0, 100, 20, 40) == Approx(1.0));  // the shorter lies inside the longer
  CHECK(overlap_fraction(0, 100, 100, 200) == 0.0);        // back to back
  CHECK(overlap_fraction(0, 100, 300, 400) == 0.0);
  CHECK(overlap_fraction(0, 0, 0, 100) == 0.0);  // an empty window shares nothing
}

TEST_CASE("busy overlap is the time both unions of intervals cover over the smaller union", "[timeline]") {
  using Iv = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
  CHECK(busy_overlap_fraction(Iv{{0, 10}, {20, 30}}, Iv{{10, 20}, {30, 40}}) == 0.0);  // taking turns
  CHECK(busy_overlap_fraction(Iv{{0, 10}, {20, 30}}, Iv{{0, 10}, {20, 30}}) == 1.0);
  CHECK(busy_overlap_fraction(Iv{{0, 100}}, Iv{{50, 60}, {90, 130}}) == Approx(20.0 / 50.0));
  // Overlapping intervals of one rank count once; unsorted input is fine.
  CHECK(busy_overlap_fraction(Iv{{5, 15}, {0, 10}}, Iv{{0, 15}}) == 1.0);
  CHECK(busy_overlap_fraction(Iv{}, Iv{{0, 10}}) == 0.0);
  CHECK(busy_overlap_fraction(Iv{{10, 10}}, Iv{{0, 10}}) == 0.0);  // empty intervals are dropped
}

TEST_CASE("verdict thresholds split overlapped, partial and serialized", "[timeline]") {
  CHECK(verdict_of(0.9, 2) == Verdict::overlapped);
  CHECK(verdict_of(kOverlappedAtLeast, 2) == Verdict::overlapped);
  CHECK(verdict_of(0.3, 2) == Verdict::partial);
  CHECK(verdict_of(kSerializedAtMost, 2) == Verdict::serialized);
  CHECK(verdict_of(0.0, 2) == Verdict::serialized);
  CHECK(verdict_of(std::nullopt, 2) == Verdict::no_data);
  CHECK(verdict_of(0.0, 1) == Verdict::single_rank);
  CHECK(verdict_thresholds_text().find("0.50") != std::string::npos);
  CHECK(verdict_thresholds_text().find("0.05") != std::string::npos);
}

TEST_CASE("summaries interpolate percentiles over replays", "[timeline]") {
  const Stats s = summarize({10, 1, 9, 2, 8, 3, 7, 4, 6, 5});
  CHECK(s.count == 10);
  CHECK(s.min == 1);
  CHECK(s.max == 10);
  CHECK(s.median == Approx(5.5));
  CHECK(s.p90 == Approx(9.1));
  CHECK(summarize({}).count == 0);
}

TEST_CASE("two ranks that run side by side are OVERLAPPED", "[timeline]") {
  const VariantRun run = scheduled_variant(small_scenario("side-by-side", 5), {0, 1'000});
  const VariantTimeline v = analyze_variant(run);
  REQUIRE(v.replays.size() == 5);
  CHECK(v.verdict == Verdict::overlapped);
  CHECK(v.verdict_counts[static_cast<std::size_t>(Verdict::overlapped)] == 5);
  // 7 ops of 10 µs on each rank; rank 1 starts 1 µs later.
  CHECK(v.rank_summaries[0].span_us.median == Approx(70.0));
  CHECK(v.rank_summaries[1].offset_us.median == Approx(1.0));
  CHECK(v.rank_summaries[0].offset_us.median == Approx(0.0));
  CHECK(v.overlap.median == Approx(69.0 / 70.0));
  CHECK(v.busy_overlap.median == Approx(69.0 / 70.0));
  CHECK(v.health.clean());
}

TEST_CASE("ranks on one GPU whose kernels take turns are judged on busy overlap: SERIALIZED", "[timeline]") {
  // One shared GPU, each rank's op fills the other's gap: the windows share almost all their time,
  // the kernels none of it.
  const VariantRun run = scheduled_variant(small_scenario("turns", 3), {0, 10'000}, 10'000, 10'000);
  const VariantTimeline v = analyze_variant(run);
  CHECK(v.basis == OverlapBasis::busy);
  CHECK(v.overlap.median > 0.9);
  CHECK(v.window_verdict == Verdict::overlapped);
  CHECK(v.busy_overlap.count == 3);
  CHECK(v.busy_overlap.max == 0.0);
  CHECK(v.verdict == Verdict::serialized);
  CHECK(v.busy_verdict == Verdict::serialized);
  CHECK(v.verdict_counts[static_cast<std::size_t>(Verdict::serialized)] == 3);
  for (const auto& rt : v.replays) CHECK(rt.verdict == Verdict::serialized);
}

TEST_CASE("ranks on different GPUs are judged on window overlap, busy overlap beside it", "[timeline]") {
  VariantRun run = scheduled_variant(small_scenario("two-gpus", 3), {0, 10'000}, 10'000, 10'000);
  for (auto& n : run.graph.nodes) n.device = n.rank;
  run.ranks_share_gpu = false;
  const VariantTimeline v = analyze_variant(run);
  CHECK(v.basis == OverlapBasis::window);
  CHECK(v.verdict == Verdict::overlapped);
  CHECK(v.verdict_overlap.median == Approx(v.overlap.median));
  CHECK(v.busy_verdict == Verdict::serialized);
}

TEST_CASE("rank 1 starting after rank 0 ends is SERIALIZED, and its first node shows the wait", "[timeline]") {
  const VariantRun run = scheduled_variant(small_scenario("one-after-the-other", 4), {0, 72'000});
  const VariantTimeline v = analyze_variant(run);
  CHECK(v.verdict == Verdict::serialized);
  CHECK(v.overlap.max == 0.0);
  CHECK(v.rank_summaries[1].offset_us.median == Approx(72.0));
  // r1.quant_z depends on nothing recorded (its begin event has no recorded ancestor), so it was
  // ready when the replay began, and waited 72 µs for something the graph does not show.
  REQUIRE_FALSE(v.waits.empty());
  const Node& top = run.graph.nodes[static_cast<std::size_t>(v.waits.front().node)];
  CHECK(top.label == "r1.quant_z");
  CHECK(top.rank == 1);
  CHECK(v.waits.front().wait_us.median == Approx(72.0));
  CHECK(v.waits.front().ready_from == -1);
  CHECK(wait_of(run, v, "r0.gate").wait_us.max == Approx(0.0));
}

TEST_CASE("ranks sharing part of their windows are PARTIAL", "[timeline]") {
  const VariantRun run = scheduled_variant(small_scenario("half", 3), {0, 40'000});
  const VariantTimeline v = analyze_variant(run);
  CHECK(v.verdict == Verdict::partial);
  CHECK(v.overlap.median == Approx(30.0 / 70.0));
}

TEST_CASE("ready time walks through event nodes to the latest recorded predecessor", "[timeline]") {
  const VariantRun run = tiny_variant();
  const VariantTimeline v = analyze_variant(run);
  const auto& t = v.timings.at(0);
  // a: nothing before it: ready at the replay's first start.
  CHECK(t[0].wait_us == Approx(0.0));
  CHECK(t[0].ready_from == -1);
  // b after a through the event node.
  CHECK(t[2].ready_from == 0);
  CHECK(t[2].wait_us == Approx(5.0));
  // c on rank 1 waited 90 µs after a ended: what the graph does not explain.
  CHECK(t[3].ready_from == 0);
  CHECK(t[3].wait_us == Approx(90.0));
  CHECK(t[4].ready_from == 3);
  CHECK(t[4].wait_us == Approx(1.0));
  CHECK(v.waits.front().node == 3);
}

TEST_CASE("a missing record is counted and the ready time walks past its node", "[timeline]") {
  VariantRun run = tiny_variant();
  run.records.erase(run.records.begin() + 2);  // c's record
  const VariantTimeline v = analyze_variant(run);
  CHECK(v.health.missing == 1);
  CHECK_FALSE(v.health.clean());
  CHECK(v.health.problems().find("1 kernel/copy nodes with no record") != std::string::npos);
  // d now depends (through the missing c) on a.
  CHECK(v.timings[0][4].ready_from == 0);
}

TEST_CASE("dropped, untimed and unmatched records make the variant unclean", "[timeline]") {
  VariantRun run = scheduled_variant(small_scenario("dirty", 2), {0, 1'000});
  run.health.dropped = 3;
  ActivityRecord untimed = run.records.front();
  untimed.start_ns = 0;
  ActivityRecord unmatched = run.records.front();
  unmatched.node = -1;
  ActivityRecord warmup = run.records.front();
  warmup.replay = -1;
  run.records.push_back(untimed);
  run.records.push_back(unmatched);
  run.records.push_back(warmup);
  const VariantTimeline v = analyze_variant(run);
  CHECK_FALSE(v.health.clean());
  CHECK(v.health.no_timestamp_seen == 1);
  CHECK(v.health.unmatched_seen == 1);
  CHECK(v.health.replay_out_of_range == 1);
  const std::string p = v.health.problems();
  CHECK(p.find("3 records dropped by CUPTI") != std::string::npos);
  CHECK(p.find("1 records without a timestamp") != std::string::npos);
  CHECK(p.find("1 records matching no graph node") != std::string::npos);
  // The analysis itself is unchanged by the bad records.
  CHECK(v.verdict == Verdict::overlapped);
}

TEST_CASE("CUPTI spans are checked against the event-node spans", "[timeline]") {
  SECTION("events 2 µs outside a 70 µs chain: within 2%? no: 70/72 is off by 2.8%") {
    const VariantTimeline v = analyze_variant(scheduled_variant(small_scenario("events", 3), {0, 1'000}));
    CHECK(v.rank_summaries[0].cupti_over_event.median == Approx(70.0 / 72.0));
    CHECK(v.rank_summaries[0].event_minus_cupti_us.median == Approx(2.0));
    CHECK(v.rank_summaries[0].event_mismatch);
  }
  SECTION("a long chain makes the same 2 µs negligible") {
    const VariantTimeline v =
        analyze_variant(scheduled_variant(small_scenario("events", 3), {0, 1'000}, 100'000, 0, 10'000'000));
    CHECK(v.rank_summaries[1].cupti_over_event.median == Approx(700.0 / 702.0));
    CHECK_FALSE(v.rank_summaries[1].event_mismatch);
  }
}

TEST_CASE("with layers the overlap is taken per layer, so layer-by-layer serialization shows", "[timeline]") {
  Scenario s = small_scenario("layers", 2);
  s.layers = 2;
  s.join = JoinKind::reduce;
  VariantRun run = scheduled_variant(s, {0, 0}, 10'000, 0, 10'000'000);
  // Lay the ranks out layer by layer, one after the other: r0 L0, r1 L0, r0 L1, r1 L1.
  for (auto& a : run.records) {
    const Node& n = run.graph.nodes[static_cast<std::size_t>(a.node)];
    const std::uint64_t slot = static_cast<std::uint64_t>(n.layer * 2 + n.rank);
    const std::uint64_t begin = kClock0 + static_cast<std::uint64_t>(a.replay) * 10'000'000;
    const std::uint64_t within = (a.start_ns - begin) % 1'000'000;  // position in its rank's chain
    a.start_ns = begin + slot * 1'000'000 + within;
    a.end_ns = a.start_ns + 1'000;
  }
  const VariantTimeline v = analyze_variant(run);
  CHECK(v.layers == 2);
  // Whole-replay windows would overlap by half; per layer they share nothing.
  CHECK(v.verdict == Verdict::serialized);
}

TEST_CASE("with three ranks each is compared to the root and the smallest overlap decides", "[timeline]") {
  Scenario s = small_scenario("three", 2);
  s.geometry.ranks = 3;
  const VariantTimeline v = analyze_variant(scheduled_variant(s, {0, 0, 60'000}));
  REQUIRE(v.overlap_vs_root.size() == 3);
  CHECK(v.overlap_vs_root[0].count == 0);
  CHECK(v.overlap_vs_root[1].median == Approx(1.0));
  CHECK(v.overlap_vs_root[2].median == Approx(10.0 / 70.0));
  CHECK(v.overlap.median == Approx(10.0 / 70.0));
  CHECK(v.verdict == Verdict::partial);
}

TEST_CASE("tracing cost and host launch cost are summarized", "[timeline]") {
  const VariantTimeline v = analyze_variant(scheduled_variant(small_scenario("costs", 5), {0, 0}));
  REQUIRE(v.tracing_cost.has_value());
  CHECK(*v.tracing_cost == Approx(1.03));
  CHECK(v.host_launch_us.median == Approx(12.0));
  CHECK(v.host_launch_us.max == Approx(14.0));
}

TEST_CASE("run analysis takes its time base from the earliest record", "[timeline]") {
  RunData run = single_variant_run(scheduled_variant(small_scenario("a", 2), {5'000, 0}));
  const RunAnalysis a = analyze_run(run);
  CHECK(a.base_ns == kClock0);
  CHECK(a.collection_clean());
}

namespace {

double path_total(const ReplayTimeline& rt) {
  double sum = 0;
  for (const auto& l : rt.critical_path) sum += l.us;
  return sum;
}

}  // namespace

TEST_CASE("a wait splits into contention by the nodes that held the GPU and idle", "[timeline][why]") {
  // r1: c -> d. While d waits (ready at 10, start at 60) rank 0's a runs 10..50 and e 50..55 on the
  // same GPU; 55..60 nothing runs.
  HandBuilt h(2);
  const int a = h.node(0, 0, "a");
  const int e = h.node(0, 0, "e");
  const int c = h.node(1, 0, "c");
  const int d = h.node(1, 0, "d");
  h.edge(a, e);
  h.edge(c, d);
  h.record(c, 0, 10);
  h.record(a, 10, 50);
  h.record(e, 50, 55);
  h.record(d, 60, 70);
  const VariantTimeline v = analyze_variant(h.v);
  const NodeTiming& t = v.timings[0][static_cast<std::size_t>(d)];
  CHECK(t.ready_from == c);
  CHECK(t.wait_us == Approx(50.0));
  CHECK(t.parts.contention_us == Approx(45.0));
  CHECK(t.parts.idle_us == Approx(5.0));
  CHECK(t.parts.contention_us + t.parts.idle_us == Approx(t.wait_us));
  REQUIRE(t.parts.occupants.size() == 2);
  CHECK(t.parts.occupants[0].node == a);
  CHECK(t.parts.occupants[0].us == Approx(40.0));
  CHECK_FALSE(t.parts.occupants[0].other_replay);
  CHECK(t.parts.occupants[1].node == e);
  CHECK(t.parts.occupants[1].us == Approx(5.0));
  CHECK(t.parts.arrival_us == 0.0);  // its predecessor is on its own rank
  CHECK(t.parts.own_from == -1);
  // a depends on nothing: ready at the replay's start, it waited the 10 µs c held the GPU.
  const NodeTiming& ta = v.timings[0][static_cast<std::size_t>(a)];
  CHECK(ta.wait_us == Approx(10.0));
  CHECK(ta.parts.contention_us == Approx(10.0));
  REQUIRE(ta.parts.occupants.size() == 1);
  CHECK(ta.parts.occupants[0].node == c);
  // The node's typical breakdown over replays is its one replay's.
  const NodeWaitSummary* w = v.wait_of(d);
  REQUIRE(w != nullptr);
  CHECK(w->typical_replay == 0);
  CHECK(w->typical.contention_us == Approx(45.0));
  CHECK(w->contention_us.median == Approx(45.0));
  CHECK(w->idle_us.median == Approx(5.0));
}

TEST_CASE("work on another GPU is not contention: the wait is idle", "[timeline][why]") {
  HandBuilt h(2);
  const int a = h.node(0, 0, "a");
  const int c = h.node(1, 1, "c");
  const int d = h.node(1, 1, "d");
  h.edge(c, d);
  h.record(c, 0, 10);
  h.record(a, 0, 50);
  h.record(d, 25, 35);
  const VariantTimeline v = analyze_variant(h.v);
  const NodeTiming& t = v.timings[0][static_cast<std::size_t>(d)];
  CHECK(t.wait_us == Approx(15.0));
  CHECK(t.parts.contention_us == 0.0);
  CHECK(t.parts.idle_us == Approx(15.0));
  CHECK(t.parts.occupants.empty());
}

TEST_CASE("overlapping occupants share a wait without counting any instant twice", "[timeline][why]") {
  // Two kernels of rank 0 on two streams overlap (20..60 and 40..80) while d waits 20..100.
  HandBuilt h(2);
  const int a = h.node(0, 0, "a");
  const int b = h.node(0, 0, "b");
  const int c = h.node(1, 0, "c");
  const int d = h.node(1, 0, "d");
  h.edge(c, d);
  h.record(c, 0, 20);
  h.record(a, 20, 60);
  h.record(b, 40, 80);
  h.record(d, 100, 110);
  const VariantTimeline v = analyze_variant(h.v);
  const NodeTiming& t = v.timings[0][static_cast<std::size_t>(d)];
  CHECK(t.wait_us == Approx(80.0));
  CHECK(t.parts.contention_us == Approx(60.0));  // 20..80 covered once
  CHECK(t.parts.idle_us == Approx(20.0));
  REQUIRE(t.parts.occupants.size() == 2);
  CHECK(t.parts.occupants[0].node == a);  // a started first: it owns 20..60
  CHECK(t.parts.occupants[0].us == Approx(40.0));
  CHECK(t.parts.occupants[1].node == b);  // b owns the rest, 60..80
  CHECK(t.parts.occupants[1].us == Approx(20.0));
}

TEST_CASE("a predecessor on another rank that ends late is arrival, beside the wait", "[timeline][why]") {
  // j (rank 0) joins p (rank 0, ends at 10) and q (rank 1 on GPU 1, ends at 50); j starts at 53.
  HandBuilt h(2);
  const int p = h.node(0, 0, "p");
  const int q = h.node(1, 1, "q");
  const int j = h.node(0, 0, "j");
  h.edge(p, j);
  h.edge(q, j);
  h.record(p, 0, 10);
  h.record(q, 0, 50);
  h.record(j, 53, 60);
  const VariantTimeline v = analyze_variant(h.v);
  const NodeTiming& t = v.timings[0][static_cast<std::size_t>(j)];
  CHECK(t.ready_from == q);
  CHECK(t.wait_us == Approx(3.0));
  CHECK(t.parts.idle_us == Approx(3.0));
  CHECK(t.parts.contention_us == 0.0);
  CHECK(t.parts.own_from == p);
  CHECK(t.parts.arrival_us == Approx(40.0));
  const NodeWaitSummary* w = v.wait_of(j);
  REQUIRE(w != nullptr);
  CHECK(w->arrival_us.median == Approx(40.0));
  // q has no own-rank predecessor: nothing to arrive late against.
  CHECK(v.timings[0][static_cast<std::size_t>(q)].parts.own_from == -1);
}

TEST_CASE("the critical path runs through the later branch of a join", "[timeline][why]") {
  // a (rank 0, GPU 0) 0..10 and b (rank 1, GPU 1) 0..40 join into j (GPU 0) 45..60.
  HandBuilt h(2);
  const int a = h.node(0, 0, "a");
  const int b = h.node(1, 1, "b");
  const int j = h.node(0, 0, "j");
  h.edge(a, j);
  h.edge(b, j);
  h.record(a, 0, 10);
  h.record(b, 0, 40);
  h.record(j, 45, 60);
  const VariantTimeline v = analyze_variant(h.v);
  const ReplayTimeline& rt = v.replays[0];
  REQUIRE(rt.critical_path.size() == 3);
  CHECK(rt.critical_path[0].kind == PathLinkKind::run);
  CHECK(rt.critical_path[0].node == b);
  CHECK(rt.critical_path[0].us == Approx(40.0));
  CHECK(rt.critical_path[1].kind == PathLinkKind::idle);
  CHECK(rt.critical_path[1].node == j);
  CHECK(rt.critical_path[1].us == Approx(5.0));
  CHECK(rt.critical_path[2].kind == PathLinkKind::run);
  CHECK(rt.critical_path[2].node == j);
  CHECK(rt.critical_path[2].us == Approx(15.0));
  CHECK(path_total(rt) == Approx(rt.span_us));
  CHECK(v.critical_path.speedup_node == b);
  CHECK(v.critical_path.speedup_us == Approx(40.0));
  CHECK(v.critical_path.typical_replay == 0);
}

TEST_CASE("the critical path goes through the node that held the GPU while another waited", "[timeline][why]") {
  // One GPU: r1's c is ready at 0 but r0's a holds the GPU 0..30; c runs 30..40, then r0's b
  // (after a) waits for c and runs 40..50.
  HandBuilt h(2);
  const int a = h.node(0, 0, "a");
  const int b = h.node(0, 0, "b");
  const int c = h.node(1, 0, "c");
  h.edge(a, b);
  h.record(a, 0, 30);
  h.record(c, 30, 40);
  h.record(b, 40, 50);
  const VariantTimeline v = analyze_variant(h.v);
  const ReplayTimeline& rt = v.replays[0];
  REQUIRE(rt.critical_path.size() == 3);
  CHECK(rt.critical_path[0].node == a);
  CHECK(rt.critical_path[0].held == c);
  CHECK(rt.critical_path[1].node == c);
  CHECK(rt.critical_path[1].held == b);
  CHECK(rt.critical_path[2].node == b);
  CHECK(rt.critical_path[2].held == -1);
  CHECK(path_total(rt) == Approx(50.0));
}

TEST_CASE("critical path links add up to every replay's span", "[timeline][why]") {
  for (const std::uint64_t gap : {0ULL, 3'000ULL}) {
    const VariantTimeline v = analyze_variant(scheduled_variant(small_scenario("turns", 4), {0, 10'000}, 10'000, gap));
    for (const auto& rt : v.replays) CHECK(path_total(rt) == Approx(rt.span_us));
  }
  Scenario s = small_scenario("root-busy", 3);
  s.root_busy = 3;
  s.join = JoinKind::reduce;
  const VariantTimeline v = analyze_variant(scheduled_variant(s, {0, 35'000}, 10'000, 2'000));
  for (const auto& rt : v.replays) CHECK(path_total(rt) == Approx(rt.span_us));
}

TEST_CASE("a replay whose rank started late is an outlier, named with the node and its wait", "[timeline][why]") {
  VariantRun run = scheduled_variant(small_scenario("outlier", 12), {0, 1'000});
  // Replay 6: rank 1 starts 30 µs later than usual, behind rank 0's chain.
  for (auto& a : run.records) {
    if (a.replay != 6 || run.graph.nodes[static_cast<std::size_t>(a.node)].rank != 1) continue;
    a.start_ns += 30'000;
    a.end_ns += 30'000;
  }
  const VariantTimeline v = analyze_variant(run);
  CHECK(v.span_us.median == Approx(71.0));
  CHECK(v.outlier_threshold_us == Approx(0.05 * 71.0));
  REQUIRE(v.outliers.size() == 1);
  const OutlierReplay& o = v.outliers[0];
  CHECK(o.replay == 6);
  CHECK(o.span_us == Approx(101.0));
  CHECK(o.span_departs);
  CHECK(o.late_node == run.graph.find("r1.quant_z")->id);
  CHECK(o.late_by_us == Approx(30.0));
  CHECK(o.excess_wait_us == Approx(30.0));
  const NodeTiming& t = v.timings[6][static_cast<std::size_t>(o.late_node)];
  CHECK(t.wait_us == Approx(31.0));
  CHECK(t.parts.contention_us == Approx(31.0));  // rank 0's chain held the GPU all along
  CHECK(o.slow_by_us == Approx(0.0));            // no node ran longer than usual
  CHECK(v.steadiness.known);
  CHECK(v.steadiness.steady);
}

TEST_CASE("an outlier replay names the node that ran longer than usual", "[timeline][why]") {
  VariantRun run = scheduled_variant(small_scenario("slow-gemm", 10), {0, 1'000}, 10'000, 1'000);
  // Replay 4: r0.gate runs 20 µs longer; everything after it on rank 0 moves with it.
  const Node* gate = run.graph.find("r0.gate");
  std::uint64_t gate_start = 0;
  for (const auto& a : run.records)
    if (a.replay == 4 && a.node == gate->id) gate_start = a.start_ns;
  for (auto& a : run.records) {
    if (a.replay != 4 || run.graph.nodes[static_cast<std::size_t>(a.node)].rank != 0 || a.start_ns < gate_start)
      continue;
    if (a.node != gate->id) a.start_ns += 20'000;
    a.end_ns += 20'000;
  }
  const VariantTimeline v = analyze_variant(run);
  REQUIRE(v.outliers.size() == 1);
  CHECK(v.outliers[0].replay == 4);
  CHECK(v.outliers[0].slow_node == gate->id);
  CHECK(v.outliers[0].slow_by_us == Approx(20.0));
}

TEST_CASE("a run whose last replays are slower than its first is not steady", "[timeline][why]") {
  VariantRun run = scheduled_variant(small_scenario("drift", 12), {0, 1'000});
  for (auto& a : run.records) {
    if (a.replay < 8 || run.graph.nodes[static_cast<std::size_t>(a.node)].rank != 1) continue;
    a.start_ns += 40'000;
    a.end_ns += 40'000;
  }
  const VariantTimeline v = analyze_variant(run);
  REQUIRE(v.steadiness.known);
  CHECK(v.steadiness.quarter == 3);
  CHECK(v.steadiness.first_span_us == Approx(71.0));
  CHECK(v.steadiness.last_span_us == Approx(111.0));
  CHECK_FALSE(v.steadiness.steady);
  CHECK(v.outliers.size() == 4);
  SECTION("too few replays to judge") {
    const VariantTimeline few = analyze_variant(scheduled_variant(small_scenario("few", 5), {0, 1'000}));
    CHECK_FALSE(few.steadiness.known);
  }
}

TEST_CASE("a replay whose verdict departs from the variant's is an outlier", "[timeline][why]") {
  VariantRun run = scheduled_variant(small_scenario("one-off", 9), {0, 1'000});
  // Replay 2: rank 1 runs after rank 0 instead of beside it (its span departs as well).
  for (auto& a : run.records) {
    if (a.replay != 2 || run.graph.nodes[static_cast<std::size_t>(a.node)].rank != 1) continue;
    a.start_ns += 70'000;
    a.end_ns += 70'000;
  }
  const VariantTimeline v = analyze_variant(run);
  CHECK(v.verdict == Verdict::overlapped);
  REQUIRE(v.outliers.size() == 1);
  CHECK(v.outliers[0].replay == 2);
  CHECK(v.outliers[0].verdict == Verdict::serialized);
  CHECK(v.outliers[0].verdict_departs);
}

TEST_CASE("work of an overlapping replay is contention, named as another replay's", "[timeline][why]") {
  // Replay 1 begins before replay 0 has ended: its b waits for replay 0's b to leave the GPU.
  HandBuilt h(1, 2);
  const int a = h.node(0, 0, "a");
  const int b = h.node(0, 0, "b");
  h.edge(a, b);
  const auto put = [&](int node, int replay, std::uint64_t start_us, std::uint64_t end_us) {
    ActivityRecord r;
    r.start_ns = kClock0 + start_us * 1000;
    r.end_ns = kClock0 + end_us * 1000;
    r.node = node;
    r.replay = replay;
    h.v.records.push_back(r);
  };
  put(a, 0, 0, 10);
  put(b, 0, 10, 100);
  put(a, 1, 20, 30);
  put(b, 1, 100, 110);
  const VariantTimeline v = analyze_variant(h.v);
  const NodeTiming& t = v.timings[1][static_cast<std::size_t>(b)];
  CHECK(t.wait_us == Approx(70.0));
  CHECK(t.parts.contention_us == Approx(70.0));
  REQUIRE(t.parts.occupants.size() == 1);
  CHECK(t.parts.occupants[0].node == b);
  CHECK(t.parts.occupants[0].other_replay);
  // On the critical path the other replay's work is a contention link of b, not a run.
  const auto& path = v.replays[1].critical_path;
  REQUIRE(path.size() == 3);
  CHECK(path[0].kind == PathLinkKind::run);
  CHECK(path[0].node == a);
  CHECK(path[1].kind == PathLinkKind::contention);
  CHECK(path[1].node == b);
  CHECK(path[1].occupant == b);
  CHECK(path[1].us == Approx(70.0));
  CHECK(path[2].node == b);
}

TEST_CASE("with ranks on the root's GPU and on another, each rank is judged on its own basis", "[timeline][why]") {
  // r0 and r1 share GPU 0 and take turns (busy overlap 0, windows shared); r2 on GPU 1 runs beside r0.
  HandBuilt h(3);
  const int a0 = h.node(0, 0, "a0");
  const int b0 = h.node(0, 0, "b0");
  const int a1 = h.node(1, 0, "a1");
  const int b1 = h.node(1, 0, "b1");
  const int a2 = h.node(2, 1, "a2");
  h.edge(a0, b0);
  h.edge(a1, b1);
  h.record(a0, 0, 10);
  h.record(a1, 10, 20);
  h.record(b0, 20, 30);
  h.record(b1, 30, 40);
  h.record(a2, 0, 30);
  const VariantTimeline v = analyze_variant(h.v);
  CHECK(v.basis == OverlapBasis::mixed);
  const ReplayTimeline& rt = v.replays[0];
  REQUIRE(rt.busy_vs_root[1].has_value());
  CHECK(*rt.busy_vs_root[1] == 0.0);
  CHECK(*rt.overlap_vs_root[1] == Approx(2.0 / 3.0));  // windows 0..30 and 10..40
  CHECK(*rt.overlap_vs_root[2] == Approx(1.0));
  CHECK(*rt.verdict_overlap == 0.0);  // r1's busy overlap decides
  CHECK(rt.verdict == Verdict::serialized);
  CHECK(v.window_verdict == Verdict::overlapped);
}

TEST_CASE("keeping the detail of a few replays changes no summary", "[timeline][scale]") {
  // Two ranks sharing GPU 0, 40 replays with contention that varies per replay and one slow replay.
  HandBuilt h(2, 40);
  const int a = h.node(0, 0, "a");
  const int b = h.node(0, 0, "b");
  const int c = h.node(1, 0, "c");
  const int d = h.node(1, 0, "d");
  h.edge(a, b);
  h.edge(c, d);
  h.edge(a, d);
  for (int r = 0; r < 40; ++r) {
    const double skew = (r * 7) % 11;
    const double slow = r == 29 ? 400.0 : 0.0;
    h.record(a, 0, 20, r);
    h.record(c, 5 + skew, 30 + skew, r);
    h.record(b, 30 + skew, 50 + skew + slow, r);
    h.record(d, 52 + skew + slow, 60 + skew + slow, r);
  }
  const VariantTimeline full = analyze_variant(h.v, AnalysisOptions{.detail_replays = -1, .replay = std::nullopt});
  const VariantTimeline few = analyze_variant(h.v, AnalysisOptions{.detail_replays = 3, .replay = 17});
  const auto same_stats = [](const Stats& x, const Stats& y) {
    CHECK(x.count == y.count);
    CHECK(x.min == y.min);
    CHECK(x.median == y.median);
    CHECK(x.p90 == y.p90);
    CHECK(x.max == y.max);
  };
  REQUIRE(full.waits.size() == few.waits.size());
  for (std::size_t i = 0; i < full.waits.size(); ++i) {
    const NodeWaitSummary& x = full.waits[i];
    const NodeWaitSummary& y = few.waits[i];
    CHECK(x.node == y.node);
    same_stats(x.wait_us, y.wait_us);
    same_stats(x.duration_us, y.duration_us);
    same_stats(x.contention_us, y.contention_us);
    same_stats(x.idle_us, y.idle_us);
    same_stats(x.arrival_us, y.arrival_us);
    CHECK(x.typical_replay == y.typical_replay);
    CHECK(x.typical.contention_us == y.typical.contention_us);
    CHECK(x.typical.occupants.size() == y.typical.occupants.size());
  }
  REQUIRE(full.critical_path.nodes.size() == few.critical_path.nodes.size());
  for (std::size_t i = 0; i < full.critical_path.nodes.size(); ++i) {
    CHECK(full.critical_path.nodes[i].node == few.critical_path.nodes[i].node);
    same_stats(full.critical_path.nodes[i].run_us, few.critical_path.nodes[i].run_us);
    same_stats(full.critical_path.nodes[i].wait_us, few.critical_path.nodes[i].wait_us);
  }
  CHECK(full.critical_path.speedup_node == few.critical_path.speedup_node);
  REQUIRE(full.outliers.size() == few.outliers.size());
  REQUIRE_FALSE(few.outliers.empty());
  CHECK(few.outliers.front().replay == 29);
  CHECK(few.outliers.front().late_node == full.outliers.front().late_node);
  CHECK(few.verdict_counts == full.verdict_counts);
  same_stats(full.busy_overlap, few.busy_overlap);

  // Detail: the first three, the outlier, the median-span and median-wait replays, the one asked for.
  for (int r = 0; r < 3; ++r) CHECK(few.has_detail(r));
  CHECK(few.has_detail(29));
  CHECK(few.has_detail(17));
  CHECK(few.has_detail(few.critical_path.typical_replay));
  for (const auto& w : few.waits) CHECK(few.has_detail(w.typical_replay));
  int kept = 0;
  for (int r = 0; r < 40; ++r) kept += few.has_detail(r) ? 1 : 0;
  CHECK(kept < 12);
  CHECK(few.replays[17].critical_path.size() == full.replays[17].critical_path.size());
  CHECK(few.replays[29].critical_path.size() == full.replays[29].critical_path.size());
  for (int r = 0; r < 40; ++r)
    if (!few.has_detail(r)) CHECK(few.replays[static_cast<std::size_t>(r)].critical_path.empty());
}
