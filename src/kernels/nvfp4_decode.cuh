// NVFP4 -> fp16 in registers, for the A (weight) fragments of mma.sync m16n8k16 and of wgmma
// with A from registers (the same fragment per warp). Layout v2 (src/core/numerics/nvfp4_layout.cpp) hands each lane
// one 32-bit word per k16 block: bytes (row g, t), (row g+8, t), (row g, t+4), (row g+8, t+4).
//
// The GEMM runs the MMA with a fixed permutation of k inside every 16-block (the same for A and
// B, so the sum is over the same products): physical k 2t, 2t+1, 2t+8, 2t+9 hold logical
// elements 2t, 2t+8, 2t+1, 2t+9. Then each half2 of the A fragment pairs the same nibble of two
// bytes that are 16 bits apart, and one shift plus one LOP3 builds it. The activations (B) are
// stored in that order by the quantize kernels, so ldmatrix hands them over as they are.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/ptx.cuh"

namespace tpgraph::kernels::detail {

// The two nibbles at bits 12..15 and 28..31 of q as fp16 bit patterns of e2m1 * 2^-14: sign to
// bit 15, exponent and mantissa bits to 9..11. E2M1's subnormal (code 1 = 0.5) lands on fp16's
// subnormal 2^-15, so every code maps exactly with no bias fix-up.
__device__ __forceinline__ std::uint32_t e2m1_pair_scaled(std::uint32_t q) {
  return (q & 0x80008000u) | ((q >> 3) & 0x0e000e00u);
}

__device__ __forceinline__ __half2 as_half2(std::uint32_t bits) {
  __half2 h;
  static_assert(sizeof(h) == sizeof(bits));
  __builtin_memcpy(&h, &bits, sizeof(bits));
  return h;
}
__device__ __forceinline__ std::uint32_t as_u32(__half2 h) {
  std::uint32_t bits;
  __builtin_memcpy(&bits, &h, sizeof(bits));
  return bits;
}

// The A fragment of one k16 block, times 2^-14: a[0] row g, a[1] row g+8, a[2] row g, a[3] row
// g+8, in the permuted k order above. `scales_g` / `scales_g8` hold the four UE4M3 codes of rows g
// and g+8 in this 64-column chunk; kk picks the block.
// Exactness: e2m1 * 2^-14 is an fp16 multiple of 2^-15; the UE4M3 code shifted into fp16's exponent
// and mantissa is ue4m3 * 2^-8, exact (its subnormals too), times 256 exact; the product
// e2m1 * ue4m3 * 2^-14 is a multiple of 2^-24 below 2^-2, so fp16 holds it exactly (as a
// subnormal when small). The caller multiplies the fp32 sum by 2^14, which is exact.
// kk is a constant wherever this is called (unrolled loops), so the selector folds.
// kPacked: `w` is a v2 word (bits moved by nvfp4_v2_pack_word, src/core/numerics/nvfp4_layout.cpp): 11
// integer instructions for the four half2. Otherwise the byte-ordered word of v1: 15.
template <bool kPacked>
__device__ __forceinline__ void decode_a_fragment(std::uint32_t w, std::uint32_t scales_g, std::uint32_t scales_g8,
                                                  int kk, std::uint32_t a[4]) {
  // Bytes [code_g, 0, code_g8, 0]: a selector nibble with bit 3 set copies the sign of its byte,
  // and a UE4M3 code's top bit is always 0.
  const std::uint32_t selector = static_cast<std::uint32_t>(kk | ((8 | kk) << 4) | ((4 + kk) << 8) | ((8 | kk) << 12));
  const __half2 scale_pair = __hmul2(as_half2(prmt(scales_g, scales_g8, selector) << 7), __float2half2_rn(256.0f));
  const __half2 scale_g = __low2half2(scale_pair);
  const __half2 scale_g8 = __high2half2(scale_pair);
  std::uint32_t h[4];
  if constexpr (kPacked) {
    h[0] = w & 0x8e008e00u;
    h[1] = __funnelshift_r(w, w, 3) & 0x8e008e00u;
    h[2] = ((w << 15) & 0x80008000u) | ((w << 6) & 0x0e000e00u);
    h[3] = ((w << 14) & 0x80008000u) | ((w << 3) & 0x0e000e00u);
  } else {
    h[0] = e2m1_pair_scaled(w << 12);  // low nibbles of bytes 0, 2
    h[1] = e2m1_pair_scaled(w << 4);   // low nibbles of bytes 1, 3
    h[2] = e2m1_pair_scaled(w << 8);   // high nibbles of bytes 0, 2
    h[3] = e2m1_pair_scaled(w);        // high nibbles of bytes 1, 3
  }
  a[0] = as_u32(__hmul2(as_half2(h[0]), scale_g));
  a[1] = as_u32(__hmul2(as_half2(h[1]), scale_g8));
  a[2] = as_u32(__hmul2(as_half2(h[2]), scale_g));
  a[3] = as_u32(__hmul2(as_half2(h[3]), scale_g8));
}

}  // namespace tpgraph::kernels::detail
