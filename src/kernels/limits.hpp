// Kernels made for nothing but measuring this GPU's limits, which bench states the chain's kernels
// against: streaming reads (the limit of a GEMM's weight stream), streaming writes, a copy, and the
// tensor-core peak of the grouped GEMM's own instruction; and a spin, the short kernel `trace`
// calibrates CUPTI's record cost on. Plain C++ launch functions, as kernels.hpp.
#pragma once
#include <cstdint>

#include "core/analysis/bench_shapes.hpp"
#include "kernels/kernels.hpp"

namespace tpgraph::kernels {

// The kinds and launch shapes are core's (core/analysis/bench_shapes.hpp), so the limits bench
// records name the shape that gave them without a copy of the type.
using StreamKind = bench::StreamKind;
using StreamShape = bench::StreamShape;
using MmaPeakShape = bench::MmaPeakShape;

// read: every byte of src[0, bytes) loaded once (a fold of the values is stored to *sink only if
// it hits a value the fill never gives, so nothing is optimised away). write: dst[0, bytes)
// stored once. copy: src to dst. `bytes` must be a multiple of 16 and the pointers 16-byte
// aligned. Throws std::invalid_argument for an unsupported shape, cuda::CudaError if the launch
// fails.
void stream_memory(StreamKind kind, const void* src, void* dst, std::int64_t bytes, const StreamShape& shape,
                   std::uint32_t* sink, Stream stream);

// The tensor-core peak kernel: each warpgroup of MmaPeakShape issues wgmma.mma_async m64nNk16
// f32.f16.f16 with A from registers and B from shared memory by a 128-byte-swizzle descriptor, the
// grouped GEMM's instruction.
//
// False where the build has no sm_90a code (wgmma): the peak cannot be measured.
[[nodiscard]] bool mma_peak_built();
// Each warpgroup runs `iterations` x 4 k16 steps, keeping one commit group in flight as the GEMM
// does. `sink` takes one float per block (written only for a sum the inputs never give). `clocks`
// (device memory, two words, optional): block 0's SM clock cycles and global-timer nanoseconds over
// its loop are added to them.
void mma_peak(const MmaPeakShape& shape, int iterations, float* sink, Stream stream,
              unsigned long long* clocks = nullptr);
// The FLOPs one mma_peak launch performs: 2 * 64 * n * 16 per wgmma.
[[nodiscard]] double mma_peak_flops(const MmaPeakShape& shape, int iterations);

// One warp that spins on the GPU's global timer (ns) for `ns`, so it lasts as long as asked
// whatever the clock speed; `sink` takes a store only when the timer ran backwards (never), so
// nothing is optimised away. Throws std::invalid_argument for ns outside 1 to 10^9.
void spin(std::int64_t ns, std::uint32_t* sink, Stream stream);

}  // namespace tpgraph::kernels
