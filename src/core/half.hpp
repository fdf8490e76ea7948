// IEEE binary16 on the host, bit-exact with the GPU's __float2half_rn / __half2float.
#pragma once
#include <cstdint>

namespace tpgraph {

[[nodiscard]] std::uint16_t float_to_half(float x);  // round to nearest even, overflow -> inf
[[nodiscard]] float half_to_float(std::uint16_t h);

}  // namespace tpgraph
