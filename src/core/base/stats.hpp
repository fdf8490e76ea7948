// The one home of the statistics tpgraph reports over repeated measurements (replays, timed
// launches): every figure called a median anywhere in the tool is median() here.
//
// Percentiles interpolate linearly between ranks: the q-quantile of n sorted values sits at
// position q * (n - 1). The median is the 0.5-quantile, so for an even count it is the mean of the
// middle pair (computed as lower + (upper - lower) / 2, the interpolation's own arithmetic).
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tpgraph::stats {

// The q-quantile (0 <= q <= 1) of `sorted` (ascending); 0 when empty.
[[nodiscard]] double percentile_sorted(std::span<const double> sorted, double q);
// The q-quantile of `values` in any order; 0 when empty.
[[nodiscard]] double percentile(std::vector<double> values, double q);
// percentile(values, 0.5); 0 when empty.
[[nodiscard]] double median(std::vector<double> values);
// Smallest and largest value; 0 when empty.
[[nodiscard]] double min(std::span<const double> values);
[[nodiscard]] double max(std::span<const double> values);
// Median absolute deviation from the median (unscaled); 0 when empty.
[[nodiscard]] double mad(std::span<const double> values);

// What an output holds, to tell a real result from a degenerate one: a comparison of zeros with
// zeros proves nothing.
struct OutputGuard {
  std::int64_t count = 0;
  std::int64_t nonzero = 0;
  std::int64_t nan_count = 0;
  double absmax = 0;  // over the values that are not NaN
  [[nodiscard]] bool vacuous() const { return nonzero == 0; }
};
[[nodiscard]] OutputGuard guard_of(std::span<const float> values);
// "nonzero 262144/262144, absmax 1.23, NaN 0"
[[nodiscard]] std::string describe(const OutputGuard& g);

}  // namespace tpgraph::stats
