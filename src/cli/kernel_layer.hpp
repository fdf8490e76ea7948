// The whole layer (every rank's chain and the root's join) on the GPUs, for `check` and `bench`:
// the kernels of src/cuda/layer_buffers on one stream per rank, outside any graph capture.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/reference.hpp"
#include "core/router.hpp"
#include "core/scenario.hpp"
#include "cuda/layer_buffers.hpp"
#include "cuda/owners.hpp"

namespace tpgraph::cli {

// Non-degeneracy figures of an output: a comparison of zeros with zeros proves nothing.
struct OutputGuard {
  std::int64_t count = 0;
  std::int64_t nonzero = 0;
  std::int64_t nan_count = 0;
  double absmax = 0;
  [[nodiscard]] bool vacuous() const { return nonzero == 0; }
};
[[nodiscard]] OutputGuard guard_of(std::span<const float> values);
// "nonzero 262144/262144, absmax 1.23, NaN 0"
[[nodiscard]] std::string describe(const OutputGuard& g);

// Each rank's weights for a scenario (make_rank_weights, rank by rank).
[[nodiscard]] std::vector<RankWeights> make_all_rank_weights(const Geometry& g, WeightsKind kind, std::uint64_t seed);

class GpuLayer {
 public:
  // `devices[r]` is rank r's GPU; the join runs on rank 0's.
  GpuLayer(const Geometry& g, const Routing& routing, std::span<const RankWeights> weights,
           std::span<const float> z, std::span<const int> devices, Layout layout);

  // Poisons every rank's buffers and the layer output (NaN bytes), synchronously.
  void poison();
  // Enqueues every rank's chain on its stream and then, on the root's stream (after each rank's
  // chain, through events), the copies of the partials and the join. Returns at once.
  void enqueue();
  // Waits for the root's stream and returns the layer output [tokens][hidden].
  [[nodiscard]] std::vector<float> collect() const;
  // poison, enqueue, collect.
  [[nodiscard]] std::vector<float> run();
  // The last run's output of rank r [tokens][hidden].
  [[nodiscard]] std::vector<float> rank_output(int rank) const;
  [[nodiscard]] const cuda::RankLayer& rank(int r) const { return *ranks_[static_cast<std::size_t>(r)]; }

 private:
  Geometry geometry_;
  std::vector<int> devices_;
  std::vector<std::unique_ptr<cuda::RankLayer>> ranks_;
  std::vector<cuda::Stream> streams_;
  std::vector<cuda::Event> chain_done_;             // [rank]: recorded after the rank's chain
  std::vector<cuda::DeviceBuffer<float>> staged_;  // on the root: ranks 1..R-1's outputs
  cuda::DeviceBuffer<const float*> partials_;       // device array of staged_ pointers
  cuda::DeviceBuffer<float> layer_out_;
};

}  // namespace tpgraph::cli
