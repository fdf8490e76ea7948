// Timing one rank's kernels for `tpgraph bench`: a sequence of chain steps captured in a CUDA graph
// with an event-record node before, between and after them, replayed, and each step's time read
// from its two events; or, as a layer runs them, with events only before and after the sequence,
// its kernels launched plainly or programmatically (kernels::ProgrammaticLaunches).
#pragma once
#include <vector>

#include "core/analysis/bench_model.hpp"
#include "cuda/layer_buffers.hpp"
#include "cuda/owners.hpp"

namespace tpgraph::cuda {

// How a TimedGraph's kernels meet: an event between every two (each step timed; an event node
// also keeps programmatic launches apart, so they are never combined), or one kernel after the
// other with events only around the sequence, launched plainly or programmatically.
enum class Timing { per_step, span, span_programmatic };

class TimedGraph {
 public:
  // Captures `steps` of `layer` on a stream of its own.
  TimedGraph(const RankLayer& layer, std::vector<ChainStep> steps, Timing timing = Timing::per_step);

  // `warmup` untimed replays, then `replays` timed: per step, and for the whole sequence (last
  // entry), the time of every replay in µs.
  [[nodiscard]] std::vector<std::vector<double>> replay(int warmup, int replays) const;
  // `warmup` replays, waited for.
  void warm(int warmup) const;
  // One replay; appends each step's time and the whole sequence's to `us` (steps + 1 series; for a
  // span graph only the last, the others stay empty).
  void replay_once(std::vector<std::vector<double>>& us) const;
  [[nodiscard]] std::size_t steps() const { return steps_.size(); }

 private:
  int device_;
  std::vector<ChainStep> steps_;
  bool per_step_;
  Stream stream_;
  std::vector<Event> events_;
  Graph graph_;
  GraphExec exec_;
};

// Per-replay times (µs) of one rank's whole chain and of its three grouped GEMMs alone: [step] for
// each step of the sequence, then the whole sequence last.
struct ChainTimes {
  std::vector<std::vector<double>> chain_us;  // kChainSteps, then the chain
  std::vector<std::vector<double>> gemm_us;   // gate, up, down, then the three
  // The chain and the three GEMMs as one sequence of kernels each (Timing::span), then the same
  // launched programmatically (Timing::span_programmatic): per replay.
  std::vector<double> chain_plain_us, chain_programmatic_us;
  std::vector<double> gemms_plain_us, gemms_programmatic_us;
};

// Runs the chain once plainly (so every intermediate the GEMMs-only graph reads holds real values),
// captures the chain and the GEMMs alone, each with every Timing, warms them, and times `replays`
// replays of each, taking turns replay by replay so all run under the same clocks.
[[nodiscard]] ChainTimes time_rank_chain(const RankLayer& layer, int warmup, int replays);

// The three grouped GEMMs alone, with the layer's current plan (after RankLayer::replan).
[[nodiscard]] std::vector<std::vector<double>> time_gemms(const RankLayer& layer, int warmup, int replays);

// How many GEMM tiles --tile and --all-tiles choose from (kernels::gemm_tile_count()).
[[nodiscard]] int bench_tile_count();

// Everything bench times for one token count on `layer` (built with `routing`): the chain and its
// GEMMs alone (time_rank_chain), each kernel's cost from the shapes (step_cost), the plan's tiles;
// with `all_tiles`, the three GEMMs again with every tile (max(10, replays / 4) replays each), which
// leaves `layer` planned with the last tile.
[[nodiscard]] bench::TokenMeasurement measure_bench_tokens(RankLayer& layer, const Routing& routing, int warmup,
                                                           int replays, bool all_tiles);

}  // namespace tpgraph::cuda
