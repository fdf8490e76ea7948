// Kernels made for nothing but measuring this GPU's limits, which bench states the chain's kernels
// against: streaming reads (the limit of a GEMM's weight stream), streaming writes, a copy, and the
// tensor-core peak of the grouped GEMM's own instruction. Plain C++ launch functions, as kernels.hpp.
#pragma once
#include <cstdint>

#include "kernels/kernels.hpp"

namespace tpgraph::kernels {

enum class StreamKind { read, write, copy };

// A launch shape of the streaming kernels: `blocks` x `threads`, each thread moving `vector_bytes`
// (4, 8 or 16) per access with `unroll` (1, 2 or 4) accesses in flight, grid-stride over the buffer.
struct StreamShape {
  int blocks = 0;
  int threads = 256;
  int vector_bytes = 16;
  int unroll = 1;
};

// read: every byte of src[0, bytes) loaded once (a fold of the values is stored to *sink only if
// it hits a value the fill never gives, so nothing is optimised away). write: dst[0, bytes)
// stored once. copy: src to dst. `bytes` must be a multiple of 16 and the pointers 16-byte
// aligned. Throws std::invalid_argument for an unsupported shape, std::runtime_error if the
// launch fails.
void stream_memory(StreamKind kind, const void* src, void* dst, std::int64_t bytes, const StreamShape& shape,
                   std::uint32_t* sink, Stream stream);

// A launch shape of the tensor-core peak kernel: `blocks` blocks of `warpgroups` warpgroups, each
// warpgroup issuing wgmma.mma_async m64nNk16 f32.f16.f16 with A from registers and B from shared
// memory by a 128-byte-swizzle descriptor, N = `n` (64, 128 or 160): the grouped GEMM's instruction.
struct MmaPeakShape {
  int n = 160;
  int warpgroups = 2;
  int blocks = 0;
};
// False where the build has no sm_90a code (wgmma): the peak cannot be measured.
[[nodiscard]] bool mma_peak_built();
// Each warpgroup runs `iterations` x 4 k16 steps, keeping one commit group in flight as the GEMM
// does. `sink` takes one float per block (written only for a sum the inputs never give).
void mma_peak(const MmaPeakShape& shape, int iterations, float* sink, Stream stream);
// The FLOPs one mma_peak launch performs: 2 * 64 * n * 16 per wgmma.
[[nodiscard]] double mma_peak_flops(const MmaPeakShape& shape, int iterations);

}  // namespace tpgraph::kernels
