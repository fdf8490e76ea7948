// Synthetic runs for the tests of `tpgraph diff`: two ranks on two GPUs, each a chain of four kernels,
// rank 1 forked after r0.k0 and joined back before r0.k3, replays 10 ms apart. Every node's duration
// is its base time scaled by factors a GPU timing has: the run's own clock (one draw per run), a
// warm-up ramp (the first replays slower, decaying), a slow drift over the run, and a per-replay clock
// wobble that neighbouring replays share (AR(1)), plus a little noise of the node's own.
#pragma once
#include <cmath>
#include <cstdint>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "run_fixture.hpp"

namespace tpgraph::testing {

struct SyntheticRun {
  std::uint64_t seed = 1;
  int replays = 200;
  int ramp_replays = 40;    // warm-up: 25% slower at replay 0, decaying with time constant ramp_replays / 2
  double late_ramp = 0;     // the last 15% of the replays slow down linearly by this much (never steady)
  double run_sd = 0.003;    // the run's clock factor
  double drift = 0.005;     // from the first replay to the last
  double wobble_sd = 0.01;  // per replay, shared by the nodes, AR(1) with wobble_phi
  double wobble_phi = 0.6;
  double node_sd = 0.005;                // per node and replay
  std::map<std::string, double> slower;  // label -> factor on its duration
  bool traced = false;                   // traced kernels (keys from kernel names and positions)
  bool reversed_ids = false;             // the same graph with its node ids in reverse order
  double launch_factor = 1.0;            // the process's host launch cost (20 µs) times this
};

// splitmix64 and Box-Muller: the same draws with every standard library.
class TestRng {
 public:
  explicit TestRng(std::uint64_t seed) : s_(seed) {}
  double uniform() {
    std::uint64_t z = (s_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return (static_cast<double>((z ^ (z >> 31)) >> 11) + 0.5) / 9007199254740992.0;
  }
  double normal() { return std::sqrt(-2 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()); }

 private:
  std::uint64_t s_;
};

inline RunData synthetic_run(const SyntheticRun& o) {
  struct Spec {
    int rank;
    const char* label;
    double us;
  };
  const std::vector<Spec> specs{{0, "r0.k0", 50}, {0, "r0.k1", 120}, {0, "r0.k2", 80}, {0, "r0.k3", 30},
                                {1, "r1.k0", 60}, {1, "r1.k1", 130}, {1, "r1.k2", 90}, {1, "r1.k3", 20}};
  const std::vector<std::pair<int, int>> edges{{0, 1}, {1, 2}, {2, 3}, {4, 5}, {5, 6}, {6, 7}, {0, 4}, {7, 3}};
  std::vector<int> id(specs.size());  // spec -> node id
  std::iota(id.begin(), id.end(), 0);
  if (o.reversed_ids) std::reverse(id.begin(), id.end());
  HandBuilt h(2, o.replays);
  h.v.scenario.name = "synthetic";
  h.v.graph.nodes.resize(specs.size());
  for (std::size_t i = 0; i < specs.size(); ++i) {
    Node& n = h.v.graph.nodes[static_cast<std::size_t>(id[i])];
    n.id = id[i];
    n.rank = n.stream = n.device = specs[i].rank;
    n.kind = NodeKind::kernel;
    n.role = o.traced ? Role::traced : Role::gate;
    n.label = specs[i].label;
    n.name = o.traced ? std::string("kernel_") + (specs[i].label + 3) : "";
  }
  for (const auto& [from, to] : edges) h.edge(id[static_cast<std::size_t>(from)], id[static_cast<std::size_t>(to)]);
  TestRng rng(o.seed);
  const double run_factor = 1 + o.run_sd * rng.normal();
  double wobble = 0;
  for (int r = 0; r < o.replays; ++r) {
    wobble = o.wobble_phi * wobble + std::sqrt(1 - o.wobble_phi * o.wobble_phi) * o.wobble_sd * rng.normal();
    const double ramp = 0.25 * std::exp(-2.0 * r / std::max(1, o.ramp_replays));
    const int late = o.replays - o.replays * 15 / 100;
    const double step = r >= late ? 1 + o.late_ramp * (r - late) / (o.replays - late) : 1.0;
    const double clock = run_factor * (1 + ramp) * step * (1 + o.drift * r / o.replays) * (1 + wobble);
    std::vector<double> end(specs.size(), 0);
    for (const std::size_t i : {0, 1, 2, 4, 5, 6, 7, 3}) {  // a topological order of the specs
      double ready = 0;
      for (const auto& [from, to] : edges)
        if (static_cast<std::size_t>(to) == i) ready = std::max(ready, end[static_cast<std::size_t>(from)]);
      const double gap = 2.0 + 0.05 * rng.normal();  // launch latency, µs
      const auto slow = o.slower.find(specs[i].label);
      const double us =
          specs[i].us * clock * (1 + o.node_sd * rng.normal()) * (slow != o.slower.end() ? slow->second : 1.0);
      const double start = ready + gap;
      end[i] = start + us;
      h.record(id[i], start, end[i], r);
    }
  }
  h.v.replay_us_untraced = 500;
  h.v.replay_us_traced = 510;
  for (int r = 0; r < o.replays; ++r) h.v.host_launch_us.push_back(20 * o.launch_factor + 0.2 * rng.normal());
  RunData run = single_variant_run(std::move(h.v));
  return run;
}

}  // namespace tpgraph::testing
