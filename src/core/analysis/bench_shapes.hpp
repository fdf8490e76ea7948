// The launch shapes of the kernels that measure bench's limits (src/kernels/limits.hpp launches
// them, core/analysis/bench_model.hpp records which shape gave each limit): one definition for both,
// kept free of fmt so the .cu files that launch them include nothing more.
#pragma once
#include <string_view>

namespace tpgraph::bench {

// The streaming kernels' three jobs (the kernels' launch functions take the same type).
enum class StreamKind { read, write, copy };
[[nodiscard]] std::string_view to_string(StreamKind kind);

// A launch shape of the streaming kernels: `blocks` x `threads`, each thread moving `vector_bytes`
// (4, 8 or 16) per access with `unroll` (1, 2 or 4) accesses in flight, grid-stride over the buffer.
struct StreamShape {
  int blocks = 0;
  int threads = 256;
  int vector_bytes = 16;
  int unroll = 1;
};

// A launch shape of the tensor-core peak kernel: `blocks` blocks of `warpgroups` warpgroups, each
// warpgroup issuing wgmma.mma_async m64nNk16 f32.f16.f16 with N = `n` (64, 128 or 160).
struct MmaPeakShape {
  int n = 160;
  int warpgroups = 2;
  int blocks = 0;
};

}  // namespace tpgraph::bench
