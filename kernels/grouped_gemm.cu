// The grouped GEMM over NVFP4 expert weights: y[i][o] = (xs[i] * ts_e) * sum_k x16[i][k] * w16_e[o][k]
// for every routed row i of expert e.
//
// Weights sit on the MMA's M side and routed rows (tokens) on N, because an expert has few rows
// at decode sizes (1-3 at t=43). Every warp owns 16 weight rows: bulk asynchronous copies bring
// their NVFP4 bytes into the warp's own shared-memory stages, several 64-column chunks ahead
// (WeightPipe), and the warp decodes them to the fp16 A fragment of an m16n8k16 MMA
// (nvfp4_decode.cuh). The routed rows go through a cp.async ring in shared memory. No split-K, no
// atomics: a block owns its outputs over all of K. An expert's routed rows are split evenly into
// blocks of at most the tile's tokens, and each block runs the kernel variant for its size.
//
// Two kernels share that scheme (docs/kernel-notes.md has the tiles and their measurements):
//  - mma.sync (tiles of 4 or 8 warps, up to 32 routed rows): B fragments by ldmatrix. For the
//    few-token sizes, where the decode is the work.
//  - wgmma (tiles 128 x <=160 and 256 x <=160): warpgroups of 4 warps, each 64 weight rows; the A
//    fragment goes from registers straight into wgmma.mma_async m64nNk16, B (routed rows, brought
//    by tensor copies) from shared memory by descriptor. N is the block's routed rows rounded up to
//    16 (an expert's rows are split evenly into blocks of at most 160), so the tensor cores do
//    little padding; where K is short a block walks several row blocks with its pipelines running
//    on. For the many-token sizes.
//
// Determinism and batch invariance: every output element is one fp32 accumulator updated by k16
// MMAs in k order 0, 16, 32, ... with the same operands whatever the tile, the layout, the row's
// position in its block or the number of tokens. wgmma and mma.sync give the same bits for the
// same k16 steps (measured on the H200: docs/kernel-notes.md; the GPU tests compare every tile).
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>

#include "kernels/kernels.hpp"
#include "kernels/launch.cuh"
#include "kernels/nvfp4_decode.cuh"
#include "kernels/wgmma_ops.cuh"

namespace tpgraph::kernels {
namespace {

using detail::cp_async_commit;
using detail::cp_async_wait;

constexpr int kChunkElems = 64;
constexpr int kChunkBytes = 36;   // 32 bytes of E2M1 + 4 UE4M3 scales per 64 columns
constexpr int kUnitBytes = 576;   // 16 rows x one chunk
constexpr int kItemInts = 4;  // per block: expert, row block, first routed row, routed rows
constexpr int kBStages = 4;       // routed-row chunks in the shared-memory ring
constexpr int ring_barrier_bytes(int stages) { return 2 * stages * 8; }  // a ring's full and empty mbarriers
constexpr int kWgmmaMaxTokens = 160;  // routed rows per wgmma block (N of m64nNk16)
// Chunks a wgmma block runs at least, over several row blocks, where one row block has fewer than
// half of them (K < 2560: the down GEMM, K = 640, walks 8 row blocks; gate and up one). t=4096:
// down 502 -> 482 us with 80 against 40 (4 row blocks), 496 with 60; gate and up lost 5% when
// made to walk two of their 64-chunk row blocks (docs/kernel-notes.md, session 6).
constexpr int kWgTargetChunks = 80;

// Tiles, by GemmTile index. mma: `warps` x 16 weight rows, up to 8*n8 tokens. wgmma: `warpgroups`
// x 64 weight rows, up to kWgmmaMaxTokens tokens.
struct TileSpec {
  bool wgmma;
  int n8;          // mma: n8 tiles per block (the largest variant)
  int warpgroups;  // wgmma: warpgroups per block
  int warps;       // mma: warps per block (16 weight rows each)
  int min_blocks;  // blocks per SM the registers must allow (0: no minimum)
};
constexpr std::array<TileSpec, 7> kTiles{{
    {false, 1, 1, 4, 8},  // 64 x <=8
    {false, 2, 1, 4, 8},  // 64 x <=16
    {false, 4, 1, 4, 0},  // 64 x <=32
    {true, 0, 2, 4, 2},   // 128 x <=160
    {true, 0, 4, 4, 1},   // 256 x <=160
    {false, 2, 1, 8, 4},  // 128 x <=16
    {false, 4, 1, 8, 4},  // 128 x <=32
}};

constexpr int spec_rows(const TileSpec& s) { return s.wgmma ? 64 * s.warpgroups : 16 * s.warps; }
constexpr int spec_tokens(const TileSpec& s) { return s.wgmma ? kWgmmaMaxTokens : 8 * s.n8; }

__device__ __forceinline__ std::uint32_t load_word(const std::uint8_t* p) {
  std::uint32_t v;
  asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// One lane's weights of one 16-row tile and 64-column chunk: its four fragment words (one per k16
// block) and the UE4M3 codes of rows g and g+8.
struct Fragment {
  uint4 values;
  uint2 scales;
};

// Layout v1's weight fragments of one 16-row tile, chunk after chunk: rows g and g+8 of the tile,
// row-major; the fragment words assembled from byte t of each row word (v2 stores them ready-made).
struct V1WeightStream {
  const std::uint8_t* p;   // row g
  const std::uint8_t* p8;  // row g+8
  std::uint32_t select_t;

  __device__ __forceinline__ V1WeightStream(const std::uint8_t* matrix, int tile, int chunks, int lane) {
    const int g = lane / 4;
    const int t = lane % 4;
    p = matrix + (static_cast<std::int64_t>(tile) * 16 + g) * chunks * kChunkBytes;
    p8 = p + 8 * static_cast<std::int64_t>(chunks) * kChunkBytes;
    select_t = static_cast<std::uint32_t>(t) | (static_cast<std::uint32_t>(4 + t) << 4);
  }

  // The next chunk's fragment; the stream moves on by one chunk.
  __device__ __forceinline__ Fragment next() {
    std::uint32_t w[4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const std::uint32_t lo = detail::prmt(load_word(p + 8 * kk), load_word(p8 + 8 * kk), select_t);
      const std::uint32_t hi = detail::prmt(load_word(p + 8 * kk + 4), load_word(p8 + 8 * kk + 4), select_t);
      w[kk] = detail::prmt(lo, hi, 0x5410u);  // (g, t), (g+8, t), (g, t+4), (g+8, t+4)
    }
    const Fragment f{make_uint4(w[0], w[1], w[2], w[3]), make_uint2(load_word(p + 32), load_word(p8 + 32))};
    p += kChunkBytes;
    p8 += kChunkBytes;
    return f;
  }
};

// A warp's weights in the mma kernel, chunk after chunk, kPipeRound chunks per unrolled round
// (chunk = round * kPipeRound + d).
//  v2: the warp's tile is one contiguous stream of 576-byte units, so kPipeGroup units at a time
//      come with one bulk asynchronous copy (the Tensor Memory Accelerator) into one of the warp's
//      kPipeStages shared-memory stages, each with an mbarrier; the lanes wait on the barrier and
//      read their 16 + 8 bytes with two shared loads. The copy engine keeps the bytes in flight
//      without occupying the load units or registers. WarpWeightCopies issues the copies.
//  v1: byte gathers from the row-major rows straight into a register ring kPipeRing chunks deep.
// The wgmma kernel's warps issue their own copies, across row blocks (WgWeights).
constexpr int kPipeGroup = 4;                                          // chunks per bulk copy
constexpr int kPipeStages = 2;                                         // bulk copies in flight per warp
constexpr int kPipeRound = kPipeGroup * kPipeStages;                   // 8 chunks
constexpr int kPipeWarpBytes = kPipeStages * kPipeGroup * kUnitBytes;  // 4608
constexpr int kPipeRing = 4;                                           // v1 register ring

// Shared memory the weight pipes of `warps` warps need (v2; v1 needs none), after 8-byte barriers.
constexpr int pipe_smem_bytes(int warps) { return warps * (kPipeWarpBytes + kPipeStages * 8); }

__device__ __forceinline__ void mbar_init(std::uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(std::uint32_t bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void mbar_inval(std::uint32_t bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void bulk_copy(std::uint32_t dst, const void* src, int bytes, std::uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
__device__ __forceinline__ uint4 lds128(std::uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}
__device__ __forceinline__ uint2 lds64(std::uint32_t a) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(a));
  return v;
}

template <bool kV2>
struct WeightPipe;

template <>
struct WeightPipe<true> {
  std::uint32_t stages;  // this warp's first stage
  std::uint32_t bars;    // this warp's first barrier
  int lane;

  // `pipe_smem`: shared memory for `warps` warps (pipe_smem_bytes); `warp` is this warp's index.
  // WarpWeightCopies fills the stages; here the warp only waits and reads.
  __device__ __forceinline__ WeightPipe(const std::uint8_t*, int, int, int lane_, std::uint8_t* pipe_smem, int warp,
                                        int warps)
      : lane(lane_) {
    const std::uint32_t base = detail::smem_address(pipe_smem);
    stages = base + static_cast<std::uint32_t>(warp * kPipeWarpBytes);
    bars = base + static_cast<std::uint32_t>(warps * kPipeWarpBytes + warp * kPipeStages * 8);
  }

  // Chunk round * kPipeRound + d (d a constant after unrolling).
  __device__ __forceinline__ Fragment get(int d, int round) {
    const int stage = d / kPipeGroup;
    if (d % kPipeGroup == 0) mbar_wait(bars + 8 * stage, static_cast<std::uint32_t>(round & 1));
    const std::uint32_t unit = stages + static_cast<std::uint32_t>((stage * kPipeGroup + d % kPipeGroup) * kUnitBytes);
    return Fragment{lds128(unit + 16 * lane), lds64(unit + 512 + 8 * (lane / 4))};
  }
  __device__ __forceinline__ void release(int, int) {}
};

// The mma kernel's weight copies: lane 0 of each warp issues its own warp's (after the chunk's
// block barrier, when the warp is done with the stage refilled). Thread 0 issuing every warp's
// copies made warp 0 the one all others waited for at the next barrier (t=416: the down GEMM took
// 174.7 us that way, 164.3 like this; docs/kernel-notes.md, session 5).
struct WarpWeightCopies {
  const std::uint8_t* matrix;
  int first_tile;  // warp w's tile is first_tile + w (tile 0 past the matrix's end)
  int tiles;
  int chunks;
  int groups;
  std::uint32_t base;  // pipe_smem of all warps
  int warps;

  // Lane 0 of warp w: copy group `group` of w's tile.
  __device__ __forceinline__ void issue(int group, int w) const {
    const int stage = group % kPipeStages;
    const int bytes = min(kPipeGroup, chunks - group * kPipeGroup) * kUnitBytes;
    const int tile = first_tile + w < tiles ? first_tile + w : 0;
    const std::uint32_t bar = base + static_cast<std::uint32_t>(warps * kPipeWarpBytes + (w * kPipeStages + stage) * 8);
    mbar_expect_tx(bar, bytes);
    bulk_copy(base + static_cast<std::uint32_t>(w * kPipeWarpBytes + stage * kPipeGroup * kUnitBytes),
              matrix + (static_cast<std::int64_t>(tile) * chunks + group * kPipeGroup) * kUnitBytes, bytes, bar);
  }
  // Lane 0 of warp w: w's barriers, then its first kPipeStages groups. The caller's __syncwarp
  // makes the barriers visible to the warp's other lanes before they wait on them.
  __device__ __forceinline__ void start(int w) const {
    for (int i = 0; i < kPipeStages; ++i) {
      mbar_init(base + static_cast<std::uint32_t>(warps * kPipeWarpBytes + (w * kPipeStages + i) * 8), 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int g = 0; g < kPipeStages && g < groups; ++g) issue(g, w);
  }
};

template <>
struct WeightPipe<false> {
  V1WeightStream stream;
  Fragment ring[kPipeRing];
  int chunks;

  __device__ __forceinline__ WeightPipe(const std::uint8_t* matrix, int tile, int chunks_, int lane, std::uint8_t*,
                                        int, int)
      : stream(matrix, tile, chunks_, lane), chunks(chunks_) {
#pragma unroll
    for (int i = 0; i < kPipeRing; ++i) {
      if (i < chunks) ring[i] = stream.next();
    }
  }
  __device__ __forceinline__ Fragment get(int d, int) { return ring[d % kPipeRing]; }
  __device__ __forceinline__ void release(int d, int round) {
    if (round * kPipeRound + d + kPipeRing < chunks) ring[d % kPipeRing] = stream.next();
  }
};

__device__ __forceinline__ std::uint32_t word_of(const Fragment& f, int kk) {
  return kk == 0 ? f.values.x : kk == 1 ? f.values.y : kk == 2 ? f.values.z : f.values.w;
}

// Writes one accumulator fragment row pair: out rows o and o+8 of routed rows col, col+1, whose
// activation scales are xs_pair.
__device__ __forceinline__ void store_pair(float* y, const float (&xs_pair)[2], float ts, std::int64_t row_begin,
                                           int block_rows, int out_rows, int o, int col, const float (&v)[4]) {
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    if (col + c < block_rows) {
      const std::int64_t row = row_begin + col + c;
      const float scale = __fmul_rn(xs_pair[c], ts);
      // The decoded weights carry 2^-14 (nvfp4_decode.cuh): scaling the sum back is exact.
      float* out = y + row * out_rows + o;
      out[0] = __fmul_rn(scale, __fmul_rn(v[c], 16384.0f));
      out[8] = __fmul_rn(scale, __fmul_rn(v[2 + c], 16384.0f));
    }
  }
}

// out[0] = a and out[8] = b where `keep`; volatile, so the stores stay in program order and their
// addresses are not computed ahead (which would hold a register pair per store).
__device__ __forceinline__ void store_if(float* out, float a, float b, bool keep) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %3, 0;\n"
      "@p st.global.f32 [%0], %1;\n@p st.global.f32 [%0+32], %2;\n}\n" ::"l"(out),
      "f"(a), "f"(b), "r"(static_cast<int>(keep))
      : "memory");
}

struct GemmArgs {
  const std::uint16_t* x16_bits;
  const float* xs;
  const std::uint8_t* weights;
  const float* tensor_scale;
  int out_rows;
  int in_cols;
  const std::int32_t* items;
  int tile_index;
  float* y;
};

// ---------------------------------------------------------------------------------------------
// mma.sync kernel: kWarps x 16 weight rows, up to 8*kN8 routed rows.

constexpr int kBRowStride = 144;  // 128 bytes + 16 of padding: ldmatrix rows hit distinct banks
constexpr int mma_stage_bytes(int n8) { return 8 * n8 * kBRowStride; }

// Shared memory of the mma kernel: the routed-row ring (sized for kMaxN8), the weight pipes (v2),
// the routed rows' activation scales.
constexpr int mma_xs_offset(int max_n8, bool v2, int warps) {
  return kBStages * mma_stage_bytes(max_n8) + (v2 ? pipe_smem_bytes(warps) : 0);
}
constexpr int mma_smem_bytes(int max_n8, bool v2, int warps) {
  return mma_xs_offset(max_n8, v2, warps) + 8 * max_n8 * 4;
}

template <bool kV2, int kWarps, int kN8, int kSub>
__device__ __forceinline__ void mma_block(const GemmArgs& args, std::uint8_t* smem, int expert, int row_block,
                                          int row_begin, int block_rows) {
  constexpr int kThreads = 32 * kWarps;
  constexpr int kStageBytes = mma_stage_bytes(kN8);
  constexpr int kSlots = kBStages * kSub;  // ring slots of one chunk each; kSub chunks per block barrier
  static_assert(kPipeRound % kSlots == 0, "one unrolled round covers the weight pipe and the routed-row ring");
  constexpr int kBlockTokens = 8 * kN8;
  constexpr int kPieces = kBlockTokens * 8;  // 16-byte pieces of routed rows per chunk
  constexpr int kPiecesPerThread = (kPieces + kThreads - 1) / kThreads;
  const int chunks = args.in_cols / kChunkElems;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int tile = row_block * kWarps + warp;  // this warp's m16 tile
  const bool tile_valid = tile < args.out_rows / 16;
  const std::uint8_t* matrix =
      args.weights + static_cast<std::int64_t>(expert) * args.out_rows * chunks * kChunkBytes;

  // Routed rows: each thread copies the same pieces of every chunk; rows past the block's end are
  // zero-filled (cp.async with 0 source bytes).
  const __half* x16 = reinterpret_cast<const __half*>(args.x16_bits);
  const __half* piece_src[kPiecesPerThread];
  std::uint32_t piece_dst[kPiecesPerThread];
  int piece_bytes[kPiecesPerThread];
  const std::uint32_t b_base = detail::smem_address(smem);
#pragma unroll
  for (int i = 0; i < kPiecesPerThread; ++i) {
    const int p = threadIdx.x + i * kThreads;
    const int n = p / 8;
    const int q = p % 8;
    const bool valid = p < kPieces && n < block_rows;
    piece_src[i] = x16 + static_cast<std::int64_t>(valid ? row_begin + n : row_begin) * args.in_cols + q * 8;
    piece_dst[i] = p < kPieces ? b_base + static_cast<std::uint32_t>(n * kBRowStride + q * 16) : 0xffffffffu;
    piece_bytes[i] = valid ? 16 : 0;
  }
  // Chunk `rel` of the current round (rel a constant after unrolling: the address is an immediate
  // offset from the round's pointer, which moves once per round).
  auto load_b = [&](int stage, int rel) {
#pragma unroll
    for (int i = 0; i < kPiecesPerThread; ++i) {
      if (kPieces % kThreads == 0 || piece_dst[i] != 0xffffffffu) {
        detail::cp_async16_at(piece_dst[i] + static_cast<std::uint32_t>(stage * kStageBytes),
                              piece_src[i] + rel * kChunkElems, piece_bytes[i]);
      }
    }
  };

  // A warp past the last weight tile (out rows not a multiple of 64) computes on tile 0 and stores
  // nothing: no branch in the loop.
  std::uint8_t* pipe_smem = smem + kSlots * kStageBytes;
  WeightPipe<kV2> weights(matrix, tile_valid ? tile : 0, chunks, lane, pipe_smem, warp, kWarps);
  const WarpWeightCopies copies{matrix,      row_block * kWarps,
                                args.out_rows / 16, chunks, (chunks + kPipeGroup - 1) / kPipeGroup,
                                detail::smem_address(pipe_smem), kWarps};
  if (kV2 && lane == 0) copies.start(warp);
  __syncwarp();

  float acc[kN8][4];
#pragma unroll
  for (int n = 0; n < kN8; ++n)
#pragma unroll
    for (int v = 0; v < 4; ++v) acc[n][v] = 0.0f;

  // ldmatrix row addresses: x4 covers n8 tiles (2p, 2p+1) x k 0-7 / 8-15; x2 the last odd tile.
  const int mat = lane / 8;
  const std::uint32_t lane_x4 =
      b_base + static_cast<std::uint32_t>(((mat / 2) * 8 + lane % 8) * kBRowStride + (mat % 2) * 16);
  const std::uint32_t lane_x2 =
      b_base + static_cast<std::uint32_t>(((kN8 - 1) * 8 + lane % 8) * kBRowStride + (mat % 2) * 16);

  auto compute = [&](const Fragment& f, int stage) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      std::uint32_t b[kN8][2];
#pragma unroll
      for (int n = 0; n + 1 < kN8; n += 2) {
        std::uint32_t r[4];
        detail::ldmatrix_x4_at(r, lane_x4 + static_cast<std::uint32_t>(stage * kStageBytes + n * 8 * kBRowStride + kk * 32));
        b[n][0] = r[0];
        b[n][1] = r[1];
        b[n + 1][0] = r[2];
        b[n + 1][1] = r[3];
      }
      if constexpr (kN8 % 2 == 1) {
        detail::ldmatrix_x2_at(b[kN8 - 1], lane_x2 + static_cast<std::uint32_t>(stage * kStageBytes + kk * 32));
      }
      std::uint32_t a[4];
      detail::decode_a_fragment<kV2>(word_of(f, kk), f.scales.x, f.scales.y, kk, a);
#pragma unroll
      for (int n = 0; n < kN8; ++n) detail::mma_16816(acc[n], a, b[n]);
    }
  };

  // The routed rows' activation scales, for the epilogue: copied with the first ring group, so they
  // are in shared memory (zeros past the block's rows) when the last chunk is done (the global
  // loads right before the stores were 4.5% of the down GEMM's stall samples at t=416).
  float* xs_s = reinterpret_cast<float*>(pipe_smem + (kV2 ? pipe_smem_bytes(kWarps) : 0));
  if (threadIdx.x < kBlockTokens) {
    const int n = threadIdx.x;
    detail::cp_async4_at(detail::smem_address(xs_s + n), args.xs + row_begin + (n < block_rows ? n : 0),
                         n < block_rows ? 4 : 0);
  }
  // The ring: kSlots slots of one chunk. The loads go in groups of kSub chunks (one cp.async group
  // each), kBStages - 1 groups ahead, and the warps meet at one block barrier per group.
#pragma unroll
  for (int s = 0; s < kBStages - 1; ++s) {
#pragma unroll
    for (int j = 0; j < kSub; ++j) {
      if (s * kSub + j < chunks) load_b(s * kSub + j, s * kSub + j);
    }
    cp_async_commit();
  }
  for (int round = 0; round * kPipeRound < chunks; ++round) {
#pragma unroll
    for (int d = 0; d < kPipeRound; ++d) {
      const int chunk = round * kPipeRound + d;
      if (chunk < chunks) {
        if (d % kSub == 0) {
          cp_async_wait<kBStages - 2>();
          __syncthreads();  // the chunks' rows are in; every warp is done with the slots refilled next
          if (kV2 && d % kPipeGroup == 0 && chunk >= kPipeGroup && lane == 0) {
            // The warp is done with the previous group: its stage takes the group after this one.
            const int next = chunk / kPipeGroup + kPipeStages - 1;
            if (next < copies.groups) copies.issue(next, warp);
          }
#pragma unroll
          for (int j = 0; j < kSub; ++j) {
            const int ahead = (kBStages - 1) * kSub + j;
            if (chunk + ahead < chunks) load_b((d + ahead) % kSlots, d + ahead);
          }
          cp_async_commit();
        }
        compute(weights.get(d, round), d % kSlots);
        weights.release(d, round);
      }
    }
#pragma unroll
    for (int i = 0; i < kPiecesPerThread; ++i) piece_src[i] += kPipeRound * kChunkElems;
  }
  cp_async_wait<0>();

  if (!tile_valid) return;
  const int o = tile * 16 + g;
  const float ts = args.tensor_scale[expert];
  float xs_cols[kN8][2];  // every scale load issues before the first store
#pragma unroll
  for (int n = 0; n < kN8; ++n) {
    xs_cols[n][0] = xs_s[n * 8 + 2 * t];
    xs_cols[n][1] = xs_s[n * 8 + 2 * t + 1];
  }
#pragma unroll
  for (int n = 0; n < kN8; ++n) store_pair(args.y, xs_cols[n], ts, row_begin, block_rows, args.out_rows, o, n * 8 + 2 * t, acc[n]);
}

// An expert's rows split evenly into ceil(rows / max_tokens) blocks (the planner cuts the same way).
__host__ __device__ __forceinline__ int token_blocks_of(int rows, int max_tokens) {
  return (rows + max_tokens - 1) / max_tokens;
}

struct BlockWork {
  int expert;
  int row_block;  // the first row block
  int items;      // consecutive row blocks (wgmma tiles; 1 for mma tiles)
  int begin;  // first routed row
  int rows;   // routed rows, 1..max_tokens
};

// The plan holds each block's work ready-made (one 16-byte load, no dependent lookups before the
// weights can be requested); items[0] is the tile the plan was cut for.
__device__ __forceinline__ BlockWork block_work(const GemmArgs& args, int) {
  // A plan cut for another tile would index the wrong rows: fail loudly.
  if (args.items[0] != args.tile_index) __trap();
  const int4 item = reinterpret_cast<const int4*>(args.items)[1 + blockIdx.x];
  return BlockWork{item.x, item.y & 0xffff, item.y >> 16, item.z, item.w};
}

// Routed-row chunks per block barrier in the mma kernel: 2 where the block's rows fill at most half
// of the ring its tile allocates (tiles of up to 32 rows), so the same shared memory holds twice the
// slots, loads run as far ahead in chunks and the warps meet half as often (t=416: the three GEMMs
// 451-456 -> 442-445 us, docs/kernel-notes.md, session 6); 1 otherwise. At t=43 (tile 1, up to 16
// rows) 2 was slower (261 -> 270 us), so tiles of 16 rows keep 1.
constexpr int barrier_chunks(int n8, int max_n8) { return max_n8 >= 4 && 2 * n8 <= max_n8 ? 2 : 1; }

template <bool kV2, int kWarps, int kMaxN8, int kMinBlocks>
__global__ void __launch_bounds__(32 * kWarps, kMinBlocks) grouped_gemm_mma_kernel(const GemmArgs args) {
  extern __shared__ __align__(128) std::uint8_t smem[];
  const BlockWork w = block_work(args, 8 * kMaxN8);
  const int n8 = (w.rows + 7) / 8;
  if (n8 == 1 || kMaxN8 == 1) return mma_block<kV2, kWarps, 1, barrier_chunks(1, kMaxN8)>(args, smem, w.expert, w.row_block, w.begin, w.rows);
  if constexpr (kMaxN8 >= 2) {
    if (n8 == 2 || kMaxN8 == 2) return mma_block<kV2, kWarps, 2, barrier_chunks(2, kMaxN8)>(args, smem, w.expert, w.row_block, w.begin, w.rows);
  }
  if constexpr (kMaxN8 >= 3) {
    if (n8 == 3 || kMaxN8 == 3) return mma_block<kV2, kWarps, 3, barrier_chunks(3, kMaxN8)>(args, smem, w.expert, w.row_block, w.begin, w.rows);
  }
  if constexpr (kMaxN8 >= 4) {
    if (n8 == 4 || kMaxN8 == 4) return mma_block<kV2, kWarps, 4, barrier_chunks(4, kMaxN8)>(args, smem, w.expert, w.row_block, w.begin, w.rows);
  }
  static_assert(kMaxN8 >= 1 && kMaxN8 <= 4, "mma tiles hold 8 to 32 routed rows");
}

// ---------------------------------------------------------------------------------------------
// wgmma kernel: kWarpgroups x 64 weight rows, up to kWgmmaMaxTokens routed rows.
//
// B in shared memory, per stage: a chunk of the block's routed rows, 128 bytes each, as the tensor
// copies write it with the 128-byte swizzle (smem_desc_sw128 reads it).

constexpr int kWgStageBytes = kWgmmaMaxTokens * 128;  // 20 KB, a multiple of the swizzle's 1024
// 6 stages, 3 chunks ahead: gate 460 us against 476 with 4 stages, 2 ahead, at t=4096 (docs/kernel-
// notes.md, session 5; before the copies were issued by rotating warps, 6 stages were no faster).
constexpr int kWgStages = 6;
constexpr int kWgSmemBytes = kWgStages * kWgStageBytes;
constexpr int kWgAhead = kWgStages / 2;  // chunks of B in flight ahead of the one computed
// k16 wgmmas a warp leaves in flight when it decodes the next (2 measured slower: docs/kernel-notes.md)
constexpr int kWgPending = 1;

// A warp's weights in the wgmma kernel: the chunks of `items` row blocks one after the other
// (global chunk gc = item * chunks + c), item r's tile 4 * kWarpgroups tiles after item r-1's.
template <bool kV2, int kTileStep>
struct WgWeights;

// v2: bulk copies of kPipeGroup chunks into kPipeStages stages, as WeightPipe, over the global
// chunk sequence (a copy group may straddle two row blocks: then two copies fill the stage). The
// chunk counts come from the caller, which holds them anyway (registers are tight here).
template <int kTileStep>
struct WgWeights<true, kTileStep> {
  const std::uint8_t* first;  // item 0's tile stream
  std::uint32_t stages;       // this warp's first stage; its barriers follow all warps' stages
  std::uint32_t bars;

  __device__ __forceinline__ WgWeights(const std::uint8_t* matrix, int tile, int chunks, int total, int lane,
                                       std::uint32_t pipe_base, int warp, int warps) {
    first = matrix + static_cast<std::int64_t>(tile) * chunks * kUnitBytes;
    stages = pipe_base + static_cast<std::uint32_t>(warp * kPipeWarpBytes);
    bars = pipe_base + static_cast<std::uint32_t>(warps * kPipeWarpBytes + warp * kPipeStages * 8);
    if (total == 0) return;
    if (lane == 0) {
#pragma unroll
      for (int s = 0; s < kPipeStages; ++s) mbar_init(bars + 8 * s, 1);
      asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#pragma unroll
      for (int s = 0; s < kPipeStages; ++s) {
        if (s * kPipeGroup < total) issue(s, chunks, total);
      }
    }
    __syncwarp();
  }

  // Copy group `group`: chunks group * kPipeGroup on; item r's stream is r * kTileStep tiles on.
  __device__ __forceinline__ void issue(int group, int chunks, int total) const {
    const int stage = group % kPipeStages;
    int c = group * kPipeGroup;
    int n = min(kPipeGroup, total - c);
    const std::uint32_t bar = bars + 8 * stage;
    mbar_expect_tx(bar, n * kUnitBytes);
    std::uint32_t dst = stages + static_cast<std::uint32_t>(stage * kPipeGroup * kUnitBytes);
    int item = c / chunks;
    int ci = c - item * chunks;
    while (n > 0) {
      const int m = min(n, chunks - ci);
      bulk_copy(dst, first + (static_cast<std::int64_t>(item) * kTileStep * chunks + ci) * kUnitBytes, m * kUnitBytes, bar);
      dst += static_cast<std::uint32_t>(m * kUnitBytes);
      n -= m;
      ++item;
      ci = 0;
    }
  }
  // Chunk gc; s8 = gc % kPipeRound (a constant in the unrolled loop).
  __device__ __forceinline__ Fragment get(int gc, int s8, int lane) const {
    const int stage = s8 / kPipeGroup;
    if (s8 % kPipeGroup == 0) mbar_wait(bars + 8 * stage, static_cast<std::uint32_t>((gc / kPipeRound) & 1));
    const std::uint32_t unit = stages + static_cast<std::uint32_t>(s8 * kUnitBytes);
    return Fragment{lds128(unit + 16 * lane), lds64(unit + 512 + 8 * (lane / 4))};
  }
  __device__ __forceinline__ void release(int gc, int s8, int chunks, int total, int lane) const {
    if (s8 % kPipeGroup == kPipeGroup - 1 || gc == total - 1) {
      __syncwarp();
      const int next = gc / kPipeGroup + kPipeStages;
      if (lane == 0 && next * kPipeGroup < total) issue(next, chunks, total);
    }
  }
  __device__ __forceinline__ void inval(int s, int total) const {
    if (total > 0) mbar_inval(bars + 8 * s);
  }
};

// v1: byte gathers one chunk ahead in registers.
template <int kTileStep>
struct WgWeights<false, kTileStep> {
  const std::uint8_t* matrix;
  V1WeightStream stream;
  Fragment ahead;
  int tile;
  int chunks;
  int total;
  int c;  // chunk of `ahead` within its item
  int lane;

  __device__ __forceinline__ WgWeights(const std::uint8_t* matrix_, int tile_, int chunks_, int total_, int lane_,
                                       std::uint32_t, int, int)
      : matrix(matrix_), stream(matrix_, tile_, chunks_, lane_), tile(tile_), chunks(chunks_), total(total_), c(0),
        lane(lane_) {
    if (total > 0) ahead = stream.next();
  }
  __device__ __forceinline__ Fragment get(int gc, int, int) {
    const Fragment f = ahead;
    if (++c == chunks) {
      c = 0;
      tile += kTileStep;
      stream = V1WeightStream(matrix, tile, chunks, lane);
    }
    if (gc + 1 < total) ahead = stream.next();
    return f;
  }
  __device__ __forceinline__ void release(int, int, int, int, int) const {}
  __device__ __forceinline__ void inval(int, int) const {}
};

// Shared memory of the wgmma kernel: the routed rows' activation scales (kWgXsBytes), the ring's
// stages, the weight pipes, the ring's barriers. After the last chunk the last row block's outputs
// are staged over all of it (wgmma_staged_bytes).
constexpr int kWgXsBytes = 1024;
constexpr int wgmma_main_bytes(int warpgroups, bool v2) {
  return kWgXsBytes + kWgSmemBytes + (v2 ? pipe_smem_bytes(4 * warpgroups) : 0) + ring_barrier_bytes(kWgStages);
}
constexpr int wgmma_staged_bytes(int warpgroups) { return kWgXsBytes + kWgmmaMaxTokens * (64 * warpgroups + 4) * 4; }
constexpr int wgmma_smem_bytes(int warpgroups, bool v2) {
  return wgmma_main_bytes(warpgroups, v2) > wgmma_staged_bytes(warpgroups) ? wgmma_main_bytes(warpgroups, v2)
                                                                           : wgmma_staged_bytes(warpgroups);
}

// A stage of routed rows as the tensor copies leave it: N rows of 128 bytes (one chunk), the
// 16-byte pieces of row r swizzled by r % 8 (the 128-byte swizzle), stages 1024-byte aligned.
// wgmma reads it K-major through a descriptor of that layout: 8-row groups 1024 bytes apart
// (stride byte offset), the leading byte offset unused; k16 step kk starts 32 * kk bytes on.
__device__ __forceinline__ std::uint64_t smem_desc_sw128(std::uint32_t address) {
  constexpr std::uint64_t kLeading = 1;
  constexpr std::uint64_t kStride = 1024 >> 4;
  constexpr std::uint64_t kSwizzle128 = 1;
  return static_cast<std::uint64_t>((address >> 4) & 0x3fffu) | (kLeading << 16) | (kStride << 32) | (kSwizzle128 << 62);
}

// One block: `items` consecutive row blocks of one expert and one token block. The routed rows are
// the same for every row block, so the ring keeps cycling through their chunks, and both the ring
// and the weight pipes run on into the next row block while the current one is finished: its
// outputs go straight from registers to y, except the last row block's, which are staged in shared
// memory (free by then) and written with coalesced 16-byte stores.
template <bool kV2, int kWarpgroups, int kN>
__device__ __forceinline__ void wgmma_block(const GemmArgs& args, const CUtensorMap* x16_map, std::uint8_t* smem,
                                            int expert, int row_block0, int items, int row_begin, int block_rows) {
  static_assert(kWgAhead < kWgStages - 1, "a stage is refilled only after a chunk that is not the previous one");
  static_assert(kWgPending >= 1 && kWgPending <= 4, "a chunk has four k16 steps");
  static_assert(kN <= kWgmmaMaxTokens && kWgmmaMaxTokens * 4 <= kWgXsBytes, "the scales fit their shared memory");
  constexpr int kRows = 64 * kWarpgroups;
  const int chunks = args.in_cols / kChunkElems;
  const int total = chunks * items;
  const int warp = threadIdx.x / 32;  // warpgroup warp / 4, row tile warp % 4 within it
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int tile0 = row_block0 * 4 * kWarpgroups + warp;
  // A warpgroup wholly past the last weight row (out rows not a multiple of the block's rows, e.g.
  // 640 = 2.5 x 256) only helps load the routed rows: no weight copies, no decode, no wgmma, so the
  // tensor cores serve the block's other warpgroups alone. Its warps agree (the test is per
  // warpgroup), which the .aligned wgmma instructions need. The planner gives such a row block a
  // block of its own (items == 1).
  const bool group_active = (tile0 & ~3) < args.out_rows / 16;
  const std::uint8_t* matrix =
      args.weights + static_cast<std::int64_t>(expert) * args.out_rows * chunks * kChunkBytes;

  float* xs_s = reinterpret_cast<float*>(smem);
  std::uint8_t* ring = smem + kWgXsBytes;
  const std::uint32_t b_base = detail::smem_address(ring);
  const std::uint32_t pipe_base = b_base + static_cast<std::uint32_t>(kWgSmemBytes);
  const int weight_chunks = group_active ? total : 0;  // an idle warpgroup's pipe has none
  WgWeights<kV2, 4 * kWarpgroups> weights(matrix, group_active ? tile0 : 0, chunks, weight_chunks, lane, pipe_base, warp,
                                          4 * kWarpgroups);
  float acc[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;

  // The routed-row ring: one thread loads each chunk with tensor copies (TMA, 16 routed rows x 64
  // columns each, 128-byte swizzle) into a stage once empty[s] says every warp's wgmmas that read
  // it are complete; full[s] completes when the copies have landed. Chunk gc + kWgAhead is loaded
  // while chunk gc is computed, so the warpgroups drift apart by up to a chunk instead of meeting
  // at every one. The loads are issued by lane 0 of warp gc % warps in turn: with thread 0 alone
  // as the producer, warp 0 carried an empty wait and N/16 copies per chunk on top of its share
  // of the math, every other warp waited for its copies (28% of the stall samples on full[s]),
  // and gate took 504 us instead of 476 at t=4096 (docs/kernel-notes.md, session 5). Rows past
  // the block's end come with the copies (zeros past the matrix, the next expert's rows
  // otherwise): they only feed output columns that are never stored.
  const std::uint32_t full_bars =
      pipe_base + static_cast<std::uint32_t>(kV2 ? pipe_smem_bytes(4 * kWarpgroups) : 0);
  const std::uint32_t empty_bars = full_bars + 8 * kWgStages;
  const bool producer = threadIdx.x == 0;
  if (producer) {
#pragma unroll
    for (int i = 0; i < kWgStages; ++i) {
      mbar_init(full_bars + 8 * i, 1);
      mbar_init(empty_bars + 8 * i, 4 * kWarpgroups);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // Per routed row: xs * ts * 2^14 (the decoded weights carry 2^-14, nvfp4_decode.cuh). Scaling by
  // 2^14 is exact, so scale * acc rounds to the same bits as (xs * ts) * (acc * 2^14) does.
  const float ts = args.tensor_scale[expert];
  for (int n = threadIdx.x; n < kN; n += 128 * kWarpgroups) {
    xs_s[n] = n < block_rows ? __fmul_rn(__fmul_rn(args.xs[row_begin + n], ts), 16384.0f) : 0.0f;
  }
  __syncthreads();  // the ring's barriers and the scales are in place before anyone uses them
  const std::uint64_t map = reinterpret_cast<std::uint64_t>(x16_map);
  auto load_b = [&](int stage, int c) {  // one thread: chunk c of the routed rows
    const std::uint32_t bar = full_bars + 8 * static_cast<std::uint32_t>(stage);
    mbar_expect_tx(bar, kN * 128);
    const std::uint32_t dst = b_base + static_cast<std::uint32_t>(stage * kWgStageBytes);
#pragma unroll
    for (int r = 0; r < kN; r += 16) {
      asm volatile(
          "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
              dst + static_cast<std::uint32_t>(r * 128)),
          "l"(map), "r"(c * kChunkElems), "r"(row_begin + r), "r"(bar)
          : "memory");
    }
  };

  int load_c = 0;  // the routed-row chunk loaded next (they repeat for every row block)
  if (producer) {
    for (int s = 0; s < kWgAhead && s < total; ++s) {
      load_b(s, load_c);
      if (++load_c == chunks) load_c = 0;
    }
  }
  // Every warp tracks the chunk loaded next: after the first ones (thread 0), the warps take turns
  // to issue the copies (chunk gc + kWgAhead by warp gc % warps).
  load_c = kWgAhead % chunks;

  int gc = 0;
  for (int item = 0; item < items; ++item) {
    for (int c = 0; c < chunks; ++c, ++gc) {
      const int s = gc % kWgStages;
      const bool issuer = lane == 0 && warp == gc % (4 * kWarpgroups);
      if (issuer && gc + kWgAhead < total) {
        const int refill = (gc + kWgAhead) % kWgStages;
        if (gc + kWgAhead >= kWgStages) {
          mbar_wait(empty_bars + 8 * refill, static_cast<std::uint32_t>(((gc + kWgAhead - kWgStages) / kWgStages) & 1));
        }
        load_b(refill, load_c);
      }
      if (++load_c == chunks) load_c = 0;
      mbar_wait(full_bars + 8 * s, static_cast<std::uint32_t>((gc / kWgStages) & 1));
      // Once kWgPending k16 steps of this chunk are in flight, every wgmma of the previous chunk
      // is complete: its stage is free (an idle warpgroup read nothing and says so at once).
      const bool release_previous = gc > 0;
      const std::uint32_t previous_empty = empty_bars + 8 * ((gc + kWgStages - 1) % kWgStages);
      if (group_active) {
        const int s8 = gc % kPipeRound;
        const Fragment f = weights.get(gc, s8, lane);
        const std::uint32_t stage = b_base + static_cast<std::uint32_t>(s * kWgStageBytes);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {
          std::uint32_t a[4];
          detail::decode_a_fragment<kV2>(word_of(f, kk), f.scales.x, f.scales.y, kk, a);
          detail::wgmma_fence();
          detail::Wgmma<kN>::mma(acc, a, smem_desc_sw128(stage + static_cast<std::uint32_t>(kk * 32)));
          detail::wgmma_commit();
          detail::wgmma_wait<kWgPending>();
          if (kk == kWgPending - 1 && release_previous && lane == 0) mbar_arrive(previous_empty);
        }
        weights.release(gc, s8, chunks, total, lane);
      } else if (release_previous && lane == 0) {
        mbar_arrive(previous_empty);
      }
    }
    if (item + 1 == items) break;
    // A row block before the last: its outputs straight from registers (the next row block's
    // weights and routed rows are already on their way).
    detail::wgmma_wait<0>();
    {
      // One running address (the compiler would otherwise keep every store's address live).
      float* out = args.y + static_cast<std::int64_t>(row_begin + 2 * t) * args.out_rows +
                   (tile0 + item * 4 * kWarpgroups) * 16 + g;
      const std::int64_t step = static_cast<std::int64_t>(args.out_rows);
#pragma unroll
      for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int n = j * 8 + 2 * t + c;
          const float scale = xs_s[n];
          store_if(out, __fmul_rn(scale, acc[4 * j + c]), __fmul_rn(scale, acc[4 * j + 2 + c]), n < block_rows);
          out += c == 0 ? step : 7 * step;
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;
  }
  detail::wgmma_wait<0>();

  // The last row block: staged in shared memory as [routed row][out row] (a 16-byte pad per row:
  // the fragment writes hit distinct banks), then 16-byte stores, each warp a whole 1 KB row.
  constexpr int kStride = kRows + 4;
  __syncthreads();  // every warp is done with the ring, the weight stages and their barriers
  if (threadIdx.x < 2 * kWgStages) mbar_inval(full_bars + 8 * threadIdx.x);
  if (kV2 && lane < kPipeStages) weights.inval(lane, weight_chunks);
  __syncthreads();  // the barriers are retired before their memory takes outputs
  const int row_block = row_block0 + items - 1;
  const int tile = tile0 + (items - 1) * 4 * kWarpgroups;
  float* staged = reinterpret_cast<float*>(ring);
  if (tile < args.out_rows / 16) {
    const int ol = warp * 16 + g;
#pragma unroll
    for (int j = 0; j < kN / 8; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int n = j * 8 + 2 * t + c;
        const float scale = xs_s[n];
        float* out = staged + n * kStride + ol;
        out[0] = __fmul_rn(scale, acc[4 * j + c]);
        out[8] = __fmul_rn(scale, acc[4 * j + 2 + c]);
      }
    }
  }
  __syncthreads();
  const int cols = min(kRows, args.out_rows - row_block * kRows);
  float* y0 = args.y + static_cast<std::int64_t>(row_begin) * args.out_rows + row_block * kRows;
  for (int n = warp; n < block_rows; n += 4 * kWarpgroups) {
#pragma unroll
    for (int h = 0; h < kRows / 128; ++h) {
      const int col = h * 128 + lane * 4;
      if (col < cols) {
        const float4 v = *reinterpret_cast<const float4*>(staged + n * kStride + col);
        *reinterpret_cast<float4*>(y0 + static_cast<std::int64_t>(n) * args.out_rows + col) = v;
      }
    }
  }
}

template <bool kV2, int kWarpgroups, int kMinBlocks>
__global__ void __launch_bounds__(128 * kWarpgroups, kMinBlocks) grouped_gemm_wgmma_kernel(const GemmArgs args, const __grid_constant__ CUtensorMap x16_map) {
  extern __shared__ __align__(1024) std::uint8_t wg_smem[];
  const BlockWork w = block_work(args, kWgmmaMaxTokens);
  const int expert = w.expert;
  const int row_block = w.row_block;
  const int items = w.items;
  const int begin = w.begin;
  const int rows = w.rows;
  switch ((rows + 15) / 16) {
    case 1: return wgmma_block<kV2, kWarpgroups, 16>(args, &x16_map, wg_smem, expert, row_block, items, begin, rows);
    case 2: return wgmma_block<kV2, kWarpgroups, 32>(args, &x16_map, wg_smem, expert, row_block, items, begin, rows);
    case 3: return wgmma_block<kV2, kWarpgroups, 48>(args, &x16_map, wg_smem, expert, row_block, items, begin, rows);
    case 4: return wgmma_block<kV2, kWarpgroups, 64>(args, &x16_map, wg_smem, expert, row_block, items, begin, rows);
    case 5: return wgmma_block<kV2, kWarpgroups, 80>(args, &x16_map, wg_smem, expert, row_block, items, begin, rows);
    case 6: return wgmma_block<kV2, kWarpgroups, 96>(args, &x16_map, wg_smem, expert, row_block, items, begin, rows);
    case 7: return wgmma_block<kV2, kWarpgroups, 112>(args, &x16_map, wg_smem, expert, row_block, items, begin, rows);
    case 8: return wgmma_block<kV2, kWarpgroups, 128>(args, &x16_map, wg_smem, expert, row_block, items, begin, rows);
    case 9: return wgmma_block<kV2, kWarpgroups, 144>(args, &x16_map, wg_smem, expert, row_block, items, begin, rows);
    case 10: return wgmma_block<kV2, kWarpgroups, 160>(args, &x16_map, wg_smem, expert, row_block, items, begin, rows);
    default: __trap();
  }
}

// ---------------------------------------------------------------------------------------------

// The routed rows (x16: `rows` x `cols` f16 bits, row-major) as a tensor for the wgmma kernel's
// copies: boxes of 16 rows x 64 columns (one chunk), 128-byte swizzle, zeros past the last row.
CUtensorMap routed_rows_map(const std::uint16_t* x16, std::int64_t rows, int cols) {
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*, const cuuint64_t*,
                              const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  // The driver's entry point, found once (the project does not link libcuda itself).
  static const Encode encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    detail::check_call(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found),
                       "grouped_gemm: cudaGetDriverEntryPointByVersion(cuTensorMapEncodeTiled)");
    if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
      throw std::runtime_error("grouped_gemm: the driver has no cuTensorMapEncodeTiled (tensor copies need CUDA 12 or later)");
    }
    return reinterpret_cast<Encode>(fn);
  }();
  CUtensorMap map{};
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * sizeof(std::uint16_t)};
  const cuuint32_t box[2] = {kChunkElems, 16};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult status = encode(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<std::uint16_t*>(x16), dims, strides,
                                 box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) {
    throw std::runtime_error("grouped_gemm: cuTensorMapEncodeTiled failed (" + std::to_string(static_cast<int>(status)) +
                             ") for " + std::to_string(rows) + " x " + std::to_string(cols) + " routed rows");
  }
  return map;
}

template <bool kV2, int kTile>
void launch_tile(const GemmArgs& args, std::int64_t rows, int grid, cudaStream_t stream) {
  constexpr TileSpec spec = kTiles[kTile];
  if constexpr (spec.wgmma) {
#ifdef TPGRAPH_NO_WGMMA
    throw std::invalid_argument("grouped_gemm: tile " + std::to_string(kTile) +
                                " uses wgmma, which this build lacks: build with CMAKE_CUDA_ARCHITECTURES=90a");
#endif
    auto* kernel = grouped_gemm_wgmma_kernel<kV2, spec.warpgroups, spec.min_blocks>;
    constexpr int smem = wgmma_smem_bytes(spec.warpgroups, kV2);
    detail::prepare_smem(reinterpret_cast<const void*>(kernel), smem, "grouped_gemm: cudaFuncSetAttribute");
    const CUtensorMap map = routed_rows_map(args.x16_bits, rows, args.in_cols);
    kernel<<<static_cast<unsigned int>(grid), 128 * spec.warpgroups, smem, stream>>>(args, map);
  } else {
    // The largest variant's routed-row ring, the weight pipes, the routed rows' scales.
    constexpr int smem = mma_smem_bytes(spec.n8, kV2, spec.warps);
    // v1's byte gathers need more registers: tile 1 would spill at 8 blocks per SM.
    constexpr int min_blocks = kV2 || spec.n8 == 1 ? spec.min_blocks : 1;
    auto* kernel = grouped_gemm_mma_kernel<kV2, spec.warps, spec.n8, min_blocks>;
    detail::prepare_smem(reinterpret_cast<const void*>(kernel), smem, "grouped_gemm: cudaFuncSetAttribute");
    kernel<<<static_cast<unsigned int>(grid), 32 * spec.warps, smem, stream>>>(args);
  }
  detail::check_launch("grouped_gemm");
}

template <bool kV2>
void launch_layout(const GemmArgs& args, std::int64_t rows, int tile, int grid, cudaStream_t stream) {
  static_assert(kTiles.size() == 7);
  switch (tile) {
    case 0: return launch_tile<kV2, 0>(args, rows, grid, stream);
    case 1: return launch_tile<kV2, 1>(args, rows, grid, stream);
    case 2: return launch_tile<kV2, 2>(args, rows, grid, stream);
    case 3: return launch_tile<kV2, 3>(args, rows, grid, stream);
    case 4: return launch_tile<kV2, 4>(args, rows, grid, stream);
    case 5: return launch_tile<kV2, 5>(args, rows, grid, stream);
    case 6: return launch_tile<kV2, 6>(args, rows, grid, stream);
    default: throw std::invalid_argument("grouped_gemm: tile " + std::to_string(tile) + " out of range");
  }
}

}  // namespace

int gemm_tile_count() { return static_cast<int>(kTiles.size()); }

GemmTile gemm_tile(int index) {
  if (index < 0 || index >= gemm_tile_count()) {
    throw std::invalid_argument("gemm_tile: index " + std::to_string(index) + " out of range 0.." +
                                std::to_string(gemm_tile_count() - 1));
  }
  const TileSpec& s = kTiles[static_cast<std::size_t>(index)];
  return GemmTile{spec_rows(s), spec_tokens(s), s.wgmma};
}

int choose_gemm_tile(std::int64_t routed_rows, int active_experts, int out_rows, int in_cols) {
  const double per_expert =
      active_experts > 0 ? static_cast<double>(routed_rows) / static_cast<double>(active_experts) : 0.0;
  // From bench --all-tiles on the H200 (docs/kernel-notes.md).
  if (per_expert <= 6.0) return 1;
  // Short K (the down GEMM, K = 640: ten chunks a block): 128-row blocks halve the block starts
  // (t=416: down 170.8 us against 174.0 with 64 rows; gate and up, K = 4096, prefer 64 rows).
  const bool short_k = in_cols <= 1024 && out_rows % 128 == 0;
  if (per_expert <= 12.0) return short_k ? 6 : 2;
  if (per_expert <= 40.0) return out_rows % 128 == 0 ? 6 : 2;
#ifdef TPGRAPH_NO_WGMMA
  return out_rows % 128 == 0 ? 6 : 2;  // no sm_90a code in this build: the best mma.sync tile
#else
  return 4;  // also where out rows are not a multiple of 256: the idle half-block costs less than 128x128
#endif
}

GemmPlan plan_grouped_gemm(const Routing& routing, int out_rows, int in_cols) {
  return plan_grouped_gemm(routing, out_rows, in_cols,
                           choose_gemm_tile(routing.n_pairs(), routing.n_active(), out_rows, in_cols));
}

GemmPlan plan_grouped_gemm(const Routing& routing, int out_rows, int in_cols, int tile) {
  if (out_rows <= 0 || out_rows % 16 != 0 || in_cols <= 0 || in_cols % kChunkElems != 0) {
    throw std::invalid_argument("plan_grouped_gemm: " + std::to_string(out_rows) + " x " + std::to_string(in_cols) +
                                " weights; out rows must be a multiple of 16 and in cols of 64");
  }
  const GemmTile shape = gemm_tile(tile);
  const int row_blocks = (out_rows + shape.block_rows() - 1) / shape.block_rows();
  // Experts with the most rows first: the hardware hands blocks out in order, so the longest work
  // starts first and the short tail fills in (longest-processing-time scheduling).
  std::vector<int> order(static_cast<std::size_t>(routing.n_active()));
  std::iota(order.begin(), order.end(), 0);
  auto rows_of = [&](int a) { return routing.offsets[static_cast<std::size_t>(a) + 1] - routing.offsets[static_cast<std::size_t>(a)]; };
  std::stable_sort(order.begin(), order.end(), [&](int l, int r) { return rows_of(l) > rows_of(r); });

  GemmPlan plan;
  plan.tile = tile;
  auto push4 = [&](int a, int b, int c, int d) {
    plan.items.push_back(a);
    plan.items.push_back(b);
    plan.items.push_back(c);
    plan.items.push_back(d);
  };
  // Row-block ranges: a wgmma block walks several consecutive full row blocks of an expert when K
  // is short (at least kWgTargetChunks chunks per block), so its pipelines run across them; a
  // partial last row block (idle warpgroups) is a range of its own. mma blocks: one row block.
  const int chunks = in_cols / kChunkElems;
  const int full_blocks = out_rows / shape.block_rows();
  std::vector<std::pair<int, int>> ranges;  // first row block, count
  if (shape.wgmma && full_blocks > 0) {
    const int per =
        2 * chunks >= kWgTargetChunks ? 1 : std::clamp((kWgTargetChunks + chunks - 1) / chunks, 1, full_blocks);
    const int count = (full_blocks + per - 1) / per;
    for (int r = 0; r < count; ++r) {
      const int first = r * full_blocks / count;
      ranges.emplace_back(first, (r + 1) * full_blocks / count - first);
    }
    if (row_blocks > full_blocks) ranges.emplace_back(full_blocks, 1);
  } else {
    for (int rb = 0; rb < row_blocks; ++rb) ranges.emplace_back(rb, 1);
  }
  push4(tile, 0, 0, 0);  // header: 16 bytes, so items stay aligned
  for (const int a : order) {
    const int token_blocks = token_blocks_of(rows_of(a), shape.block_tokens());
    for (const auto& [first, count] : ranges) {
      for (int tb = 0; tb < token_blocks; ++tb) {
        const int begin = routing.offsets[static_cast<std::size_t>(a)] + tb * rows_of(a) / token_blocks;
        const int end = routing.offsets[static_cast<std::size_t>(a)] + (tb + 1) * rows_of(a) / token_blocks;
        push4(routing.active_experts[static_cast<std::size_t>(a)], first | (count << 16), begin, end - begin);
      }
    }
  }
  plan.grid = static_cast<int>(plan.items.size() / kItemInts - 1);
  return plan;
}

void grouped_gemm(const std::uint16_t* x16, const float* xs, const ExpertBank& w, const DeviceRouting& routing,
                  const DeviceGemmPlan& plan, float* y, Stream stream) {
  if (w.rows % 16 != 0 || w.cols % kChunkElems != 0) {
    throw std::invalid_argument("grouped_gemm: weights " + std::to_string(w.rows) + " x " + std::to_string(w.cols) +
                                "; rows must be a multiple of 16 and cols of 64");
  }
  if (plan.grid <= 0) return;  // no routed rows: nothing to write
  const GemmArgs args{x16, xs, w.bytes, w.tensor_scale, w.rows, w.cols, plan.items, plan.tile, y};
  if (w.layout == Layout::v2) {
    launch_layout<true>(args, routing.n_rows, plan.tile, plan.grid, stream);
  } else {
    launch_layout<false>(args, routing.n_rows, plan.tile, plan.grid, stream);
  }
}

void grouped_gemm(const std::uint16_t* x16, const float* xs, const ExpertBank& w, const DeviceRouting& routing,
                  const std::int32_t* plan_items, int plan_grid, float* y, Stream stream) {
  const DeviceGemmPlan plan{plan_items, plan_grid, choose_gemm_tile(routing.n_rows, routing.n_active, w.rows, w.cols)};
  grouped_gemm(x16, xs, w, routing, plan, y, stream);
}

}  // namespace tpgraph::kernels
