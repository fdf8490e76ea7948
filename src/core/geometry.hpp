// The MoE layer's shape: experts, top-k, hidden, per-rank FFN width, tokens, ranks.
#pragma once
#include <cstdint>
#include <string>

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

// Throws InputError naming the first invalid field and what is accepted: hidden and ff multiples
// of 64 (one NVFP4 chunk), 1 <= top_k <= experts, tokens >= 1, ranks >= 1.
void validate(const Geometry& g);

// Bytes of one NVFP4 matrix of rows x cols (cols a multiple of 64): 36 bytes per 64 elements.
[[nodiscard]] std::int64_t nvfp4_matrix_bytes(std::int64_t rows, std::int64_t cols);

// Device memory one rank needs, by buffer, for a given geometry (resident buffers; a run with
// fresh allocation needs the working set again as pool headroom).
struct MemoryEstimate {
  std::int64_t weights = 0;      // gate + up + down, all experts, NVFP4
  std::int64_t activations = 0;  // z, z16/zs, g, u, a, a16/as, y, out
  std::int64_t routing = 0;      // CSR arrays
  [[nodiscard]] std::int64_t total() const { return weights + activations + routing; }
};
[[nodiscard]] MemoryEstimate memory_per_rank(const Geometry& g);

// "1.27 GiB", "84.0 MiB": for messages and tables.
[[nodiscard]] std::string format_bytes(std::int64_t bytes);

}  // namespace tpgraph
