// Between the grouped GEMM's thin launcher (grouped_gemm.cpp) and its two kernels: the kernels'
// parameter block and one launch function per kernel file. Plain C++.
#pragma once
#include <cstdint>

#include "kernels/kernels.hpp"

namespace tpgraph::kernels::gemm {

// The kernels' parameters (passed by value: one constant-bank block per launch).
struct GemmArgs {
  const std::uint16_t* x16_bits;  // routed rows, f16 bits in the GEMM's k order
  const float* xs;                // their scales
  const std::uint8_t* weights;    // ExpertBank::bytes
  const float* tensor_scale;      // [experts]
  int out_rows;
  int in_cols;
  const std::int32_t* items;  // the plan on the device (gemm_plan.hpp)
  int tile_index;             // the tile launched: the kernel traps on a plan cut for another
  float* y;
  // A paired plan's partner GEMM (gemm_plan.hpp, plan_gate_up): same shape and routed rows.
  const std::uint8_t* partner_weights;
  const float* partner_tensor_scale;
  float* partner_y;
  GemmWait wait;  // where the blocks wait for the kernels before them (kernels.hpp)
};

// Launches mma.sync tile `tile` (gemm_mma.cu) or wgmma tile `tile` (gemm_wgmma.cu) over `grid`
// plan items, for layout v2 (`v2`) or v1 weights. `routed_rows` (the rows of x16) and `experts` (the
// matrices of the weights) bound the wgmma kernel's tensor copies. Throw std::invalid_argument for a
// tile of the other kind and cuda::CudaError when the launch fails.
void launch_mma(const GemmArgs& args, bool v2, int tile, int grid, Stream stream);
void launch_wgmma(const GemmArgs& args, bool v2, int tile, std::int64_t routed_rows, int experts, int grid,
                  Stream stream);
// The warp-specialised wgmma kernel (gemm_wgmma_ws.cu, built with TPGRAPH_WGMMA_WS=1): in such a
// build launch_wgmma hands it every launch.
void launch_wgmma_ws(const GemmArgs& args, bool v2, int tile, std::int64_t routed_rows, int grid, Stream stream);

}  // namespace tpgraph::kernels::gemm
