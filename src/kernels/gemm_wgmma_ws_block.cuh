// The warp-specialised wgmma kernel's view of one block (gemm_wgmma_ws.cu), shared by its roles
// and by both designs of the consumers (gemm_wgmma_ws_decode.cuh): the work item and the shared
// memory's addresses, the 64-row groups, the barriers' preparation, the routed rows' copies and
// where a consumer reads its chunks. Compiled only with TPGRAPH_WGMMA_WS (included by
// gemm_wgmma_ws.cu alone).
#pragma once
#include <cuda.h>

#include <cstddef>
#include <cstdint>

#include "kernels/gemm_common.cuh"
#include "kernels/gemm_wgmma_ws.cuh"
#include "kernels/ptx.cuh"

namespace tpgraph::kernels::gemm {

// What both roles know of the block: its work item and its shared memory's addresses.
struct WsBlock {
  BlockWork work;
  int chunks;          // per row block
  int total;           // chunks * items
  int partial_groups;  // 64-row groups of this GEMM in a pair block
  std::uint32_t base;  // shared-window address of the storage
};
// The block's work item and its shared memory, read again where a role needs them: nothing is
// kept live across setmaxnreg and the routed-row switch (ptxas spilled such values).
template <int kConsumers>
__device__ __forceinline__ WsBlock ws_block_of(const GemmArgs& args, const std::uint8_t* smem) {
  const BlockWork work = block_work(args);
  const int chunks = args.in_cols / kChunkElems;
  return WsBlock{work, chunks, chunks * work.items, (args.out_rows % WsShape<kConsumers>::kRows) / 64,
                 detail::smem_address(smem)};
}

// The shared-window address of a member of the storage (kConsumers from the enclosing template).
#define TPGRAPH_WS_AT(block, member) \
  ((block).base + static_cast<std::uint32_t>(offsetof(WsStorage<kConsumers>, member)))

// 64-row group q of the block (a producer warp's tiles, a consumer's half): its first tile in
// item 0, whether it takes the partner's rows (pair blocks: the groups from partial_groups on),
// and whether it has weights at all (as in gemm_wgmma.cu, a group past the last weight row only
// keeps the barriers' counts).
struct WsGroup {
  int tile0;
  bool partner;
  bool active;
};
template <int kConsumers, bool kPair>
__device__ __forceinline__ WsGroup ws_group(const GemmArgs& args, const WsBlock& b, int q) {
  const bool partner = kPair && q >= b.partial_groups;
  const int tile0 = b.work.row_block * WsShape<kConsumers>::kTiles + 4 * q - (partner ? 4 * b.partial_groups : 0);
  return WsGroup{tile0, partner, tile0 < args.out_rows / 16};
}

// The barriers (thread 0) and the routed rows' scales (xs * ts * 2^14, as gemm_wgmma.cu), before
// anyone uses them.
template <int kConsumers, bool kPair>
__device__ __forceinline__ void ws_prepare(const GemmArgs& args, const WsBlock& b, float* xs_s, float* xs_partner) {
  using Shape = WsShape<kConsumers>;
  if (threadIdx.x == 0) {
    for (int s = 0; s < Shape::kBStages; ++s) {
      detail::mbar_init(TPGRAPH_WS_AT(b, b_full) + 8 * s, 1);
      detail::mbar_init(TPGRAPH_WS_AT(b, b_empty) + 8 * s, 4 * kConsumers);
    }
    for (int s = 0; s < kConsumers * Shape::kAStages; ++s) {
      detail::mbar_init(TPGRAPH_WS_AT(b, a_full) + 8 * s, Shape::kFeeders);
      detail::mbar_init(TPGRAPH_WS_AT(b, a_empty) + 8 * s, 4);
    }
    for (int s = 0; s < Shape::kProducerWarps * Shape::kRawStages; ++s)
      detail::mbar_init(TPGRAPH_WS_AT(b, raw_full) + 8 * s, 1);
    for (int s = 0; s < Shape::kRawStages; ++s) detail::mbar_init(TPGRAPH_WS_AT(b, raw_empty) + 8 * s, 4 * kConsumers);
    detail::fence_mbarrier_init();
  }
  const float ts = args.tensor_scale[b.work.expert];
  const float ts_partner = kPair ? args.partner_tensor_scale[b.work.expert] : 0.0f;
  for (int n = threadIdx.x; n < kWgmmaMaxTokens; n += Shape::kThreads) {
    const bool in = n < b.work.rows;
    xs_s[n] = in ? __fmul_rn(__fmul_rn(args.xs[b.work.begin + n], ts), 16384.0f) : 0.0f;
    if (kPair) xs_partner[n] = in ? __fmul_rn(__fmul_rn(args.xs[b.work.begin + n], ts_partner), 16384.0f) : 0.0f;
  }
  __syncthreads();
}

// Chunk gc's routed rows (routed-row chunk c, the block's rows rounded up to 16) into B stage
// gc % kBStages once every consumer warp has released its previous use. One lane.
template <int kConsumers>
__device__ __forceinline__ void ws_load_b(const WsBlock& b, const CUtensorMap* map, int gc, int c) {
  using Ring = RingOrder<WsShape<kConsumers>::kBStages>;
  const int s = Ring::stage(gc);
  if (gc >= WsShape<kConsumers>::kBStages) detail::mbar_wait(TPGRAPH_WS_AT(b, b_empty) + 8 * s, Ring::phase(gc) ^ 1u);
  const std::uint32_t bar = TPGRAPH_WS_AT(b, b_full) + 8 * s;
  const int pieces = (b.work.rows + 15) / 16;
  detail::mbar_expect_tx(bar, pieces * 16 * 128);
  const std::uint32_t dst = TPGRAPH_WS_AT(b, b_ring) + static_cast<std::uint32_t>(s * kWsBStageBytes);
  const std::uint64_t m = reinterpret_cast<std::uint64_t>(map);
  for (int r = 0; r < pieces; ++r) {
    detail::tensor_copy_2d(dst + static_cast<std::uint32_t>(r * 16 * 128), m, c * kChunkElems, b.work.begin + 16 * r,
                           bar);
  }
}

// Where a consumer warpgroup reads its chunks: its barriers and its descriptors' low words.
struct WsReads {
  std::uint32_t b_full;  // stage 0's; stage s at + 8 s
  std::uint32_t b_empty;
  std::uint32_t a_full;  // this consumer's
  std::uint32_t a_empty;
  std::uint32_t a_lo;   // A stage 0, half 0: the descriptor's low word (TPGRAPH_WS_A_SWIZZLE's layout)
  std::uint32_t a_ldm;  // A stage 0, half 0: this lane's ldmatrix row in its warp's tile (TPGRAPH_WGMMA_WS_RS)
  std::uint32_t b_lo;   // B stage 0 (128-byte swizzle)
};
template <int kConsumers>
__device__ __forceinline__ WsReads ws_reads(const WsBlock& b, int consumer) {
  constexpr int kAStages = WsShape<kConsumers>::kAStages;
  const std::uint32_t own = static_cast<std::uint32_t>(consumer * kAStages * 8);
  const std::uint32_t a_half0 = TPGRAPH_WS_AT(b, a_stages) + static_cast<std::uint32_t>(2 * consumer * kWsHalfBytes);
  const int lane = threadIdx.x % 32;
  const std::uint32_t ldm_row = static_cast<std::uint32_t>(((threadIdx.x / 32) % 4) * 2048 + (lane / 8 & 1) * 1024 +
                                                           (lane / 16) * 128 + (lane % 8) * 16);
  return WsReads{TPGRAPH_WS_AT(b, b_full),
                 TPGRAPH_WS_AT(b, b_empty),
                 TPGRAPH_WS_AT(b, a_full) + own,
                 TPGRAPH_WS_AT(b, a_empty) + own,
                 TPGRAPH_WS_A_SWIZZLE ? detail::smem_desc_sw128_lo_of(a_half0)
                                      : detail::smem_desc_interleave_lo_of(a_half0),
                 a_half0 + ldm_row,
                 detail::smem_desc_sw128_lo_of(TPGRAPH_WS_AT(b, b_ring))};
}

}  // namespace tpgraph::kernels::gemm
