#include "core/base/stats.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>

namespace tpgraph::stats {

double percentile_sorted(std::span<const double> sorted, double q) {
  if (sorted.empty()) return 0;
  const double pos = std::clamp(q, 0.0, 1.0) * static_cast<double>(sorted.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = static_cast<std::size_t>(std::ceil(pos));
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

double percentile(std::vector<double> values, double q) {
  std::sort(values.begin(), values.end());
  return percentile_sorted(values, q);
}

double median(std::vector<double> values) { return percentile(std::move(values), 0.5); }

double min(std::span<const double> values) {
  return values.empty() ? 0.0 : *std::min_element(values.begin(), values.end());
}

double max(std::span<const double> values) {
  return values.empty() ? 0.0 : *std::max_element(values.begin(), values.end());
}

double mad(std::span<const double> values) {
  const double center = median({values.begin(), values.end()});
  std::vector<double> deviation;
  deviation.reserve(values.size());
  for (const double x : values) deviation.push_back(std::abs(x - center));
  return median(std::move(deviation));
}

OutputGuard guard_of(std::span<const float> values) {
  OutputGuard g;
  g.count = static_cast<std::int64_t>(values.size());
  for (const float v : values) {
    if (std::isnan(v)) {
      ++g.nan_count;
      continue;
    }
    if (v != 0.0f) ++g.nonzero;
    g.absmax = std::max(g.absmax, static_cast<double>(std::fabs(v)));
  }
  return g;
}

std::string describe(const OutputGuard& g) {
  return fmt::format("nonzero {}/{}, absmax {:.4g}, NaN {}", g.nonzero, g.count, g.absmax, g.nan_count);
}

}  // namespace tpgraph::stats
