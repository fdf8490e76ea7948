#include "core/numerics/nvfp4.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace tpgraph {
namespace {

constexpr std::array<float, 16> kE2M1Values = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

// The magnitude code is the number of rounding boundaries (midpoints of neighbouring magnitudes)
// that |q| has passed. On a midpoint, ties go to the even code (0, 1.0, 2.0, 4.0): `>` for a
// boundary above an even code, `>=` for one above an odd code. Past the last boundary every value
// is code 7 (6.0), which is the saturation. NaN passes no boundary: a zero with NaN's sign bit.
// Branch-free so the quantize loop vectorises.
inline std::uint8_t e2m1_code(float q) {
  const auto bits = std::bit_cast<std::uint32_t>(q);
  const float a = std::bit_cast<float>(bits & 0x7fffffffu);
  const int m = int{a > 0.25f} + int{a >= 0.75f} + int{a > 1.25f} + int{a >= 1.75f} + int{a > 2.5f} + int{a >= 3.5f} +
                int{a > 5.0f};
  return static_cast<std::uint8_t>(((bits >> 28) & 0x8u) | static_cast<std::uint32_t>(m));
}

// max |x| over floats as the integer max of their magnitude bits: the same order for every
// non-NaN float, and the compiler vectorises an integer max where a float max would need
// -ffast-math.
inline float abs_max(const float* x, std::size_t n) {
  std::uint32_t m = 0;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::bit_cast<std::uint32_t>(x[i]) & 0x7fffffffu);
  return std::bit_cast<float>(m);
}

constexpr float ue4m3_value(std::uint32_t code) {
  const std::uint32_t exponent = (code >> 3) & 0xfu;
  const std::uint32_t mantissa = code & 0x7u;
  // Both NaN codes (0x7f, 0xff) give the canonical NaN, as the GPU's conversion does.
  if (exponent == 0xf && mantissa == 0x7) return std::bit_cast<float>(0x7fffffffu);
  // Subnormal: mantissa * 2^-9; normal: the fp32 with the same exponent and mantissa.
  const float magnitude = exponent == 0 ? static_cast<float>(mantissa) / 512.0f
                                        : std::bit_cast<float>(((exponent + 120u) << 23) | (mantissa << 20));
  return (code & 0x80u) != 0 ? -magnitude : magnitude;
}

constexpr std::array<float, 256> kUE4M3Values = [] {
  std::array<float, 256> t{};
  for (std::uint32_t c = 0; c < 256; ++c) t[c] = ue4m3_value(c);
  return t;
}();

void check_row_sizes(std::size_t elems, std::size_t bytes, const char* what) {
  if (elems % kNvfp4ChunkElems != 0 || bytes != elems / kNvfp4ChunkElems * kNvfp4ChunkBytes) {
    throw std::invalid_argument(
        std::string(what) + ": a row of " + std::to_string(elems) + " elements (a multiple of 64) needs " +
        std::to_string(elems / kNvfp4ChunkElems * kNvfp4ChunkBytes) + " bytes, got " + std::to_string(bytes));
  }
}

}  // namespace

std::uint8_t e2m1_encode(float x) { return e2m1_code(x); }

float e2m1_decode(std::uint8_t code) { return kE2M1Values[code & 0xfu]; }

std::uint8_t ue4m3_encode(float x) {
  if (!(x > 0.0f)) return 0;        // negative, zero and NaN
  if (x >= kUE4M3Max) return 0x7e;  // saturate: 0x7f is NaN in E4M3
  if (x < 0x1p-6f) {
    // Subnormal codes are multiples of 2^-9; code 8 (rounding up to 2^-6) is also the first normal.
    const float q = x * 512.0f;  // exact: a power-of-two scale of a small number
    float whole = std::floor(q);
    const float frac = q - whole;  // exact: both are multiples of q's ulp
    if (frac > 0.5f || (frac == 0.5f && std::fmod(whole, 2.0f) != 0.0f)) whole += 1.0f;
    return static_cast<std::uint8_t>(whole);
  }
  const auto bits = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t exponent = (bits >> 23) - 127u + 7u;  // 1..15 here
  const std::uint32_t mantissa = bits & 0x7fffffu;
  std::uint32_t code = (exponent << 3) | (mantissa >> 20);
  const std::uint32_t rest = mantissa & 0xfffffu;
  // A carry into the exponent is correct; x < 448 keeps the result at most 0x7e.
  if (rest > 0x80000u || (rest == 0x80000u && (code & 1u) != 0)) ++code;
  return static_cast<std::uint8_t>(code);
}

float ue4m3_decode(std::uint8_t code) { return kUE4M3Values[code]; }

float nvfp4_tensor_scale(std::span<const float> values) {
  const float amax = abs_max(values.data(), values.size());  // as bits, inf and NaN sort above any finite
  if (!(amax <= std::numeric_limits<float>::max())) {
    throw std::invalid_argument("nvfp4_tensor_scale: the matrix holds inf or NaN");
  }
  return amax == 0.0f ? 1.0f : amax / (kE2M1Max * kUE4M3Max);
}

void nvfp4_quantize_row(std::span<const float> row, float tensor_scale, std::span<std::uint8_t> out) {
  check_row_sizes(row.size(), out.size(), "nvfp4_quantize_row");
  const std::size_t chunks = row.size() / kNvfp4ChunkElems;
  for (std::size_t c = 0; c < chunks; ++c) {
    const float* x = row.data() + c * kNvfp4ChunkElems;
    std::uint8_t* chunk = out.data() + c * kNvfp4ChunkBytes;
    std::array<std::uint8_t, kNvfp4ChunkElems> codes{};
    for (int b = 0; b < kNvfp4ChunkElems / kNvfp4BlockElems; ++b) {
      const float* block = x + b * kNvfp4BlockElems;
      const float amax = abs_max(block, kNvfp4BlockElems);
      const std::uint8_t scale_code = ue4m3_encode(amax / (kE2M1Max * tensor_scale));
      chunk[32 + b] = scale_code;
      // A block whose scale rounds to 0 decodes to zeros whatever its codes; store zeros.
      const float step = kUE4M3Values[scale_code] * tensor_scale;
      if (step == 0.0f) continue;
      for (int i = 0; i < kNvfp4BlockElems; ++i) codes[b * kNvfp4BlockElems + i] = e2m1_code(block[i] / step);
    }
    for (int i = 0; i < 32; ++i) chunk[i] = static_cast<std::uint8_t>(codes[2 * i] | (codes[2 * i + 1] << 4));
  }
}

void nvfp4_decode_row(std::span<const std::uint8_t> row_bytes, std::span<float> out) {
  check_row_sizes(out.size(), row_bytes.size(), "nvfp4_decode_row");
  const std::size_t chunks = out.size() / kNvfp4ChunkElems;
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::uint8_t* chunk = row_bytes.data() + c * kNvfp4ChunkBytes;
    float* y = out.data() + c * kNvfp4ChunkElems;
    for (int b = 0; b < 4; ++b) {
      const float scale = kUE4M3Values[chunk[32 + b]];
      for (int i = 0; i < 8; ++i) {
        const std::uint8_t byte = chunk[8 * b + i];
        // Exact: at most 2 significant bits times 4, in range.
        y[16 * b + 2 * i] = kE2M1Values[byte & 0xfu] * scale;
        y[16 * b + 2 * i + 1] = kE2M1Values[byte >> 4] * scale;
      }
    }
  }
}

Nvfp4Matrix nvfp4_quantize(std::span<const float> values, int rows, int cols) {
  if (rows < 0 || cols < 0 || cols % kNvfp4ChunkElems != 0 ||
      values.size() != static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols)) {
    throw std::invalid_argument("nvfp4_quantize: " + std::to_string(values.size()) + " values for a " +
                                std::to_string(rows) + " x " + std::to_string(cols) +
                                " matrix (cols a multiple of 64)");
  }
  Nvfp4Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.tensor_scale = nvfp4_tensor_scale(values);
  const std::size_t row_bytes = static_cast<std::size_t>(cols) / kNvfp4ChunkElems * kNvfp4ChunkBytes;
  m.bytes.resize(static_cast<std::size_t>(rows) * row_bytes);
  for (std::size_t r = 0; r < static_cast<std::size_t>(rows); ++r) {
    nvfp4_quantize_row(values.subspan(r * static_cast<std::size_t>(cols), static_cast<std::size_t>(cols)),
                       m.tensor_scale, std::span(m.bytes).subspan(r * row_bytes, row_bytes));
  }
  return m;
}

std::vector<float> nvfp4_dequantize(const Nvfp4Matrix& m) {
  const auto cols = static_cast<std::size_t>(m.cols);
  const std::size_t row_bytes = cols / kNvfp4ChunkElems * kNvfp4ChunkBytes;
  if (m.rows < 0 || m.bytes.size() != static_cast<std::size_t>(m.rows) * row_bytes) {
    throw std::invalid_argument("nvfp4_dequantize: " + std::to_string(m.bytes.size()) + " bytes for a " +
                                std::to_string(m.rows) + " x " + std::to_string(m.cols) + " matrix");
  }
  std::vector<float> out(static_cast<std::size_t>(m.rows) * cols);
  for (std::size_t r = 0; r < static_cast<std::size_t>(m.rows); ++r) {
    const std::span<float> row(out.data() + r * cols, cols);
    nvfp4_decode_row(std::span(m.bytes).subspan(r * row_bytes, row_bytes), row);
    for (float& v : row) v *= m.tensor_scale;
  }
  return out;
}

}  // namespace tpgraph
