// The grouped GEMM's wgmma kernel, for many routed rows per expert (tiles 128 x <=160 and
// 256 x <=160): warpgroups of 4 warps, each warp 16 of the warpgroup's 64 weight rows. A warp
// decodes its weights to the A fragment in registers (nvfp4_decode.cuh), which goes straight into
// wgmma.mma_async m64nNk16; B, the block's routed rows, comes from shared memory by descriptor.
// Tensor copies bring each chunk's routed rows (and with layout v2 the block's weights for it) into
// one ring stage (gemm_wgmma_ring.cuh). N is the block's routed rows rounded up to 16 (an expert's rows
// are split evenly into blocks of at most 160), so the tensor cores do little padding. Where K is
// short a block walks several row blocks with its pipelines running on (gemm_tiles.hpp).
//
// wgmma and mma.sync give the same bits for the same k16 steps in the same order (the GPU tests
// compare every tile), so this kernel and gemm_mma.cu are interchangeable bit for bit.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/gemm_common.cuh"
#include "kernels/gemm_wgmma_ring.cuh"
#include "kernels/launch.cuh"
#include "kernels/wg_timeline.cuh"

namespace tpgraph::kernels::gemm {
namespace {

// k16 wgmmas a warp leaves in flight when it decodes the next (2 measured slower).
constexpr int kWgPending = 1;
static_assert(kWgPending >= 1 && kWgPending <= 4, "a chunk has four k16 steps");
constexpr int kWgXsBytes = 2048;  // the routed rows' scales, two GEMMs', padded so the ring starts 1024-aligned

// Shared memory of the wgmma kernel. While the block computes: the routed rows' scales, the ring
// (WgRing: stages of routed rows, with layout v2 each followed by the chunk's weight units), the
// ring's barriers. After the last chunk the last row block's outputs are staged over the ring
// (WgStagedOutputs), so the kernel allocates the larger of the two (wgmma_smem_bytes).
template <bool kV2, int kWarpgroups>
struct WgSharedStorage {
  float xs[kWgXsBytes / 4];
  std::uint8_t ring[wg_ring_bytes(kV2 ? 4 * kWarpgroups : 0)];
  std::uint64_t full[kWgMaxStages];   // a stage's routed rows (and weights) have landed
  std::uint64_t empty[kWgMaxStages];  // every warp's wgmmas that read a stage are complete
};
template <int kWarpgroups>
struct WgStagedOutputs {
  float xs[kWgXsBytes / 4];
  float out[kWgmmaMaxTokens][64 * kWarpgroups + 4];  // [routed row][out row], a 16-byte pad per row
};
template <bool kV2, int kWarpgroups>
constexpr int wgmma_smem_bytes() {
  return sizeof(WgSharedStorage<kV2, kWarpgroups>) > sizeof(WgStagedOutputs<kWarpgroups>)
             ? static_cast<int>(sizeof(WgSharedStorage<kV2, kWarpgroups>))
             : static_cast<int>(sizeof(WgStagedOutputs<kWarpgroups>));
}
using WgStorage128 = WgSharedStorage<true, 2>;
using WgStorage256V1 = WgSharedStorage<false, 4>;
using WgStaged128 = WgStagedOutputs<2>;
static_assert(offsetof(WgStorage128, ring) % 1024 == 0 && offsetof(WgStorage256V1, ring) % 1024 == 0,
              "the swizzled stages are 1024-byte aligned");
static_assert(offsetof(WgStaged128, out) == offsetof(WgStorage128, ring), "the staged outputs lie over the ring");
static_assert(offsetof(WgStorage128, empty) == offsetof(WgStorage128, full) + 8 * kWgMaxStages,
              "full and empty are one array of barriers to the retiring loop");
template <bool kV2, int kWarpgroups>
constexpr bool packed() {  // no padding: the launch asks for exactly the parts' bytes
  return sizeof(WgSharedStorage<kV2, kWarpgroups>) ==
         static_cast<std::size_t>(kWgXsBytes + wg_ring_bytes(kV2 ? 4 * kWarpgroups : 0) + 2 * 8 * kWgMaxStages);
}
static_assert(packed<true, 2>() && packed<true, 4>() && packed<false, 2>() && packed<false, 4>());

// The ring of a block of kN routed rows: with layout v2 its stages carry the weights of the block's
// 4 * kWarpgroups tiles too.
template <bool kV2, int kWarpgroups, int kN>
using WgRingOf = WgRing<kN, kV2 ? 4 * kWarpgroups : 0>;

// v2: a warp's weight unit of chunk gc lies in the chunk's ring stage s, after the routed rows, in
// the order of the block's warps; the ring's barriers cover it.
template <class Ring>
struct WgRingWeights {
  std::uint32_t unit0;  // this warp's unit in stage 0
  __device__ __forceinline__ WgRingWeights(std::uint32_t b_base, int warp)
      : unit0(b_base + static_cast<std::uint32_t>(Ring::kRowBytes + warp * kUnitBytes)) {}
  __device__ __forceinline__ Fragment get(int s, int lane) const {
    return load_unit_fragment(unit0 + static_cast<std::uint32_t>(s * Ring::kStageBytes), lane);
  }
};

// v1: a warp's weights by byte gathers one chunk ahead in registers: the chunks of `items` row
// blocks one after the other (global chunk gc = item * chunks + c), item r's tile kTileStep tiles
// after item r-1's.
template <int kTileStep>
struct WgV1Weights {
  const std::uint8_t* matrix;
  V1WeightStream stream;
  Fragment ahead;
  int tile;
  int chunks;
  int total;
  int c;  // chunk of `ahead` within its item
  int lane;

  __device__ __forceinline__ WgV1Weights(const std::uint8_t* matrix_, int tile_, int chunks_, int total_, int lane_)
      : matrix(matrix_),
        stream(matrix_, tile_, chunks_, lane_),
        tile(tile_),
        chunks(chunks_),
        total(total_),
        c(0),
        lane(lane_) {
    if (total > 0) ahead = stream.next();
  }
  __device__ __forceinline__ Fragment get(int gc) {
    const Fragment f = ahead;
    if (++c == chunks) {
      c = 0;
      tile += kTileStep;
      stream = V1WeightStream(matrix, tile, chunks, lane);
    }
    if (gc + 1 < total) ahead = stream.next();
    return f;
  }
};

// A warp's weights: v2 from the ring's stages, v1 gathered from the matrix (an idle warpgroup's
// none), its tiles from tile0 on.
template <bool kV2, int kWarpgroups, class Ring>
__device__ __forceinline__ auto wg_weights(const GemmArgs& args, int expert, bool partner, bool group_active, int tile0,
                                           int chunks, int total, std::uint32_t b_base, int warp, int lane) {
  if constexpr (kV2) {
    return WgRingWeights<Ring>(b_base, warp);
  } else {
    const std::uint8_t* matrix =
        (partner ? args.partner_weights : args.weights) +
        static_cast<std::int64_t>(kWgProbe & 2 ? 0 : expert) * args.out_rows * chunks * kChunkBytes;
    return WgV1Weights<4 * kWarpgroups>(matrix, group_active ? tile0 : 0, chunks, group_active ? total : 0, lane);
  }
}

// The ring's barriers (thread 0) and the routed rows' scales, before anyone uses them. Per routed
// row: xs * ts * 2^14 (the decoded weights carry 2^-14, nvfp4_decode.cuh). Scaling by 2^14 is
// exact, so scale * acc rounds to the same bits as (xs * ts) * (acc * 2^14) does.
template <int kWarpgroups, int kN, bool kPair, int kStages>
__device__ __forceinline__ void prepare_ring_and_scales(const GemmArgs& args, std::uint32_t full_bars,
                                                        std::uint32_t empty_bars, bool producer, float* xs_s,
                                                        float* xs_partner, int expert, int row_begin, int block_rows) {
  if (producer) {
#pragma unroll
    for (int i = 0; i < kStages; ++i) {
      detail::mbar_init(full_bars + 8 * i, 1);
      detail::mbar_init(empty_bars + 8 * i, 4 * kWarpgroups);
    }
    detail::fence_mbarrier_init();
  }
  wait_before_inputs(args);  // the weights' first copies are in flight; the routed rows come next
  const float ts = args.tensor_scale[expert];
  const float ts_partner = kPair ? args.partner_tensor_scale[expert] : 0.0f;
  for (int n = threadIdx.x; n < kN; n += 128 * kWarpgroups) {
    xs_s[n] = n < block_rows ? __fmul_rn(__fmul_rn(args.xs[row_begin + n], ts), 16384.0f) : 0.0f;
    if (kPair)
      xs_partner[n] = n < block_rows ? __fmul_rn(__fmul_rn(args.xs[row_begin + n], ts_partner), 16384.0f) : 0.0f;
  }
  __syncthreads();  // the ring's barriers and the scales are in place before anyone uses them
}

// A warp's k16 steps of one chunk: the weights f, decoded step by step into the A fragment, against
// the routed rows in stage s. The ring's descriptors by their low word: stage s, k16 step kk at
// desc_base + s * kStageBytes / 16 + 2 * kk (the address field counts 16 bytes), the high word a constant.
// Once kWgPending steps are in flight, every wgmma of the previous chunk is complete: lane 0
// releases its stage (previous_empty).
template <bool kV2, int kN, int kStageBytes>
__device__ __forceinline__ void wgmma_chunk(float (&acc)[kN / 2], const Fragment& f, std::uint32_t desc_base, int s,
                                            bool release_previous, std::uint32_t previous_empty, int lane) {
  const std::uint32_t desc = desc_base + static_cast<std::uint32_t>(s * (kStageBytes >> 4));
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    std::uint32_t a[4];
    if constexpr ((kWgProbe & 8) != 0) {
      a[0] = a[2] = word_of(f, kk) & 0x3bff3bffu;  // the words as they come, finite fp16 bits
      a[1] = f.scales.x & 0x3bff3bffu;
      a[3] = f.scales.y & 0x3bff3bffu;
    } else {
      detail::decode_a_fragment<kV2>(word_of(f, kk), f.scales.x, f.scales.y, kk, a);
    }
    detail::wgmma_fence();
    detail::Wgmma<kN>::mma(acc, a, detail::smem_desc_sw128_lo(desc + static_cast<std::uint32_t>(2 * kk)));
    detail::wgmma_commit();
    detail::wgmma_wait<kWgPending>();
    if (kk == kWgPending - 1 && release_previous && lane == 0) detail::mbar_arrive(previous_empty);
  }
}

// The last row block's outputs: staged in shared memory as [routed row][out row] over the ring
// (the pad per row makes the fragment writes hit distinct banks), whose barriers are retired first,
// then 16-byte stores, each warp a whole 1 KB row.
template <int kWarpgroups, int kN, bool kPair, class Ring>
__device__ __forceinline__ void store_last_row_block(const GemmArgs& args, const float (&acc)[kN / 2],
                                                     std::uint8_t* smem, const float* xs_s, const float* xs_partner,
                                                     bool partner, std::uint32_t full_bars, int row_block0, int tile0,
                                                     int items, int row_begin, int block_rows, int warp, int lane,
                                                     int g, int t) {
  constexpr int kRows = 64 * kWarpgroups;
  constexpr int kStride = kRows + 4;
  __syncthreads();  // every warp is done with the ring and its barriers
  if (threadIdx.x < Ring::kStages) {
    detail::mbar_inval(full_bars + 8 * threadIdx.x);
    detail::mbar_inval(full_bars + 8 * (kWgMaxStages + threadIdx.x));  // empty follows full
  }
  __syncthreads();  // the barriers are retired before their memory takes outputs
  const int row_block = row_block0 + items - 1;
  const int tile = tile0 + (items - 1) * 4 * kWarpgroups;
  float* staged = &reinterpret_cast<WgStagedOutputs<kWarpgroups>*>(smem)->out[0][0];
  if (tile < args.out_rows / 16) {
    const int ol = warp * 16 + g;
    const float* scales = partner ? xs_partner : xs_s;
#pragma unroll
    for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int n = j * 8 + 2 * t + c;
        const float scale = scales[n];
        float* out = staged + n * kStride + ol;
        out[0] = __fmul_rn(scale, acc[4 * j + c]);
        out[8] = __fmul_rn(scale, acc[4 * j + 2 + c]);
      }
    }
  }
  __syncthreads();
  // Staged columns [0, cols) are this GEMM's rows; in a pair block [cols, 2 * cols) the partner's.
  const int cols = min(kRows, args.out_rows - row_block * kRows);
  const int staged_cols = kPair ? 2 * cols : cols;
  const std::int64_t first =
      static_cast<std::int64_t>(kWgProbe & 16 ? 0 : row_begin) * args.out_rows + row_block * kRows;
  if constexpr ((kWgProbe & 4) != 0) return;
  float* y0 = args.y + first;
  float* partner_y0 = kPair ? args.partner_y + first : nullptr;
  for (int n = warp; n < block_rows; n += 4 * kWarpgroups) {
#pragma unroll
    for (int h = 0; h < kRows / 128; ++h) {
      const int col = h * 128 + lane * 4;
      if (col < staged_cols) {
        const float4 v = *reinterpret_cast<const float4*>(staged + n * kStride + col);
        float* y = !kPair || col < cols ? y0 + col : partner_y0 + (col - cols);
        float4* to = reinterpret_cast<float4*>(y + static_cast<std::int64_t>(n) * args.out_rows);
        *to = v;
      }
    }
  }
}

// One block: `items` consecutive row blocks of one expert and one token block. The routed rows are
// the same for every row block, so the ring keeps cycling through their chunks, and both the ring
// and the v1 weight gathers run on into the next row block while the current one is finished: its
// outputs go straight from registers to y, except the last row block's, which are staged in shared
// memory (free by then) and written with coalesced 16-byte stores.
// A pair block (plan_gate_up) is the partial last row block of this GEMM and of the partner: the
// warpgroups past this GEMM's rows compute the partner's same rows from the same routed rows.
// kPair: a pair block's code is its own instance, so the other blocks' registers are those of a
// kernel without pairs. In a pair block the warpgroups from `partial_groups` on take the partner's
// rows, as warps 0, 1, ... of the same row block.
// A warpgroup wholly past the last weight row (out rows not a multiple of the block's rows, e.g.
// 640 = 2.5 x 256) only helps load the routed rows: no weight copies, no decode, no wgmma, so the
// tensor cores serve the block's other warpgroups alone. Its warps agree (the test is per
// warpgroup), which the .aligned wgmma instructions need. The planner gives such a row block a
// block of its own (items == 1), a pair block where the partner's rows fill the idle warpgroups.
template <bool kV2, int kWarpgroups, int kN, bool kPair>
__device__ __forceinline__ void wgmma_block(const GemmArgs& args, const WgRowMaps& x16_maps, std::uint8_t* smem,
                                            const BlockWork& work) {
  static_assert(kN <= kWgmmaMaxTokens && 2 * kWgmmaMaxTokens * 4 <= kWgXsBytes, "the scales fit their shared memory");
  using Storage = WgSharedStorage<kV2, kWarpgroups>;
  using Ring = WgRingOf<kV2, kWarpgroups, kN>;
  constexpr int kRows = 64 * kWarpgroups;
  Storage& shared = *reinterpret_cast<Storage*>(smem);
  const int expert = work.expert;
  const int row_block0 = work.row_block;
  const int items = work.items;
  const int row_begin = work.begin;
  const int block_rows = work.rows;
  const int chunks = args.in_cols / kChunkElems;
  const int total = chunks * items;
  const int warp = threadIdx.x / 32;  // warpgroup warp / 4, row tile warp % 4 within it
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  // This warp's first tile: in a pair block, warpgroups from partial_groups on take the partner's
  // rows; a warpgroup past the last weight row is idle (both above the function).
  const int partial_groups = (args.out_rows % kRows) / 64;
  const bool partner = kPair && warp >= 4 * partial_groups;
  const int tile0 = row_block0 * 4 * kWarpgroups + warp - (partner ? 4 * partial_groups : 0);
  const bool group_active = (tile0 & ~3) < args.out_rows / 16;

  // Shared-window addresses of the storage's members, as offsets from the ring's: one address
  // conversion, and the barrier addresses stay immediates from it.
  float* xs_s = shared.xs;
  float* xs_partner = shared.xs + kWgmmaMaxTokens;
  const std::uint32_t b_base = detail::smem_address(shared.ring);
  auto from_ring = [&](std::size_t member_offset) {
    return b_base + static_cast<std::uint32_t>(member_offset - offsetof(Storage, ring));
  };
  auto weights =
      wg_weights<kV2, kWarpgroups, Ring>(args, expert, partner, group_active, tile0, chunks, total, b_base, warp, lane);
  float acc[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;

  // The ring (refill_ring): its barriers, the copies of one chunk, the first chunks.
  const std::uint32_t full_bars = from_ring(offsetof(Storage, full));
  const std::uint32_t empty_bars = from_ring(offsetof(Storage, empty));
  const bool producer = threadIdx.x == 0;
  prepare_ring_and_scales<kWarpgroups, kN, kPair, Ring::kStages>(args, full_bars, empty_bars, producer, xs_s,
                                                                 xs_partner, expert, row_begin, block_rows);
  WgTimeline::ready(args.weights, block_rows, items, chunks);
  const std::uint64_t map = reinterpret_cast<std::uint64_t>(&x16_maps.n[kN / 16 - 1]);
  const WgRingCopies<Ring> copies{full_bars, b_base,
                                  map,       kWgProbe & 1 ? 0 : row_begin,
                                  &x16_maps, (args.out_rows % kRows) / 16,
                                  kPair,     args.out_rows / kRows - 1};
  // The weights' tile coordinate of the block's first row block (v2).
  const int weight_tile0 = (kWgProbe & 2 ? 0 : expert) * (args.out_rows / 16) + row_block0 * 4 * kWarpgroups;
  WgRingCursor<Ring> next = start_ring<Ring>(copies, producer, chunks, total, row_block0, weight_tile0);
  const std::uint32_t desc_base = detail::smem_desc_sw128_lo_of(b_base);
  WgTimeline::Waits waits;  // thread 0's waits in the loop, where the probe is built in
  int gc = 0;
  for (int item = 0; item < items; ++item) {
    for (int c = 0; c < chunks; ++c, ++gc) {
      const int s = RingOrder<Ring::kStages>::stage(gc);
      const std::uint32_t parity = RingOrder<Ring::kStages>::phase(gc);
      const int turn = static_cast<int>(static_cast<unsigned>(gc) % (4 * kWarpgroups));  // who loads the next
      if (warp == turn && gc + Ring::kAhead < total)
        waits.timed(waits.empty, [&] { refill_ring<Ring>(copies, gc, s, parity, next, empty_bars, lane); });
      next.advance(chunks);
      if constexpr (!kWgNoRingWaits) waits.timed(waits.full, [&] { detail::mbar_wait(full_bars + 8 * s, parity); });
      // The previous chunk's stage is free once this chunk's first wgmmas are in flight (an idle
      // warpgroup read nothing and says so at once).
      const bool release_previous = gc > 0;
      const std::uint32_t previous_empty = empty_bars + 8 * (s == 0 ? Ring::kStages - 1 : s - 1);
      if (group_active) {
        Fragment f;
        if constexpr (kV2) {
          waits.timed(waits.pipe, [&] { f = weights.get(s, lane); });
        } else {
          waits.timed(waits.pipe, [&] { f = weights.get(gc); });
        }
        wgmma_chunk<kV2, kN, Ring::kStageBytes>(acc, f, desc_base, s, release_previous, previous_empty, lane);
      } else if (release_previous && lane == 0) {
        detail::mbar_arrive(previous_empty);
      }
    }
    if (item + 1 == items) break;
    if constexpr ((kWgProbe & 4) != 0) {
      detail::wgmma_wait<0>();
      continue;  // the next row block sums on (the outputs are wrong anyway)
    }
    store_row_block<kN>(args, acc, xs_s, kWgProbe & 16 ? 0 : row_begin, block_rows, tile0 + item * 4 * kWarpgroups, g,
                        t);
  }
  detail::wgmma_wait<0>();
  WgTimeline::loop_end(args.weights, waits);

  store_last_row_block<kWarpgroups, kN, kPair, Ring>(args, acc, smem, xs_s, xs_partner, partner, full_bars, row_block0,
                                                     tile0, items, row_begin, block_rows, warp, lane, g, t);
}

// The block's variant: N is its routed rows rounded up to 16.
template <bool kV2, int kWarpgroups, bool kPair>
__device__ __forceinline__ void wgmma_rows(const GemmArgs& args, const WgRowMaps& x16_maps, std::uint8_t* smem,
                                           const BlockWork& w) {
  switch ((w.rows + 15) / 16) {
    case 1: return wgmma_block<kV2, kWarpgroups, 16, kPair>(args, x16_maps, smem, w);
    case 2: return wgmma_block<kV2, kWarpgroups, 32, kPair>(args, x16_maps, smem, w);
    case 3: return wgmma_block<kV2, kWarpgroups, 48, kPair>(args, x16_maps, smem, w);
    case 4: return wgmma_block<kV2, kWarpgroups, 64, kPair>(args, x16_maps, smem, w);
    case 5: return wgmma_block<kV2, kWarpgroups, 80, kPair>(args, x16_maps, smem, w);
    case 6: return wgmma_block<kV2, kWarpgroups, 96, kPair>(args, x16_maps, smem, w);
    case 7: return wgmma_block<kV2, kWarpgroups, 112, kPair>(args, x16_maps, smem, w);
    case 8: return wgmma_block<kV2, kWarpgroups, 128, kPair>(args, x16_maps, smem, w);
    case 9: return wgmma_block<kV2, kWarpgroups, 144, kPair>(args, x16_maps, smem, w);
    case 10: return wgmma_block<kV2, kWarpgroups, 160, kPair>(args, x16_maps, smem, w);
    default: __trap();
  }
}

template <bool kV2, int kWarpgroups, int kMinBlocks>
__global__ void __launch_bounds__(128 * kWarpgroups, kMinBlocks)
    grouped_gemm_wgmma_kernel(const GemmArgs args, const __grid_constant__ WgRowMaps x16_maps) {
  extern __shared__ __align__(1024) std::uint8_t wg_smem[];
  WgTimeline::start(args.weights);
  const bool at_exit = args.wait != GemmWait::before_inputs;  // GemmWait::at_exit (kernels.hpp)
  if (at_exit) detail::allow_dependent_launch();
  const BlockWork w = block_work(args);
  if (w.pair) {
    wgmma_rows<kV2, kWarpgroups, true>(args, x16_maps, wg_smem, w);
  } else {
    wgmma_rows<kV2, kWarpgroups, false>(args, x16_maps, wg_smem, w);
  }
  if (at_exit) detail::wait_for_prerequisite_grids();
  WgTimeline::finish(args.weights);
}

// A tensor map through the driver's cuTensorMapEncodeTiled (found once: the project does not link
// libcuda itself), every element stride 1, no interleave, L2 promotion of 256 bytes, zeros past
// the tensor; what() names it in the error (called only then: a launch encodes 13 maps).
template <class What>
CUtensorMap encode_map(CUtensorMapDataType type, cuuint32_t rank, const void* base, const cuuint64_t* dims,
                       const cuuint64_t* strides, const cuuint32_t* box, CUtensorMapSwizzle swizzle, What&& what) {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  static const Encode encode = cuda::driver_function<Encode>("cuTensorMapEncodeTiled");
  CUtensorMap map{};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  const CUresult status = encode(&map, type, rank, const_cast<void*>(base), dims, strides, box, element_strides,
                                 CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) cuda::check(status, ("grouped_gemm: cuTensorMapEncodeTiled for " + what()).c_str());
  return map;
}

// A bank of weight matrices, layout v2 (`experts` x `rows` / 16 tiles of 16 rows, each `cols` / 64
// units of 576 bytes), as a tensor of [tiles][chunks][72 words of 8 bytes] for the ring's copies:
// boxes of one chunk of `box_tiles` consecutive tiles, in the order of the block's warps.
CUtensorMap weights_map(const std::uint8_t* bytes, int experts, int rows, int cols, int box_tiles) {
  const auto chunks = static_cast<cuuint64_t>(cols / kChunkElems);
  const cuuint64_t dims[3] = {kUnitBytes / 8, chunks, static_cast<cuuint64_t>(experts) * (rows / 16)};
  const cuuint64_t strides[2] = {kUnitBytes, chunks * kUnitBytes};
  const cuuint32_t box[3] = {kUnitBytes / 8, 1, static_cast<cuuint32_t>(box_tiles)};
  return encode_map(CU_TENSOR_MAP_DATA_TYPE_UINT64, 3, bytes, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_NONE, [&] {
    return std::to_string(experts) + " experts' " + std::to_string(rows) + " x " + std::to_string(cols) + " weights";
  });
}

template <bool kV2, int kTile>
void launch_tile(const GemmArgs& args, std::int64_t rows, int experts, int grid, cudaStream_t stream) {
  constexpr TileSpec spec = kTiles[kTile];
  static_assert(spec.wgmma);
#ifdef TPGRAPH_NO_WGMMA
  throw std::invalid_argument("grouped_gemm: tile " + std::to_string(kTile) +
                              " uses wgmma, which this build lacks: build with CMAKE_CUDA_ARCHITECTURES=90a");
#endif
  auto* kernel = grouped_gemm_wgmma_kernel<kV2, spec.warpgroups, spec.min_blocks>;
  constexpr int smem = wgmma_smem_bytes<kV2, spec.warpgroups>();
  detail::prepare_smem(reinterpret_cast<const void*>(kernel), smem, "grouped_gemm: cudaFuncSetAttribute");
  WgRowMaps maps;
  for (int i = 0; i < kWgmmaMaxTokens / 16; ++i)
    maps.n[i] = routed_rows_map(args.x16_bits, rows, args.in_cols, 16 * (i + 1));
  if constexpr (kV2) {  // the weights' maps: a row block's tiles, a partial one's, its partner's
    constexpr int kTiles = 4 * spec.warpgroups;
    const int partial = args.out_rows % (16 * kTiles) / 16;
    maps.weights = weights_map(args.weights, experts, args.out_rows, args.in_cols, kTiles);
    if (partial > 0) maps.partial = weights_map(args.weights, experts, args.out_rows, args.in_cols, partial);
    if (partial > 0 && args.partner_weights != nullptr)
      maps.partner = weights_map(args.partner_weights, experts, args.out_rows, args.in_cols, kTiles - partial);
  }
  timeline_at_exit();
  detail::launch("grouped_gemm", kernel, static_cast<unsigned int>(grid), 128 * spec.warpgroups, smem, stream, args,
                 maps);
}

template <bool kV2>
void launch_layout(const GemmArgs& args, std::int64_t rows, int experts, int tile, int grid, cudaStream_t stream) {
  switch (tile) {
    case 3: return launch_tile<kV2, 3>(args, rows, experts, grid, stream);
    case 4: return launch_tile<kV2, 4>(args, rows, experts, grid, stream);
    default: throw std::invalid_argument("grouped_gemm: tile " + std::to_string(tile) + " is not a wgmma tile");
  }
}

}  // namespace

CUtensorMap routed_rows_map(const std::uint16_t* x16, std::int64_t rows, int cols, int box_rows) {
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * sizeof(std::uint16_t)};
  const cuuint32_t box[2] = {kChunkElems, static_cast<cuuint32_t>(box_rows)};
  return encode_map(CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, x16, dims, strides, box, CU_TENSOR_MAP_SWIZZLE_128B,
                    [&] { return std::to_string(rows) + " x " + std::to_string(cols) + " routed rows"; });
}

void launch_wgmma(const GemmArgs& args, bool v2, int tile, std::int64_t routed_rows, int experts, int grid,
                  Stream stream) {
#ifdef TPGRAPH_WGMMA_WS
  launch_wgmma_ws(args, v2, tile, routed_rows, grid, stream);  // the warp-specialised variant
#else
  if (v2) {
    launch_layout<true>(args, routed_rows, experts, tile, grid, stream);
  } else {
    launch_layout<false>(args, routed_rows, experts, tile, grid, stream);
  }
#endif
}

}  // namespace tpgraph::kernels::gemm
