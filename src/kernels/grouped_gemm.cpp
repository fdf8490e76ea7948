// The grouped GEMM's launch functions (kernels.hpp): check the weights, pick the kernel of the
// plan's tile. The kernels and their pipelines are in gemm_mma.cu and gemm_wgmma.cu.
#include <stdexcept>
#include <string>

#include "kernels/gemm_launch.hpp"
#include "kernels/gemm_tiles.hpp"
#include "kernels/kernels.hpp"

namespace tpgraph::kernels {

void grouped_gemm(const std::uint16_t* x16, const float* xs, const ExpertBank& w, const DeviceRouting& routing,
                  const DeviceGemmPlan& plan, float* y, Stream stream, const ExpertBank* partner, float* partner_y,
                  GemmWait wait) {
  if (w.rows % 16 != 0 || w.cols % gemm::kChunkElems != 0) {
    throw std::invalid_argument("grouped_gemm: weights " + std::to_string(w.rows) + " x " + std::to_string(w.cols) +
                                "; rows must be a multiple of 16 and cols of 64");
  }
  if (w.experts <= 0) {
    throw std::invalid_argument("grouped_gemm: a bank of " + std::to_string(w.experts) +
                                " experts; it needs at least one");
  }
  if (plan.grid <= 0) return;  // no routed rows: nothing to write
  if (plan.tile < 0 || plan.tile >= gemm_tile_count()) {
    throw std::invalid_argument("grouped_gemm: tile " + std::to_string(plan.tile) + " out of range");
  }
  if (plan.paired && (partner == nullptr || partner_y == nullptr || partner->rows != w.rows ||
                      partner->cols != w.cols || partner->layout != w.layout || partner->experts != w.experts)) {
    throw std::invalid_argument(
        "grouped_gemm: a paired plan needs a partner GEMM of the same experts, shape and layout (" +
        std::to_string(w.rows) + " x " + std::to_string(w.cols) + ")");
  }
  const bool paired = plan.paired;
  const gemm::GemmArgs args{x16,
                            xs,
                            w.bytes,
                            w.tensor_scale,
                            w.rows,
                            w.cols,
                            plan.items,
                            plan.tile,
                            y,
                            paired ? partner->bytes : nullptr,
                            paired ? partner->tensor_scale : nullptr,
                            paired ? partner_y : nullptr,
                            wait};
  const bool v2 = w.layout == Layout::v2;
  if (gemm::kTiles[static_cast<std::size_t>(plan.tile)].wgmma) {
    gemm::launch_wgmma(args, v2, plan.tile, routing.n_rows, w.experts, plan.grid, stream);
  } else {
    gemm::launch_mma(args, v2, plan.tile, plan.grid, stream);
  }
}

void grouped_gemm(const std::uint16_t* x16, const float* xs, const ExpertBank& w, const DeviceRouting& routing,
                  const std::int32_t* plan_items, int plan_grid, float* y, Stream stream) {
  const DeviceGemmPlan plan{plan_items, plan_grid, choose_gemm_tile(routing.n_rows, routing.n_active, w.rows, w.cols)};
  grouped_gemm(x16, xs, w, routing, plan, y, stream);
}

}  // namespace tpgraph::kernels
