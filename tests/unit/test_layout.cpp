// Layout v2 is a permutation of v1's bytes, and the GPU's way of reading it (lane fragments and the
// shift/LOP3 decode of kernels/nvfp4_decode.cuh, emulated here bit for bit) gives back exactly the
// matrix the codec decodes from v1.
#include "catch.hpp"

#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/numerics/half.hpp"
#include "core/numerics/nvfp4.hpp"
#include "core/numerics/nvfp4_layout.hpp"

using namespace tpgraph;

namespace {

std::int64_t matrix_bytes(int rows, int cols) { return std::int64_t{rows} * (cols / 64) * 36; }

// Every byte value, except that a scale never holds UE4M3's NaN (0x7f) or a set top bit: the
// encoder never writes them. Subnormal scales (codes 1..7) and every E2M1 code occur.
std::vector<std::uint8_t> random_v1(int rows, int cols, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::uint8_t> bytes(static_cast<std::size_t>(matrix_bytes(rows, cols)));
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    auto b = static_cast<std::uint8_t>(rng() & 0xffu);
    if (i % 36 >= 32) b = static_cast<std::uint8_t>(b & 0x7fu) == 0x7f ? 0x7e : static_cast<std::uint8_t>(b & 0x7fu);
    bytes[i] = b;
  }
  return bytes;
}

std::vector<float> decode_v1(const std::vector<std::uint8_t>& v1, int rows, int cols) {
  std::vector<float> out(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols));
  const auto row_bytes = static_cast<std::size_t>(cols / 64 * 36);
  for (int r = 0; r < rows; ++r) {
    nvfp4_decode_row(std::span(v1).subspan(static_cast<std::size_t>(r) * row_bytes, row_bytes),
                     std::span(out).subspan(static_cast<std::size_t>(r) * static_cast<std::size_t>(cols),
                                            static_cast<std::size_t>(cols)));
  }
  return out;
}

std::uint32_t load_u32(const std::uint8_t* p) {
  std::uint32_t w = 0;
  std::memcpy(&w, p, 4);
  return w;
}

std::uint32_t rotr(std::uint32_t q, int s) { return (q >> s) | (q << (32 - s)); }

// The v2 decode of decode_a_fragment (kernels/nvfp4_decode.cuh): half2 0..3 of a packed word.
void unpack_half2s(std::uint32_t q, std::uint32_t a[4]) {
  a[0] = q & 0x8e008e00u;
  a[1] = rotr(q, 3) & 0x8e008e00u;
  a[2] = ((q << 15) & 0x80008000u) | ((q << 6) & 0x0e000e00u);
  a[3] = ((q << 14) & 0x80008000u) | ((q << 3) & 0x0e000e00u);
}

// The v1 decode (byte-ordered word, the v1 path of the kernel): the same four half2.
std::uint32_t e2m1_pair_scaled(std::uint32_t q) { return (q & 0x80008000u) | ((q >> 3) & 0x0e000e00u); }

std::vector<std::uint8_t> unpack_value_words(std::vector<std::uint8_t> v2) {
  for (std::size_t u = 0; u < v2.size(); u += 576) {
    for (std::size_t i = 0; i < 512; i += 4) {
      const std::uint32_t w = nvfp4_v2_unpack_word(load_u32(&v2[u + i]));
      std::memcpy(&v2[u + i], &w, 4);
    }
  }
  return v2;
}

// fp16 multiply that must be exact: the product of two halves, checked to fit a half.
float exact_half_product(float a, float b) {
  const float p = a * b;
  REQUIRE(half_to_float(float_to_half(p)) == p);
  return p;
}

// The grouped GEMM's reading of v2, on the host: for each unit, lane and k16 block, the 32-bit word
// and scale pair the kernel loads, decoded as decode_a_fragment does, placed at (row, logical k).
std::vector<float> decode_v2_like_the_kernel(const std::vector<std::uint8_t>& v2, int rows, int cols) {
  std::vector<float> out(static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols), -999.0f);
  const int chunks = cols / 64;
  for (int tile = 0; tile < rows / 16; ++tile) {
    for (int chunk = 0; chunk < chunks; ++chunk) {
      const std::uint8_t* unit = v2.data() + (static_cast<std::size_t>(tile) * chunks + chunk) * 576;
      for (int lane = 0; lane < 32; ++lane) {
        const int g = lane / 4;
        const int t = lane % 4;
        const std::uint32_t scales_g = load_u32(unit + 512 + 8 * g);
        const std::uint32_t scales_g8 = load_u32(unit + 512 + 8 * g + 4);
        for (int kk = 0; kk < 4; ++kk) {
          const std::uint32_t w = load_u32(unit + 16 * lane + 4 * kk);
          const auto scale_of = [&](std::uint32_t codes) {
            const auto code = static_cast<std::uint16_t>((codes >> (8 * kk)) & 0xffu);
            return exact_half_product(half_to_float(static_cast<std::uint16_t>(code << 7)), 256.0f);
          };
          const float sg = scale_of(scales_g);
          const float sg8 = scale_of(scales_g8);
          std::uint32_t a[4];
          unpack_half2s(w, a);
          const float scale[4] = {sg, sg8, sg, sg8};
          const int row_of[4] = {g, g + 8, g, g + 8};
          // Physical k (2t, 2t+1) holds logical (2t, 2t+8); physical (2t+8, 2t+9) logical (2t+1, 2t+9).
          const int k_lo[4] = {2 * t, 2 * t, 2 * t + 1, 2 * t + 1};
          for (int i = 0; i < 4; ++i) {
            for (int h = 0; h < 2; ++h) {
              const auto bits = static_cast<std::uint16_t>(h == 0 ? a[i] & 0xffffu : a[i] >> 16);
              const float value = exact_half_product(half_to_float(bits), scale[i]) * 16384.0f;
              const int row = tile * 16 + row_of[i];
              const int col = chunk * 64 + kk * 16 + k_lo[i] + 8 * h;
              out[static_cast<std::size_t>(row) * static_cast<std::size_t>(cols) + static_cast<std::size_t>(col)] =
                  value;
            }
          }
        }
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("layout v1 -> v2 -> v1 is the identity", "[layout]") {
  for (const auto& [rows, cols] : {std::pair{16, 64}, std::pair{64, 640}, std::pair{640, 256}, std::pair{48, 4096}}) {
    DYNAMIC_SECTION(rows << " x " << cols) {
      const auto v1 = random_v1(rows, cols, static_cast<std::uint32_t>(rows * 7919 + cols));
      const auto v2 = nvfp4_to_v2(v1, rows, cols);
      REQUIRE(v2.size() == v1.size());
      CHECK(v2 != v1);
      CHECK(nvfp4_to_v1(v2, rows, cols) == v1);
    }
  }
}

TEST_CASE("layout v2 offset is a permutation that matches nvfp4_to_v2", "[layout]") {
  const int rows = 32;
  const int cols = 192;
  const auto size = matrix_bytes(rows, cols);
  std::vector<int> hits(static_cast<std::size_t>(size), 0);
  for (std::int64_t i = 0; i < size; ++i) {
    const std::int64_t j = nvfp4_v2_offset(i, rows, cols);
    REQUIRE(j >= 0);
    REQUIRE(j < size);
    ++hits[static_cast<std::size_t>(j)];
  }
  for (const int h : hits) REQUIRE(h == 1);

  const auto v1 = random_v1(rows, cols, 5);
  const auto v2 = unpack_value_words(nvfp4_to_v2(v1, rows, cols));
  for (std::int64_t i = 0; i < size; ++i) {
    REQUIRE(v2[static_cast<std::size_t>(nvfp4_v2_offset(i, rows, cols))] == v1[static_cast<std::size_t>(i)]);
  }
}

TEST_CASE("layout v2's word packing is a bit permutation the v2 decode reads like the v1 decode", "[layout]") {
  std::mt19937 rng(17);
  for (int i = 0; i < 200000; ++i) {
    const std::uint32_t w = i < 32 ? (1u << i) : static_cast<std::uint32_t>(rng());
    const std::uint32_t q = nvfp4_v2_pack_word(w);
    REQUIRE(std::popcount(q) == std::popcount(w));
    REQUIRE(nvfp4_v2_unpack_word(q) == w);
    std::uint32_t a[4];
    unpack_half2s(q, a);
    REQUIRE(a[0] == e2m1_pair_scaled(w << 12));
    REQUIRE(a[1] == e2m1_pair_scaled(w << 4));
    REQUIRE(a[2] == e2m1_pair_scaled(w << 8));
    REQUIRE(a[3] == e2m1_pair_scaled(w));
  }
}

TEST_CASE("layout v2 keeps every 576-byte unit whole and 16-byte aligned", "[layout]") {
  // Each (16-row tile, chunk) unit of v2 holds exactly the bytes of that tile's chunk in v1.
  const int rows = 32;
  const int cols = 128;
  const int chunks = cols / 64;
  for (std::int64_t i = 0; i < matrix_bytes(rows, cols); ++i) {
    const std::int64_t row = i / (chunks * 36);
    const std::int64_t chunk = (i % (chunks * 36)) / 36;
    const std::int64_t unit = nvfp4_v2_offset(i, rows, cols) / 576;
    REQUIRE(unit == (row / 16) * chunks + chunk);
  }
  CHECK(576 % 16 == 0);
  CHECK(nvfp4_v2_row_tile() == 16);
}

TEST_CASE("the kernel's reading of v2 decodes to the codec's matrix, bit for bit", "[layout]") {
  SECTION("arbitrary bytes: every E2M1 code, subnormal and normal scales") {
    const int rows = 48;
    const int cols = 256;
    const auto v1 = random_v1(rows, cols, 11);
    const auto expected = decode_v1(v1, rows, cols);
    const auto got = decode_v2_like_the_kernel(nvfp4_to_v2(v1, rows, cols), rows, cols);
    REQUIRE(got.size() == expected.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("element " << i);
      REQUIRE(std::memcmp(&got[i], &expected[i], sizeof(float)) == 0);
    }
  }
  SECTION("a quantized random matrix") {
    const int rows = 32;
    const int cols = 640;
    std::mt19937 rng(3);
    std::normal_distribution<float> normal(0.0f, 0.05f);
    std::vector<float> values(static_cast<std::size_t>(rows) * cols);
    for (auto& v : values) v = normal(rng);
    const Nvfp4Matrix m = nvfp4_quantize(values, rows, cols);
    const auto expected = decode_v1(m.bytes, rows, cols);
    const auto got = decode_v2_like_the_kernel(nvfp4_to_v2(m.bytes, rows, cols), rows, cols);
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("element " << i);
      REQUIRE(got[i] == expected[i]);
    }
  }
}

TEST_CASE("layout conversion rejects shapes the kernel cannot tile", "[layout]") {
  const std::vector<std::uint8_t> bytes(static_cast<std::size_t>(matrix_bytes(8, 64)));
  CHECK_THROWS_AS(nvfp4_to_v2(bytes, 8, 64), std::invalid_argument);  // rows not a multiple of 16
  const std::vector<std::uint8_t> short_bytes(100);
  CHECK_THROWS_AS(nvfp4_to_v2(short_bytes, 16, 64), std::invalid_argument);
  CHECK_THROWS_AS(nvfp4_v2_offset(-1, 16, 64), std::invalid_argument);
  CHECK_THROWS_AS(nvfp4_v2_offset(576, 16, 64), std::invalid_argument);
  CHECK(to_string(Layout::v1) == "v1");
  CHECK(to_string(Layout::v2) == "v2");
}
