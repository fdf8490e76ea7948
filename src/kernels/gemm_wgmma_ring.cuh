// The wgmma kernel's routed-row ring (gemm_wgmma.cu): its stages, the tensor copies that fill them
// and the order in which the warps refill them; and the kernel's probe bits (TPGRAPH_WG_PROBE).
#pragma once
#include <cuda.h>

#include <cstdint>

#include "kernels/gemm_tiles.hpp"
#include "kernels/ptx.cuh"

namespace tpgraph::kernels::gemm {

// B in shared memory: a ring of stages, each a chunk of the block's routed rows, 128 bytes each, as
// the tensor copies write it with the 128-byte swizzle (smem_desc_sw128 reads it). The ring has 120
// KB, six stages of the largest block's 160 rows; a block of kN rows cuts it into stages of kN rows,
// so fewer rows get more stages, loaded further ahead, and the warpgroups may drift further apart:
// 8 stages 4 ahead at N = 112 (t=4096's typical block), 10 at 96, at most 12. Against six stages of
// 160 rows for every N, 3 ahead: the three GEMMs at t=4096 0.986x (one H100).
constexpr int kWgRingBytes = 6 * kWgmmaMaxTokens * 128;
constexpr int kWgMaxStages = 12;  // the barriers' arrays
template <int kN>
struct WgRing {
  static constexpr int kStageBytes = kN * 128;  // a multiple of the swizzle's 1024 (kN is one of 16)
  static constexpr int kStages = kWgRingBytes / kStageBytes < kWgMaxStages ? kWgRingBytes / kStageBytes : kWgMaxStages;
  static constexpr int kAhead = kStages / 2;  // chunks of B in flight ahead of the one computed
  static_assert(kStageBytes % 1024 == 0 && kStages * kStageBytes <= kWgRingBytes);
  static_assert(kAhead < kStages - 1, "a stage is refilled only after a chunk that is not the previous one");
};
// The kernel's probe of what device memory and the copies cost it (never a build to use: its
// outputs are wrong), bits: 1, every block's routed rows are the first rows of x16 (read from the
// L2); 2, every block reads expert 0's weights (from the L2); 4, no outputs are stored; 8, the
// weight words go to the MMA undecoded (one AND each instead of the decode's 18 instructions); 16,
// every block stores its outputs over y's first rows (the same lines, which stay in the L2: the
// stores without their device-memory writes); 32, no copies and no waits for them: the routed-row
// ring and the weight pipes are never filled, every warp computes on whatever their shared memory
// holds (the loop's own instructions and the tensor cores alone); 64, the same for the routed-row
// ring alone; 128, for the weight pipes alone. Timed beside the kernel as it is, each says how
// much of its time the traffic or the work it removes costs.
#ifndef TPGRAPH_WG_PROBE
#define TPGRAPH_WG_PROBE 0
#endif
constexpr int kWgProbe = TPGRAPH_WG_PROBE;
constexpr bool kWgNoRingCopies = (kWgProbe & (32 | 64)) != 0;
constexpr bool kWgNoWeightCopies = (kWgProbe & (32 | 128)) != 0;

// The routed rows as tensors for the ring's copies: a tensor map per block size, n[i] with boxes of
// 16 (i + 1) rows x 64 columns, so a chunk of a block's N rows is one copy (a kernel parameter).
struct WgRowMaps {
  CUtensorMap n[kWgmmaMaxTokens / 16];
};

// The copy of routed-row chunk c (the block's N rows from `first_row` on) into ring stage `stage`,
// from one thread: one tensor copy through the map of N-row boxes, completing on the stage's full
// barrier with the bytes. A copy per 16 rows (N/16 of them, even from a warp's lanes side by side)
// kept the issuing warp, and with it its warpgroup, about half a chunk longer on its turn.
template <int kN>
struct WgRingCopies {
  std::uint32_t full_bars, b_base;
  std::uint64_t map;  // the N-row map
  int first_row;
  __device__ __forceinline__ void one(int stage, int c) const {
    if constexpr (kWgNoRingCopies) return;
    const std::uint32_t bar = full_bars + 8 * static_cast<std::uint32_t>(stage);
    detail::mbar_expect_tx(bar, kN * 128);
    detail::tensor_copy_2d(b_base + static_cast<std::uint32_t>(stage * WgRing<kN>::kStageBytes), map, c * kChunkElems,
                           first_row, bar);
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
// is (stage s, phase parity), loads routed-row chunk load_c as chunk gc + kAhead (lane 0 issues).
template <int kN>
__device__ __forceinline__ void refill_ring(const WgRingCopies<kN>& copies, int gc, int s, std::uint32_t parity,
                                            int load_c, std::uint32_t empty_bars, int lane) {
  // Chunk gc + kAhead goes to the stage last used by chunk gc + kAhead - kStages: in this round if
  // that stage comes before s, else in the previous one.
  constexpr int kStages = WgRing<kN>::kStages;
  constexpr int kAhead = WgRing<kN>::kAhead;
  constexpr int kBack = kStages - kAhead;
  const bool same_round = s >= kBack;
  const int refill = same_round ? s - kBack : s + kAhead;
  if (gc + kAhead >= kStages && !kWgNoRingCopies) {
    // The stage's previous use must have been drained.
    detail::mbar_wait(empty_bars + 8 * refill, same_round ? parity : parity ^ 1u);
  }
  if (lane == 0) copies.one(refill, load_c);
}

// The ring's first kAhead chunks, loaded by thread 0 (the producer). Returns the routed-row chunk
// loaded next (they repeat for every row block): every warp tracks it, as after these the warps take
// turns to issue the copies (chunk gc + kAhead by warp gc % warps, refill_ring).
template <int kN>
__device__ __forceinline__ int start_ring(const WgRingCopies<kN>& copies, bool producer, int chunks, int total) {
  constexpr int kAhead = WgRing<kN>::kAhead;
  int load_c = 0;
  if (producer) {
    for (int s = 0; s < kAhead && s < total; ++s) {
      copies.one(s, load_c);
      if (++load_c == chunks) load_c = 0;
    }
  }
  return kAhead % chunks;
}

}  // namespace tpgraph::kernels::gemm
