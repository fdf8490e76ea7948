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
// Encode rounds to nearest, ties to even code, and saturates at +-6. NaN encodes as +0... see .cpp.
[[nodiscard]] std::uint8_t e2m1_encode(float x);
[[nodiscard]] float e2m1_decode(std::uint8_t code);  // low 4 bits used
// UE4M3: unsigned, 4 exponent bits (bias 7), 3 mantissa bits, subnormals; max finite 448.
// Encode rounds to nearest even and saturates at 448; negative inputs encode as 0.
[[nodiscard]] std::uint8_t ue4m3_encode(float x);
[[nodiscard]] float ue4m3_decode(std::uint8_t code);

// Tensor scale of a matrix: amax / (6 * 448), or 1 when amax is 0.
[[nodiscard]] float nvfp4_tensor_scale(std::span<const float> values);

// Quantize one row of `cols` floats (cols % 64 == 0) into cols/64*36 bytes of layout v1.
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
