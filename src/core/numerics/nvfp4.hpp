// NVFP4 weights: E2M1 values (two per byte) with a UE4M3 scale per 16 elements and an fp32 scale per
// matrix. A row of `cols` elements is cols/64 chunks of 36 bytes: 32 bytes of E2M1 (element 2i in
// the low nibble of byte i, 2i+1 in the high nibble), then 4 UE4M3 scales (one per 16 elements).
// Decoded value = e2m1 * ue4m3 * tensor_scale; e2m1 * ue4m3 is exact in fp16, so the GPU may
// dequantize to fp16 and multiply by tensor_scale after the fp32 accumulation.
//
// Layout v1 is that row-major form. Layout v2 is a pure permutation of v1's bytes into the order
// the GPU kernel reads (nvfp4_layout.hpp).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace tpgraph {

inline constexpr int kNvfp4ChunkElems = 64;
inline constexpr int kNvfp4ChunkBytes = 36;
inline constexpr int kNvfp4BlockElems = 16;
inline constexpr float kE2M1Max = 6.0f;
inline constexpr float kUE4M3Max = 448.0f;

// E2M1: sign, 2 exponent bits, 1 mantissa bit; magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6}.
// Encode rounds to nearest, ties to the even code (0, 1, 2, 4), and saturates at +-6 (inf too); the
// sign bit is kept, so -0.0 encodes as 0x8. NaN encodes as a zero (0x0 or 0x8, by its sign bit).
[[nodiscard]] std::uint8_t e2m1_encode(float x);
[[nodiscard]] float e2m1_decode(std::uint8_t code);  // low 4 bits used
// UE4M3: unsigned, 4 exponent bits (bias 7), 3 mantissa bits, subnormals; max finite 448.
// Encode rounds to nearest even and saturates at 448 (inf too); negative inputs and NaN encode as 0.
// Decode honours bit 7 as a sign (the GPU's E4M3 conversion does); 0x7f and 0xff are NaN. Encode
// is bit-exact with CUDA's __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3) for x >= 0.
[[nodiscard]] std::uint8_t ue4m3_encode(float x);
[[nodiscard]] float ue4m3_decode(std::uint8_t code);

// Tensor scale of a matrix: amax / (6 * 448), or 1 when amax is 0. Throws on inf or NaN.
[[nodiscard]] float nvfp4_tensor_scale(std::span<const float> values);

// Quantize one row of `cols` floats (cols % 64 == 0) into cols/64*36 bytes of layout v1. Per block
// of 16: scale code = ue4m3_encode(amax_block / (6 * tensor_scale)), step = ue4m3_decode(code) *
// tensor_scale, value code = e2m1_encode(x / step); a block whose step is 0 stores zero codes.
// Error bound (a block whose scale is a normal UE4M3, >= 2^-6): |x - decoded| <= amax_block * 17/96.
// The scale rounds to within 2^-4 of amax/6, so step <= amax/6 * 17/16, and no value is more than
// one step (half the widest E2M1 gap, 4 to 6) from its code: the saturated ones are at most 6.4
// steps, 0.4 from 6.
void nvfp4_quantize_row(std::span<const float> row, float tensor_scale, std::span<std::uint8_t> out);
// Decode one v1 row to e2m1*ue4m3 (without the tensor scale): exactly the fp16 value the GPU uses.
void nvfp4_decode_row(std::span<const std::uint8_t> row_bytes, std::span<float> out);

// One expert's matrix, rows x cols, layout v1.
struct Nvfp4Matrix {
  int rows = 0;
  int cols = 0;
  float tensor_scale = 1.0f;
  std::vector<std::uint8_t> bytes;  // rows * cols/64 * 36
};
[[nodiscard]] Nvfp4Matrix nvfp4_quantize(std::span<const float> values, int rows, int cols);
// Full dequantization including the tensor scale.
[[nodiscard]] std::vector<float> nvfp4_dequantize(const Nvfp4Matrix& m);

}  // namespace tpgraph
