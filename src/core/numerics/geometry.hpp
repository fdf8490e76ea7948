// The MoE layer's shape: experts, top-k, hidden, per-rank FFN width, tokens, ranks.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "core/base/host_memory.hpp"  // available_host_memory(), which the memory checks take

namespace tpgraph {

struct Geometry {
  int experts = 288;
  int top_k = 8;
  int hidden = 4096;
  int ff = 640;  // per-rank slice of the FFN width
  int tokens = 4096;
  int ranks = 2;

  [[nodiscard]] std::int64_t pairs() const { return std::int64_t{tokens} * top_k; }
  friend bool operator==(const Geometry&, const Geometry&) = default;
};

// Upper bounds keep every product in range: pairs fit the int32 CSR arrays, byte counts fit int64.
inline constexpr int kMaxExperts = 4096;
inline constexpr int kMaxWidth = 65536;  // hidden and ff
inline constexpr int kMaxTokens = 1 << 20;
inline constexpr int kMaxRanks = 64;

// Throws InputError naming the first invalid field and what is accepted: hidden and ff multiples
// of 64 (one NVFP4 chunk), 1 <= top_k <= experts, tokens >= 1, experts >= 1, ranks >= 1, each
// under the bounds above, and tokens * top_k < 2^31 (the CSR arrays are int32).
void validate(const Geometry& g);

// Bytes of one NVFP4 matrix of rows x cols (cols a multiple of 64): 36 bytes per 64 elements.
[[nodiscard]] std::int64_t nvfp4_matrix_bytes(std::int64_t rows, std::int64_t cols);

// Device memory one rank needs, by buffer, for a given geometry (resident buffers; a run with
// fresh allocation needs the working set again as pool headroom).
struct MemoryEstimate {
  std::int64_t weights = 0;      // gate + up + down, all experts, NVFP4, plus their fp32 scales
  std::int64_t activations = 0;  // z, z16/zs, g, u, a, a16/as, y, out
  std::int64_t routing = 0;      // CSR arrays (active experts counted at their maximum, E)
  std::int64_t staging = 0;      // root only, join != none: the other ranks' partials
  std::int64_t pool = 0;         // alloc fresh: the in-graph pool's working set
  [[nodiscard]] std::int64_t total() const { return weights + activations + routing + staging + pool; }
};
[[nodiscard]] MemoryEstimate memory_per_rank(const Geometry& g);
// The variant-aware form: `staged_partials` other ranks' outputs staged on this rank (the root
// with a join: ranks - 1, else 0), and the pool when the working set is allocated in the graph.
[[nodiscard]] MemoryEstimate memory_per_rank(const Geometry& g, int staged_partials, bool fresh_alloc);
// The per-layer working set a rank computes through: z16/zs, g, u, a, a16/as, y. With alloc fresh
// it is what one rank's alloc node allocates.
[[nodiscard]] std::int64_t working_set_bytes(const Geometry& g);

// Throws InputError when `needed` bytes do not fit in `available` on `device`, saying both.
void check_memory_fits(std::int64_t needed, std::int64_t available, int device);

// Host memory `tpgraph check` builds before it touches a GPU: every rank's weights (NVFP4, as on
// the device), the routing's per-pair arrays, the layer input and the outputs it compares.
[[nodiscard]] std::int64_t host_memory_for_check(const Geometry& g);
// Throws InputError when `needed` bytes exceed `available` (unless available < 0, unknown).
void check_host_memory_fits(std::int64_t needed, std::int64_t available, std::string_view what);

// "1.27 GiB", "84.0 MiB": for messages and tables.
[[nodiscard]] std::string format_bytes(std::int64_t bytes);

}  // namespace tpgraph
