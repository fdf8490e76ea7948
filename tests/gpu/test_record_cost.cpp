// The calibration `tpgraph trace` makes after the program exits: CUPTI's record cost per kernel
// node on this GPU, from a chain of short kernels replayed with the records off and on.
#include <chrono>
#include <cmath>

#include "catch.hpp"
#include "cuda/record_cost.hpp"
#include "cupti/collector.hpp"

using tpgraph::CostCalibration;
using tpgraph::cupti::Collector;
namespace cuda = tpgraph::cuda;

TEST_CASE("the record cost calibration gives a cost per node between 0 and 5 µs, in well under a second",
          "[gpu][cupti][cost]") {
  Collector records(Collector::Coverage::trace_records);
  const auto start = std::chrono::steady_clock::now();
  const CostCalibration c = cuda::calibrate_record_cost(0, [&](bool on) { records.set_tracing(on); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("off " << c.off_us << " µs, on " << c.on_us << " µs, " << c.per_node_us << " µs per node, " << seconds
              << " s on " << c.gpu);
  REQUIRE(c.measured);
  CHECK(std::isfinite(c.per_node_us));
  CHECK(c.per_node_us >= 0);
  CHECK(c.per_node_us < 5);
  // 32 kernels of 1.5 µs spin at least 48 µs; launch and sync add microseconds, not milliseconds.
  CHECK(c.off_us >= c.nodes * c.kernel_us);
  CHECK(c.off_us < 2000);
  CHECK(c.nodes == tpgraph::kCalibrationNodes);
  CHECK(c.replays > 100);
  CHECK_FALSE(c.gpu.empty());
  CHECK(seconds < 1.0);
}

TEST_CASE("a UUID no GPU has names no device", "[gpu][cost]") {
  CHECK(cuda::device_with_uuid("GPU-00000000-0000-0000-0000-000000000000") == -1);
  CHECK(cuda::device_with_uuid("") == -1);
}
