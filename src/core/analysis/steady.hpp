// When a series of replay spans is steady, and from which replay on: the one rule that the timeline's
// steadiness check, `tpgraph diff` (which compares only the steady part of each run) and `run
// --warmup auto` (which warms up until the span is steady) all apply. GPU-free.
//
// The rule (the timeline's since its first version): a series is steady when the median of its first
// quarter and the median of its last quarter differ by at most the allowance max(kOutlierMads * MAD,
// kOutlierFraction * median) of the whole series; it is judged from kSteadinessMinReplays values on.
#pragma once
#include <cstddef>
#include <span>
#include <string>

namespace tpgraph {

struct SpanDrift {
  bool known = false;                // false below kSteadinessMinReplays values
  int quarter = 0;                   // values per quarter
  double first_us = 0, last_us = 0;  // median of the first and of the last quarter
  double allowance_us = 0;           // max(kOutlierMads * MAD, kOutlierFraction * median)
  [[nodiscard]] double drift_us() const { return last_us - first_us; }
  [[nodiscard]] bool steady() const;  // known and |drift| <= allowance
};
[[nodiscard]] SpanDrift span_drift(std::span<const double> spans);

// The steady part of a run: the longest tail [first, size) of the spans that is steady, searched from
// the start in steps of kSteadyStepFraction of the run and kept to at least kSteadyMinFraction of the
// run (and kSteadinessMinReplays replays). Not found: no tail that long is steady.
inline constexpr double kSteadyStepFraction = 0.05;
inline constexpr double kSteadyMinFraction = 0.25;
struct SteadyWindow {
  bool found = false;
  std::size_t first = 0;  // index into the spans given
  std::size_t count = 0;
  SpanDrift drift;  // of the tail chosen, or of the shortest tail tried when none is steady
};
[[nodiscard]] SteadyWindow steady_window(std::span<const double> spans);

// `run --warmup auto`: warm-up replays go in blocks of kAutoWarmupBlock; after each block the last
// kAutoWarmupWindow spans are judged by span_drift with half its allowance (the ramp goes on after the
// warm-up stops, so the window must be flatter than what the analysis accepts). Warm-up ends at the
// first block whose window passes, and after kMaxAutoWarmup replays in any case (not steady: said so).
inline constexpr std::size_t kAutoWarmupBlock = 10;
inline constexpr std::size_t kAutoWarmupWindow = 40;
inline constexpr std::size_t kMaxAutoWarmup = 2000;
struct WarmupDecision {
  bool done = false;    // stop warming up
  bool steady = false;  // ... because the window passed (false: the cap was reached)
  SpanDrift window;     // the last window's drift, for the note
};
// `spans`: every warm-up replay's span so far, in order.
[[nodiscard]] WarmupDecision auto_warmup_decision(std::span<const double> spans);
// The note a run carries: how many warm-up replays and why they stopped.
[[nodiscard]] std::string auto_warmup_note(std::size_t replays, const WarmupDecision& d);

}  // namespace tpgraph
