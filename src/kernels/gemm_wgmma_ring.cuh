// The wgmma kernel's ring (gemm_wgmma.cu): its stages of routed rows and, with layout v2, weights;
// the tensor maps and the copies that fill a stage; the order in which the warps refill them; and
// the kernel's probe bits (TPGRAPH_WG_PROBE).
#pragma once
#include <cuda.h>

#include <cstdint>

#include "kernels/gemm_common.cuh"
#include "kernels/gemm_tiles.hpp"
#include "kernels/ptx.cuh"

namespace tpgraph::kernels::gemm {

// B in shared memory: a ring of stages, each a chunk of the block's routed rows, 128 bytes each, as
// the tensor copies write it with the 128-byte swizzle (smem_desc_sw128 reads it). The routed rows
// have 120 KB, six stages of the largest block's 160 rows; a block of kN rows cuts the ring into
// stages of kN rows, so fewer rows get more stages, loaded further ahead, and the warpgroups may
// drift further apart: 8 stages 4 ahead at N = 112 (t=4096's typical block), at most 12. Against six
// stages of 160 rows for every N, 3 ahead: the three GEMMs at t=4096 0.986x (one H100).
// With layout v2 a stage also carries the chunk's weights: the 576-byte units of the block's kTiles
// warps (one 16-row tile each), after the routed rows, so one copy of each and the stage's barriers
// serve both; the ring then has the 72 KB more that per-warp weight pipes of 8 chunks would take:
// at N = 112 eight stages of 14 KB of routed rows and 9 KB of weights.
constexpr int kWgRingBytes = 6 * kWgmmaMaxTokens * 128;  // the routed rows' share
constexpr int kWgMaxStages = 12;                         // the barriers' arrays
constexpr int wg_ring_bytes(int tiles) { return kWgRingBytes + tiles * 8 * kUnitBytes; }
template <int kN, int kTilesT>
struct WgRing {
  static constexpr int kTiles = kTilesT;      // weight tiles per stage (0: layout v1, no weights)
  static constexpr int kRowBytes = kN * 128;  // a multiple of the swizzle's 1024 (kN is one of 16)
  static constexpr int kStageBytes = kRowBytes + (kTiles * kUnitBytes + 1023) / 1024 * 1024;
  static constexpr int kRingBytes = wg_ring_bytes(kTiles);
  static constexpr int kStages = kRingBytes / kStageBytes < kWgMaxStages ? kRingBytes / kStageBytes : kWgMaxStages;
  static constexpr int kAhead = kStages / 2;  // chunks in flight ahead of the one computed
  static_assert(kStageBytes % 1024 == 0 && kStages * kStageBytes <= kRingBytes);
  static_assert(kAhead < kStages - 1, "a stage is refilled only after a chunk that is not the previous one");
};
// The kernel's probe of what device memory and the copies cost it (never a build to use: its
// outputs are wrong), bits: 1, every block's routed rows are the first rows of x16 (read from the
// L2); 2, every block reads expert 0's weights (from the L2); 4, no outputs are stored; 8, the
// weight words go to the MMA undecoded (one AND each instead of the decode's 18 instructions); 16,
// every block stores its outputs over y's first rows (the same lines, which stay in the L2: the
// stores without their device-memory writes); 32, no copies and no waits for them: the ring is never
// filled, every warp computes on whatever its shared memory holds (the loop's own instructions and
// the tensor cores alone); 64, the same (in v1 its weights still come); 128, no weight copies (in v2
// the stages' routed rows still come); 256, the ring filled once, its stages waited for before the
// loop, then no copies and no waits (bit 32's loop on real data, where bit 32 computes on whatever
// shared memory held). Timed beside the kernel as it is, each says how much of its time the
// traffic or the work it removes costs.
#ifndef TPGRAPH_WG_PROBE
#define TPGRAPH_WG_PROBE 0
#endif
constexpr int kWgProbe = TPGRAPH_WG_PROBE;
constexpr bool kWgNoRingCopies = (kWgProbe & (32 | 64)) != 0;
constexpr bool kWgNoWeightCopies = (kWgProbe & (32 | 128)) != 0;
constexpr bool kWgRingOnce = (kWgProbe & 256) != 0;
constexpr bool kWgNoRingWaits = kWgNoRingCopies || kWgRingOnce;  // the loop skips the full waits

// The tensors the ring's copies read (one kernel parameter, made by the launch): the routed rows
// through a map per block size, n[i] with boxes of 16 (i + 1) rows x 64 columns, so a chunk of a
// block's N rows is one copy; and the weights (v2) as [tiles][chunks][72 words of 8 bytes], every
// expert's tiles one after the other, with boxes of one chunk of a row block's tiles (`weights`), of
// a partial row block's (`partial`) and of a pair block's partner's rows (`partner`).
struct WgRowMaps {
  CUtensorMap n[kWgmmaMaxTokens / 16];
  CUtensorMap weights, partial, partner;
};

// The copies of chunk c into ring stage `stage`, from one thread, completing on the stage's full
// barrier with the bytes: the block's N routed rows from `first_row` on, one tensor copy (a copy
// per 16 rows, N/16 of them even from a warp's lanes side by side, kept the issuing warp, and with
// it its warpgroup, about half a chunk longer on its turn); with weights (Ring::kTiles > 0), the
// chunk's units of row block `row_block`, whose first tile is at coordinate `tile`: one copy of a
// whole row block's tiles, of a partial one's, and in a pair block a second of the partner's.
template <class Ring>
struct WgRingCopies {
  std::uint32_t full_bars, b_base;
  std::uint64_t map;  // the N-row map
  int first_row;
  const WgRowMaps* maps;
  int partial_tiles;  // a partial row block's tiles of this GEMM
  bool pair;
  int last_whole;  // the last row block whose tiles are all there
  __device__ __forceinline__ void one(int stage, int c, int row_block, int tile) const {
    if constexpr (kWgNoRingCopies) return;
    constexpr bool kWeights = Ring::kTiles > 0 && !kWgNoWeightCopies;
    const std::uint32_t bar = full_bars + 8 * static_cast<std::uint32_t>(stage);
    const bool whole = row_block <= last_whole;
    const int own = whole ? Ring::kTiles : partial_tiles;
    const int copied = whole || !pair ? own : Ring::kTiles;
    detail::mbar_expect_tx(bar, Ring::kRowBytes + (kWeights ? copied * kUnitBytes : 0));
    const std::uint32_t dst = b_base + static_cast<std::uint32_t>(stage * Ring::kStageBytes);
    detail::tensor_copy_2d(dst, map, c * kChunkElems, first_row, bar);
    if constexpr (kWeights) {
      const std::uint32_t units = dst + static_cast<std::uint32_t>(Ring::kRowBytes);
      detail::tensor_copy_3d(units, reinterpret_cast<std::uint64_t>(whole ? &maps->weights : &maps->partial), 0, c,
                             tile, bar);
      if (!whole && pair)
        detail::tensor_copy_3d(units + static_cast<std::uint32_t>(own * kUnitBytes),
                               reinterpret_cast<std::uint64_t>(&maps->partner), 0, c, tile, bar);
    }
  }
};

// What the next refill loads (chunk gc + kAhead at chunk gc): its routed-row chunk (they repeat for
// every row block) and, with weights, its row block and their tile coordinate. Every warp keeps it,
// as the warps take turns to issue the copies.
template <class Ring>
struct WgRingCursor {
  int c, row_block, tile;
  __device__ __forceinline__ void advance(int chunks) {
    if (++c == chunks) {
      c = 0;
      if constexpr (Ring::kTiles > 0) {
        ++row_block;
        tile += Ring::kTiles;
      }
    }
  }
};

// The routed-row ring: a tensor copy (the block's N routed rows x 64 columns, 128-byte swizzle) loads
// a chunk into a stage once empty[s] says every warp's wgmmas that read it are complete; full[s]
// completes when the copy has landed. Chunk gc + kAhead is loaded while chunk gc is computed, so
// the warpgroups drift apart by up to a chunk instead of meeting at every one. The loads are issued
// by warp gc % warps in turn: with thread 0 alone as the producer, warp 0 carried an empty wait and
// the copies of every chunk on top of its share of the math, every other warp waited for its copies
// (28% of the stall samples on full[s]), and gate took 504 us instead of 476 at t=4096. Rows past
// the block's end come with the copy (zeros past the matrix, the next expert's rows otherwise):
// they only feed output columns that are never stored. Here warp gc % warps, whose turn chunk gc
// is (stage s, phase parity), loads chunk gc + kAhead (`next`; lane 0 issues).
template <class Ring>
__device__ __forceinline__ void refill_ring(const WgRingCopies<Ring>& copies, int gc, int s, std::uint32_t parity,
                                            const WgRingCursor<Ring>& next, std::uint32_t empty_bars, int lane) {
  // Chunk gc + kAhead goes to the stage last used by chunk gc + kAhead - kStages: in this round if
  // that stage comes before s, else in the previous one.
  constexpr int kStages = Ring::kStages;
  constexpr int kAhead = Ring::kAhead;
  constexpr int kBack = kStages - kAhead;
  if constexpr (kWgRingOnce) return;
  const bool same_round = s >= kBack;
  const int refill = same_round ? s - kBack : s + kAhead;
  if (gc + kAhead >= kStages && !kWgNoRingCopies) {
    // The stage's previous use must have been drained.
    detail::mbar_wait(empty_bars + 8 * refill, same_round ? parity : parity ^ 1u);
  }
  if (lane == 0) copies.one(refill, next.c, next.row_block, next.tile);
}

// The ring's first kAhead chunks, loaded by thread 0 (the producer), from row block row_block0 at
// weight tile coordinate tile0 on. Returns the cursor of the chunk loaded next.
template <class Ring>
__device__ __forceinline__ WgRingCursor<Ring> start_ring(const WgRingCopies<Ring>& copies, bool producer, int chunks,
                                                         int total, int row_block0, int tile0) {
  constexpr int kFirst = kWgRingOnce ? Ring::kStages : Ring::kAhead;  // the probe fills every stage once
  if (producer) {
    WgRingCursor<Ring> load{0, row_block0, tile0};
    for (int s = 0; s < kFirst && s < total; ++s) {
      copies.one(s, load.c, load.row_block, load.tile);
      load.advance(chunks);
    }
  }
  if constexpr (kWgRingOnce) {  // and waits for them here
    for (int s = 0; s < kFirst && s < total; ++s) detail::mbar_wait(copies.full_bars + 8 * s, 0);
  }
  constexpr int kAhead = Ring::kAhead;
  return {kAhead % chunks, row_block0 + kAhead / chunks, tile0 + kAhead / chunks * Ring::kTiles};
}

}  // namespace tpgraph::kernels::gemm
