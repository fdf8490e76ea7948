#include "catch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <vector>

#include "core/numerics/half.hpp"
#include "core/numerics/nvfp4.hpp"
#include "core/numerics/reference.hpp"

using namespace tpgraph;

namespace {
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
}  // namespace

TEST_CASE("every E2M1 code round-trips and decodes to its magnitude", "[nvfp4]") {
  const float magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  for (std::uint8_t code = 0; code < 16; ++code) {
    const float v = e2m1_decode(code);
    CHECK(std::fabs(v) == magnitudes[code & 7]);
    CHECK(std::signbit(v) == (code >= 8));
    CHECK(e2m1_encode(v) == code);
  }
  CHECK(e2m1_decode(0xf5) == e2m1_decode(0x05));  // only the low nibble counts
}

TEST_CASE("every finite UE4M3 code round-trips, in increasing order", "[nvfp4]") {
  float previous = -1.0f;
  for (std::uint8_t code = 0; code <= 0x7e; ++code) {
    const float v = ue4m3_decode(code);
    REQUIRE(v > previous);
    previous = v;
    REQUIRE(ue4m3_encode(v) == code);
  }
  CHECK(ue4m3_decode(0x00) == 0.0f);
  CHECK(ue4m3_decode(0x01) == 0x1p-9f);  // smallest subnormal
  CHECK(ue4m3_decode(0x07) == 7 * 0x1p-9f);
  CHECK(ue4m3_decode(0x08) == 0x1p-6f);  // smallest normal
  CHECK(ue4m3_decode(0x38) == 1.0f);
  CHECK(ue4m3_decode(0x7e) == 448.0f);
  CHECK(std::isnan(ue4m3_decode(0x7f)));
  CHECK(std::isnan(ue4m3_decode(0xff)));
  CHECK(ue4m3_decode(0xb8) == -1.0f);  // bit 7 is a sign to the GPU's conversion
}

TEST_CASE("E2M1 encode rounds ties to the even code and saturates", "[nvfp4]") {
  struct Case {
    float x;
    std::uint8_t code;
  };
  const Case cases[] = {
      {0.25f, 0x0},
      {std::nextafter(0.25f, 1.0f), 0x1},
      {0.75f, 0x2},
      {std::nextafter(0.75f, 0.0f), 0x1},
      {1.25f, 0x2},
      {1.75f, 0x4},
      {2.5f, 0x4},
      {std::nextafter(2.5f, 3.0f), 0x5},
      {3.5f, 0x6},
      {5.0f, 0x6},
      {std::nextafter(5.0f, 6.0f), 0x7},
      {6.0f, 0x7},
      {6.5f, 0x7},
      {1e30f, 0x7},
      {kInf, 0x7},
      {-0.25f, 0x8},
      {-0.0f, 0x8},
      {-5.0f, 0xe},
      {-7.0f, 0xf},
      {-kInf, 0xf},
  };
  for (const auto& c : cases) {
    INFO("x = " << c.x);
    CHECK(static_cast<int>(e2m1_encode(c.x)) == static_cast<int>(c.code));
  }
  CHECK(e2m1_decode(e2m1_encode(kNaN)) == 0.0f);
}

TEST_CASE("UE4M3 encode rounds ties to even, saturates at 448 and clamps negatives to 0", "[nvfp4]") {
  struct Case {
    float x;
    std::uint8_t code;
  };
  const Case cases[] = {
      {1.0625f, 0x38},  // between 1 (0x38) and 1.125: even
      {1.1875f, 0x3a},  // between 1.125 and 1.25: even
      {std::nextafter(1.0625f, 2.0f), 0x39},
      {0.5f * 0x1p-9f, 0x00},
      {std::nextafter(0.5f * 0x1p-9f, 1.0f), 0x01},
      {1.5f * 0x1p-9f, 0x02},
      {2.5f * 0x1p-9f, 0x02},
      {7.5f * 0x1p-9f, 0x08},  // into the first normal
      {448.0f, 0x7e},
      {464.0f, 0x7e},
      {1e9f, 0x7e},
      {kInf, 0x7e},
      {0.0f, 0x00},
      {-1.0f, 0x00},
      {-kInf, 0x00},
      {kNaN, 0x00},
  };
  for (const auto& c : cases) {
    INFO("x = " << c.x);
    CHECK(static_cast<int>(ue4m3_encode(c.x)) == static_cast<int>(c.code));
  }
}

TEST_CASE("every E2M1 x UE4M3 product is exact in binary16", "[nvfp4]") {
  for (std::uint8_t e = 0; e < 16; ++e) {
    for (std::uint8_t s = 0; s <= 0x7e; ++s) {
      const float v = e2m1_decode(e) * ue4m3_decode(s);
      REQUIRE(half_to_float(float_to_half(v)) == v);
    }
  }
}

TEST_CASE("layout v1: element 2i in the low nibble of byte i, the four scales after 32 bytes", "[nvfp4]") {
  // One chunk whose every block has amax 6 * tensor_scale, so each block scale is exactly 1.0 and
  // each value is its own E2M1 code.
  std::vector<float> row(64);
  for (int i = 0; i < 64; ++i) row[i] = e2m1_decode(static_cast<std::uint8_t>(i % 16));
  for (int b = 0; b < 4; ++b) row[16 * b + 7] = 6.0f;  // code 7
  std::vector<std::uint8_t> bytes(36);
  nvfp4_quantize_row(row, 1.0f, bytes);
  for (int i = 0; i < 32; ++i) {
    INFO("byte " << i);
    CHECK(static_cast<int>(bytes[i] & 0xf) == static_cast<int>(e2m1_encode(row[2 * i])));
    CHECK(static_cast<int>(bytes[i] >> 4) == static_cast<int>(e2m1_encode(row[2 * i + 1])));
  }
  for (int b = 0; b < 4; ++b) CHECK(static_cast<int>(bytes[32 + b]) == 0x38);
  std::vector<float> decoded(64);
  nvfp4_decode_row(bytes, decoded);
  for (int i = 0; i < 64; ++i) CHECK(decoded[i] == row[i]);
}

TEST_CASE("zeros quantize to zero bytes and decode to exact zeros", "[nvfp4]") {
  SECTION("an all-zero matrix") {
    const std::vector<float> zeros(4 * 128, 0.0f);
    const Nvfp4Matrix m = nvfp4_quantize(zeros, 4, 128);
    CHECK(m.tensor_scale == 1.0f);
    CHECK(std::all_of(m.bytes.begin(), m.bytes.end(), [](std::uint8_t b) { return b == 0; }));
    const auto back = nvfp4_dequantize(m);
    CHECK(std::all_of(back.begin(), back.end(), [](float v) { return v == 0.0f; }));
  }
  SECTION("zero elements and a zero block inside random data") {
    std::vector<float> row(128);
    fill_normal(random_stream_key(7, 9, 0, 0), 0, 1.0f, row);
    for (int i = 16; i < 32; ++i) row[i] = 0.0f;  // a whole block
    row[3] = 0.0f;
    row[100] = 0.0f;
    const Nvfp4Matrix m = nvfp4_quantize(row, 1, 128);
    CHECK(m.bytes[33] == 0);  // the zero block's scale
    const auto back = nvfp4_dequantize(m);
    for (int i = 16; i < 32; ++i) CHECK(back[i] == 0.0f);
    CHECK(back[3] == 0.0f);
    CHECK(back[100] == 0.0f);
  }
}

TEST_CASE("a block of E2M1 multiples of its scale quantizes exactly", "[nvfp4]") {
  const float tensor_scale = 0x1p-10f;
  const float step = 20.0f * tensor_scale;  // 20 is UE4M3 0x5a
  std::vector<float> values(2 * 64);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = e2m1_decode(static_cast<std::uint8_t>(i * 7 % 16)) * step;
  // Every block must reach 6 * step, and the matrix amax must give the tensor scale above.
  for (std::size_t b = 0; b < values.size() / 16; ++b) values[16 * b + 5] = -6.0f * step;
  values[0] = 6.0f * kUE4M3Max * tensor_scale;
  values[1] = 0.0f;
  // values[0]'s block has amax 2688 * ts: scale 448, and the others in it must be multiples of that.
  for (int i = 2; i < 16; ++i) values[i] = (i % 2 == 0 ? 3.0f : -0.5f) * kUE4M3Max * tensor_scale;
  const Nvfp4Matrix m = nvfp4_quantize(values, 2, 64);
  CHECK(m.tensor_scale == tensor_scale);
  CHECK(nvfp4_dequantize(m) == values);
}

TEST_CASE("quantize/dequantize error stays within amax_block * 17/96 on random data", "[nvfp4]") {
  // Bound (nvfp4.hpp): the UE4M3 scale is within 2^-4 of amax/6, so the step is at most
  // amax/6 * 17/16, and no value lies more than one step from its code.
  const int rows = 64;
  const int cols = 512;
  std::vector<float> values(static_cast<std::size_t>(rows) * cols);
  fill_normal(random_stream_key(11, 9, 1, 0), 0, 1.0f, values);
  // Blocks with very different magnitudes, so the scales cover much of UE4M3's normal range.
  for (std::size_t i = 0; i < values.size(); ++i) values[i] *= std::ldexp(1.0f, static_cast<int>(i / 16 % 9) - 4);
  const Nvfp4Matrix m = nvfp4_quantize(values, rows, cols);
  const auto back = nvfp4_dequantize(m);
  double worst_ratio = 0;  // max error / block amax
  double sum_sq_err = 0;
  double sum_sq = 0;
  int checked_blocks = 0;
  for (std::size_t b = 0; b < values.size() / 16; ++b) {
    float amax = 0;
    for (std::size_t i = 16 * b; i < 16 * b + 16; ++i) amax = std::max(amax, std::fabs(values[i]));
    const std::size_t scale_byte = (b / 4) * 36 + 32 + b % 4;
    if (m.bytes[scale_byte] < 0x08) continue;  // subnormal scale: coarser, not covered by the bound
    ++checked_blocks;
    for (std::size_t i = 16 * b; i < 16 * b + 16; ++i) {
      const double err = std::fabs(static_cast<double>(values[i]) - back[i]);
      worst_ratio = std::max(worst_ratio, err / amax);
      sum_sq_err += err * err;
      sum_sq += static_cast<double>(values[i]) * values[i];
    }
  }
  INFO("worst error / block amax = " << worst_ratio << ", rms error / rms = " << std::sqrt(sum_sq_err / sum_sq));
  CHECK(checked_blocks > static_cast<int>(values.size() / 16) * 9 / 10);
  CHECK(worst_ratio <= 17.0 / 96.0 * (1 + 1e-6));
  CHECK(std::sqrt(sum_sq_err / sum_sq) < 0.12);  // about 0.09 for normal data
}

TEST_CASE("codec rejects sizes that do not match the v1 layout", "[nvfp4]") {
  std::vector<float> row(100);
  std::vector<std::uint8_t> bytes(36);
  CHECK_THROWS_AS(nvfp4_quantize_row(row, 1.0f, bytes), std::invalid_argument);
  std::vector<float> ok(64);
  std::vector<std::uint8_t> short_bytes(35);
  CHECK_THROWS_AS(nvfp4_decode_row(short_bytes, ok), std::invalid_argument);
  CHECK_THROWS_AS(nvfp4_quantize(ok, 2, 64), std::invalid_argument);
  const std::vector<float> bad = {kNaN, 1.0f};
  CHECK_THROWS_AS(nvfp4_tensor_scale(bad), std::invalid_argument);
}
