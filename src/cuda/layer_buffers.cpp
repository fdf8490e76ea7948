#include "cuda/layer_buffers.hpp"

#include <stdexcept>
#include <string>
#include <vector>

#include "core/base/parallel.hpp"

namespace tpgraph::cuda {
namespace {

constexpr std::size_t kAlign = 256;

std::size_t align_up(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// The parts of a workspace in carve order, in bytes.
std::array<std::size_t, 8> workspace_parts(const Geometry& g) {
  const auto pairs = static_cast<std::size_t>(g.pairs());
  const auto hidden = static_cast<std::size_t>(g.hidden);
  const auto ff = static_cast<std::size_t>(g.ff);
  return {pairs * hidden * 2, pairs * 4,      pairs * ff * 4, pairs * ff * 4,
          pairs * ff * 4,     pairs * ff * 2, pairs * 4,      pairs * hidden * 4};
}

template <class T>
DeviceBuffer<T> upload_vector(int device, const std::vector<T>& host) {
  // A zero-length buffer still gets one element, so kernels always see a valid pointer.
  DeviceBuffer<T> buf(device, std::max<std::size_t>(host.size(), 1));
  if (!host.empty()) buf.upload(host);
  return buf;
}

kernels::GemmPlan make_plan(const Routing& routing, int out_rows, int in_cols, int tile) {
  return tile < 0 ? kernels::plan_grouped_gemm(routing, out_rows, in_cols)
                  : kernels::plan_grouped_gemm(routing, out_rows, in_cols, tile);
}

}  // namespace

kernels::ExpertBank DeviceBank::view() const {
  return kernels::ExpertBank{bytes.get(), tensor_scale.get(), rows, cols, layout, experts};
}

DeviceBank upload_bank(int device, std::span<const Nvfp4Matrix> matrices, Layout layout) {
  if (matrices.empty()) throw std::invalid_argument("upload_bank: no matrices");
  DeviceBank bank;
  bank.rows = matrices.front().rows;
  bank.cols = matrices.front().cols;
  bank.layout = layout;
  bank.experts = static_cast<int>(matrices.size());
  const std::size_t matrix_bytes = matrices.front().bytes.size();
  std::vector<std::uint8_t> host(matrix_bytes * matrices.size());
  std::vector<float> scales(matrices.size());
  for (const auto& m : matrices) {
    if (m.rows != bank.rows || m.cols != bank.cols || m.bytes.size() != matrix_bytes) {
      throw std::invalid_argument("upload_bank: matrices of different shapes (" + std::to_string(m.rows) + " x " +
                                  std::to_string(m.cols) + " vs " + std::to_string(bank.rows) + " x " +
                                  std::to_string(bank.cols) + ")");
    }
  }
  const auto count = static_cast<std::int64_t>(matrices.size());
  parallel_for(count, worker_count(count), [&](std::int64_t e, int) {
    const auto& m = matrices[static_cast<std::size_t>(e)];
    scales[static_cast<std::size_t>(e)] = m.tensor_scale;
    auto* dst = host.data() + static_cast<std::size_t>(e) * matrix_bytes;
    if (layout == Layout::v2) {
      const auto v2 = nvfp4_to_v2(m.bytes, m.rows, m.cols);
      std::copy(v2.begin(), v2.end(), dst);
    } else {
      std::copy(m.bytes.begin(), m.bytes.end(), dst);
    }
  });
  bank.bytes = to_device<std::uint8_t>(device, host);
  bank.tensor_scale = to_device<float>(device, scales);
  return bank;
}

kernels::DeviceRouting DeviceRoutingBuffers::view() const {
  return kernels::DeviceRouting{active_experts.get(),
                                offsets.get(),
                                row_token.get(),
                                pair_row.get(),
                                pair_weight.get(),
                                n_active,
                                n_rows,
                                tokens,
                                top_k};
}

DeviceRoutingBuffers upload_routing(int device, const Routing& routing) {
  DeviceRoutingBuffers r;
  r.active_experts = upload_vector(device, routing.active_experts);
  r.offsets = upload_vector(device, routing.offsets);
  r.row_token = upload_vector(device, routing.row_token);
  r.pair_row = upload_vector(device, routing.pair_row);
  r.pair_weight = upload_vector(device, routing.pair_weight);
  r.n_active = routing.n_active();
  r.n_rows = routing.n_pairs();
  r.tokens = routing.tokens;
  r.top_k = routing.top_k;
  return r;
}

std::size_t workspace_bytes(const Geometry& g) {
  std::size_t total = 0;
  for (const std::size_t part : workspace_parts(g)) total += align_up(part);
  return total;
}

RankWorkspace carve_workspace(void* base, const Geometry& g) {
  const auto parts = workspace_parts(g);
  auto* p = static_cast<std::uint8_t*>(base);
  std::array<void*, 8> at{};
  for (std::size_t i = 0; i < parts.size(); ++i) {
    at[i] = p;
    p += align_up(parts[i]);
  }
  return RankWorkspace{static_cast<std::uint16_t*>(at[0]), static_cast<float*>(at[1]),
                       static_cast<float*>(at[2]),         static_cast<float*>(at[3]),
                       static_cast<float*>(at[4]),         static_cast<std::uint16_t*>(at[5]),
                       static_cast<float*>(at[6]),         static_cast<float*>(at[7])};
}

std::string_view to_string(ChainStep s) {
  switch (s) {
    case ChainStep::quantize_z: return "quant_z";
    case ChainStep::gate: return "gate";
    case ChainStep::up: return "up";
    case ChainStep::swiglu: return "swiglu";
    case ChainStep::quantize_a: return "quant_a";
    case ChainStep::down: return "down";
    case ChainStep::combine: return "combine";
  }
  return "?";
}

StepCost step_cost(ChainStep s, const Geometry& g, const Routing& routing, int gemm_rows) {
  const std::int64_t pairs = routing.n_pairs();
  const std::int64_t tokens = g.tokens;
  const std::int64_t hidden = g.hidden;
  const std::int64_t ff = (s == ChainStep::gate || s == ChainStep::up) && gemm_rows > 0 ? gemm_rows : g.ff;
  const std::int64_t active = routing.n_active();
  StepCost c;
  switch (s) {
    case ChainStep::quantize_z:  // z read once per token (L2 serves the other pairs), z16 + zs written
      c.bytes = tokens * hidden * 4 + pairs * hidden * 2 + pairs * 4;
      break;
    case ChainStep::gate:
    case ChainStep::up:
      c.weight_bytes = active * nvfp4_matrix_bytes(ff, hidden);
      c.bytes = c.weight_bytes + pairs * hidden * 2 + pairs * 4 + pairs * ff * 4;
      c.flops = 2.0 * static_cast<double>(pairs) * static_cast<double>(hidden) * static_cast<double>(ff);
      break;
    case ChainStep::swiglu: c.bytes = 3 * pairs * ff * 4; break;
    case ChainStep::quantize_a: c.bytes = pairs * ff * 4 + pairs * ff * 2 + pairs * 4; break;
    case ChainStep::down:
      c.weight_bytes = active * nvfp4_matrix_bytes(hidden, ff);
      c.bytes = c.weight_bytes + pairs * ff * 2 + pairs * 4 + pairs * hidden * 4;
      c.flops = 2.0 * static_cast<double>(pairs) * static_cast<double>(hidden) * static_cast<double>(ff);
      break;
    case ChainStep::combine: c.bytes = pairs * hidden * 4 + pairs * 8 + tokens * hidden * 4; break;
  }
  return c;
}

RankLayer::RankLayer(int device, const Geometry& g, const Routing& routing, const RankWeights& weights, Layout layout,
                     int gemm_tile)
    : device_(device), geometry_(g) {
  if (weights.hidden != g.hidden || weights.ff != g.ff || weights.experts != g.experts) {
    throw std::invalid_argument("RankLayer: weights of another geometry");
  }
  DeviceScope scope(device);
  gate_ = upload_bank(device, weights.gate, layout);
  up_ = upload_bank(device, weights.up, layout);
  down_ = upload_bank(device, weights.down, layout);
  routing_ = upload_routing(device, routing);
  replan(routing, gemm_tile);
  const auto plane = static_cast<std::size_t>(g.tokens) * static_cast<std::size_t>(g.hidden);
  z_ = DeviceBuffer<float>(device, plane);
  out_ = DeviceBuffer<float>(device, plane);
  workspace_memory_ = DeviceMemory(device, workspace_bytes(g));
  workspace_ = carve_workspace(workspace_memory_.get(), g);
  // cudaMemcpy from pageable memory may return before the copy lands, and the chain runs on
  // non-blocking streams that do not wait for it.
  TPG_CUDA(cudaDeviceSynchronize());
}

void RankLayer::replan(const Routing& routing, int gemm_tile) {
  if (routing.n_pairs() != routing_.n_rows || routing.n_active() != routing_.n_active) {
    throw std::invalid_argument("RankLayer::replan: a routing other than the layer's");
  }
  const Geometry& g = geometry_;
  const auto ffn = kernels::plan_gate_up(routing, g.ff, g.hidden, gemm_tile);
  const auto down = make_plan(routing, g.hidden, g.ff, gemm_tile);
  auto upload = [&](const kernels::GemmPlan& plan) {
    return Plan{upload_vector(device_, plan.items), plan.grid, plan.tile, plan.paired};
  };
  gate_plan_ = upload(ffn.first);
  up_plan_ = upload(ffn.second);
  down_plan_ = upload(down);
  partner_rows_ = ffn.first.paired ? g.ff % kernels::gemm_tile(ffn.first.tile).block_rows() : 0;
  const DeviceScope scope(device_);
  TPG_CUDA(cudaDeviceSynchronize());
}

void RankLayer::upload_input(std::span<const float> z) {
  if (z.size() != z_.size()) {
    throw std::invalid_argument("RankLayer::upload_input: " + std::to_string(z.size()) + " floats, expected " +
                                std::to_string(z_.size()));
  }
  z_.upload(z);
  const DeviceScope scope(device_);
  TPG_CUDA(cudaDeviceSynchronize());
}

int RankLayer::gemm_rows(ChainStep gemm) const {
  switch (gemm) {
    case ChainStep::gate: return geometry_.ff + partner_rows_;
    case ChainStep::up: return geometry_.ff - partner_rows_;
    case ChainStep::down: return geometry_.hidden;
    default: throw std::invalid_argument("RankLayer::gemm_rows: " + std::string(to_string(gemm)) + " is not a GEMM");
  }
}

const DeviceBank& RankLayer::bank(ChainStep gemm) const {
  switch (gemm) {
    case ChainStep::gate: return gate_;
    case ChainStep::up: return up_;
    case ChainStep::down: return down_;
    default: throw std::invalid_argument("RankLayer::bank: " + std::string(to_string(gemm)) + " is not a GEMM");
  }
}

void RankLayer::enqueue(ChainStep step, const RankWorkspace& ws, cudaStream_t stream,
                        std::optional<ChainStep> previous) const {
  const Geometry& g = geometry_;
  const auto routing = routing_.view();
  const std::int64_t pairs = routing_.n_rows;
  switch (step) {
    case ChainStep::quantize_z: kernels::gather_quantize(z_.get(), g.hidden, routing, ws.z16, ws.zs, stream); break;
    case ChainStep::gate: {
      const kernels::ExpertBank up = up_.view();
      kernels::grouped_gemm(ws.z16, ws.zs, gate_.view(), routing, gate_plan_.view(), ws.g, stream, &up, ws.u);
      break;
    }
    case ChainStep::up: {
      // Up reads z16 and zs, which gate's wait saw complete before gate let up launch, and writes
      // rows of u that gate neither reads nor writes (its partner rows are up's others). A gate
      // with no blocks launches nothing: up would follow the quantize.
      const bool beside_gate = previous == ChainStep::gate && gate_plan_.grid > 0;
      kernels::grouped_gemm(ws.z16, ws.zs, up_.view(), routing, up_plan_.view(), ws.u, stream, nullptr, nullptr,
                            beside_gate ? kernels::GemmWait::at_exit : kernels::GemmWait::before_inputs);
      break;
    }
    case ChainStep::swiglu: kernels::swiglu(ws.g, ws.u, pairs * g.ff, ws.a, stream); break;
    case ChainStep::quantize_a: kernels::quantize_rows(ws.a, g.ff, pairs, ws.a16, ws.as, stream); break;
    case ChainStep::down:
      kernels::grouped_gemm(ws.a16, ws.as, down_.view(), routing, down_plan_.view(), ws.y, stream);
      break;
    case ChainStep::combine: kernels::combine(ws.y, g.hidden, routing, out_.get(), stream); break;
  }
}

void RankLayer::enqueue_chain(cudaStream_t stream) const {
  std::optional<ChainStep> previous;
  for (const ChainStep step : kChainSteps) {
    enqueue(step, stream, previous);
    previous = step;
  }
}

void RankLayer::poison() const {
  DeviceScope scope(device_);
  TPG_CUDA(cudaMemset(workspace_memory_.get(), 0xff, workspace_memory_.bytes()));
  TPG_CUDA(cudaMemset(out_.get(), 0xff, out_.bytes()));
  // The memsets run on the legacy stream, which the chain's non-blocking streams do not wait for.
  TPG_CUDA(cudaDeviceSynchronize());
}

namespace {
template <class T>
std::vector<T> copy_back(const T* device_ptr, std::size_t count) {
  std::vector<T> host(count);
  if (count > 0) TPG_CUDA(cudaMemcpy(host.data(), device_ptr, count * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}
}  // namespace

RankTrace RankLayer::download_trace() const {
  DeviceScope scope(device_);
  TPG_CUDA(cudaDeviceSynchronize());
  const auto pairs = static_cast<std::size_t>(routing_.n_rows);
  const auto hidden = static_cast<std::size_t>(geometry_.hidden);
  const auto ff = static_cast<std::size_t>(geometry_.ff);
  RankTrace t;
  t.z16 = copy_back(workspace_.z16, pairs * hidden);
  t.zs = copy_back(workspace_.zs, pairs);
  t.g = copy_back(workspace_.g, pairs * ff);
  t.u = copy_back(workspace_.u, pairs * ff);
  t.a = copy_back(workspace_.a, pairs * ff);
  t.a16 = copy_back(workspace_.a16, pairs * ff);
  t.as = copy_back(workspace_.as, pairs);
  t.y = copy_back(workspace_.y, pairs * hidden);
  kernels::x16_to_natural_order(t.z16, geometry_.hidden);
  kernels::x16_to_natural_order(t.a16, geometry_.ff);
  t.out = download_out();
  return t;
}

std::vector<float> RankLayer::download_out() const {
  DeviceScope scope(device_);
  TPG_CUDA(cudaDeviceSynchronize());
  return out_.download();
}

}  // namespace tpgraph::cuda
