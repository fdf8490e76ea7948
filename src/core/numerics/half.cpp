#include "core/numerics/half.hpp"

#include <bit>

namespace tpgraph {

// Same case split and rounding as cuda_fp16.hpp's host path, so the host and the GPU's
// cvt.rn.f16.f32 agree on every float, NaN included (every NaN becomes 0x7fff).
std::uint16_t float_to_half(float x) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t mag = bits & 0x7fffffffu;
  if (mag >= 0x7f800000u) return static_cast<std::uint16_t>(mag == 0x7f800000u ? sign | 0x7c00u : 0x7fffu);
  // 65520 is the tie between 65504 (odd mantissa) and 65536: ties to even means inf.
  if (mag >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);
  std::uint32_t result = 0;
  std::uint32_t rest = 0;  // the dropped bits
  std::uint32_t half_ulp = 0;
  if (mag >= 0x38800000u) {  // normal in binary16: >= 2^-14
    result = (mag - 0x38000000u) >> 13;
    rest = mag & 0x1fffu;
    half_ulp = 0x1000u;
  } else if (mag <= 0x33000000u) {  // <= 2^-25, half the smallest subnormal: ties to even 0
    return static_cast<std::uint16_t>(sign);
  } else {  // subnormal: value = significand * 2^(exponent - 150), unit 2^-24
    const std::uint32_t exponent = mag >> 23;
    const std::uint32_t significand = (mag & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - exponent;  // 14..24
    result = significand >> shift;
    rest = significand & ((1u << shift) - 1u);
    half_ulp = 1u << (shift - 1u);
  }
  // A carry out of the mantissa bumps the exponent, which is the correctly rounded result.
  if (rest > half_ulp || (rest == half_ulp && (result & 1u) != 0)) ++result;
  return static_cast<std::uint16_t>(sign | result);
}

// NaN keeps no sign or payload (0x7fffffff), as in cuda_fp16.hpp's host path.
float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (std::uint32_t{h} & 0x8000u) << 16;
  const std::uint32_t exponent = (std::uint32_t{h} >> 10) & 0x1fu;
  const std::uint32_t mantissa = std::uint32_t{h} & 0x3ffu;
  if (exponent == 0x1fu) {
    return std::bit_cast<float>(mantissa != 0 ? 0x7fffffffu : (sign | 0x7f800000u));
  }
  if (exponent == 0) {
    // mantissa * 2^-24 is exact in float (at most 10 significant bits).
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return sign != 0 ? -magnitude : magnitude;
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

}  // namespace tpgraph
