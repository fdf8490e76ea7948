// IEEE binary16 on the host, bit-exact with the GPU's __float2half_rn / __half2float.
#pragma once
#include <cstdint>

namespace tpgraph {

// Round to nearest even; overflow (>= 65520 in magnitude) gives inf; below half the smallest
// subnormal gives a signed zero; every NaN gives 0x7fff. Checked against cuda_fp16.hpp's host
// conversion on all 2^32 floats.
[[nodiscard]] std::uint16_t float_to_half(float x);
// Exact; NaN codes give the canonical NaN 0x7fffffff, as cuda_fp16.hpp's host conversion does.
[[nodiscard]] float half_to_float(std::uint16_t h);

}  // namespace tpgraph
