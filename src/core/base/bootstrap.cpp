#include "core/base/bootstrap.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/base/stats.hpp"

namespace tpgraph::stats {

namespace {

// splitmix64 (Steele, Lea, Flood 2014): a full-period 64-bit generator with no state but a counter,
// written out so every standard library draws the same numbers.
class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) by the remainder: its bias is below n / 2^64, far under what a thousand
  // resamples can show.
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }

 private:
  std::uint64_t state_;
};

// The median of `v` (reordered): stats::median's definition, in linear time.
double median_in_place(std::vector<double>& v) {
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return lower + (upper - lower) / 2;
}

// One circular block resample of `x` into `out`, and its median.
double resampled_median(std::span<const double> x, std::size_t block, SplitMix64& rng, std::vector<double>& out) {
  const std::size_t n = x.size();
  out.clear();
  while (out.size() < n) {
    std::size_t at = rng.below(n);
    for (std::size_t i = 0; i < block && out.size() < n; ++i) {
      out.push_back(x[at]);
      at = at + 1 == n ? 0 : at + 1;
    }
  }
  return median_in_place(out);
}

// Every stride-th value of `x`, stride = ceil(n / kMaxBootstrapValues); `x` itself when small.
std::span<const double> thinned(std::span<const double> x, std::vector<double>& store, std::size_t& stride) {
  stride = (x.size() + kMaxBootstrapValues - 1) / kMaxBootstrapValues;
  if (stride <= 1) {
    stride = 1;
    return x;
  }
  store.clear();
  for (std::size_t i = 0; i < x.size(); i += stride) store.push_back(x[i]);
  return store;
}

}  // namespace

std::size_t block_length(std::size_t n) {
  return std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(n)))));
}

MedianShift median_shift(std::span<const double> a, std::span<const double> b, std::uint64_t seed, bool with_interval,
                         int resamples, double confidence) {
  MedianShift m;
  m.n_a = a.size();
  m.n_b = b.size();
  if (a.empty() || b.empty()) return m;
  m.median_a = median({a.begin(), a.end()});
  m.median_b = median({b.begin(), b.end()});
  m.shift = m.median_b - m.median_a;
  std::vector<double> a_store, b_store;
  const auto ta = thinned(a, a_store, m.stride_a);
  const auto tb = thinned(b, b_store, m.stride_b);
  m.block_a = block_length(ta.size());
  m.block_b = block_length(tb.size());
  if (!with_interval || resamples < 2) return m;
  SplitMix64 rng(seed);
  std::vector<double> scratch, shifts;
  scratch.reserve(std::max(ta.size(), tb.size()));
  shifts.reserve(static_cast<std::size_t>(resamples));
  for (int i = 0; i < resamples; ++i) {
    const double ma = resampled_median(ta, m.block_a, rng, scratch);
    const double mb = resampled_median(tb, m.block_b, rng, scratch);
    shifts.push_back(mb - ma);
  }
  std::sort(shifts.begin(), shifts.end());
  m.interval = true;
  // Thinned: centred on the shift of all values (no move when nothing was thinned).
  const double move = m.shift - (median({tb.begin(), tb.end()}) - median({ta.begin(), ta.end()}));
  m.lo = percentile_sorted(shifts, (1 - confidence) / 2) + move;
  m.hi = percentile_sorted(shifts, (1 + confidence) / 2) + move;
  return m;
}

std::uint64_t seed_for(std::uint64_t seed, std::string_view name) {
  std::uint64_t h = 0xcbf29ce484222325ULL ^ seed;
  for (const char c : name) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace tpgraph::stats
