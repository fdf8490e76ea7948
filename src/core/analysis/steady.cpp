#include "core/analysis/steady.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/analysis/timeline.hpp"
#include "core/base/stats.hpp"

namespace tpgraph {

bool SpanDrift::steady() const { return known && std::abs(drift_us()) <= allowance_us; }

SpanDrift span_drift(std::span<const double> spans) {
  SpanDrift d;
  d.known = spans.size() >= kSteadinessMinReplays;
  if (!d.known) return d;
  const std::size_t q = spans.size() / 4;
  d.quarter = static_cast<int>(q);
  d.first_us = stats::median({spans.begin(), spans.begin() + static_cast<std::ptrdiff_t>(q)});
  d.last_us = stats::median({spans.end() - static_cast<std::ptrdiff_t>(q), spans.end()});
  d.allowance_us =
      std::max(kOutlierMads * stats::mad(spans), kOutlierFraction * stats::median({spans.begin(), spans.end()}));
  return d;
}

SteadyWindow steady_window(std::span<const double> spans) {
  SteadyWindow w;
  const std::size_t n = spans.size();
  const std::size_t min_count =
      std::max(kSteadinessMinReplays, static_cast<std::size_t>(std::ceil(kSteadyMinFraction * static_cast<double>(n))));
  if (n < min_count) {
    w.drift = span_drift(spans);
    return w;
  }
  const std::size_t step =
      std::max<std::size_t>(1, static_cast<std::size_t>(kSteadyStepFraction * static_cast<double>(n)));
  for (std::size_t first = 0; first + min_count <= n; first += step) {
    w.first = first;
    w.count = n - first;
    w.drift = span_drift(spans.subspan(first));
    if (w.drift.steady()) {
      w.found = true;
      return w;
    }
  }
  return w;
}

WarmupDecision auto_warmup_decision(std::span<const double> spans) {
  WarmupDecision d;
  const std::size_t n = spans.size();
  if (n >= kAutoWarmupWindow) {
    d.window = span_drift(spans.subspan(n - kAutoWarmupWindow));
    d.steady = d.window.known && std::abs(d.window.drift_us()) <= d.window.allowance_us / 2;
  }
  d.done = d.steady || n >= kMaxAutoWarmup;
  return d;
}

std::string auto_warmup_note(std::size_t replays, const WarmupDecision& d) {
  if (d.steady)
    return fmt::format(
        "warm-up auto: {} replays, until the last {} replays' span drifted {:.1f} µs (first to last quarter), within "
        "half the steadiness allowance ({:.1f} µs)",
        replays, kAutoWarmupWindow, d.window.drift_us(), d.window.allowance_us / 2);
  return fmt::format(
      "warm-up auto: NOT STEADY after {} replays (the cap): the last {} replays' span still drifted {:.1f} µs, beyond "
      "half the steadiness allowance ({:.1f} µs)",
      replays, kAutoWarmupWindow, d.window.drift_us(), d.window.allowance_us / 2);
}

}  // namespace tpgraph
