// Byte layouts of an NVFP4 expert matrix. v1: row-major chunks (nvfp4.hpp). v2 ("slot-major"): the
// same bytes permuted into the order the GPU's grouped GEMM reads, 16-byte aligned; see the .cpp
// for the tile order. Both layouts have the same size and decode to the same matrix.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace tpgraph {

enum class Layout { v1, v2 };
[[nodiscard]] std::string_view to_string(Layout l);
// fmt prints a Layout by name where core/base/enum_format.hpp is included; this header leaves it
// out because nvcc compiles it into the kernels and cannot parse fmt/format.h.
[[nodiscard]] inline std::string_view format_as(Layout l) { return to_string(l); }

// Permute one matrix (rows x cols) between layouts. rows must be a multiple of the kernel's row tile
// (nvfp4_v2_row_tile()) and cols a multiple of 64; both are checked.
[[nodiscard]] std::vector<std::uint8_t> nvfp4_to_v2(std::span<const std::uint8_t> v1, int rows, int cols);
[[nodiscard]] std::vector<std::uint8_t> nvfp4_to_v1(std::span<const std::uint8_t> v2, int rows, int cols);
// Offset in v2 of byte `i` of v1: the byte permutation. A scale byte lands there as it is; a value
// byte lands in the 32-bit fragment word there, whose bits nvfp4_v2_pack_word then moves.
[[nodiscard]] std::int64_t nvfp4_v2_offset(std::int64_t v1_offset, int rows, int cols);
// The bit permutation of one fragment word (bytes (g,t), (g+8,t), (g,t+4), (g+8,t+4) of a k16
// block) into v2, and back.
[[nodiscard]] std::uint32_t nvfp4_v2_pack_word(std::uint32_t byte_ordered);
[[nodiscard]] std::uint32_t nvfp4_v2_unpack_word(std::uint32_t packed);
[[nodiscard]] int nvfp4_v2_row_tile();

}  // namespace tpgraph
