// Launch functions of tpgraph's GPU kernels. Plain C++: no CUDA syntax, so the core, the capture
// code and the tests can include it. Every function enqueues on `stream` and returns at once; it
// throws cuda::CudaError (cuda_error/error.hpp, a std::runtime_error) if the launch itself fails. Nothing here
// allocates or synchronizes, so every call can be captured into a CUDA graph. Numerics follow
// src/core/numerics/reference.hpp step by step.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "core/numerics/nvfp4_layout.hpp"
#include "core/numerics/router.hpp"
#include "kernels/gemm_plan.hpp"

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace tpgraph::kernels {

using Stream = CUstream_st*;

// One weight kind (gate, up or down) of one rank, all experts, on the device.
struct ExpertBank {
  const std::uint8_t* bytes = nullptr;  // experts * rows * (cols/64*36), in `layout`
  const float* tensor_scale = nullptr;  // [experts]
  int rows = 0;                         // output features
  int cols = 0;                         // input features (K)
  Layout layout = Layout::v2;
  int experts = 0;  // matrices in `bytes`
};

// The routing on the device (copies of core Routing's arrays).
struct DeviceRouting {
  const std::int32_t* active_experts = nullptr;  // [n_active]
  const std::int32_t* offsets = nullptr;         // [n_active + 1]
  const std::int32_t* row_token = nullptr;       // [n_rows]
  const std::int32_t* pair_row = nullptr;        // [tokens * top_k]
  const float* pair_weight = nullptr;            // [tokens * top_k]
  int n_active = 0;
  std::int64_t n_rows = 0;  // pairs
  int tokens = 0;
  int top_k = 0;
};

// A plan on the device, for the grouped_gemm overload that launches a chosen tile.
struct DeviceGemmPlan {
  const std::int32_t* items = nullptr;  // device copy of GemmPlan::items
  int grid = 0;
  int tile = 0;
  bool paired = false;  // GemmPlan::paired: the launch needs a partner
};

// While one lives, the kernels this thread launches carry the programmatic-serialization attribute
// (programmatic dependent launch, sm_90): each may start while the kernel before it in the stream
// still runs, and waits for it in its own code before it reads what that kernel wrote (ptx.cuh,
// wait_for_prerequisite_grids). Captured into a graph, the edge between two such kernels is a
// programmatic one. The next kernel's blocks then take the SMs the previous kernel's last blocks
// leave free and start their weight copies while those finish. Nesting restores the outer setting.
class ProgrammaticLaunches {
 public:
  explicit ProgrammaticLaunches(bool on = true);
  ~ProgrammaticLaunches();
  ProgrammaticLaunches(const ProgrammaticLaunches&) = delete;
  ProgrammaticLaunches& operator=(const ProgrammaticLaunches&) = delete;

 private:
  bool outer_;
};

// 1. x16[i] = half(z[row_token[i]] / s), xs[i] = s = amax of the row (1 if 0).
// x16 and a16 rows are stored in the grouped GEMM's k order, not column order: within every 16
// columns, half2 slot t (t = 0..3) holds columns (2t, 2t+8) and slot 4+t holds (2t+1, 2t+9). The
// MMA then reads its B fragments with no shuffles (nvfp4_decode.cuh says why that order).
// x16_to_natural_order turns downloaded rows back into column order.
// The gather reads each token's row once and writes it to the token's k CSR rows (routing.pair_row).
void gather_quantize(const float* z, int hidden, const DeviceRouting& routing, std::uint16_t* x16, float* xs,
                     Stream stream);
void x16_to_natural_order(std::span<std::uint16_t> values, int cols);
// 4. the same without the gather: a16[i] = half(a[i] / s).
void quantize_rows(const float* a, int cols, std::int64_t rows, std::uint16_t* a16, float* as, Stream stream);
// 2 and 5. y[i][o] = xs[i] * scale_e * sum_k x16[i][k] * w_e[o][k] for every CSR row i of expert e.
// `plan_items` is the device copy of plan.items. No atomics: a fixed reduction order per element.
// This form launches the tile choose_gemm_tile picks; the plan must come from plan_grouped_gemm
// with the same routing (the kernel traps on a plan cut for another tile).
void grouped_gemm(const std::uint16_t* x16, const float* xs, const ExpertBank& w, const DeviceRouting& routing,
                  const std::int32_t* plan_items, int plan_grid, float* y, Stream stream);
// Where a grouped GEMM launched programmatically (ProgrammaticLaunches) waits for the kernels
// before it in the stream.
//  before_inputs: before it reads the routed rows and their scales (every launch but one).
//  at_exit: each block waits only before it exits, and lets the next kernel launch at its start.
//    Only for a GEMM whose inputs were complete before the kernel just before it passed its own
//    wait, and which neither reads what that kernel writes nor writes what it reads or writes:
//    up right after gate (RankLayer::enqueue). Its blocks then compute on the SMs gate's last blocks
//    leave free; since none exits before gate completes, up's completion still implies gate's.
enum class GemmWait { before_inputs, at_exit };
// A paired plan (plan_gate_up's first) also computes the partner GEMM's rows of its pair blocks:
// `partner` (same shape and layout as w) and its output `partner_y`; other plans ignore them.
void grouped_gemm(const std::uint16_t* x16, const float* xs, const ExpertBank& w, const DeviceRouting& routing,
                  const DeviceGemmPlan& plan, float* y, Stream stream, const ExpertBank* partner = nullptr,
                  float* partner_y = nullptr, GemmWait wait = GemmWait::before_inputs);
// 3. a = silu(g) * u, n elements.
void swiglu(const float* g, const float* u, std::int64_t n, float* a, Stream stream);
// 6. out[t][h] = sum over the token's pairs j = 0..k-1 (fmaf, in order) of weight * y[pair_row].
void combine(const float* y, int hidden, const DeviceRouting& routing, float* out, Stream stream);
// 7. out = ((out + partials[0]) + partials[1]) + ...: the root's reduce, in rank order.
// `partials` is a device array of `count` device pointers.
void join_reduce(const float* const* partials, int count, std::int64_t n, float* out, Stream stream);

}  // namespace tpgraph::kernels
