// tpgraph diff and gate on synthetic runs whose shifts and drift are known (diff_fixture.hpp): the
// false-alarm and detection rates, matching under renumbering, structural changes, every refusal of
// gate, and the block bootstrap and steadiness rules underneath.
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <string>

#include "catch.hpp"
#include "core/analysis/run_diff.hpp"
#include "core/analysis/steady.hpp"
#include "core/base/bootstrap.hpp"
#include "core/report/diff_report.hpp"
#include "diff_fixture.hpp"

using namespace tpgraph;
using namespace tpgraph::testing;

namespace {

DiffRun side_of(const RunData& run, const std::string& origin) {
  AnalysisOptions o;
  o.keep_series = true;
  o.detail_replays = 0;
  return diff_side(run, analyze_run(run, o), origin);
}

RunDiff diff_of(const SyntheticRun& a, const SyntheticRun& b) {
  return diff_runs(side_of(synthetic_run(a), "A"), side_of(synthetic_run(b), "B"));
}

const MetricDiff* find(const RunDiff& d, const std::string& subject, Metric m) {
  for (const auto& x : d.metrics)
    if (x.subject == subject && x.metric == m) return &x;
  return nullptr;
}

bool has_structure(const RunDiff& d, StructureKind k, const std::string& what) {
  return std::any_of(d.structure.begin(), d.structure.end(),
                     [&](const StructuralChange& s) { return s.kind == k && s.what == what; });
}

}  // namespace

TEST_CASE("the block bootstrap is deterministic and its interval covers a known shift", "[diff]") {
  TestRng rng(7);
  std::vector<double> a, b;
  for (int i = 0; i < 200; ++i) {
    a.push_back(100 + rng.normal());
    b.push_back(103 + rng.normal());
  }
  const auto m1 = stats::median_shift(a, b, 42, true);
  const auto m2 = stats::median_shift(a, b, 42, true);
  CHECK(m1.lo == m2.lo);
  CHECK(m1.hi == m2.hi);
  CHECK(m1.excludes_zero());
  // Over 100 such pairs, the 95% interval holds the true shift in about 95.
  int covered = 0;
  for (std::uint64_t seed = 0; seed < 100; ++seed) {
    TestRng r(100 + seed);
    std::vector<double> x, y;
    for (int i = 0; i < 200; ++i) {
      x.push_back(100 + r.normal());
      y.push_back(103 + r.normal());
    }
    const auto m = stats::median_shift(x, y, seed, true);
    covered += m.lo <= 3.0 && 3.0 <= m.hi ? 1 : 0;
  }
  INFO("intervals holding the true shift: " << covered << " of 100");
  CHECK(covered >= 88);
  CHECK(m1.block_a == 15);  // ceil(sqrt(200))
  // Thinned past kMaxBootstrapValues: every other value of 8000, the interval around the full shift.
  std::vector<double> big_a, big_b;
  for (int i = 0; i < 8000; ++i) {
    big_a.push_back(100 + rng.normal());
    big_b.push_back(103 + rng.normal());
  }
  const auto big = stats::median_shift(big_a, big_b, 42, true);
  CHECK(big.stride_a == 2);
  CHECK(big.block_a == 64);  // ceil(sqrt(4000))
  CHECK(big.lo < big.shift);
  CHECK(big.shift < big.hi);
  CHECK(big.hi - big.lo < 0.3);
  const auto none = stats::median_shift(a, a, 42, true);
  CHECK(none.shift == 0);
  CHECK_FALSE(none.excludes_zero());
}

TEST_CASE("a drifting series gets a wider interval than independent draws would give", "[diff]") {
  // The same values, once in drift order (neighbours alike) and once shuffled: blocks keep the
  // drift, so the ordered series' interval is wider.
  std::vector<double> drifting;
  for (int i = 0; i < 400; ++i) drifting.push_back(100 + 2.0 * std::sin(i / 40.0));
  std::vector<double> shuffled = drifting;
  TestRng rng(3);
  for (std::size_t i = shuffled.size() - 1; i > 0; --i)
    std::swap(shuffled[i], shuffled[static_cast<std::size_t>(rng.uniform() * static_cast<double>(i + 1))]);
  const auto ordered = stats::median_shift(drifting, drifting, 5, true);
  const auto independent = stats::median_shift(shuffled, shuffled, 5, true);
  CHECK(ordered.hi - ordered.lo > 1.3 * (independent.hi - independent.lo));
}

TEST_CASE("steady_window cuts a warm-up ramp and says so when nothing is steady", "[diff][steady]") {
  std::vector<double> spans;
  for (int i = 0; i < 200; ++i) spans.push_back(3300 + 1000 * std::exp(-i / 25.0));
  const SteadyWindow w = steady_window(spans);
  REQUIRE(w.found);
  CHECK(w.first > 0);
  CHECK(w.first <= 100);
  CHECK(w.count == 200 - w.first);
  CHECK_FALSE(span_drift(spans).steady());  // the whole run is not

  std::vector<double> flat(100, 50.0);
  CHECK(steady_window(flat).first == 0);

  // Flat, then the last 15 replays slow down to twice the span: every tail ends in the ramp.
  std::vector<double> late(100, 100.0);
  for (int i = 85; i < 100; ++i) late[static_cast<std::size_t>(i)] = 100.0 + 100.0 * (i - 85) / 15.0;
  CHECK_FALSE(steady_window(late).found);
  CHECK_FALSE(steady_window(std::vector<double>(5, 1.0)).found);  // too few to judge
}

TEST_CASE("warmup auto stops once the last window is flat, and at the cap otherwise", "[diff][steady]") {
  const auto warm = [](auto&& span_at) {
    std::vector<double> spans;
    WarmupDecision d;
    while (!d.done) {
      for (std::size_t i = 0; i < kAutoWarmupBlock; ++i) spans.push_back(span_at(spans.size()));
      d = auto_warmup_decision(spans);
    }
    return std::pair{spans.size(), d};
  };
  const auto [flat_n, flat] = warm([](std::size_t) { return 100.0; });
  CHECK(flat.steady);
  CHECK(flat_n == kAutoWarmupWindow);
  // The H200's clocks after an idle GPU: 3.8 ms falling to 3.3 ms over some 100 replays.
  const auto [ramp_n, ramp] = warm([](std::size_t i) { return 3300 + 500 * std::exp(-static_cast<double>(i) / 25.0); });
  CHECK(ramp.steady);
  CHECK(ramp_n > kAutoWarmupWindow);
  CHECK(ramp_n < 300);
  const double left = 500 * std::exp(-static_cast<double>(ramp_n) / 25.0);
  CHECK(left < 0.05 * 3300 / 2);  // what is left of the ramp is within half the allowance
  // A span that grows by 0.3% a replay never flattens.
  const auto [drift_n, drift] = warm([](std::size_t i) { return 100.0 * std::pow(1.003, static_cast<double>(i)); });
  CHECK_FALSE(drift.steady);
  CHECK(drift_n == kMaxAutoWarmup);
  CHECK(auto_warmup_note(drift_n, drift).find("NOT STEADY") != std::string::npos);
}

TEST_CASE("same distribution: at most 1 of 20 pairs flags anything", "[diff][rates]") {
  int flagged = 0;
  for (std::uint64_t pair = 0; pair < 20; ++pair) {
    SyntheticRun a, b;
    a.seed = 1000 + 2 * pair;
    b.seed = 1001 + 2 * pair;
    const RunDiff d = diff_of(a, b);
    REQUIRE(d.comparability.comparable);
    flagged += d.change_count() > 0 ? 1 : 0;
  }
  INFO("pairs that flagged anything: " << flagged << " of 20");
  CHECK(flagged <= 1);
}

TEST_CASE("a node 3% slower is flagged in at least 19 of 20 pairs, as the first line", "[diff][rates]") {
  int detected = 0;
  int first = 0;
  for (std::uint64_t pair = 0; pair < 20; ++pair) {
    SyntheticRun a, b;
    a.seed = 5000 + 2 * pair;
    b.seed = 5001 + 2 * pair;
    b.slower["r1.k1"] = 1.03;
    const RunDiff d = diff_of(a, b);
    const MetricDiff* m = find(d, "r1.k1", Metric::duration);
    REQUIRE(m != nullptr);
    detected += m->change() && m->shift.shift > 0 ? 1 : 0;
    first += !d.metrics.empty() && &d.metrics.front() == m ? 1 : 0;
  }
  INFO("detected " << detected << " of 20, first line " << first << " of 20");
  CHECK(detected >= 19);
  CHECK(first >= 19);
}

TEST_CASE("the host launch cost changes only past 15% and 2 µs, and is listed after the nodes", "[diff]") {
  SyntheticRun a, b;
  b.seed = 2;
  b.launch_factor = 1.09;  // +1.8 µs, 9%: what two processes of one build differed by on the H200
  const RunDiff same = diff_of(a, b);
  const MetricDiff* launch = find(same, "replay", Metric::launch);
  REQUIRE(launch != nullptr);
  CHECK(launch->shift.shift > 1.5);
  CHECK_FALSE(launch->change());
  b.launch_factor = 1.25;  // +5 µs, 25%
  b.slower["r1.k1"] = 1.05;
  const RunDiff slower = diff_of(a, b);
  launch = find(slower, "replay", Metric::launch);
  REQUIRE(launch != nullptr);
  CHECK(launch->change());
  REQUIRE_FALSE(slower.metrics.empty());
  CHECK(slower.metrics.front().subject == "r1.k1");  // the GPU's change first, the host's after
  CHECK(render_diff_text(slower).find("15% and 2 µs for the host launch cost") != std::string::npos);
}

TEST_CASE("the steady part excludes the warm-up ramp and is named", "[diff]") {
  SyntheticRun a, b;
  b.seed = 2;
  const RunDiff d = diff_of(a, b);
  REQUIRE(d.variants.size() == 1);
  CHECK(d.variants[0].a_first > 0);
  CHECK(d.variants[0].a_used == 200 - d.variants[0].a_first);
  CHECK(render_diff_text(d).find("steady of 200") != std::string::npos);
}

TEST_CASE("traced nodes match by kernel and position whatever their ids", "[diff][match]") {
  SyntheticRun a, b;
  a.traced = b.traced = true;
  b.reversed_ids = true;
  b.seed = 9;
  const RunDiff d = diff_of(a, b);
  REQUIRE(d.variants.size() == 1);
  CHECK(d.variants[0].matched_by == "name and graph");
  CHECK(d.structure.empty());
  CHECK(d.change_count() == 0);
  CHECK(find(d, "r1.k1", Metric::duration) != nullptr);
}

TEST_CASE("traced graphs of one shape pair by their capture site, whatever order numbered them", "[diff][match]") {
  // A server's graphs for two batch sizes, one shape: run B saw bs=8's first record first, so its
  // names are the other way round. bs=8's replays are 50% longer in both runs.
  SyntheticRun a;
  a.traced = true;
  SyntheticRun slow = a;
  for (const char* label : {"r0.k0", "r0.k1", "r0.k2", "r0.k3", "r1.k0", "r1.k1", "r1.k2", "r1.k3"})
    slow.slower[label] = 1.5;
  const auto server = [&](bool swapped) {
    RunData r = synthetic_run(a);
    r.variants.push_back(synthetic_run(slow).variants[0]);
    for (std::size_t i = 0; i < 2; ++i) {
      const std::string name = (i == 0) != swapped ? "graph-1" : "graph-2";
      r.variants[i].scenario.name = name;
      r.variants[i].identity = fmt::format(
          "captured at server.py:52 capture_all; NVTX capture bs={}; 12 nodes; fingerprint 00000000000000aa",
          i == 0 ? 1 : 8);
    }
    return r;
  };
  const RunDiff d = diff_runs(side_of(server(false), "A"), side_of(server(true), "B"));
  REQUIRE(d.variants.size() == 2);
  for (const auto& v : d.variants) {
    CHECK(v.matched_by == "capture site and graph");
    CHECK(v.a != v.b);  // graph-1 (bs=1) in A is graph-2 in B
    CHECK(v.span_mean_b_us == Approx(v.span_mean_a_us).epsilon(0.05));
  }
  // Without the sites the names pair them: bs=1 against bs=8, the span 50% apart.
  RunData plain_a = server(false), plain_b = server(true);
  for (auto* r : {&plain_a, &plain_b})
    for (auto& v : r->variants) v.identity.clear();
  const RunDiff by_name = diff_runs(side_of(plain_a, "A"), side_of(plain_b, "B"));
  REQUIRE(by_name.variants.size() == 2);
  CHECK(by_name.variants[0].matched_by == "name and graph");
  CHECK(by_name.variants[0].a == by_name.variants[0].b);
}

TEST_CASE("structural changes are listed: nodes, edges, a renamed kernel, a variant in one run only", "[diff][match]") {
  SyntheticRun a;
  a.traced = true;
  RunData ra = synthetic_run(a);
  RunData rb = synthetic_run(a);
  LayerGraph& g = rb.variants[0].graph;
  g.nodes[5].name = "kernel_k1_v2";  // r1.k1: a new version of the kernel
  g.nodes[5].label = "r1.k1v2";
  std::erase_if(g.edges, [](const Edge& e) { return e.from == 7 && e.to == 3; });  // the join is gone
  rb.variants.push_back(rb.variants[0]);
  rb.variants[1].scenario.name = "extra";
  rb.variants[1].graph.edges.push_back({0, 7});
  const RunDiff d = diff_runs(side_of(ra, "A"), side_of(rb, "B"));
  CHECK(has_structure(d, StructureKind::kernel_renamed, "r1.k1 -> r1.k1v2"));
  CHECK(has_structure(d, StructureKind::edge_removed, "r1.k3 -> r0.k3"));
  CHECK(has_structure(d, StructureKind::variant_only_b, "extra"));
  CHECK(d.variants.size() == 1);
}

TEST_CASE("a run with an extra node: added, and on the critical path", "[diff][match]") {
  SyntheticRun a;
  RunData ra = synthetic_run(a);
  RunData rb = synthetic_run(a);
  VariantRun& v = rb.variants[0];
  Node busy = v.graph.nodes[0];
  busy.id = static_cast<int>(v.graph.nodes.size());
  busy.label = "r0.busy0";
  v.graph.nodes.push_back(busy);
  v.graph.edges.push_back({busy.id, 0});
  // r0.busy0 runs 100 µs before r0.k0 in every replay: everything else moves later.
  for (auto& r : v.records) {
    r.start_ns += 102'000;
    r.end_ns += 102'000;
  }
  for (int replay = 0; replay < a.replays; ++replay) {
    ActivityRecord r = v.records.front();
    r.node = busy.id;
    r.replay = replay;
    r.start_ns = kClock0 + static_cast<std::uint64_t>(replay) * 10'000'000ULL;
    r.end_ns = r.start_ns + 100'000;
    v.records.push_back(r);
  }
  const RunDiff d = diff_runs(side_of(ra, "A"), side_of(rb, "B"));
  CHECK(has_structure(d, StructureKind::node_added, "r0.busy0"));
  REQUIRE(d.variants.size() == 1);
  const auto& joined = d.variants[0].path_joined;
  CHECK(std::find(joined.begin(), joined.end(), "r0.busy0 (added)") != joined.end());
  REQUIRE_FALSE(d.variants[0].explains.empty());
  CHECK(d.variants[0].explains[0].label == "r0.busy0 (added)");
  const MetricDiff* span = find(d, "replay", Metric::replay_span);
  REQUIRE(span != nullptr);
  CHECK(span->change());
}

TEST_CASE("gate passes, fails on a regression, and refuses what it cannot compare", "[diff][gate]") {
  SyntheticRun a, b;
  b.seed = 2;
  GateBudget budget;
  SECTION("same distribution: pass") { CHECK(gate_runs(diff_of(a, b), budget).outcome == GateOutcome::pass); }
  SECTION("a node 6% slower: regression, one line naming it") {
    b.slower["r0.k1"] = 1.06;
    const GateResult g = gate_runs(diff_of(a, b), budget);
    CHECK(g.outcome == GateOutcome::regression);
    REQUIRE_FALSE(g.failures.empty());
    CHECK(g.failures[0].find("r0.k1 duration") != std::string::npos);
  }
  SECTION("a node 2.5% slower is within a 3% budget") {
    b.slower["r0.k1"] = 1.025;
    CHECK(gate_runs(diff_of(a, b), budget).outcome == GateOutcome::pass);
  }
  SECTION("not steady") {
    b.late_ramp = 1.0;  // the last 30 replays slow down to twice the time: no tail of the run is steady
    CHECK(gate_runs(diff_of(a, b), budget).outcome == GateOutcome::not_comparable);
  }
  SECTION("not clean") {
    RunData rb = synthetic_run(b);
    rb.variants[0].records.pop_back();  // a kernel with no record in a replay
    const GateResult g = gate_runs(diff_runs(side_of(synthetic_run(a), "A"), side_of(rb, "B")), budget);
    CHECK(g.outcome == GateOutcome::not_comparable);
    CHECK(g.failures[0].find("not clean") != std::string::npos);
  }
  SECTION("another GPU model, another driver") {
    RunData rb = synthetic_run(b);
    rb.env.devices[0].name = "NVIDIA H100";
    rb.env.driver_version = 12080;
    const RunDiff d = diff_runs(side_of(synthetic_run(a), "A"), side_of(rb, "B"));
    CHECK(d.comparability.line().rfind("NOT COMPARABLE", 0) == 0);
    CHECK(d.comparability.line().find("GPUs differ") != std::string::npos);
    CHECK(d.comparability.line().find("drivers differ") != std::string::npos);
    CHECK(gate_runs(d, budget).outcome == GateOutcome::not_comparable);
  }
  SECTION("another tracing cost") {
    RunData rb = synthetic_run(b);
    rb.variants[0].replay_us_traced = 600;
    CHECK(gate_runs(diff_runs(side_of(synthetic_run(a), "A"), side_of(rb, "B")), budget).outcome ==
          GateOutcome::not_comparable);
  }
  SECTION("a run against a trace") {
    RunData rb = synthetic_run(b);
    rb.trace = TraceCompleteness{};
    CHECK(gate_runs(diff_runs(side_of(synthetic_run(a), "A"), side_of(rb, "B")), budget).outcome ==
          GateOutcome::not_comparable);
  }
  SECTION("a trace that is not clean") {
    RunData ra = synthetic_run(a);
    RunData rb = synthetic_run(b);
    ra.trace = TraceCompleteness{};
    rb.trace = TraceCompleteness{};
    rb.trace->unmatched = 3;  // three records reached no node
    const RunDiff d = diff_runs(side_of(ra, "A"), side_of(rb, "B"));
    CHECK(d.comparability.line().rfind("NOT COMPARABLE: B: NOT CLEAN", 0) == 0);
    CHECK(gate_runs(d, budget).outcome == GateOutcome::not_comparable);
  }
  SECTION("A's variant missing in B") {
    RunData ra = synthetic_run(a);
    ra.variants.push_back(ra.variants[0]);
    ra.variants[1].scenario.name = "second";
    ra.variants[1].graph.edges.push_back({0, 7});
    const GateResult g = gate_runs(diff_runs(side_of(ra, "A"), side_of(synthetic_run(b), "B")), budget);
    CHECK(g.outcome == GateOutcome::not_comparable);
  }
  SECTION("nothing matches") {
    RunData rb = synthetic_run(b);
    rb.variants.clear();
    CHECK(gate_runs(diff_runs(side_of(synthetic_run(a), "A"), side_of(rb, "B")), budget).outcome ==
          GateOutcome::not_comparable);
  }
}

TEST_CASE("the outputs start with the comparability line", "[diff]") {
  SyntheticRun a, b;
  b.seed = 2;
  b.slower["r0.k1"] = 1.05;
  const DiffRun sb = side_of(synthetic_run(b), "B");
  const RunDiff d = diff_runs(side_of(synthetic_run(a), "A"), sb);
  CHECK(render_diff_text(d).rfind("COMPARABLE", 0) == 0);
  CHECK(render_diff_markdown(d).rfind("**COMPARABLE", 0) == 0);
  const std::string json = render_diff_json(d);
  CHECK(json.find("\"kind\": \"tpgraph-diff\"") != std::string::npos);
  CHECK(json.find("\"change\": true") != std::string::npos);
  const std::string dot = render_diff_dot(d, d.variants[0], sb.variants[0]);
  CHECK(dot.find("#ef5350") != std::string::npos);  // r0.k1, slower
}

TEST_CASE("diff is linear: a million records compare in seconds", "[diff][scale]") {
  // 10 nodes... 8 nodes x 62500 replays x 2 runs = 1M records; one node shifted, so one figure
  // takes the bootstrap over 62500 replays.
  SyntheticRun a, b;
  a.replays = b.replays = 62'500;
  a.ramp_replays = b.ramp_replays = 4000;
  b.seed = 2;
  b.slower["r0.k1"] = 1.05;
  const auto t0 = std::chrono::steady_clock::now();
  const RunDiff d = diff_of(a, b);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO("seconds: " << s);
  const MetricDiff* m = find(d, "r0.k1", Metric::duration);
  REQUIRE(m != nullptr);
  CHECK(m->change());
  CHECK(s < 30);
}

TEST_CASE("a wait that moved from idle to contention is named with its occupant", "[diff][causes]") {
  // One GPU, 40 replays. x then z (an edge), y unrelated. In A, z waits 50 µs after x with the GPU
  // idle, and y runs later; in B, y runs during z's wait for 40 µs of it:
  //   A:  x [0,10)  .......... idle ..........  z [60,70)   y [100,110)
  //   B:  x [0,10)  ..  y [15,55)  ..           z [60,70)
  const auto run_of = [](bool y_inside) {
    HandBuilt h(1, 40);
    const int x = h.node(0, 0, "x");
    const int y = h.node(0, 0, "y");
    const int z = h.node(0, 0, "z");
    h.edge(x, z);
    for (int r = 0; r < 40; ++r) {
      h.record(x, 0, 10, r);
      h.record(z, 60, 70, r);
      if (y_inside) h.record(y, 15, 55, r);
      else h.record(y, 100, 110, r);
    }
    return single_variant_run(std::move(h.v));
  };
  const RunDiff d = diff_runs(side_of(run_of(false), "A"), side_of(run_of(true), "B"));
  REQUIRE(d.variants.size() == 1);
  // y's own wait changed too (it started 85 µs earlier): its line comes first, in node order.
  const auto& causes = d.variants[0].cause_changes;
  REQUIRE(causes.size() == 2);
  CHECK(causes[0] == "y's wait: contention -10.0 µs, idle -75.0 µs");
  CHECK(causes[1] == "z's wait: contention +40.0 µs (by y), idle -40.0 µs");
  const MetricDiff* wait = find(d, "z", Metric::wait);
  REQUIRE(wait != nullptr);
  CHECK_FALSE(wait->change());  // the wait itself did not change: only its cause
}

namespace {

// Two root GEMMs on two streams of one GPU, ready together at each replay's start: whichever the GPU
// starts first runs alone, the other shares the GPU and takes twice as long; after one of them comes
// a second GEMM, after the other an elementwise kernel, then a join. `a_first`: the share of the
// replays in which a's root starts first (spread over the run). `slower`: the join kernel's duration
// times this; `slower_a2`: gemm_a2's (a node after one root only) in either order.
RunData tied_roots(double a_first, double slower = 1.0, double slower_a2 = 1.0) {
  constexpr int kReplays = 60;
  HandBuilt h(1, kReplays);
  const int ga = h.node(0, 0, "gemm_a");
  const int gb = h.node(0, 0, "gemm_b");
  const int ga2 = h.node(0, 0, "gemm_a2");
  const int eb = h.node(0, 0, "elementwise_b");
  const int join = h.node(0, 0, "join");
  for (const int g : {ga, gb, ga2}) h.v.graph.nodes[static_cast<std::size_t>(g)].name = "kernel_gemm";
  h.edge(ga, ga2);
  h.edge(gb, eb);
  h.edge(ga2, join);
  h.edge(eb, join);
  for (int r = 0; r < kReplays; ++r) {
    const double j = 0.05 * ((r * 7) % 5);
    const bool a_starts = (r * 37) % kReplays < static_cast<int>(a_first * kReplays + 0.5);
    const int first = a_starts ? ga : gb, second = a_starts ? gb : ga;
    h.record(first, 0, 24 + j, r);
    h.record(second, 2, 46 + j, r);
    // The branch of the root that ran first goes on while the other root still runs.
    const int after_first = a_starts ? ga2 : eb, after_second = a_starts ? eb : ga2;
    const double s1 = after_first == ga2 ? slower_a2 : 1.0, s2 = after_second == ga2 ? slower_a2 : 1.0;
    h.record(after_first, 24.5 + j, 24.5 + j + 22.5 * s1, r);
    h.record(after_second, 47.5 + j, 47.5 + j + 23.5 * s2, r);
    h.record(join, 72 + j, 72 + j + 6 * slower, r);
  }
  return single_variant_run(std::move(h.v));
}

}  // namespace

TEST_CASE("a tie the GPU broke the other way explains the shifts after it, and hides no other change",
          "[diff][order]") {
  const RunDiff d = diff_runs(side_of(tied_roots(0.0), "A"), side_of(tied_roots(1.0), "B"));
  REQUIRE(d.variants.size() == 1);
  // Both roots swapped durations (24 <-> 44 µs), and so did their branches: none is a change.
  CHECK(d.change_count() == 0);
  const MetricDiff* ga = find(d, "gemm_a", Metric::duration);
  REQUIRE(ga != nullptr);
  CHECK(ga->practical);
  CHECK(ga->significant);
  CHECK_FALSE(ga->change());
  CHECK(ga->explained.find("gemm_a and gemm_b were ready together") != std::string::npos);
  CHECK(ga->explained.find("A ran gemm_b first, B ran gemm_a first") != std::string::npos);
  const MetricDiff* join = find(d, "join", Metric::duration);
  REQUIRE(join != nullptr);
  CHECK(join->explained.empty());  // after both roots: no flip reaches it
  CHECK(render_diff_text(d).find("shifts explained by the order of concurrent work") != std::string::npos);
  CHECK(gate_runs(d, GateBudget{}).outcome == GateOutcome::pass);

  // The same flip with the join 20% slower in B: the join is still a change.
  const RunDiff slower = diff_runs(side_of(tied_roots(0.0), "A"), side_of(tied_roots(1.0, 1.2), "B"));
  const MetricDiff* j2 = find(slower, "join", Metric::duration);
  REQUIRE(j2 != nullptr);
  CHECK(j2->change());
  CHECK(slower.change_count() >= 1);

  // No flip (the same order in both): nothing is explained away.
  const RunDiff same = diff_runs(side_of(tied_roots(1.0), "A"), side_of(tied_roots(1.0, 1.2), "B"));
  for (const auto& m : same.metrics) CHECK(m.explained.empty());
}

TEST_CASE("a tie broken in other proportions: compared within each order, no change unless one ran slower",
          "[diff][order]") {
  // A ran gemm_a first in 40% of its replays, B in 65%: gemm_a's median duration drops from the long
  // mode to the short one, though within each order it did not move.
  const RunDiff d = diff_runs(side_of(tied_roots(0.4), "A"), side_of(tied_roots(0.65), "B"));
  const MetricDiff* ga = find(d, "gemm_a", Metric::duration);
  REQUIRE(ga != nullptr);
  CHECK(ga->shift.shift < -15);
  CHECK(ga->practical);
  CHECK(ga->significant);
  CHECK(ga->explained.find("gemm_a started first in 40% of A's replays and 65% of B's") != std::string::npos);
  CHECK(d.change_count() == 0);
  CHECK(gate_runs(d, GateBudget{}).outcome == GateOutcome::pass);

  // The same mixture with gemm_a2 (after one root only) 15% slower in either order: found within the
  // orders, a change.
  const RunDiff slower = diff_runs(side_of(tied_roots(0.4), "A"), side_of(tied_roots(0.65, 1.0, 1.15), "B"));
  const MetricDiff* a2 = find(slower, "gemm_a2", Metric::duration);
  REQUIRE(a2 != nullptr);
  CHECK(a2->change());
  CHECK(a2->explained.empty());
  CHECK(gate_runs(slower, GateBudget{}).outcome != GateOutcome::pass);
}
