// One rank's layer on one GPU: its weights (gate, up, down as ExpertBanks), the routing, the grouped
// GEMM plans, the input z, the output out_r and the working buffers, plus the seven kernels of the
// rank's chain (contract in src/core/numerics/reference.hpp):
//
//   quantize_z -> gate -> up -> swiglu -> quantize_a -> down -> combine
//
// `check`, `bench`, the GPU tests and the capture all build their layers from this, so every one of
// them launches the same kernels with the same plans.
#pragma once
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "core/base/enum_format.hpp"
#include "core/numerics/geometry.hpp"
#include "core/numerics/nvfp4_layout.hpp"
#include "core/numerics/reference.hpp"
#include "core/numerics/router.hpp"
#include "cuda/owners.hpp"
#include "kernels/kernels.hpp"

namespace tpgraph::cuda {

// One weight kind of one rank, every expert, on the device in `layout`.
struct DeviceBank {
  DeviceBuffer<std::uint8_t> bytes;
  DeviceBuffer<float> tensor_scale;  // [experts]
  int rows = 0;
  int cols = 0;
  Layout layout = Layout::v2;
  int experts = 0;
  [[nodiscard]] kernels::ExpertBank view() const;
};
// All matrices must have the same shape (rows a multiple of 16 for v2).
[[nodiscard]] DeviceBank upload_bank(int device, std::span<const Nvfp4Matrix> matrices, Layout layout);

struct DeviceRoutingBuffers {
  DeviceBuffer<std::int32_t> active_experts, offsets, row_token, pair_row;
  DeviceBuffer<float> pair_weight;
  int n_active = 0;
  std::int64_t n_rows = 0;
  int tokens = 0;
  int top_k = 0;
  [[nodiscard]] kernels::DeviceRouting view() const;
};
[[nodiscard]] DeviceRoutingBuffers upload_routing(int device, const Routing& routing);

// The chain's intermediates for one layer of one rank. The pointers belong to whoever allocated
// the block they were carved from (RankLayer's resident block, or a graph's memory node).
struct RankWorkspace {
  std::uint16_t* z16 = nullptr;  // [pairs][hidden] binary16
  float* zs = nullptr;           // [pairs]
  float* g = nullptr;            // [pairs][ff]
  float* u = nullptr;            // [pairs][ff]
  float* a = nullptr;            // [pairs][ff]
  std::uint16_t* a16 = nullptr;  // [pairs][ff]
  float* as = nullptr;           // [pairs]
  float* y = nullptr;            // [pairs][hidden]
};
// Bytes of one block that carve_workspace splits (every part 256-byte aligned).
[[nodiscard]] std::size_t workspace_bytes(const Geometry& g);
[[nodiscard]] RankWorkspace carve_workspace(void* base, const Geometry& g);

// The seven kernels of a rank's chain, in issue order.
enum class ChainStep { quantize_z, gate, up, swiglu, quantize_a, down, combine };
inline constexpr std::array<ChainStep, 7> kChainSteps{ChainStep::quantize_z, ChainStep::gate,       ChainStep::up,
                                                      ChainStep::swiglu,     ChainStep::quantize_a, ChainStep::down,
                                                      ChainStep::combine};
[[nodiscard]] std::string_view to_string(ChainStep s);
[[nodiscard]] inline std::string_view format_as(ChainStep s) { return to_string(s); }

// Bytes a step reads plus writes and its floating-point operations (GEMMs: 2 per multiply-add over
// the routed rows), counted from the shapes for bench's achieved rates. Weight bytes are those of
// the active experts only. `gemm_rows`: the output rows the step's launch computes (a GEMM's;
// gate's and up's launches share their rows unevenly where gate's plan is paired:
// RankLayer::gemm_rows), or 0 for the GEMM's own rows.
struct StepCost {
  std::int64_t bytes = 0;
  std::int64_t weight_bytes = 0;
  double flops = 0;
};
[[nodiscard]] StepCost step_cost(ChainStep s, const Geometry& g, const Routing& routing, int gemm_rows = 0);

class RankLayer {
 public:
  // Uploads the weights in `layout`, the routing and the plans; allocates z, out and a resident
  // workspace on `device`. z is left for the caller to fill (upload_input or a peer copy).
  // `gemm_tile` < 0 lets plan_grouped_gemm choose the GEMM tile; bench forces one to compare them.
  RankLayer(int device, const Geometry& g, const Routing& routing, const RankWeights& weights, Layout layout,
            int gemm_tile = -1);

  void upload_input(std::span<const float> z);
  // Cuts the GEMM plans again for another tile (`routing` must be the one the layer was built
  // with). A graph captured before must be captured again: the plan buffers move.
  void replan(const Routing& routing, int gemm_tile);
  // Enqueues one step on `stream` (on this layer's device), reading and writing `ws`. `previous`:
  // the step enqueued on `stream` just before this one, with nothing between them; up right after
  // gate then waits for it only at its blocks' exits (kernels::GemmWait::at_exit).
  void enqueue(ChainStep step, const RankWorkspace& ws, cudaStream_t stream,
               std::optional<ChainStep> previous = std::nullopt) const;
  void enqueue(ChainStep step, cudaStream_t stream, std::optional<ChainStep> previous = std::nullopt) const {
    enqueue(step, workspace_, stream, previous);
  }
  // The whole chain, in order.
  void enqueue_chain(cudaStream_t stream) const;

  // Fills the resident workspace and out with 0xff bytes (NaN as fp32 and as fp16), so a test can
  // tell an element no kernel wrote. Synchronous.
  void poison() const;
  // Synchronous copies of the resident workspace and out, in the CPU reference's own shape (z16 and
  // a16 back in column order).
  [[nodiscard]] RankTrace download_trace() const;
  [[nodiscard]] std::vector<float> download_out() const;

  [[nodiscard]] int device() const { return device_; }
  [[nodiscard]] const Geometry& geometry() const { return geometry_; }
  [[nodiscard]] Layout layout() const { return gate_.layout; }
  [[nodiscard]] float* z() const { return z_.get(); }      // [tokens][hidden]
  [[nodiscard]] float* out() const { return out_.get(); }  // [tokens][hidden]
  [[nodiscard]] const RankWorkspace& workspace() const { return workspace_; }
  [[nodiscard]] std::int64_t pairs() const { return routing_.n_rows; }
  [[nodiscard]] int gate_tile() const { return gate_plan_.tile; }
  // The output rows a GEMM step's launch computes: gate's includes up's partial row blocks where
  // its plan is paired (kernels::plan_gate_up), up's then lacks them.
  [[nodiscard]] int gemm_rows(ChainStep gemm) const;
  [[nodiscard]] int down_tile() const { return down_plan_.tile; }
  [[nodiscard]] const DeviceBank& bank(ChainStep gemm) const;

 private:
  int device_ = 0;
  Geometry geometry_;
  DeviceBank gate_, up_, down_;
  DeviceRoutingBuffers routing_;
  // A GEMM's plan on the device. Gate's and up's come from plan_gate_up: gate's pair blocks also
  // compute up's partial row blocks (gate is launched with up as its partner).
  struct Plan {
    DeviceBuffer<std::int32_t> items;
    int grid = 0;
    int tile = 0;
    bool paired = false;
    [[nodiscard]] kernels::DeviceGemmPlan view() const { return {items.get(), grid, tile, paired}; }
  };
  Plan gate_plan_, up_plan_, down_plan_;
  int partner_rows_ = 0;  // up's rows that gate's launch computes
  DeviceBuffer<float> z_, out_;
  DeviceMemory workspace_memory_;
  RankWorkspace workspace_;
};

}  // namespace tpgraph::cuda
