// The shift of a median between two series of repeated GPU timings, with a confidence interval that
// holds when the timings are not independent: replays of one run drift together (clocks ramp, a
// neighbour's load comes and goes), so neighbouring replays are alike and resampling them one by
// one would make the interval too narrow. The circular block bootstrap resamples whole runs of
// consecutive replays instead, keeping that likeness inside each block.
//
// For each side independently: its n values taken as a circle; a resample is ceil(n / b) blocks of
// b consecutive values starting at uniformly drawn positions, cut to n values; its median is taken.
// The shift of one resample is median(B*) - median(A*); over `resamples` of them, the interval is
// their (1 - confidence) / 2 and (1 + confidence) / 2 quantiles (the percentile method). Block
// length b = ceil(sqrt(n)): longer than the n^(1/3) that is optimal for a stationary series, because
// GPU drift is slow, and a block must hold the part of it that neighbouring replays share.
//
// Bounded: a side of more than kMaxBootstrapValues values enters the resampling thinned to every k-th
// value (k = ceil(n / kMaxBootstrapValues), in order, so the drift is kept on a stretched time scale),
// and the interval is moved to centre on the shift of all values (the thinned shift's interval,
// minus the thinned shift, plus the full one). Thinning only widens the interval: the medians of
// tens of thousands of replays are far more precise than the run-to-run noise the practical
// thresholds are for. A figure then costs resamples * 2 * kMaxBootstrapValues at most.
//
// Deterministic: the generator is splitmix64, seeded from the caller's seed; the same inputs and seed
// give the same interval on every machine.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace tpgraph::stats {

inline constexpr int kDefaultResamples = 1000;
inline constexpr double kDefaultConfidence = 0.95;
inline constexpr std::size_t kMaxBootstrapValues = 4000;

struct MedianShift {
  std::size_t n_a = 0, n_b = 0;
  double median_a = 0, median_b = 0;
  double shift = 0;                        // median_b - median_a
  bool interval = false;                   // lo and hi computed
  double lo = 0, hi = 0;                   // the interval of the shift
  std::size_t block_a = 0, block_b = 0;    // block lengths, in values resampled
  std::size_t stride_a = 1, stride_b = 1;  // every stride-th value was resampled
  [[nodiscard]] bool excludes_zero() const { return interval && (lo > 0 || hi < 0); }
};

// The block length for n values: ceil(sqrt(n)), at least 1.
[[nodiscard]] std::size_t block_length(std::size_t n);

// Medians and their shift; the interval only when `with_interval` (it costs resamples * (n_a + n_b)).
// Empty sides give n 0 and no interval.
[[nodiscard]] MedianShift median_shift(std::span<const double> a, std::span<const double> b, std::uint64_t seed,
                                       bool with_interval, int resamples = kDefaultResamples,
                                       double confidence = kDefaultConfidence);

// A seed for one comparison, from the run's seed and the comparison's name (FNV-1a): every figure gets
// its own stream of draws, the same whatever else is compared.
[[nodiscard]] std::uint64_t seed_for(std::uint64_t seed, std::string_view name);

}  // namespace tpgraph::stats
