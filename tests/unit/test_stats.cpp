#include "catch.hpp"

#include <limits>
#include <vector>

#include "core/analysis/timeline.hpp"
#include "core/base/stats.hpp"

using namespace tpgraph;

TEST_CASE("the median of an odd count is the middle value, in any input order", "[stats]") {
  CHECK(stats::median({7.0, 1.0, 3.0}) == 3.0);
  CHECK(stats::median({5.0}) == 5.0);
  CHECK(stats::median({2.0, 9.0, 4.0, 1.0, 100.0}) == 4.0);
}

TEST_CASE("the median of an even count is the mean of the middle pair, not either of them", "[stats]") {
  // The upper middle value (v[n/2] after sorting) would give 4 and the lower 3.
  CHECK(stats::median({4.0, 1.0, 3.0, 10.0}) == 3.5);
  CHECK(stats::median({2.0, 1.0}) == 1.5);
  // 50 timed replays, the count bench uses: values 1..50 have median 25.5.
  std::vector<double> fifty;
  for (int i = 50; i >= 1; --i) fifty.push_back(i);
  CHECK(stats::median(fifty) == 25.5);
}

TEST_CASE("an empty series has median, extremes and MAD 0", "[stats]") {
  CHECK(stats::median({}) == 0.0);
  CHECK(stats::percentile({}, 0.9) == 0.0);
  CHECK(stats::min({}) == 0.0);
  CHECK(stats::max({}) == 0.0);
  CHECK(stats::mad({}) == 0.0);
}

TEST_CASE("percentiles interpolate linearly between ranks", "[stats]") {
  const std::vector<double> v{10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
  CHECK(stats::percentile(v, 0.0) == 1.0);
  CHECK(stats::percentile(v, 1.0) == 10.0);
  CHECK(stats::percentile(v, 0.9) == Approx(9.1));    // position 8.1 of 0..9
  CHECK(stats::percentile(v, 0.25) == Approx(3.25));  // position 2.25
  CHECK(stats::percentile(v, 0.5) == stats::median(v));
  // Out-of-range quantiles are held to the ends rather than read past them.
  CHECK(stats::percentile(v, 1.5) == 10.0);
  CHECK(stats::percentile(v, -1.0) == 1.0);
}

TEST_CASE("min and max are the extremes", "[stats]") {
  const std::vector<double> v{3.5, -2.0, 8.25, 0.0};
  CHECK(stats::min(v) == -2.0);
  CHECK(stats::max(v) == 8.25);
}

TEST_CASE("MAD is the median distance from the median, and ignores one wild value", "[stats]") {
  // Median 3; distances 2, 1, 0, 1, 97: their median is 1.
  CHECK(stats::mad(std::vector<double>{1, 2, 3, 4, 100}) == 1.0);
  // Even count: median 2.5, distances 1.5, 0.5, 0.5, 1.5 -> 1.
  CHECK(stats::mad(std::vector<double>{1, 2, 3, 4}) == 1.0);
  CHECK(stats::mad(std::vector<double>{7, 7, 7}) == 0.0);
}

TEST_CASE("the timeline's summaries use the same median and percentiles", "[stats][timeline]") {
  const std::vector<double> v{12.0, 3.0, 40.0, 7.0, 5.0, 9.0};
  const Stats s = summarize(v);
  CHECK(s.median == stats::median(v));
  CHECK(s.median == 8.0);
  CHECK(s.p90 == stats::percentile(v, 0.9));
  CHECK(s.min == stats::min(v));
  CHECK(s.max == stats::max(v));
}

TEST_CASE("an output guard counts nonzero and NaN values and tells a vacuous output", "[stats]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> values{0.0f, -3.5f, nan, 2.0f, 0.0f};
  const stats::OutputGuard g = stats::guard_of(values);
  CHECK(g.count == 5);
  CHECK(g.nonzero == 2);
  CHECK(g.nan_count == 1);
  CHECK(g.absmax == 3.5);
  CHECK_FALSE(g.vacuous());
  CHECK(stats::describe(g) == "nonzero 2/5, absmax 3.5, NaN 1");

  const std::vector<float> zeros(8, 0.0f);
  CHECK(stats::guard_of(zeros).vacuous());
  // All NaN is vacuous too: nothing was computed.
  CHECK(stats::guard_of(std::vector<float>{nan, nan}).vacuous());
}
