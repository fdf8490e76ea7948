// The grouped GEMM's mma.sync kernel, for few routed rows per expert (tiles of 4 or 8 warps, up to
// 32 routed rows), where decoding the weights is the work.
//
// Weights sit on the MMA's M side and routed rows on N: every warp owns 16 weight rows and decodes
// them to the A fragment of m16n8k16 (nvfp4_decode.cuh); v2 weights come through the warp's own
// bulk-copy pipe, v1 weights are gathered byte by byte into a register ring. The routed rows go
// through a cp.async ring in shared memory and reach the MMA by ldmatrix. No split-K, no atomics:
// a block owns its outputs over all of K, summed in k order (gemm_tiles.hpp, kernels.hpp).
#include <cuda_runtime.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/gemm_common.cuh"
#include "kernels/launch.cuh"

namespace tpgraph::kernels::gemm {
namespace {

using detail::cp_async_commit;
using detail::cp_async_wait;

constexpr int kBStages = 4;       // routed-row chunks in the shared-memory ring
constexpr int kBRowStride = 144;  // 128 bytes + 16 of padding: ldmatrix rows hit distinct banks
constexpr int kPipeRing = 4;      // chunks in flight in v1's register ring
constexpr int mma_stage_bytes(int n8) { return 8 * n8 * kBRowStride; }

// Shared memory of one variant (kN8 n8 tiles, kSub chunks per block barrier): the routed-row ring,
// the weight pipes (v2), the routed rows' activation scales. A tile allocates for its largest
// variant (mma_smem_bytes); the smaller ones use a prefix of it.
template <int kWarps>
struct PipeStorage {
  std::uint8_t stages[kWarps][kPipeWarpBytes];
  std::uint64_t barriers[kWarps][kPipeStages];
};
static_assert(sizeof(PipeStorage<4>) == pipe_smem_bytes(4) && sizeof(PipeStorage<8>) == pipe_smem_bytes(8));

template <bool kV2, int kWarps, int kN8, int kSub>
struct MmaSharedStorage {
  std::uint8_t ring[kBStages * kSub][mma_stage_bytes(kN8)];
  PipeStorage<kWarps> pipes;
  float xs[8 * kN8];
};
template <int kWarps, int kN8, int kSub>
struct MmaSharedStorage<false, kWarps, kN8, kSub> {  // v1 weights need no pipes
  std::uint8_t ring[kBStages * kSub][mma_stage_bytes(kN8)];
  float xs[8 * kN8];
};

// What a tile allocates: its largest variant's ring (kBStages stages of max_n8 tiles), the pipes
// and the scales. Routed-row chunks per block barrier: 2 where a variant's rows fill at most half
// of that ring (tiles of up to 32 rows), so the same memory holds twice the slots, loads run as far
// ahead in chunks and the warps meet half as often (t=416 on the H200: the three GEMMs 442-445 us
// against 451-456 with 1); 1 otherwise, and for tiles of 16 rows (t=43: 261 us against 270 with 2).
constexpr int barrier_chunks(int n8, int max_n8) { return max_n8 >= 4 && 2 * n8 <= max_n8 ? 2 : 1; }
constexpr int mma_smem_bytes(int max_n8, bool v2, int warps) {
  return kBStages * mma_stage_bytes(max_n8) + (v2 ? pipe_smem_bytes(warps) : 0) + 8 * max_n8 * 4;
}
template <bool kV2, int kWarps, int kMaxN8, int kN8 = 1>
constexpr bool fits_every_variant() {
  if constexpr (kN8 > kMaxN8) {
    return true;
  } else {
    return sizeof(MmaSharedStorage<kV2, kWarps, kN8, barrier_chunks(kN8, kMaxN8)>) <=
               mma_smem_bytes(kMaxN8, kV2, kWarps) &&
           fits_every_variant<kV2, kWarps, kMaxN8, kN8 + 1>();
  }
}

// A warp's weights in the mma kernel, chunk after chunk, kPipeRound chunks per unrolled round
// (chunk = round * kPipeRound + d).
//  v2: the warp's bulk-copy pipe (gemm_common.cuh); WarpWeightCopies issues the copies.
//  v1: byte gathers from the row-major rows straight into a register ring kPipeRing chunks deep.
template <bool kV2>
struct WeightPipe;

template <>
struct WeightPipe<true> {
  std::uint32_t stages;  // this warp's first stage
  std::uint32_t bars;    // this warp's first barrier
  int lane;

  // WarpWeightCopies fills the stages; here the warp only waits and reads.
  __device__ __forceinline__ WeightPipe(const std::uint8_t*, int, int, int lane_, const PipeLayout& pipes, int warp)
      : stages(pipes.stage(warp, 0)), bars(pipes.barrier(warp, 0)), lane(lane_) {}

  // Chunk round * kPipeRound + d (d a constant after unrolling). A stage holds round parity
  // `round & 1` of its barrier.
  __device__ __forceinline__ Fragment get(int d, int round) {
    const int stage = d / kPipeGroup;
    if (d % kPipeGroup == 0) detail::mbar_wait(bars + 8 * stage, static_cast<std::uint32_t>(round & 1));
    const std::uint32_t unit = stages + static_cast<std::uint32_t>((stage * kPipeGroup + d % kPipeGroup) * kUnitBytes);
    return load_unit_fragment(unit, lane);
  }
  __device__ __forceinline__ void release(int, int) {}
};

template <>
struct WeightPipe<false> {
  V1WeightStream stream;
  Fragment ring[kPipeRing];
  int chunks;

  __device__ __forceinline__ WeightPipe(const std::uint8_t* matrix, int tile, int chunks_, int lane, const PipeLayout&,
                                        int)
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

// The mma kernel's weight copies: lane 0 of each warp issues its own warp's, after the chunk's
// block barrier, when the warp is done with the stage refilled. (Thread 0 issuing every warp's
// copies made warp 0 the one all others waited for at the next barrier: the down GEMM took 174.7 us
// at t=416 against 164.3 this way.)
struct WarpWeightCopies {
  const std::uint8_t* matrix;
  int first_tile;  // warp w's tile is first_tile + w (tile 0 past the matrix's end)
  int tiles;
  int chunks;
  int groups;
  PipeLayout pipes;

  // Lane 0 of warp w: copy group `group` of w's tile.
  __device__ __forceinline__ void issue(int group, int w) const {
    const int stage = group % kPipeStages;
    const int bytes = min(kPipeGroup, chunks - group * kPipeGroup) * kUnitBytes;
    const int tile = first_tile + w < tiles ? first_tile + w : 0;
    const std::uint32_t bar = pipes.barrier(w, stage);
    detail::mbar_expect_tx(bar, bytes);
    // Evict-first lines: the weights are read once, and the L2 keeps the routed rows and the
    // outputs instead (t=43's three GEMMs 2.6% faster on an H100).
    detail::bulk_copy_hinted(pipes.stage(w, stage),
                             matrix + (static_cast<std::int64_t>(tile) * chunks + group * kPipeGroup) * kUnitBytes,
                             bytes, bar, detail::l2_evict_first_policy());
  }
  // Lane 0 of warp w: w's barriers, then its first kPipeStages groups. The caller's __syncwarp
  // makes the barriers visible to the warp's other lanes before they wait on them.
  __device__ __forceinline__ void start(int w) const {
    for (int i = 0; i < kPipeStages; ++i) detail::mbar_init(pipes.barrier(w, i), 1);
    detail::fence_mbarrier_init();
    for (int g = 0; g < kPipeStages && g < groups; ++g) issue(g, w);
  }
};

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

// This thread's pieces of the routed rows: the same 16-byte pieces of every chunk, as sources (the
// first round's chunk 0), ring offsets and byte counts. Rows past the block's end are zero-filled
// (cp.async with 0 source bytes); a destination of all ones marks a thread with no piece there.
template <int kWarps, int kN8, int kPiecesPerThread>
__device__ __forceinline__ void set_up_pieces(const __half* (&piece_src)[kPiecesPerThread],
                                              std::uint32_t (&piece_dst)[kPiecesPerThread],
                                              int (&piece_bytes)[kPiecesPerThread], const GemmArgs& args,
                                              std::uint32_t b_base, int row_begin, int block_rows) {
  constexpr int kThreads = 32 * kWarps;
  constexpr int kPieces = 8 * kN8 * 8;  // 16-byte pieces of routed rows per chunk
  const __half* x16 = reinterpret_cast<const __half*>(args.x16_bits);
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
}

// The MMAs of one chunk: a warp's weight fragment against the routed rows of one ring slot, read by
// ldmatrix. The row addresses: x4 covers n8 tiles (2p, 2p+1) x k 0-7 / 8-15; x2 the last odd tile.
template <bool kV2, int kN8>
struct ChunkMma {
  static constexpr int kStageBytes = mma_stage_bytes(kN8);
  std::uint32_t lane_x4;
  std::uint32_t lane_x2;

  __device__ __forceinline__ ChunkMma(std::uint32_t b_base, int lane) {
    const int mat = lane / 8;
    lane_x4 = b_base + static_cast<std::uint32_t>(((mat / 2) * 8 + lane % 8) * kBRowStride + (mat % 2) * 16);
    lane_x2 = b_base + static_cast<std::uint32_t>(((kN8 - 1) * 8 + lane % 8) * kBRowStride + (mat % 2) * 16);
  }
  // acc += the weights f (decoded k16 step by k16 step) x the routed rows in ring slot `stage`.
  __device__ __forceinline__ void operator()(float (&acc)[kN8][4], const Fragment& f, int stage) const {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      std::uint32_t b[kN8][2];
#pragma unroll
      for (int n = 0; n + 1 < kN8; n += 2) {
        std::uint32_t r[4];
        detail::ldmatrix_x4_at(r, lane_x4 +
                                      static_cast<std::uint32_t>(stage * kStageBytes + n * 8 * kBRowStride + kk * 32));
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
  }
};

// The routed rows' activation scales, for the epilogue: copied with the first ring group, so they
// are in shared memory (zeros past the block's rows) when the last chunk is done (global loads
// right before the stores were 4.5% of the down GEMM's stall samples at t=416).
template <int kN8>
__device__ __forceinline__ void load_scales(const GemmArgs& args, float* xs_s, int row_begin, int block_rows) {
  if (threadIdx.x < 8 * kN8) {
    const int n = threadIdx.x;
    detail::cp_async4_at(detail::smem_address(xs_s + n), args.xs + row_begin + (n < block_rows ? n : 0),
                         n < block_rows ? 4 : 0);
  }
}

// The ring's prologue: its first kBStages - 1 groups of kSub chunks, one cp.async group each.
template <int kSub, typename LoadB>
__device__ __forceinline__ void fill_ring(const LoadB& load_b, int chunks) {
#pragma unroll
  for (int s = 0; s < kBStages - 1; ++s) {
#pragma unroll
    for (int j = 0; j < kSub; ++j) {
      if (s * kSub + j < chunks) load_b(s * kSub + j, s * kSub + j);
    }
    cp_async_commit();
  }
}

// The main loop, kPipeRound chunks per unrolled round. The ring: kSlots slots of one chunk. The
// loads go in groups of kSub chunks (one cp.async group each), kBStages - 1 groups ahead, and the
// warps meet at one block barrier per group.
template <bool kV2, int kN8, int kSub, typename LoadB, int kPiecesPerThread>
__device__ __forceinline__ void mma_rounds(const LoadB& load_b, const __half* (&piece_src)[kPiecesPerThread],
                                           WeightPipe<kV2>& weights, const WarpWeightCopies& copies,
                                           const ChunkMma<kV2, kN8>& compute, float (&acc)[kN8][4], int chunks,
                                           int warp, int lane) {
  constexpr int kSlots = kBStages * kSub;  // ring slots of one chunk each; kSub chunks per block barrier
  static_assert(kPipeRound % kSlots == 0, "one unrolled round covers the weight pipe and the routed-row ring");
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
        compute(acc, weights.get(d, round), d % kSlots);
        weights.release(d, round);
      }
    }
#pragma unroll
    for (int i = 0; i < kPiecesPerThread; ++i) piece_src[i] += kPipeRound * kChunkElems;
  }
}

// One block: kWarps x 16 weight rows of one expert, up to 8*kN8 routed rows.
template <bool kV2, int kWarps, int kN8, int kSub>
__device__ __forceinline__ void mma_block(const GemmArgs& args, std::uint8_t* smem, int expert, int row_block,
                                          int row_begin, int block_rows) {
  using Storage = MmaSharedStorage<kV2, kWarps, kN8, kSub>;
  constexpr int kThreads = 32 * kWarps;
  constexpr int kStageBytes = mma_stage_bytes(kN8);
  constexpr int kPieces = 8 * kN8 * 8;  // 16-byte pieces of routed rows per chunk
  constexpr int kPiecesPerThread = (kPieces + kThreads - 1) / kThreads;
  Storage& shared = *reinterpret_cast<Storage*>(smem);
  const int chunks = args.in_cols / kChunkElems;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int tile = row_block * kWarps + warp;  // this warp's m16 tile
  const bool tile_valid = tile < args.out_rows / 16;
  const std::uint8_t* matrix = args.weights + static_cast<std::int64_t>(expert) * args.out_rows * chunks * kChunkBytes;

  // Routed rows: this thread's pieces of every chunk, declared here and filled by set_up_pieces (as
  // members of a struct they changed the generated SASS).
  const __half* piece_src[kPiecesPerThread];
  std::uint32_t piece_dst[kPiecesPerThread];
  int piece_bytes[kPiecesPerThread];
  const std::uint32_t b_base = detail::smem_address(shared.ring);
  set_up_pieces<kWarps, kN8>(piece_src, piece_dst, piece_bytes, args, b_base, row_begin, block_rows);
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
  std::uint32_t pipe_base = 0;
  if constexpr (kV2) pipe_base = detail::smem_address(&shared.pipes);
  const PipeLayout pipes{pipe_base, kWarps};
  WeightPipe<kV2> weights(matrix, tile_valid ? tile : 0, chunks, lane, pipes, warp);
  const WarpWeightCopies copies{
      matrix, row_block * kWarps, args.out_rows / 16, chunks, (chunks + kPipeGroup - 1) / kPipeGroup, pipes};
  if (kV2 && lane == 0) copies.start(warp);
  __syncwarp();

  float acc[kN8][4];
#pragma unroll
  for (int n = 0; n < kN8; ++n)
#pragma unroll
    for (int v = 0; v < 4; ++v) acc[n][v] = 0.0f;

  const ChunkMma<kV2, kN8> compute(b_base, lane);

  // The scales and the ring's first groups, then the chunks; the epilogue stays here (its scale
  // array in a function of its own changed the generated SASS).
  float* xs_s = shared.xs;
  wait_before_inputs(args);  // the weights' first copies are in flight; the routed rows come next
  load_scales<kN8>(args, xs_s, row_begin, block_rows);
  fill_ring<kSub>(load_b, chunks);
  mma_rounds<kV2, kN8, kSub>(load_b, piece_src, weights, copies, compute, acc, chunks, warp, lane);
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
  for (int n = 0; n < kN8; ++n)
    store_pair(args.y, xs_cols[n], ts, row_begin, block_rows, args.out_rows, o, n * 8 + 2 * t, acc[n]);
}

// Each block runs the variant for its routed rows: n8 tiles of 8 rows, up to kMaxN8.
template <bool kV2, int kWarps, int kMaxN8>
__device__ __forceinline__ void mma_rows(const GemmArgs& args, std::uint8_t* smem, const BlockWork& w) {
  const int n8 = (w.rows + 7) / 8;
  if (n8 == 1 || kMaxN8 == 1)
    return mma_block<kV2, kWarps, 1, barrier_chunks(1, kMaxN8)>(args, smem, w.expert, w.row_block, w.begin, w.rows);
  if constexpr (kMaxN8 >= 2) {
    if (n8 == 2 || kMaxN8 == 2)
      return mma_block<kV2, kWarps, 2, barrier_chunks(2, kMaxN8)>(args, smem, w.expert, w.row_block, w.begin, w.rows);
  }
  if constexpr (kMaxN8 >= 3) {
    if (n8 == 3 || kMaxN8 == 3)
      return mma_block<kV2, kWarps, 3, barrier_chunks(3, kMaxN8)>(args, smem, w.expert, w.row_block, w.begin, w.rows);
  }
  if constexpr (kMaxN8 >= 4) {
    if (n8 == 4 || kMaxN8 == 4)
      return mma_block<kV2, kWarps, 4, barrier_chunks(4, kMaxN8)>(args, smem, w.expert, w.row_block, w.begin, w.rows);
  }
}

// GemmWait::at_exit (kernels.hpp): the next kernel may launch at once, and the block waits for the
// kernels before it only once its outputs are stored.
template <bool kV2, int kWarps, int kMaxN8, int kMinBlocks>
__global__ void __launch_bounds__(32 * kWarps, kMinBlocks) grouped_gemm_mma_kernel(const GemmArgs args) {
  static_assert(kMaxN8 >= 1 && kMaxN8 <= 4, "mma tiles hold 8 to 32 routed rows");
  static_assert(fits_every_variant<kV2, kWarps, kMaxN8>(), "every variant fits the tile's shared memory");
  extern __shared__ __align__(128) std::uint8_t smem[];
  const bool at_exit = args.wait != GemmWait::before_inputs;
  if (at_exit) detail::allow_dependent_launch();
  mma_rows<kV2, kWarps, kMaxN8>(args, smem, block_work(args));
  if (at_exit) detail::wait_for_prerequisite_grids();
}

template <bool kV2, int kTile>
void launch_tile(const GemmArgs& args, int grid, cudaStream_t stream) {
  constexpr TileSpec spec = kTiles[kTile];
  static_assert(!spec.wgmma);
  constexpr int smem = mma_smem_bytes(spec.n8, kV2, spec.warps);
  // v1's byte gathers need more registers: tile 1 would spill at 8 blocks per SM.
  constexpr int min_blocks = kV2 || spec.n8 == 1 ? spec.min_blocks : 1;
  auto* kernel = grouped_gemm_mma_kernel<kV2, spec.warps, spec.n8, min_blocks>;
  detail::prepare_smem(reinterpret_cast<const void*>(kernel), smem, "grouped_gemm: cudaFuncSetAttribute");
  detail::launch("grouped_gemm", kernel, static_cast<unsigned int>(grid), 32 * spec.warps, smem, stream, args);
}

template <bool kV2>
void launch_layout(const GemmArgs& args, int tile, int grid, cudaStream_t stream) {
  static_assert(kTiles.size() == 7, "a new tile needs its case here or in gemm_wgmma.cu");
  switch (tile) {
    case 0: return launch_tile<kV2, 0>(args, grid, stream);
    case 1: return launch_tile<kV2, 1>(args, grid, stream);
    case 2: return launch_tile<kV2, 2>(args, grid, stream);
    case 5: return launch_tile<kV2, 5>(args, grid, stream);
    case 6: return launch_tile<kV2, 6>(args, grid, stream);
    default: throw std::invalid_argument("grouped_gemm: tile " + std::to_string(tile) + " is not an mma.sync tile");
  }
}

}  // namespace

void launch_mma(const GemmArgs& args, bool v2, int tile, int grid, Stream stream) {
  if (v2) {
    launch_layout<true>(args, tile, grid, stream);
  } else {
    launch_layout<false>(args, tile, grid, stream);
  }
}

}  // namespace tpgraph::kernels::gemm
