#include "catch.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/numerics/half.hpp"

using namespace tpgraph;

namespace {
bool is_half_nan(std::uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
float from_bits(std::uint32_t b) { return std::bit_cast<float>(b); }
}  // namespace

TEST_CASE("every binary16 code survives the trip through float", "[half]") {
  int nan_codes = 0;
  for (std::uint32_t code = 0; code < 65536; ++code) {
    const auto h = static_cast<std::uint16_t>(code);
    const float f = half_to_float(h);
    if (is_half_nan(h)) {
      ++nan_codes;
      REQUIRE(std::isnan(f));
      REQUIRE(float_to_half(f) == 0x7fff);  // the canonical NaN, as cvt.rn.f16.f32 gives
    } else {
      REQUIRE(float_to_half(f) == h);
      REQUIRE(std::signbit(f) == ((h & 0x8000u) != 0));
    }
  }
  CHECK(nan_codes == 2 * 1023);
}

TEST_CASE("half_to_float gives the exact value of each kind of code", "[half]") {
  CHECK(half_to_float(0x0000) == 0.0f);
  CHECK(std::signbit(half_to_float(0x8000)));
  CHECK(half_to_float(0x0001) == 0x1p-24f);            // smallest subnormal
  CHECK(half_to_float(0x03ff) == 1023.0f * 0x1p-24f);  // largest subnormal
  CHECK(half_to_float(0x0400) == 0x1p-14f);            // smallest normal
  CHECK(half_to_float(0x3c00) == 1.0f);
  CHECK(half_to_float(0x3c01) == 1.0f + 0x1p-10f);
  CHECK(half_to_float(0xc000) == -2.0f);
  CHECK(half_to_float(0x7bff) == 65504.0f);
  CHECK(half_to_float(0x7c00) == std::numeric_limits<float>::infinity());
  CHECK(half_to_float(0xfc00) == -std::numeric_limits<float>::infinity());
  CHECK(std::bit_cast<std::uint32_t>(half_to_float(0xfe01)) == 0x7fffffffu);
}

TEST_CASE("float_to_half rounds ties to even, saturates to inf, and flushes below half a subnormal", "[half]") {
  SECTION("normal ties") {
    CHECK(float_to_half(1.0f + 0x1p-11f) == 0x3c00);  // between 0x3c00 and 0x3c01: even
    CHECK(float_to_half(1.0f + 3 * 0x1p-11f) == 0x3c02);
    CHECK(float_to_half(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);  // just past the tie
    CHECK(float_to_half(-(1.0f + 0x1p-11f)) == 0xbc00);
  }
  SECTION("overflow") {
    CHECK(float_to_half(65504.0f) == 0x7bff);
    CHECK(float_to_half(std::nextafter(65520.0f, 0.0f)) == 0x7bff);
    CHECK(float_to_half(65520.0f) == 0x7c00);  // the tie between 65504 (odd) and 65536: inf
    CHECK(float_to_half(1e10f) == 0x7c00);
    CHECK(float_to_half(-1e10f) == 0xfc00);
    CHECK(float_to_half(std::numeric_limits<float>::infinity()) == 0x7c00);
    CHECK(float_to_half(-std::numeric_limits<float>::infinity()) == 0xfc00);
  }
  SECTION("subnormals and zero") {
    CHECK(float_to_half(0.0f) == 0x0000);
    CHECK(float_to_half(-0.0f) == 0x8000);
    CHECK(float_to_half(0x1p-25f) == 0x0000);  // half of the smallest subnormal: even is 0
    CHECK(float_to_half(std::nextafter(0x1p-25f, 1.0f)) == 0x0001);
    CHECK(float_to_half(-std::nextafter(0x1p-25f, 1.0f)) == 0x8001);
    CHECK(float_to_half(3 * 0x1p-25f) == 0x0002);        // 1.5 units: even is 2
    CHECK(float_to_half(5 * 0x1p-25f) == 0x0002);        // 2.5 units: even is 2
    CHECK(float_to_half(1023.5f * 0x1p-24f) == 0x0400);  // rounds up into the first normal
    CHECK(float_to_half(1e-30f) == 0x0000);
    CHECK(float_to_half(from_bits(0x00000001u)) == 0x0000);  // float subnormal
  }
  SECTION("NaN") {
    CHECK(float_to_half(std::numeric_limits<float>::quiet_NaN()) == 0x7fff);
    CHECK(float_to_half(from_bits(0xff800001u)) == 0x7fff);  // negative signalling NaN
  }
}

// A property check independent of the implementation: the result is a nearest binary16, and on a
// tie the even one.
TEST_CASE("float_to_half picks the nearest binary16 across the whole range", "[half]") {
  std::uint32_t state = 12345;
  for (int i = 0; i < 200000; ++i) {
    state = state * 1664525u + 1013904223u;
    // Exponents 2^-26 .. 2^16 and random mantissas, both signs.
    const std::uint32_t exponent = 101u + (state >> 8) % 43u;
    const std::uint32_t bits = ((state & 1u) << 31) | (exponent << 23) | ((state * 2654435761u) & 0x7fffffu);
    const float f = from_bits(bits);
    const std::uint16_t h = float_to_half(f);
    const double x = f;
    const double got = half_to_float(h);
    if (std::isinf(got)) {
      REQUIRE(std::fabs(x) >= 65520.0);
      continue;
    }
    const double err = std::fabs(got - x);
    for (const int d : {-1, 1}) {
      const auto neighbour = static_cast<std::uint16_t>(h + d);
      if ((h & 0x7fffu) == 0 && d == -1) continue;
      if (is_half_nan(neighbour) || (neighbour & 0x7fffu) == 0x7c00u) continue;
      const double other = std::fabs(static_cast<double>(half_to_float(neighbour)) - x);
      REQUIRE(err <= other);
      if (err == other) REQUIRE((h & 1u) == 0);
    }
  }
}
