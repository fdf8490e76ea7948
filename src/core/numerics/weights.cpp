// Seeded inputs of the layer: NVFP4 weights per rank and the activations z.
#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/base/parallel.hpp"
#include "core/numerics/reference.hpp"

namespace tpgraph {
namespace {

constexpr std::uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
constexpr std::uint64_t kWeightsDomain = 1;
constexpr std::uint64_t kInputDomain = 2;

// splitmix64's finaliser: a bijection whose every output bit depends on every input bit.
inline std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

// ln(u) for u in (0, 1]: u = m * 2^e with m in [sqrt(1/2), sqrt(2)) (split by integer arithmetic on
// the bits, so the loop stays branch-free and vectorises), ln m from the atanh series in
// s = (m-1)/(m+1), |s| < 0.172; the truncation is below 1e-9, under fp32 rounding.
inline float log_unit(float u) {
  constexpr std::uint32_t kSqrtHalf = 0x3f3504f3u;  // bits of sqrt(1/2)
  const std::uint32_t shifted = std::bit_cast<std::uint32_t>(u) - kSqrtHalf;
  const auto e = static_cast<float>(static_cast<std::int32_t>(shifted) >> 23);
  const float m = std::bit_cast<float>((shifted & 0x7fffffu) + kSqrtHalf);
  const float s = (m - 1.0f) / (m + 1.0f);
  const float s2 = s * s;
  const float series = 1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9))));
  return e * 0.693147181f + 2.0f * s * series;
}

// sqrt(x) for x >= 0 as x / sqrt(x), the reciprocal square root from the classic bit-level guess
// and three Newton steps (~1e-7 relative). std::sqrt would do, but its errno path keeps the
// compiler from vectorising the loop.
inline float sqrt_nonnegative(float x) {
  float y = std::bit_cast<float>(0x5f3759dfu - (std::bit_cast<std::uint32_t>(x) >> 1));
  for (int i = 0; i < 3; ++i) y = y * (1.5f - 0.5f * x * y * y);
  return x * y;
}

// cos and sin of 2*pi*t for t in [0, 1): quadrant from 4t, then Taylor polynomials on [0, pi/2)
// whose truncation is below 1e-9.
inline void cos_sin_turn(float t, float& c, float& s) {
  const float x4 = t * 4.0f;  // exact
  const int quadrant = static_cast<int>(x4);
  const float x = (x4 - static_cast<float>(quadrant)) * 1.57079633f;
  const float x2 = x * x;
  const float sin_x =
      x * (1.0f +
           x2 * (-1.0f / 6 +
                 x2 * (1.0f / 120 + x2 * (-1.0f / 5040 + x2 * (1.0f / 362880 + x2 * (-1.0f / 39916800 +
                                                                                     x2 * (1.0f / 6227020800.0f)))))));
  const float cos_x =
      1.0f + x2 * (-1.0f / 2 +
                   x2 * (1.0f / 24 +
                         x2 * (-1.0f / 720 +
                               x2 * (1.0f / 40320 + x2 * (-1.0f / 3628800 +
                                                          x2 * (1.0f / 479001600 + x2 * (-1.0f / 87178291200.0f)))))));
  // Rotating by quadrant * pi/2 swaps (odd quadrants) and negates cos (quadrants 1, 2) and sin
  // (quadrants 2, 3); done on the bits so the loop has no branch.
  const auto q = static_cast<std::uint32_t>(quadrant);
  const std::uint32_t swap = 0u - (q & 1u);
  const auto sin_bits = std::bit_cast<std::uint32_t>(sin_x);
  const auto cos_bits = std::bit_cast<std::uint32_t>(cos_x);
  c = std::bit_cast<float>(((sin_bits & swap) | (cos_bits & ~swap)) ^ ((((q + 1u) >> 1) & 1u) << 31));
  s = std::bit_cast<float>(((cos_bits & swap) | (sin_bits & ~swap)) ^ ((q >> 1) << 31));
}

Nvfp4Matrix zero_matrix(int rows, int cols) {
  Nvfp4Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.tensor_scale = 1.0f;  // what nvfp4_quantize gives an all-zero matrix
  m.bytes.assign(static_cast<std::size_t>(nvfp4_matrix_bytes(rows, cols)), 0);
  return m;
}

void check_weight_geometry(const Geometry& g, int rank, int expert) {
  validate(g);
  if (rank < 0 || rank >= g.ranks) {
    throw std::invalid_argument("weights: rank " + std::to_string(rank) + " of " + std::to_string(g.ranks));
  }
  if (expert < 0 || expert >= g.experts) {
    throw std::invalid_argument("weights: expert " + std::to_string(expert) + " of " + std::to_string(g.experts));
  }
}

Nvfp4Matrix random_matrix(const Geometry& g, int rank, WeightMatrix matrix, int expert, std::uint64_t seed,
                          std::vector<float>& scratch) {
  const bool down = matrix == WeightMatrix::down;
  const int rows = down ? g.hidden : g.ff;
  const int cols = down ? g.ff : g.hidden;
  const auto key =
      random_stream_key(seed, kWeightsDomain, static_cast<std::uint64_t>(rank) * 4 + static_cast<std::uint64_t>(matrix),
                        static_cast<std::uint64_t>(expert));
  scratch.resize(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  fill_normal(key, 0, 1.0f / std::sqrt(static_cast<float>(cols)), scratch);
  return nvfp4_quantize(scratch, rows, cols);
}

}  // namespace

std::string_view to_string(WeightsKind w) { return w == WeightsKind::zeros ? "zeros" : "random"; }

std::uint64_t random_stream_key(std::uint64_t seed, std::uint64_t domain, std::uint64_t a, std::uint64_t b) {
  std::uint64_t h = mix64(seed + kGolden);
  h = mix64(h ^ (domain + 0x632BE59BD9B4E019ULL));
  h = mix64(h ^ (a + 0x8CB92BA72F3D8DD7ULL));
  return mix64(h ^ (b + 0xD6E8FEB86659FD93ULL));
}

void fill_normal(std::uint64_t key, std::uint64_t first, float scale, std::span<float> out) {
  if (first % 2 != 0 || out.size() % 2 != 0) {
    throw std::invalid_argument("fill_normal: the first element and the count must be even");
  }
  const std::uint64_t first_pair = first / 2;
  const std::size_t pairs = out.size() / 2;
  // Hashing is 64-bit integer work; the rest is fp32 the compiler can vectorise. Splitting them
  // into two loops over a batch lets the second one run four or eight pairs at a time.
  constexpr std::size_t kBatch = 512;
  float u1[kBatch];
  float u2[kBatch];
  float radius[kBatch];
  float cosine[kBatch];
  float sine[kBatch];
  for (std::size_t base = 0; base < pairs; base += kBatch) {
    const std::size_t n = std::min(kBatch, pairs - base);
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t h = mix64(key + (first_pair + base + i + 1) * kGolden);
      u1[i] = static_cast<float>((h >> 40) + 1) * 0x1p-24f;          // (0, 1]
      u2[i] = static_cast<float>((h >> 16) & 0xffffffu) * 0x1p-24f;  // [0, 1)
    }
    for (std::size_t i = 0; i < n; ++i) {
      radius[i] = sqrt_nonnegative(-2.0f * log_unit(u1[i])) * scale;
      cos_sin_turn(u2[i], cosine[i], sine[i]);
    }
    float* dst = out.data() + 2 * base;
    for (std::size_t i = 0; i < n; ++i) {
      dst[2 * i] = radius[i] * cosine[i];
      dst[2 * i + 1] = radius[i] * sine[i];
    }
  }
}

Nvfp4Matrix make_expert_matrix(const Geometry& g, int rank, WeightMatrix matrix, int expert, WeightsKind kind,
                               std::uint64_t seed) {
  check_weight_geometry(g, rank, expert);
  const bool down = matrix == WeightMatrix::down;
  if (kind == WeightsKind::zeros) return zero_matrix(down ? g.hidden : g.ff, down ? g.ff : g.hidden);
  std::vector<float> scratch;
  return random_matrix(g, rank, matrix, expert, seed, scratch);
}

RankWeights make_rank_weights(const Geometry& g, int rank, WeightsKind kind, std::uint64_t seed) {
  check_weight_geometry(g, rank, 0);
  RankWeights w;
  w.experts = g.experts;
  w.hidden = g.hidden;
  w.ff = g.ff;
  const auto n = static_cast<std::size_t>(g.experts);
  w.gate.resize(n);
  w.up.resize(n);
  w.down.resize(n);
  const std::int64_t items = std::int64_t{g.experts} * 3;
  const int workers = worker_count(items);
  std::vector<std::vector<float>> scratch(static_cast<std::size_t>(workers));
  parallel_for(items, workers, [&](std::int64_t item, int worker) {
    const auto expert = static_cast<int>(item / 3);
    const auto matrix = static_cast<WeightMatrix>(item % 3);
    auto& slot = matrix == WeightMatrix::gate ? w.gate : matrix == WeightMatrix::up ? w.up : w.down;
    const bool down = matrix == WeightMatrix::down;
    slot[static_cast<std::size_t>(expert)] =
        kind == WeightsKind::zeros
            ? zero_matrix(down ? g.hidden : g.ff, down ? g.ff : g.hidden)
            : random_matrix(g, rank, matrix, expert, seed, scratch[static_cast<std::size_t>(worker)]);
  });
  return w;
}

std::vector<float> make_layer_input(const Geometry& g, std::uint64_t seed) {
  validate(g);
  const auto hidden = static_cast<std::size_t>(g.hidden);
  std::vector<float> z(static_cast<std::size_t>(g.tokens) * hidden);
  const auto key = random_stream_key(seed, kInputDomain, 0, 0);
  constexpr std::int64_t kTokensPerItem = 64;
  const std::int64_t items = (g.tokens + kTokensPerItem - 1) / kTokensPerItem;
  parallel_for(items, worker_count(items), [&](std::int64_t item, int) {
    const std::int64_t first_token = item * kTokensPerItem;
    const std::int64_t last_token = std::min<std::int64_t>(first_token + kTokensPerItem, g.tokens);
    const auto first = static_cast<std::size_t>(first_token) * hidden;
    fill_normal(key, first, 1.0f,
                std::span(z).subspan(first, static_cast<std::size_t>(last_token - first_token) * hidden));
  });
  return z;
}

}  // namespace tpgraph
