// The warp-specialised wgmma kernel's block shape and shared memory (gemm_wgmma_ws.cu says how
// the roles use them): one producer and kConsumers consumer warpgroups of 128 weight rows, and the
// three pipelines' stages and barriers.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/gemm_tiles.hpp"

// Tile 4's pipeline depths, as compile-time knobs for variant packs (scripts/kernel-variants.sh
// -DTPGRAPH_WS_RAW_STAGES=8 ...): the NVFP4 chunks in flight per producer warp, the decoded chunks
// and the routed-row chunks. The static_asserts below hold every choice to the block's shared memory.
#ifndef TPGRAPH_WS_RAW_STAGES
#define TPGRAPH_WS_RAW_STAGES 4
#endif
#ifndef TPGRAPH_WS_A_STAGES
#define TPGRAPH_WS_A_STAGES 3
#endif
#ifndef TPGRAPH_WS_B_STAGES
#define TPGRAPH_WS_B_STAGES 4
#endif
// Tile 4's producer warpgroups: 1 (4 warps of 4 tiles each, 384 threads) or 2 (8 warps of 2 tiles,
// 512 threads: 128 registers a thread at launch, 56 / 200 after setmaxnreg).
#ifndef TPGRAPH_WS_PRODUCERS
#define TPGRAPH_WS_PRODUCERS 1
#endif
// The decoded weights' shared-memory layout: 0, interleaved core matrices without swizzle (below,
// gemm_wgmma_ws.cu); 1, rows of 128 bytes with the 128-byte swizzle, the layout the routed rows' tensor
// copies write, read by wgmma with the same kind of descriptor.
#ifndef TPGRAPH_WS_A_SWIZZLE
#define TPGRAPH_WS_A_SWIZZLE 0
#endif
#if TPGRAPH_WS_A_SWIZZLE && defined(TPGRAPH_WGMMA_WS_RS)
#error "TPGRAPH_WGMMA_WS_RS loads A with ldmatrix from the interleaved layout: not with TPGRAPH_WS_A_SWIZZLE"
#endif
// A probe for telling the roles' rates apart in a variant pack, never a build to use (its outputs are
// wrong): 1, the producers wait for their NVFP4 chunks and arrive, decoding and storing nothing (the
// block then runs at its copies' and the consumers' rate); 2, the consumers wait for their stages and
// release them, issuing no wgmma (the producers' rate).
#ifndef TPGRAPH_WS_PROBE
#define TPGRAPH_WS_PROBE 0
#endif
#if TPGRAPH_WS_PROBE == 2 && defined(TPGRAPH_WGMMA_WS_RS)
#error "TPGRAPH_WS_PROBE=2 leaves out the shared-memory wgmmas only: not with TPGRAPH_WGMMA_WS_RS"
#endif
// Where layout v2's weights are decoded: 0, by the producer warps into shared memory (the design
// gemm_wgmma_ws.cu describes); 1, by the consumer warps into wgmma's register A operand, as in
// gemm_wgmma.cu, the producers only issuing copies: the NVFP4 chunks of all the block's tiles into
// one ring (the `raw` stages read as kRawStages stages of kTiles units, raw_full / raw_empty) and the
// routed rows. The decoded weights then never pass through shared memory (docs/kernel-notes.md: the
// 64 KB a chunk that bound the design above), and each consumer warp decodes two tiles per k16 step
// for two wgmmas with 216 registers, where a warp of gemm_wgmma.cu decodes one at 128. Layout v1
// keeps the producers' decode (its cp.async copies complete per lane, not on a barrier).
#ifndef TPGRAPH_WS_CONSUMER_DECODE
#define TPGRAPH_WS_CONSUMER_DECODE 0
#endif
#if TPGRAPH_WS_CONSUMER_DECODE && (defined(TPGRAPH_WGMMA_WS_RS) || TPGRAPH_WS_PROBE != 0)
#error "TPGRAPH_WS_CONSUMER_DECODE: not with TPGRAPH_WGMMA_WS_RS or TPGRAPH_WS_PROBE"
#endif

namespace tpgraph::kernels::gemm {

constexpr int kWsBStageBytes = kWgmmaMaxTokens * 128;  // a chunk of up to 160 routed rows, 20 KB
constexpr int kWsHalfBytes = 64 * 128;                 // a 64-row group's decoded chunk, 8 KB
constexpr int kWsXsBytes = 2048;                       // the routed rows' scales, two GEMMs', padded to 1024 alignment
// Tiles a producer warp decodes between two fragment loads: with all four of tile 4's unrolled,
// ptxas hoisted their shared loads and spilled at 56 and 64 registers; two are spill-free.
constexpr int kWsUnroll = 2;

// A block of kConsumers consumer warpgroups and kProducerGroups producer warpgroups.
template <int kConsumers>
struct WsShape {
  static constexpr int kProducerGroups = kConsumers == 2 ? TPGRAPH_WS_PRODUCERS : 1;
  static constexpr int kProducerWarps = 4 * kProducerGroups;
  static constexpr int kProducerThreads = 128 * kProducerGroups;
  static constexpr int kThreads = kProducerThreads + 128 * kConsumers;
  static constexpr int kRows = 128 * kConsumers;
  static constexpr int kTiles = kRows / 16;                       // 16-row tiles a row block has
  static constexpr int kProducerTiles = kTiles / kProducerWarps;  // per producer warp: 4 (a 64-row group) or 2
  static constexpr int kFeeders = kProducerWarps / kConsumers;    // producer warps per consumer
  static constexpr int kBStages = kConsumers == 2 ? TPGRAPH_WS_B_STAGES : 3;      // routed-row chunks
  static constexpr int kAStages = kConsumers == 2 ? TPGRAPH_WS_A_STAGES : 2;      // decoded chunks
  static constexpr int kRawStages = kConsumers == 2 ? TPGRAPH_WS_RAW_STAGES : 3;  // NVFP4 chunks per producer warp
  static constexpr int kAStageBytes = 2 * kConsumers * kWsHalfBytes;
  static constexpr int kRawStageBytes = kProducerTiles * kUnitBytes;
  // setmaxnreg: the fewest registers each role compiles to without spills (ptxas 13.0: tile 4's
  // producer spilled at 56, tile 3's consumer at 192), within the block's share of the file.
  static constexpr int kProducerRegs = kConsumers == 2 && kProducerGroups == 1 ? 64 : 56;
  static constexpr int kConsumerRegs = kConsumers == 2 && kProducerGroups == 1 ? 216 : 200;
  // The producer of chunk gc + 1's routed rows waits for chunk gc + 1 - kBStages to be released,
  // no later than the chunk its own A stage waits for (gc - kAStages).
  static_assert(kBStages >= kAStages + 1);
  static_assert(kAStages >= 2 && kRawStages >= 2, "a stage is filled while the one before it is read");
  static_assert(kProducerTiles == 2 || kProducerTiles == 4, "a producer warp's tiles lie in one 64-row group");
  static_assert(kProducerGroups == 1 || kProducerGroups == 2);
};

template <int kConsumers>
struct WsStorage {
  using Shape = WsShape<kConsumers>;
  float xs[kWsXsBytes / 4];
  std::uint8_t b_ring[Shape::kBStages][kWsBStageBytes];                  // 128-byte swizzle (tensor copies)
  std::uint8_t a_stages[Shape::kAStages][2 * kConsumers][kWsHalfBytes];  // per 64-row group (TPGRAPH_WS_A_SWIZZLE)
  std::uint8_t raw[Shape::kProducerWarps][Shape::kRawStages][Shape::kRawStageBytes];  // per producer warp
  std::uint64_t b_full[Shape::kBStages];                                              // the routed rows have landed
  std::uint64_t b_empty[Shape::kBStages];              // every consumer warp's wgmmas that read them are complete
  std::uint64_t a_full[kConsumers][Shape::kAStages];   // the consumer's producer warps have decoded
  std::uint64_t a_empty[kConsumers][Shape::kAStages];  // the consumer's wgmmas that read it are complete
  std::uint64_t raw_full[Shape::kProducerWarps][Shape::kRawStages];  // a producer warp's units have landed
  std::uint64_t raw_empty[Shape::kRawStages];  // TPGRAPH_WS_CONSUMER_DECODE: every consumer warp has its fragments
};
template <int kConsumers>
struct WsStagedOutputs {  // the last row block's outputs, over the storage once it is retired
  float xs[kWsXsBytes / 4];
  float out[kWgmmaMaxTokens][128 * kConsumers + 4];  // [routed row][out row], a 16-byte pad per row
};
template <int kConsumers>
constexpr int ws_smem_bytes() {
  return sizeof(WsStorage<kConsumers>) > sizeof(WsStagedOutputs<kConsumers>)
             ? static_cast<int>(sizeof(WsStorage<kConsumers>))
             : static_cast<int>(sizeof(WsStagedOutputs<kConsumers>));
}
static_assert(offsetof(WsStorage<2>, b_ring) % 1024 == 0 && offsetof(WsStorage<1>, b_ring) % 1024 == 0 &&
                  offsetof(WsStorage<2>, a_stages) % 1024 == 0 && offsetof(WsStorage<1>, a_stages) % 1024 == 0,
              "the swizzled stages are 1024-byte aligned");
static_assert(offsetof(WsStorage<2>, b_empty) == offsetof(WsStorage<2>, b_full) + 8 * WsShape<2>::kBStages &&
                  offsetof(WsStorage<2>, raw_empty) + sizeof(WsStorage<2>::raw_empty) == sizeof(WsStorage<2>),
              "the barriers are one array from b_full to the end");
static_assert(ws_smem_bytes<2>() <= 227 * 1024 && 2 * (ws_smem_bytes<1>() + 1024) <= 228 * 1024,
              "tile 4 fits one block per SM, tile 3 two");

}  // namespace tpgraph::kernels::gemm
