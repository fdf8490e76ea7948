// The grouped GEMM's warp-specialised wgmma kernel (built with -DTPGRAPH_WGMMA_WS=1, which hands
// it every launch of tiles 3 and 4, layouts v1 and v2). In gemm_wgmma.cu every warp decodes its
// weights into wgmma's register A operand and waits on its own wgmma: at 128 registers a thread
// cannot decode a chunk ahead, and the warps mostly wait (docs/kernel-notes.md). Here the decode
// runs ahead of the tensor cores:
//
// - a producer warpgroup (warps 0-3, setmaxnreg down) brings each 64-row group's NVFP4 chunks into
//   shared memory (gemm_wgmma_ws_raw.cuh: v2 units by bulk copies, v1 rows by cp.async), decodes
//   them to fp16 in shared memory, in the layout wgmma's descriptor reads (the interleaved K-major
//   layout, ptx.cuh), and arrives on the A stage's full barrier; it also issues the routed rows'
//   tensor copies (the B ring), producer warp gc % kProducerWarps for chunk gc + 1; tile 4 may
//   have two producer warpgroups (TPGRAPH_WS_PRODUCERS=2: warps 0-7, two 16-row tiles each);
// - consumer warpgroups (setmaxnreg up), each 128 weight rows as two m64 halves, issue wgmma with
//   both operands from shared memory: the decoded weights and the routed-row stage. Their
//   registers hold the accumulators (N = 160: 160 of them) and little else.
//
// Tile 4 (256 rows): 1 producer + 2 consumer warpgroups, 384 threads, one block per SM: 168
// registers a thread at launch (ptxas's cap for 384 threads), 64 / 216 after setmaxnreg
// (128 x 64 + 256 x 216 <= 384 x 168): a fifth warpgroup beside gemm_wgmma.cu's four would have
// capped every thread at 96 before setmaxnreg. Tile 3 (128 rows): 1 + 1, two blocks per SM: 128
// at launch, 56 / 200.
//
// Bits: every output element is the same wgmma m64nNk16 per k16 step, in the same order, over the
// same fp16 values in the same physical k positions as gemm_wgmma.cu's register fragments (the
// decode is nvfp4_decode.cuh's, stored where the fragment's registers sit), with the same
// epilogue; only where A comes from differs.
#ifdef TPGRAPH_WGMMA_WS
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/gemm_common.cuh"
#include "kernels/gemm_wgmma_ws.cuh"
#include "kernels/gemm_wgmma_ws_block.cuh"
#include "kernels/gemm_wgmma_ws_decode.cuh"
#include "kernels/gemm_wgmma_ws_raw.cuh"
#include "kernels/launch.cuh"

namespace tpgraph::kernels::gemm {
namespace {

constexpr int kWsBarrierRetire = 1;  // named barrier of the retiring steps (0 is __syncthreads')
// ---- the producer warpgroup -------------------------------------------------------------------

// A producer warp's tiles of one chunk, decoded (nvfp4_decode.cuh, the register fragment of
// gemm_wgmma.cu) and stored where wgmma's descriptor reads them: tile j's rows g and g + 8 are
// core-matrix rows of 8-row groups 2j and 2j + 1 (1024 bytes apart), k16 step kk's two 8-column
// halves core matrices 2kk and 2kk + 1 (128 bytes apart); lane (g, t) writes bytes 16g + 4t of each
// (`a_lane`): a warp's 32 words of one store fill 128 contiguous bytes, no bank conflicts.
//
// TPGRAPH_WS_A_SWIZZLE: row r of the 64-row group at 128 r, its 16-byte piece p at 16 (p ^ r % 8).
// Lane (g, t)'s words of step kk are rows g and g + 8 (r % 8 = g) in pieces 2kk and 2kk + 1, at
// 4t within the piece; `a_lane` holds 128 g + 16 g + 4t, so a piece's address is a_lane ^ 16p (the
// stage, group and tile offsets are multiples of 1024 and leave bits 4-6 alone): one XOR per piece
// and step, shared by the tiles. A warp's 32 words of one store fill 8 rows' piece (2kk) ^ g:
// 32 banks, no conflicts.
template <bool kV2, int kTilesPerWarp, typename Raw>
__device__ __forceinline__ void ws_decode_chunk(const Raw& raw, int stage, std::uint32_t a_lane, int lane) {
#pragma unroll kWsUnroll
  for (int j = 0; j < kTilesPerWarp; ++j) {
    const Fragment f = raw.fragment(stage, j, lane);
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      std::uint32_t a[4];
      detail::decode_a_fragment<kV2>(word_of(f, kk), f.scales.x, f.scales.y, kk, a);
#if TPGRAPH_WS_A_SWIZZLE
      const std::uint32_t lo = (a_lane ^ static_cast<std::uint32_t>(32 * kk)) + static_cast<std::uint32_t>(j * 2048);
      const std::uint32_t hi =
          (a_lane ^ static_cast<std::uint32_t>(32 * kk + 16)) + static_cast<std::uint32_t>(j * 2048);
      detail::sts32(lo, a[0]);
      detail::sts32(lo + 1024, a[1]);
      detail::sts32(hi, a[2]);
      detail::sts32(hi + 1024, a[3]);
#else
      const std::uint32_t at = a_lane + static_cast<std::uint32_t>(j * 2048 + kk * 256);
      detail::sts32(at, a[0]);
      detail::sts32(at + 1024, a[1]);
      detail::sts32(at + 128, a[2]);
      detail::sts32(at + 1024 + 128, a[3]);
#endif
    }
  }
}

// A producer warp's place in the block: its weights (first tile, in its group's matrix), its A
// stage slot and its consumer's barriers.
struct WsFeed {
  const std::uint8_t* matrix;  // the expert's matrix of the warp's GEMM
  int tile;                    // the warp's first tile in row block 0
  std::uint32_t a_lane;        // A stage 0, this lane's first word
  std::uint32_t a_full;        // the consumer's barriers, stage 0
  std::uint32_t a_empty;
  bool active;
};
template <int kConsumers, bool kPair>
__device__ __forceinline__ WsFeed ws_feed(const GemmArgs& args, const WsBlock& b, int warp, int lane) {
  using Shape = WsShape<kConsumers>;
  const int tile = warp * Shape::kProducerTiles;  // the warp's first tile in the block
  const int q = tile / 4;
  const WsGroup group = ws_group<kConsumers, kPair>(args, b, q);
  WsFeed f;
  f.matrix = (group.partner ? args.partner_weights : args.weights) +
             static_cast<std::int64_t>(b.work.expert) * args.out_rows * b.chunks * kChunkBytes;
  f.tile = group.tile0 + tile % 4;
  const int g = lane / 4;
  const int in_tile = TPGRAPH_WS_A_SWIZZLE ? 128 * g + 16 * g + 4 * (lane % 4) : 4 * lane;  // 4 lane = 16 g + 4 t
  f.a_lane = TPGRAPH_WS_AT(b, a_stages) + static_cast<std::uint32_t>(q * kWsHalfBytes + (tile % 4) * 2048 + in_tile);
  f.a_full = TPGRAPH_WS_AT(b, a_full) + static_cast<std::uint32_t>((q / 2) * Shape::kAStages * 8);
  f.a_empty = TPGRAPH_WS_AT(b, a_empty) + static_cast<std::uint32_t>((q / 2) * Shape::kAStages * 8);
  f.active = group.active;
  return f;
}

// One producer warp: for every chunk gc of the block, in order, (its turn) the routed rows of
// chunk gc + 1, then the decode of its tiles into A stage gc % kAStages once the consumer has
// released it, then its arrival on the stage's full barrier. A warp of a group past the last
// weight row decodes nothing and still arrives, so the barriers' counts hold.
template <bool kV2, int kConsumers, bool kPair>
__device__ __forceinline__ void ws_produce(const GemmArgs& args, const CUtensorMap* map, const WsBlock& b) {
  using Shape = WsShape<kConsumers>;
  using RingA = RingOrder<Shape::kAStages>;
  using RingRaw = RingOrder<Shape::kRawStages>;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const WsFeed f = ws_feed<kConsumers, kPair>(args, b, warp, lane);
  const WsRaw<kV2, Shape::kProducerTiles, Shape::kRawStages, Shape::kTiles> raw(
      f.matrix, f.tile, b.chunks,
      TPGRAPH_WS_AT(b, raw) + static_cast<std::uint32_t>(warp * Shape::kRawStages * Shape::kRawStageBytes),
      TPGRAPH_WS_AT(b, raw_full) + static_cast<std::uint32_t>(warp * Shape::kRawStages * 8), lane);
  int raw_item = 0;  // the chunk the raw pipe loads next
  int raw_c = 0;
  auto next_raw = [&](int stage) {
    raw.load(stage, raw_item, raw_c, lane);
    if (++raw_c == b.chunks) {
      raw_c = 0;
      ++raw_item;
    }
  };
  if (f.active) {
    for (int s = 0; s < Shape::kRawStages; ++s) {
      if (s < b.total) {
        next_raw(s);
      } else {
        raw.skip();
      }
    }
  }
  if (warp == 0 && lane == 0) ws_load_b<kConsumers>(b, map, 0, 0);
  int b_c = b.chunks == 1 ? 0 : 1;  // routed-row chunk of chunk gc + 1
  for (int gc = 0; gc < b.total; ++gc) {
    if (lane == 0 && warp == gc % Shape::kProducerWarps && gc + 1 < b.total) ws_load_b<kConsumers>(b, map, gc + 1, b_c);
    if (++b_c == b.chunks) b_c = 0;
    const int sa = RingA::stage(gc);
    if (gc >= Shape::kAStages) detail::mbar_wait(f.a_empty + 8 * sa, RingA::phase(gc) ^ 1u);
    if (f.active) {
      const int sr = RingRaw::stage(gc);
      raw.wait(sr, RingRaw::phase(gc));
      if constexpr (TPGRAPH_WS_PROBE != 1)
        ws_decode_chunk<kV2, Shape::kProducerTiles>(
            raw, sr, f.a_lane + static_cast<std::uint32_t>(sa * Shape::kAStageBytes), lane);
      __syncwarp();  // every lane has read the raw stage: refill it
      if (gc + Shape::kRawStages < b.total) {
        next_raw(sr);
      } else {
        raw.skip();
      }
    }
    detail::fence_proxy_async_shared();  // the decoded words are visible to wgmma (the async proxy)
    __syncwarp();
    if (lane == 0) detail::mbar_arrive(f.a_full + 8 * sa);
  }
}

// ---- the consumer warpgroups ------------------------------------------------------------------

#ifndef TPGRAPH_WGMMA_WS_RS
// One chunk of a consumer: per k16 step, one wgmma per active half (A: the half's decoded group at
// a_lo + 512 * half, step kk at + 16 * kk; B: the routed-row stage, step kk at + 2 * kk; both
// descriptors by their low word). The chunk's wgmmas are one group; the previous chunk's group is
// complete on return.
template <int kN, int kHalves>
__device__ __forceinline__ void ws_mma_chunk(float (&acc)[2][kN / 2], std::uint32_t a_lo, std::uint32_t,
                                             std::uint32_t b_lo) {
  if constexpr (TPGRAPH_WS_PROBE == 2) return;
  detail::wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      const std::uint32_t a_half = a_lo + static_cast<std::uint32_t>(h * (kWsHalfBytes >> 4));
#if TPGRAPH_WS_A_SWIZZLE
      const std::uint64_t a_desc = detail::smem_desc_sw128_lo(a_half + static_cast<std::uint32_t>(2 * kk));
#else
      const std::uint64_t a_desc = detail::smem_desc_interleave_lo(a_half + static_cast<std::uint32_t>(16 * kk));
#endif
      detail::Wgmma<kN>::mma_ss(acc[h], a_desc, detail::smem_desc_sw128_lo(b_lo + static_cast<std::uint32_t>(2 * kk)));
    }
  }
  detail::wgmma_commit();
  detail::wgmma_wait<1>();
}
#else
// TPGRAPH_WGMMA_WS_RS=1: A from registers, as in gemm_wgmma.cu (the same instruction on the same
// registers, in case wgmma sums an A from shared memory in another order), loaded from the decoded
// stage with one ldmatrix.x4 per half and k16 step (`a_ldm`: this lane's row of the warp's tile:
// matrix L / 8 is rows 8 (i & 1) on and k 8 (i >> 1) on, exactly the A fragment's four registers).
// One group per k16 step, the previous one complete before the next step's registers are loaded.
template <int kN, int kHalves>
__device__ __forceinline__ void ws_mma_chunk(float (&acc)[2][kN / 2], std::uint32_t, std::uint32_t a_ldm,
                                             std::uint32_t b_lo) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    std::uint32_t a[2][4];
#pragma unroll
    for (int h = 0; h < kHalves; ++h)
      detail::ldmatrix_x4_at(a[h], a_ldm + static_cast<std::uint32_t>(h * kWsHalfBytes + kk * 256));
    detail::wgmma_fence();
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      detail::Wgmma<kN>::mma(acc[h], a[h], detail::smem_desc_sw128_lo(b_lo + static_cast<std::uint32_t>(2 * kk)));
    }
    detail::wgmma_commit();
    detail::wgmma_wait<1>();
  }
}
#endif

// The last row block's outputs of one consumer warp, staged as [routed row][out row] (out row
// 64 q + 16 w + g, as gemm_wgmma.cu's warp 4 q + w), scaled by the half's GEMM's scales.
template <int kConsumers, int kN>
__device__ __forceinline__ void ws_stage_outputs(const GemmArgs& args, const float (&acc)[2][kN / 2], float* staged,
                                                 const float* xs_s, const float* xs_partner, const WsGroup (&group)[2],
                                                 int last_item, int consumer, int w, int g, int t) {
  constexpr int kStride = 128 * kConsumers + 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int tile = group[h].tile0 + last_item * WsShape<kConsumers>::kTiles + w;
    if (tile >= args.out_rows / 16) continue;
    const int ol = (2 * consumer + h) * 64 + w * 16 + g;
    const float* scales = group[h].partner ? xs_partner : xs_s;
#pragma unroll
    for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int n = j * 8 + 2 * t + c;
        const float scale = scales[n];
        float* out = staged + n * kStride + ol;
        out[0] = __fmul_rn(scale, acc[h][4 * j + c]);
        out[8] = __fmul_rn(scale, acc[h][4 * j + 2 + c]);
      }
    }
  }
}

// The block's retirement as the consumers see it: every warpgroup is done with the pipelines
// (the producers then retire the barriers), then the outputs are staged over the storage.
template <int kConsumers, int kN>
__device__ __forceinline__ void ws_consumer_retire(const GemmArgs& args, const float (&acc)[2][kN / 2],
                                                   std::uint8_t* smem, const WsBlock& b, const WsGroup (&group)[2],
                                                   int consumer) {
  constexpr int kThreads = WsShape<kConsumers>::kThreads;
  detail::named_barrier_sync(kWsBarrierRetire, kThreads);  // every warp is done with the pipelines
  detail::named_barrier_sync(kWsBarrierRetire, kThreads);  // the barriers are retired
  auto& staged = *reinterpret_cast<WsStagedOutputs<kConsumers>*>(smem);
  const int lane = threadIdx.x % 32;
  ws_stage_outputs<kConsumers, kN>(args, acc, &staged.out[0][0], staged.xs, staged.xs + kWgmmaMaxTokens, group,
                                   b.work.items - 1, consumer, (threadIdx.x / 32) % 4, lane / 4, lane % 4);
  detail::named_barrier_sync(kWsBarrierRetire, kThreads);  // the outputs are staged
}

// A consumer warpgroup's chunks, its kHalves active halves (0, 1 or 2: a loop of its own each, so
// no accumulator moves between wgmmas in flight): every chunk's wgmmas once its routed rows and
// decoded weights are in, the previous chunk's stages released once its wgmmas are complete; a
// row block before the last stored from registers (store_row_block). Returns with every wgmma
// complete.
template <int kConsumers, int kN, int kHalves>
__device__ __forceinline__ void ws_consume_chunks(const GemmArgs& args, float (&acc)[2][kN / 2], const WsBlock& b,
                                                  const WsReads& r, const WsGroup (&group)[2], const float* xs_s) {
  using Shape = WsShape<kConsumers>;
  using RingA = RingOrder<Shape::kAStages>;
  using RingB = RingOrder<Shape::kBStages>;
  const int lane = threadIdx.x % 32;
  int gc = 0;
  for (int item = 0; item < b.work.items; ++item) {
    for (int c = 0; c < b.chunks; ++c, ++gc) {
      const int sb = RingB::stage(gc);
      const int sa = RingA::stage(gc);
      detail::mbar_wait(r.b_full + 8 * sb, RingB::phase(gc));
      detail::mbar_wait(r.a_full + 8 * sa, RingA::phase(gc));
      if constexpr (kHalves > 0) {
        ws_mma_chunk<kN, kHalves>(acc, r.a_lo + static_cast<std::uint32_t>(sa * (Shape::kAStageBytes >> 4)),
                                  r.a_ldm + static_cast<std::uint32_t>(sa * Shape::kAStageBytes),
                                  r.b_lo + static_cast<std::uint32_t>(sb * (kWsBStageBytes >> 4)));
      }
      if (gc > 0 && lane == 0) {  // the previous chunk's wgmmas are complete
        detail::mbar_arrive(r.b_empty + 8 * (sb == 0 ? Shape::kBStages - 1 : sb - 1));
        detail::mbar_arrive(r.a_empty + 8 * (sa == 0 ? Shape::kAStages - 1 : sa - 1));
      }
    }
    if (item + 1 == b.work.items) break;
#pragma unroll
    for (int h = 0; h < kHalves; ++h) {
      const int tile = group[h].tile0 + item * Shape::kTiles + (threadIdx.x / 32) % 4;
      store_row_block<kN>(args, acc[h], xs_s, b.work.begin, b.work.rows, tile, lane / 4, lane % 4);
    }
  }
  detail::wgmma_wait<0>();
}

// One consumer warpgroup: its chunks, then the block's retirement and its share of the staged
// outputs.
template <int kConsumers, int kN, bool kPair, bool kDecode>
__device__ __forceinline__ void ws_consume(const GemmArgs& args, std::uint8_t* smem) {
  const WsBlock b = ws_block_of<kConsumers>(args, smem);
  const int consumer = threadIdx.x / 128 - WsShape<kConsumers>::kProducerGroups;
  const WsGroup group[2] = {ws_group<kConsumers, kPair>(args, b, 2 * consumer),
                            ws_group<kConsumers, kPair>(args, b, 2 * consumer + 1)};
  const WsReads r = ws_reads<kConsumers>(b, consumer);
  const float* xs_s = reinterpret_cast<const WsStorage<kConsumers>*>(smem)->xs;
  float acc[2][kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) acc[0][i] = acc[1][i] = 0.0f;
  if constexpr (kDecode) {
    if (group[1].active) {  // an active half 1 has an active half 0
      ws_decode_chunks<kConsumers, kN, 2>(args, acc, b, r, group, xs_s, consumer);
    } else if (group[0].active) {
      ws_decode_chunks<kConsumers, kN, 1>(args, acc, b, r, group, xs_s, consumer);
    } else {
      ws_decode_chunks<kConsumers, kN, 0>(args, acc, b, r, group, xs_s, consumer);
    }
  } else if (group[1].active) {
    ws_consume_chunks<kConsumers, kN, 2>(args, acc, b, r, group, xs_s);
  } else if (group[0].active) {
    ws_consume_chunks<kConsumers, kN, 1>(args, acc, b, r, group, xs_s);
  } else {
    ws_consume_chunks<kConsumers, kN, 0>(args, acc, b, r, group, xs_s);
  }
  ws_consumer_retire<kConsumers, kN>(args, acc, smem, b, group, consumer);
}

template <int kConsumers, bool kPair, bool kDecode>
__device__ __forceinline__ void ws_consume_rows(const GemmArgs& args, std::uint8_t* smem, int rows) {
  switch ((rows + 15) / 16) {
    case 1: return ws_consume<kConsumers, 16, kPair, kDecode>(args, smem);
    case 2: return ws_consume<kConsumers, 32, kPair, kDecode>(args, smem);
    case 3: return ws_consume<kConsumers, 48, kPair, kDecode>(args, smem);
    case 4: return ws_consume<kConsumers, 64, kPair, kDecode>(args, smem);
    case 5: return ws_consume<kConsumers, 80, kPair, kDecode>(args, smem);
    case 6: return ws_consume<kConsumers, 96, kPair, kDecode>(args, smem);
    case 7: return ws_consume<kConsumers, 112, kPair, kDecode>(args, smem);
    case 8: return ws_consume<kConsumers, 128, kPair, kDecode>(args, smem);
    case 9: return ws_consume<kConsumers, 144, kPair, kDecode>(args, smem);
    case 10: return ws_consume<kConsumers, 160, kPair, kDecode>(args, smem);
    default: __trap();
  }
}

// ---- the block ----------------------------------------------------------------------------------

// The producers' side of the retirement (ws_consumer_retire): once every warp is done with the
// pipelines, the barriers are invalidated before their memory takes outputs.
template <int kConsumers>
__device__ __forceinline__ void ws_producer_retire(const WsBlock& b) {
  constexpr int kThreads = WsShape<kConsumers>::kThreads;
  constexpr int kBarriers =
      static_cast<int>((sizeof(WsStorage<kConsumers>) - offsetof(WsStorage<kConsumers>, b_full)) / 8);
  detail::named_barrier_sync(kWsBarrierRetire, kThreads);
  for (int i = static_cast<int>(threadIdx.x); i < kBarriers; i += WsShape<kConsumers>::kProducerThreads)
    detail::mbar_inval(TPGRAPH_WS_AT(b, b_full) + 8 * i);
  detail::named_barrier_sync(kWsBarrierRetire, kThreads);
  detail::named_barrier_sync(kWsBarrierRetire, kThreads);
}

// The staged outputs to y with 16-byte stores, every warp of the block a routed row at a time (as
// gemm_wgmma.cu; in a pair block staged columns [cols, 2 cols) are the partner's).
template <int kConsumers, bool kPair>
__device__ __forceinline__ void ws_store_staged(const GemmArgs& args, const std::uint8_t* smem, const BlockWork& w) {
  constexpr int kRows = 128 * kConsumers;
  constexpr int kStride = kRows + 4;
  const float* staged = &reinterpret_cast<const WsStagedOutputs<kConsumers>*>(smem)->out[0][0];
  const int row_block = w.row_block + w.items - 1;
  const int cols = min(kRows, args.out_rows - row_block * kRows);
  const int staged_cols = kPair ? 2 * cols : cols;
  const std::int64_t first = static_cast<std::int64_t>(w.begin) * args.out_rows + row_block * kRows;
  float* y0 = args.y + first;
  float* partner_y0 = kPair ? args.partner_y + first : nullptr;
  const int lane = threadIdx.x % 32;
  for (int n = threadIdx.x / 32; n < w.rows; n += WsShape<kConsumers>::kThreads / 32) {
#pragma unroll
    for (int h = 0; h < kRows / 128; ++h) {
      const int col = h * 128 + lane * 4;
      if (col < staged_cols) {
        const float4 v = *reinterpret_cast<const float4*>(staged + n * kStride + col);
        float* y = !kPair || col < cols ? y0 + col : partner_y0 + (col - cols);
        *reinterpret_cast<float4*>(y + static_cast<std::int64_t>(n) * args.out_rows) = v;
      }
    }
  }
}

template <bool kV2, int kConsumers, bool kPair>
__device__ __forceinline__ void ws_block(const GemmArgs& args, const CUtensorMap* map, std::uint8_t* smem,
                                         const BlockWork& work) {
  using Shape = WsShape<kConsumers>;
  constexpr bool kDecodeInConsumers = kV2 && TPGRAPH_WS_CONSUMER_DECODE;
  auto& shared = *reinterpret_cast<WsStorage<kConsumers>*>(smem);
  ws_prepare<kConsumers, kPair>(args, ws_block_of<kConsumers>(args, smem), shared.xs, shared.xs + kWgmmaMaxTokens);
  const int rows = work.rows;
  if (threadIdx.x < Shape::kProducerThreads) {
    detail::setmaxnreg_dec<Shape::kProducerRegs>();
    const WsBlock b = ws_block_of<kConsumers>(args, smem);
    if constexpr (kDecodeInConsumers) {
      ws_copy<kConsumers, kPair>(args, map, b);
    } else {
      ws_produce<kV2, kConsumers, kPair>(args, map, b);
    }
    ws_producer_retire<kConsumers>(b);
  } else {
    detail::setmaxnreg_inc<Shape::kConsumerRegs>();
    ws_consume_rows<kConsumers, kPair, kDecodeInConsumers>(args, smem, rows);
  }
  ws_store_staged<kConsumers, kPair>(args, smem, block_work(args));
}

template <bool kV2, int kConsumers, int kMinBlocks>
__global__ void __launch_bounds__(WsShape<kConsumers>::kThreads, kMinBlocks)
    grouped_gemm_ws_kernel(const GemmArgs args, const __grid_constant__ CUtensorMap x16_map) {
  extern __shared__ __align__(1024) std::uint8_t ws_smem[];
  const BlockWork w = block_work(args);
  if (w.pair) {
    ws_block<kV2, kConsumers, true>(args, &x16_map, ws_smem, w);
  } else {
    ws_block<kV2, kConsumers, false>(args, &x16_map, ws_smem, w);
  }
}

template <bool kV2, int kTile>
void launch_ws_tile(const GemmArgs& args, std::int64_t rows, int grid, cudaStream_t stream) {
  constexpr TileSpec spec = kTiles[kTile];
  static_assert(spec.wgmma && spec.warpgroups % 2 == 0);
  constexpr int kConsumers = spec.warpgroups / 2;  // 64-row warpgroups there, 128-row consumers here
#ifdef TPGRAPH_NO_WGMMA
  throw std::invalid_argument("grouped_gemm: tile " + std::to_string(kTile) +
                              " uses wgmma, which this build lacks: build with CMAKE_CUDA_ARCHITECTURES=90a");
#endif
  // The registers setmaxnreg hands out come from those the block was launched with.
  constexpr int kLaunchRegs = 65536 / (WsShape<kConsumers>::kThreads * spec.min_blocks) / 8 * 8;
  static_assert(WsShape<kConsumers>::kProducerThreads * WsShape<kConsumers>::kProducerRegs +
                    128 * kConsumers * WsShape<kConsumers>::kConsumerRegs <=
                WsShape<kConsumers>::kThreads * kLaunchRegs);
  auto* kernel = grouped_gemm_ws_kernel<kV2, kConsumers, spec.min_blocks>;
  constexpr int smem = ws_smem_bytes<kConsumers>();
  detail::prepare_smem(reinterpret_cast<const void*>(kernel), smem, "grouped_gemm: cudaFuncSetAttribute");
  const CUtensorMap map = routed_rows_map(args.x16_bits, rows, args.in_cols);
  kernel<<<static_cast<unsigned int>(grid), WsShape<kConsumers>::kThreads, smem, stream>>>(args, map);
  detail::check_launch("grouped_gemm");
}

template <bool kV2>
void launch_ws_layout(const GemmArgs& args, int tile, std::int64_t routed_rows, int grid, cudaStream_t stream) {
  switch (tile) {
    case 3: return launch_ws_tile<kV2, 3>(args, routed_rows, grid, stream);
    case 4: return launch_ws_tile<kV2, 4>(args, routed_rows, grid, stream);
    default: throw std::invalid_argument("grouped_gemm: tile " + std::to_string(tile) + " is not a wgmma tile");
  }
}

}  // namespace

void launch_wgmma_ws(const GemmArgs& args, bool v2, int tile, std::int64_t routed_rows, int grid, Stream stream) {
  if (v2) {
    launch_ws_layout<true>(args, tile, routed_rows, grid, stream);
  } else {
    launch_ws_layout<false>(args, tile, routed_rows, grid, stream);
  }
}

}  // namespace tpgraph::kernels::gemm
#endif  // TPGRAPH_WGMMA_WS
