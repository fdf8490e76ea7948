#include "core/numerics/geometry.hpp"

#include <fmt/core.h>

#include <array>
#include <cstdint>
#include <fstream>
#include <limits>

#include "core/base/error.hpp"

namespace tpgraph {
namespace {

void require(bool ok, std::string_view field, std::int64_t value, std::string_view accepted) {
  if (!ok) throw InputError(fmt::format("invalid geometry: {} = {}; accepted: {}", field, value, accepted));
}

constexpr std::int64_t kF32 = 4;
constexpr std::int64_t kU16 = 2;
constexpr std::int64_t kI32 = 4;

}  // namespace

void validate(const Geometry& g) {
  require(g.experts >= 1 && g.experts <= kMaxExperts, "experts", g.experts, fmt::format("1 to {}", kMaxExperts));
  require(g.top_k >= 1 && g.top_k <= g.experts, "top_k", g.top_k, fmt::format("1 <= top_k <= experts ({})", g.experts));
  require(g.hidden >= 64 && g.hidden <= kMaxWidth && g.hidden % 64 == 0, "hidden", g.hidden,
          fmt::format("a multiple of 64 (one NVFP4 chunk) from 64 to {}", kMaxWidth));
  require(g.ff >= 64 && g.ff <= kMaxWidth && g.ff % 64 == 0, "ff", g.ff,
          fmt::format("a multiple of 64 (one NVFP4 chunk) from 64 to {}", kMaxWidth));
  require(g.tokens >= 1 && g.tokens <= kMaxTokens, "tokens", g.tokens, fmt::format("1 to {}", kMaxTokens));
  require(g.ranks >= 1 && g.ranks <= kMaxRanks, "ranks", g.ranks, fmt::format("1 to {}", kMaxRanks));
  require(g.pairs() <= std::numeric_limits<std::int32_t>::max(), "tokens * top_k", g.pairs(),
          "under 2^31 (the CSR arrays are int32)");
}

std::int64_t nvfp4_matrix_bytes(std::int64_t rows, std::int64_t cols) { return rows * (cols / 64) * 36; }

std::int64_t working_set_bytes(const Geometry& g) {
  const std::int64_t p = g.pairs();
  const std::int64_t z16 = p * g.hidden * kU16 + p * kF32;  // + zs
  const std::int64_t gate_up = 2 * p * g.ff * kF32;
  const std::int64_t a = p * g.ff * kF32;
  const std::int64_t a16 = p * g.ff * kU16 + p * kF32;  // + as
  const std::int64_t y = p * g.hidden * kF32;
  return z16 + gate_up + a + a16 + y;
}

MemoryEstimate memory_per_rank(const Geometry& g) { return memory_per_rank(g, 0, false); }

MemoryEstimate memory_per_rank(const Geometry& g, int staged_partials, bool fresh_alloc) {
  MemoryEstimate m;
  const std::int64_t experts = g.experts;
  const std::int64_t per_expert = 2 * nvfp4_matrix_bytes(g.ff, g.hidden) + nvfp4_matrix_bytes(g.hidden, g.ff);
  m.weights = experts * per_expert + 3 * experts * kF32;                       // + one fp32 tensor scale per matrix
  const std::int64_t layer_io = 2 * std::int64_t{g.tokens} * g.hidden * kF32;  // z and out
  m.activations = layer_io + working_set_bytes(g);
  const std::int64_t p = g.pairs();
  // active_experts and offsets at their largest, row_token, pair_row, pair_weight.
  m.routing = experts * kI32 + (experts + 1) * kI32 + 3 * p * kI32;
  m.staging = std::int64_t{staged_partials} * g.tokens * g.hidden * kF32;
  if (fresh_alloc) m.pool = working_set_bytes(g);
  return m;
}

void check_memory_fits(std::int64_t needed, std::int64_t available, int device) {
  if (needed > available) {
    throw InputError(
        fmt::format("GPU {} has {} free but the scenario needs {} there; lower --tokens or "
                    "--experts, or spread the ranks over more GPUs with --devices",
                    device, format_bytes(available), format_bytes(needed)));
  }
}

std::int64_t host_memory_for_check(const Geometry& g) {
  const std::int64_t weights = std::int64_t{g.ranks} * memory_per_rank(g).weights;
  // pairs, row_token, pair_row, pair_weight and the expert of each pair while sorting.
  const std::int64_t routing = 5 * g.pairs() * kI32;
  // z, the layer output, the reference's output and a rank's partial.
  const std::int64_t planes = 4 * std::int64_t{g.tokens} * g.hidden * kF32;
  return weights + routing + planes;
}

void check_host_memory_fits(std::int64_t needed, std::int64_t available, std::string_view what) {
  if (available >= 0 && needed > available) {
    throw InputError(
        fmt::format("{} needs {} of host memory but {} is available; lower --tokens, --experts, "
                    "--hidden or --ff",
                    what, format_bytes(needed), format_bytes(available)));
  }
}

std::string format_bytes(std::int64_t bytes) {
  static constexpr std::array<const char*, 5> kUnits{"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024 && bytes > -1024) return fmt::format("{} B", bytes);
  double v = static_cast<double>(bytes) / 1024.0;
  std::size_t unit = 0;
  while ((v >= 1024.0 || v <= -1024.0) && unit + 1 < kUnits.size()) {
    v /= 1024.0;
    ++unit;
  }
  // Three significant figures: "1.27 GiB", "84.0 MiB", "640 KiB".
  const double mag = v < 0 ? -v : v;
  const int decimals = mag >= 100 ? 0 : mag >= 10 ? 1 : 2;
  return fmt::format("{:.{}f} {}", v, decimals, kUnits[unit]);
}

}  // namespace tpgraph
