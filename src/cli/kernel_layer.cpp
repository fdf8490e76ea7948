#include "cli/kernel_layer.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

#include "cuda/error.hpp"
#include "kernels/kernels.hpp"

namespace tpgraph::cli {

OutputGuard guard_of(std::span<const float> values) {
  OutputGuard g;
  g.count = static_cast<std::int64_t>(values.size());
  for (const float v : values) {
    if (std::isnan(v)) {
      ++g.nan_count;
      continue;
    }
    if (v != 0.0f) ++g.nonzero;
    g.absmax = std::max(g.absmax, static_cast<double>(std::fabs(v)));
  }
  return g;
}

std::string describe(const OutputGuard& g) {
  return fmt::format("nonzero {}/{}, absmax {:.4g}, NaN {}", g.nonzero, g.count, g.absmax, g.nan_count);
}

std::vector<RankWeights> make_all_rank_weights(const Geometry& g, WeightsKind kind, std::uint64_t seed) {
  std::vector<RankWeights> ranks;
  ranks.reserve(static_cast<std::size_t>(g.ranks));
  for (int r = 0; r < g.ranks; ++r) ranks.push_back(make_rank_weights(g, r, kind, seed));
  return ranks;
}

GpuLayer::GpuLayer(const Geometry& g, const Routing& routing, std::span<const RankWeights> weights,
                   std::span<const float> z, std::span<const int> devices, Layout layout)
    : geometry_(g), devices_(devices.begin(), devices.end()) {
  const auto plane = static_cast<std::size_t>(g.tokens) * static_cast<std::size_t>(g.hidden);
  for (std::size_t r = 0; r < weights.size(); ++r) {
    ranks_.push_back(std::make_unique<cuda::RankLayer>(devices_[r], g, routing, weights[r], layout));
    ranks_.back()->upload_input(z);
    streams_.push_back(cuda::make_stream(devices_[r]));
    chain_done_.push_back(cuda::make_event(devices_[r], false));
  }
  const int root = devices_.front();
  std::vector<const float*> pointers;
  for (std::size_t r = 1; r < ranks_.size(); ++r) {
    staged_.emplace_back(root, plane);
    pointers.push_back(staged_.back().get());
  }
  if (pointers.empty()) pointers.push_back(nullptr);
  partials_ = cuda::to_device<const float*>(root, pointers);
  layer_out_ = cuda::DeviceBuffer<float>(root, plane);
}

void GpuLayer::poison() {
  for (const auto& rank : ranks_) rank->poison();
  const cuda::DeviceScope scope(devices_.front());
  TPG_CUDA(cudaMemset(layer_out_.get(), 0xff, layer_out_.bytes()));
  TPG_CUDA(cudaDeviceSynchronize());
}

void GpuLayer::enqueue() {
  for (std::size_t r = 0; r < ranks_.size(); ++r) {
    const cuda::DeviceScope scope(devices_[r]);
    ranks_[r]->enqueue_chain(streams_[r].get());
    TPG_CUDA(cudaEventRecord(chain_done_[r].get(), streams_[r].get()));
  }
  const cuda::DeviceScope scope(devices_.front());
  const cudaStream_t root = streams_.front().get();
  // Ranks 1..R-1's partials to the root (unified addressing reaches any GPU), then the root's
  // output plus each partial in rank order (contract step 7). All stream-ordered.
  for (std::size_t r = 1; r < ranks_.size(); ++r) {
    TPG_CUDA(cudaStreamWaitEvent(root, chain_done_[r].get(), 0));
    TPG_CUDA(cudaMemcpyAsync(staged_[r - 1].get(), ranks_[r]->out(), staged_[r - 1].bytes(), cudaMemcpyDefault, root));
  }
  TPG_CUDA(cudaMemcpyAsync(layer_out_.get(), ranks_.front()->out(), layer_out_.bytes(), cudaMemcpyDefault, root));
  kernels::join_reduce(partials_.get(), static_cast<int>(ranks_.size()) - 1,
                       static_cast<std::int64_t>(layer_out_.size()), layer_out_.get(), root);
}

std::vector<float> GpuLayer::collect() const {
  const cuda::DeviceScope scope(devices_.front());
  TPG_CUDA(cudaStreamSynchronize(streams_.front().get()));
  return layer_out_.download();
}

std::vector<float> GpuLayer::run() {
  poison();
  enqueue();
  return collect();
}

std::vector<float> GpuLayer::rank_output(int rank) const { return ranks_[static_cast<std::size_t>(rank)]->download_out(); }

}  // namespace tpgraph::cli
