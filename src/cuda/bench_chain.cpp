#include "cuda/bench_chain.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "cuda/capture.hpp"
#include "cuda_error/error.hpp"
#include "kernels/kernels.hpp"

namespace tpgraph::cuda {
namespace {

const std::vector<ChainStep> kGemmSteps{ChainStep::gate, ChainStep::up, ChainStep::down};

int device_major(int device) {
  int major = 0;
  TPG_CUDA(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  return major;
}

}  // namespace

TimedGraph::TimedGraph(const RankLayer& layer, std::vector<ChainStep> steps, Timing timing)
    : device_(layer.device()),
      steps_(std::move(steps)),
      per_step_(timing == Timing::per_step),
      stream_(make_stream(device_)) {
  const DeviceScope scope(device_);
  for (std::size_t i = 0; i <= steps_.size(); ++i) events_.push_back(make_event(device_));
  const kernels::ProgrammaticLaunches programmatic(timing == Timing::span_programmatic);
  graph_ = capture_graph(stream_.get(), device_, [&] {
    // External records are graph nodes whose times cudaEventElapsedTime can read after a replay.
    TPG_CUDA(cudaEventRecordWithFlags(events_[0].get(), stream_.get(), cudaEventRecordExternal));
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      // Only event records between steps break the programmatic edge from one kernel to the next.
      const bool adjacent = i > 0 && !per_step_;
      layer.enqueue(steps_[i], stream_.get(), adjacent ? std::optional<ChainStep>(steps_[i - 1]) : std::nullopt);
      if (per_step_ || i + 1 == steps_.size())
        TPG_CUDA(cudaEventRecordWithFlags(events_[i + 1].get(), stream_.get(), cudaEventRecordExternal));
    }
  });
  exec_ = instantiate(graph_);
}

std::vector<std::vector<double>> TimedGraph::replay(int warmup, int replays) const {
  warm(warmup);
  std::vector<std::vector<double>> us(steps_.size() + 1);
  for (int r = 0; r < replays; ++r) replay_once(us);
  return us;
}

void TimedGraph::warm(int warmup) const {
  const DeviceScope scope(device_);
  for (int i = 0; i < warmup; ++i) TPG_CUDA(cudaGraphLaunch(exec_.get(), stream_.get()));
  TPG_CUDA(cudaStreamSynchronize(stream_.get()));
}

void TimedGraph::replay_once(std::vector<std::vector<double>>& us) const {
  const DeviceScope scope(device_);
  TPG_CUDA(cudaGraphLaunch(exec_.get(), stream_.get()));
  TPG_CUDA(cudaStreamSynchronize(stream_.get()));
  for (std::size_t i = per_step_ ? 0 : steps_.size(); i <= steps_.size(); ++i) {
    const std::size_t from = i < steps_.size() ? i : 0;
    const std::size_t to = i < steps_.size() ? i + 1 : steps_.size();
    float ms = 0;
    TPG_CUDA(cudaEventElapsedTime(&ms, events_[from].get(), events_[to].get()));
    us[i].push_back(static_cast<double>(ms) * 1e3);
  }
}

ChainTimes time_rank_chain(const RankLayer& layer, int warmup, int replays) {
  {
    const DeviceScope scope(layer.device());
    const Stream s = make_stream(layer.device());
    layer.enqueue_chain(s.get());
    TPG_CUDA(cudaStreamSynchronize(s.get()));
  }
  // The graphs take turns, replay by replay, so all see the same clocks: the GPU's power
  // management (clocks never locked here) lowers the clocks some 100 ms into a heavy run, and
  // whichever graph was timed second ran up to 5% slower at t=4096.
  const std::vector<ChainStep> chain(kChainSteps.begin(), kChainSteps.end());
  const TimedGraph chain_graph(layer, chain);
  const TimedGraph gemm_graph(layer, kGemmSteps);
  const TimedGraph chain_span(layer, chain, Timing::span);
  const TimedGraph gemm_span(layer, kGemmSteps, Timing::span);
  // Programmatic launches need sm_90; before it their series stay empty.
  std::optional<TimedGraph> chain_programmatic, gemm_programmatic;
  if (device_major(layer.device()) >= 9) {
    chain_programmatic.emplace(layer, chain, Timing::span_programmatic);
    gemm_programmatic.emplace(layer, kGemmSteps, Timing::span_programmatic);
  }
  const std::array<const TimedGraph*, 6> graphs{&chain_graph, &gemm_graph,
                                                &chain_span,  chain_programmatic ? &*chain_programmatic : nullptr,
                                                &gemm_span,   gemm_programmatic ? &*gemm_programmatic : nullptr};
  std::array<std::vector<std::vector<double>>, graphs.size()> us;
  for (std::size_t g = 0; g < graphs.size(); ++g) {
    if (graphs[g] == nullptr) continue;
    graphs[g]->warm(warmup);
    us[g].resize(graphs[g]->steps() + 1);
  }
  for (int r = 0; r < replays; ++r)
    for (std::size_t g = 0; g < graphs.size(); ++g)
      if (graphs[g] != nullptr) graphs[g]->replay_once(us[g]);
  const auto whole = [&](std::size_t g) { return us[g].empty() ? std::vector<double>{} : std::move(us[g].back()); };
  return ChainTimes{std::move(us[0]), std::move(us[1]), whole(2), whole(3), whole(4), whole(5)};
}

std::vector<std::vector<double>> time_gemms(const RankLayer& layer, int warmup, int replays) {
  return TimedGraph(layer, kGemmSteps).replay(warmup, replays);
}

int bench_tile_count() { return kernels::gemm_tile_count(); }

namespace {

std::vector<bench::StepMeasurement> chain_steps(const RankLayer& layer, const Routing& routing,
                                                std::vector<std::vector<double>> chain_us) {
  std::vector<bench::StepMeasurement> steps;
  for (std::size_t i = 0; i < kChainSteps.size(); ++i) {
    const ChainStep step = kChainSteps[i];
    const bool ffn = step == ChainStep::gate || step == ChainStep::up;
    const StepCost cost = step_cost(step, layer.geometry(), routing, ffn ? layer.gemm_rows(step) : 0);
    steps.push_back({std::string(to_string(step)), cost.bytes, cost.weight_bytes, cost.flops, std::move(chain_us[i])});
  }
  return steps;
}

std::vector<bench::TileMeasurement> tile_sweep(RankLayer& layer, const Routing& routing, int warmup, int replays) {
  std::vector<bench::TileMeasurement> tiles;
  for (int tile = 0; tile < kernels::gemm_tile_count(); ++tile) {
    layer.replan(routing, tile);
    auto us = time_gemms(layer, warmup, std::max(10, replays / 4));
    const kernels::GemmTile shape = kernels::gemm_tile(tile);
    tiles.push_back({tile, shape.block_rows(), shape.block_tokens(), {us[0], us[1], us[2], us[3]}});
  }
  return tiles;
}

}  // namespace

bench::TokenMeasurement measure_bench_tokens(RankLayer& layer, const Routing& routing, int warmup, int replays,
                                             bool all_tiles) {
  ChainTimes times = time_rank_chain(layer, warmup, replays);
  bench::TokenMeasurement m;
  m.tokens = layer.geometry().tokens;
  m.pairs = routing.n_pairs();
  m.active_experts = routing.n_active();
  m.layout = std::string(to_string(layer.layout()));
  m.tile_gate_up = layer.gate_tile();
  m.tile_down = layer.down_tile();
  m.chain_us = times.chain_us.back();
  m.chain_plain_us = std::move(times.chain_plain_us);
  m.chain_programmatic_us = std::move(times.chain_programmatic_us);
  m.gemms_plain_us = std::move(times.gemms_plain_us);
  m.gemms_programmatic_us = std::move(times.gemms_programmatic_us);
  m.steps = chain_steps(layer, routing, std::move(times.chain_us));
  for (std::size_t i = 0; i < m.gemms_us.size(); ++i) m.gemms_us[i] = std::move(times.gemm_us[i]);
  if (all_tiles) m.tiles = tile_sweep(layer, routing, warmup, replays);
  return m;
}

}  // namespace tpgraph::cuda
