// The consumer-decode design of the warp-specialised wgmma kernel (TPGRAPH_WS_CONSUMER_DECODE=1,
// gemm_wgmma_ws.cuh says why): the producers' copies and the consumers' chunks with the decode in
// their registers. Compiled only with TPGRAPH_WGMMA_WS (included by gemm_wgmma_ws.cu alone).
#pragma once
#include <cuda.h>

#include <cstdint>

#include "kernels/gemm_common.cuh"
#include "kernels/gemm_wgmma_ws.cuh"
#include "kernels/gemm_wgmma_ws_block.cuh"
#include "kernels/nvfp4_decode.cuh"
#include "kernels/ptx.cuh"
#include "kernels/wgmma_ops.cuh"

// TPGRAPH_WS_CONSUMER_DECODE's consumers: the k16 steps' wgmma groups in flight (1 or 2), and
// whether the next chunk's fragments are read during the current chunk (TPGRAPH_WS_CD_AHEAD=1).
#ifndef TPGRAPH_WS_CD_PENDING
#define TPGRAPH_WS_CD_PENDING 1
#endif
#ifndef TPGRAPH_WS_CD_AHEAD
#define TPGRAPH_WS_CD_AHEAD 0
#endif

namespace tpgraph::kernels::gemm {

constexpr int kWsCdPending = TPGRAPH_WS_CD_PENDING;
static_assert(kWsCdPending == 1 || kWsCdPending == 2);

// TPGRAPH_WS_CONSUMER_DECODE (layout v2): the producers only copy. Warp 0's lanes 0 .. kTiles - 1
// bring tile L's unit of every chunk into raw stage gc % kRawStages (the stages read as one ring of
// kTiles units each, its full barrier raw_full[0][s], one arrival with the bytes of the active
// groups' tiles), once every consumer warp has taken its fragments of the stage's previous chunk;
// warp 1's lane 0 issues the routed rows' copies, kBStages - 1 chunks ahead. Warps 2 and 3 wait at
// the retirement.
template <int kConsumers, bool kPair>
__device__ __forceinline__ void ws_copy(const GemmArgs& args, const CUtensorMap* map, const WsBlock& b) {
  using Shape = WsShape<kConsumers>;
  using RingRaw = RingOrder<Shape::kRawStages>;
  constexpr int kStageBytes = Shape::kTiles * kUnitBytes;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (warp == 1) {
    if (lane == 0) {
      int c = 0;
      for (int gc = 0; gc < b.total; ++gc) {
        ws_load_b<kConsumers>(b, map, gc, c);
        if (++c == b.chunks) c = 0;
      }
    }
    __syncwarp();  // converged at the retirement's barriers
  }
  if (warp != 0) return;
  int bytes = 0;
#pragma unroll
  for (int q = 0; q < 2 * kConsumers; ++q)
    if (ws_group<kConsumers, kPair>(args, b, q).active) bytes += 4 * kUnitBytes;
  const WsGroup group = ws_group<kConsumers, kPair>(args, b, lane < Shape::kTiles ? lane / 4 : 0);
  const bool copies = lane < Shape::kTiles && group.active;
  const std::uint8_t* first =
      (group.partner ? args.partner_weights : args.weights) +
      (static_cast<std::int64_t>(b.work.expert) * args.out_rows + 16 * (group.tile0 + lane % 4)) * b.chunks *
          kChunkBytes;  // the lane's tile stream, row block 0, chunk 0 (16 rows x kChunkBytes = one unit)
  const std::uint32_t dst = TPGRAPH_WS_AT(b, raw) + static_cast<std::uint32_t>(lane * kUnitBytes);
  const std::uint32_t full = TPGRAPH_WS_AT(b, raw_full);
  const std::uint32_t empty = TPGRAPH_WS_AT(b, raw_empty);
  int item = 0;
  int c = 0;
  for (int gc = 0; gc < b.total; ++gc) {
    const int s = RingRaw::stage(gc);
    if (gc >= Shape::kRawStages) detail::mbar_wait(empty + 8 * s, RingRaw::phase(gc) ^ 1u);
    if (lane == 0) detail::mbar_expect_tx(full + 8 * s, bytes);
    if (copies) {
      detail::bulk_copy(dst + static_cast<std::uint32_t>(s * kStageBytes),
                        first + (static_cast<std::int64_t>(item) * Shape::kTiles * b.chunks + c) * kUnitBytes,
                        kUnitBytes, full + 8 * s);
    }
    if (++c == b.chunks) {
      c = 0;
      ++item;
    }
  }
}

// TPGRAPH_WS_CONSUMER_DECODE: a consumer warpgroup's chunks with its warps decoding their tiles
// (warp w: tile w of each active half, unit 4 (2 consumer + h) + w of a raw stage) into the register
// A operand, as gemm_wgmma.cu does with one. Per chunk: the routed rows and the NVFP4 stage landed,
// the fragments read and the raw stage released at once; per k16 step the halves' decode, one wgmma
// each, one group; once a step is in flight the previous step's group is complete, so at the first
// step the previous chunk's routed-row stage is released.
template <int kConsumers, int kN, int kHalves>
__device__ __forceinline__ void ws_decode_chunks(const GemmArgs& args, float (&acc)[2][kN / 2], const WsBlock& b,
                                                 const WsReads& r, const WsGroup (&group)[2], const float* xs_s,
                                                 int consumer) {
  using Shape = WsShape<kConsumers>;
  using RingRaw = RingOrder<Shape::kRawStages>;
  using RingB = RingOrder<Shape::kBStages>;
  constexpr int kStageBytes = Shape::kTiles * kUnitBytes;
  const int lane = threadIdx.x % 32;
  const int w = (threadIdx.x / 32) % 4;
  const std::uint32_t unit = TPGRAPH_WS_AT(b, raw) + static_cast<std::uint32_t>((8 * consumer + w) * kUnitBytes);
  const std::uint32_t full = TPGRAPH_WS_AT(b, raw_full);
  const std::uint32_t empty = TPGRAPH_WS_AT(b, raw_empty);
  // Chunk n's fragments into registers, its raw stage released.
  auto take = [&](int n, Fragment(&f)[2]) {
    const int sr = RingRaw::stage(n);
    detail::mbar_wait(full + 8 * sr, RingRaw::phase(n));
#pragma unroll
    for (int h = 0; h < kHalves; ++h)
      f[h] = load_unit_fragment(unit + static_cast<std::uint32_t>(sr * kStageBytes + h * 4 * kUnitBytes), lane);
    __syncwarp();
    if (lane == 0) detail::mbar_arrive(empty + 8 * sr);
  };
  Fragment f[2];
  if constexpr (TPGRAPH_WS_CD_AHEAD) take(0, f);
  int gc = 0;
  for (int item = 0; item < b.work.items; ++item) {
    for (int c = 0; c < b.chunks; ++c, ++gc) {
      const int sb = RingB::stage(gc);
      const std::uint32_t previous_b = r.b_empty + 8 * (sb == 0 ? Shape::kBStages - 1 : sb - 1);
      if constexpr (!TPGRAPH_WS_CD_AHEAD) take(gc, f);
      detail::mbar_wait(r.b_full + 8 * sb, RingB::phase(gc));
      if constexpr (kHalves == 0) {
        if (gc > 0 && lane == 0) detail::mbar_arrive(previous_b);
        if constexpr (TPGRAPH_WS_CD_AHEAD) {
          if (gc + 1 < b.total) take(gc + 1, f);
        }
      } else {
        const std::uint32_t b_lo = r.b_lo + static_cast<std::uint32_t>(sb * (kWsBStageBytes >> 4));
        Fragment next[2];
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          std::uint32_t a[2][4];
#pragma unroll
          for (int h = 0; h < kHalves; ++h)
            detail::decode_a_fragment<true>(word_of(f[h], kk), f[h].scales.x, f[h].scales.y, kk, a[h]);
          detail::wgmma_fence();
#pragma unroll
          for (int h = 0; h < kHalves; ++h)
            detail::Wgmma<kN>::mma(acc[h], a[h], detail::smem_desc_sw128_lo(b_lo + static_cast<std::uint32_t>(2 * kk)));
          detail::wgmma_commit();
          detail::wgmma_wait<kWsCdPending>();
          if (kk == kWsCdPending - 1 && gc > 0 && lane == 0) detail::mbar_arrive(previous_b);
          if constexpr (TPGRAPH_WS_CD_AHEAD) {
            if (kk == 1 && gc + 1 < b.total) take(gc + 1, next);
          }
        }
        if constexpr (TPGRAPH_WS_CD_AHEAD) {
#pragma unroll
          for (int h = 0; h < kHalves; ++h) f[h] = next[h];
        }
      }
    }
    if (item + 1 == b.work.items) break;
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      const int tile = group[h].tile0 + item * Shape::kTiles + w;
      store_row_block<kN>(args, acc[h], xs_s, b.work.begin, b.work.rows, tile, lane / 4, lane % 4);
    }
  }
  detail::wgmma_wait<0>();
}

}  // namespace tpgraph::kernels::gemm
