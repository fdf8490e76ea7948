// Layout v2: the bytes of a matrix in the order the grouped GEMM (kernels/gemm_mma.cu, gemm_wgmma.cu) reads
// them, so one warp loads one 16-row x 64-column unit with one 16-byte load per lane and decodes it
// in registers with no shuffles.
//
// A matrix of rows x cols is rows/16 row tiles; tile T is cols/64 units of 576 bytes, one per
// 64-column chunk c, at ((T * cols/64) + c) * 576. A unit holds exactly the v1 bytes of rows
// 16T..16T+15, chunk c (16 x 36 bytes), as:
//   [0, 512)   values: lane L = 4g + t (g = L / 4, t = L % 4) owns bytes 16L..16L+15; for
//              k16 block kk = 0..3 its four bytes are
//                (row g, byte 8kk+t), (row g+8, byte 8kk+t), (row g, byte 8kk+t+4), (row g+8, byte 8kk+t+4)
//              where "byte b" is byte b of the row's 36-byte chunk (elements 2b and 2b+1).
//   [512, 576) scales: for g = 0..7, 8 bytes at 512 + 8g: the 4 UE4M3 scales of row g, then of
//              row g+8.
// Why this order: an m16n8k16 A fragment needs, per lane and k16 block, rows g and g+8 at k = 2t,
// 2t+1, 2t+8, 2t+9, i.e. bytes t and t+4 of those rows, so they share one 32-bit word.
// Then the bits of each such word are moved (nvfp4_v2_pack_word) so that the kernel builds its four
// half2 with 11 integer instructions instead of 15 (kernels/nvfp4_decode.cuh): the nibble pair of
// half2 0 sits where fp16 wants it (signs at bits 15/31, magnitudes at 9-11/25-27), that of half2 1
// one 3-bit rotation away, and those of half2 2 and 3 one shift away for the signs and another for
// the magnitudes. Scales are bytes, unpermuted.
#include "core/numerics/nvfp4_layout.hpp"

#include <stdexcept>
#include <string>

#include "core/numerics/nvfp4.hpp"

namespace tpgraph {
namespace {

constexpr int kRowTile = 16;
constexpr int kUnitBytes = kRowTile * kNvfp4ChunkBytes;  // 576
constexpr int kValueBytes = 32;                          // per row and chunk

void check_shape(std::size_t bytes, int rows, int cols, const char* what) {
  if (rows <= 0 || cols <= 0 || rows % kRowTile != 0 || cols % kNvfp4ChunkElems != 0) {
    throw std::invalid_argument(std::string(what) + ": a " + std::to_string(rows) + " x " + std::to_string(cols) +
                                " matrix; rows must be a multiple of " + std::to_string(kRowTile) + " and cols of 64");
  }
  const auto expected =
      static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols / kNvfp4ChunkElems) * kNvfp4ChunkBytes;
  if (bytes != expected) {
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(rows) + " x " + std::to_string(cols) +
                                " needs " + std::to_string(expected) + " bytes, got " + std::to_string(bytes));
  }
}

// The permutation for a known-good shape.
std::int64_t v2_offset(std::int64_t v1_offset, int cols) {
  const std::int64_t chunks = cols / kNvfp4ChunkElems;
  const std::int64_t row_bytes = chunks * kNvfp4ChunkBytes;
  const std::int64_t row = v1_offset / row_bytes;
  const std::int64_t in_row = v1_offset % row_bytes;
  const std::int64_t chunk = in_row / kNvfp4ChunkBytes;
  const auto byte = static_cast<int>(in_row % kNvfp4ChunkBytes);
  const std::int64_t tile = row / kRowTile;
  const auto r = static_cast<int>(row % kRowTile);
  const int g = r % 8;
  const int upper = r / 8;  // row g+8
  const std::int64_t unit = (tile * chunks + chunk) * kUnitBytes;
  if (byte < kValueBytes) {
    const int kk = byte / 8;
    const int t = byte % 4;
    const int high = (byte % 8) / 4;  // byte 8kk+t+4
    const int lane = 4 * g + t;
    return unit + 16 * lane + 4 * kk + 2 * high + upper;
  }
  return unit + 512 + 8 * g + 4 * upper + (byte - kValueBytes);
}

// Nibble moves of nvfp4_v2_pack_word: {bit 0 of the nibble in the byte-ordered word, target bit of
// its sign, target bit of its magnitude's lowest bit}. In order: half2 0 (low, high half), 1, 2, 3.
constexpr int kNibbleMoves[8][3] = {{0, 15, 9}, {16, 31, 25}, {8, 18, 12}, {24, 2, 28},
                                    {4, 0, 3},  {20, 16, 19}, {12, 1, 6},  {28, 17, 22}};

}  // namespace

std::uint32_t nvfp4_v2_pack_word(std::uint32_t w) {
  std::uint32_t q = 0;
  for (const auto& m : kNibbleMoves) {
    const std::uint32_t nibble = (w >> m[0]) & 0xfu;
    q |= (nibble >> 3) << m[1];
    q |= (nibble & 0x7u) << m[2];
  }
  return q;
}

std::uint32_t nvfp4_v2_unpack_word(std::uint32_t q) {
  std::uint32_t w = 0;
  for (const auto& m : kNibbleMoves) {
    const std::uint32_t nibble = (((q >> m[1]) & 0x1u) << 3) | ((q >> m[2]) & 0x7u);
    w |= nibble << m[0];
  }
  return w;
}

std::string_view to_string(Layout l) { return l == Layout::v1 ? "v1" : "v2"; }

int nvfp4_v2_row_tile() { return kRowTile; }

std::int64_t nvfp4_v2_offset(std::int64_t v1_offset, int rows, int cols) {
  const std::int64_t total = std::int64_t{rows} * (cols / kNvfp4ChunkElems) * kNvfp4ChunkBytes;
  if (rows <= 0 || cols <= 0 || rows % kRowTile != 0 || cols % kNvfp4ChunkElems != 0 || v1_offset < 0 ||
      v1_offset >= total) {
    throw std::invalid_argument("nvfp4_v2_offset: offset " + std::to_string(v1_offset) + " outside a " +
                                std::to_string(rows) + " x " + std::to_string(cols) +
                                " matrix (rows a multiple of 16, cols of 64)");
  }
  return v2_offset(v1_offset, cols);
}

// Both directions walk unit by unit with the unit's own 576-entry permutation (the same for every
// unit), so converting a rank's weights costs a copy, not a division per byte.
namespace {

const std::vector<int>& unit_permutation() {
  // unit_permutation()[16*36-index of (row r, byte b)] = position inside the v2 unit.
  static const std::vector<int> table = [] {
    std::vector<int> t(kUnitBytes);
    const int cols = kNvfp4ChunkElems;  // one chunk per row: v1 offset = r * 36 + b
    for (int i = 0; i < kUnitBytes; ++i) t[static_cast<std::size_t>(i)] = static_cast<int>(v2_offset(i, cols));
    return t;
  }();
  return table;
}

// The first 512 bytes of every unit are 128 fragment words, little-endian.
template <std::uint32_t (*kMap)(std::uint32_t)>
void map_value_words(std::uint8_t* unit) {
  for (int i = 0; i < 512; i += 4) {
    std::uint32_t w = std::uint32_t{unit[i]} | std::uint32_t{unit[i + 1]} << 8 | std::uint32_t{unit[i + 2]} << 16 |
                      std::uint32_t{unit[i + 3]} << 24;
    w = kMap(w);
    for (int b = 0; b < 4; ++b) unit[i + b] = static_cast<std::uint8_t>(w >> (8 * b));
  }
}

template <bool kToV2>
std::vector<std::uint8_t> convert(std::span<const std::uint8_t> in, int rows, int cols) {
  const auto& perm = unit_permutation();
  std::vector<std::uint8_t> scratch;
  if constexpr (!kToV2) {
    scratch.assign(in.begin(), in.end());
    for (std::size_t u = 0; u < scratch.size(); u += kUnitBytes) map_value_words<nvfp4_v2_unpack_word>(&scratch[u]);
    in = scratch;
  }
  const std::size_t chunks = static_cast<std::size_t>(cols / kNvfp4ChunkElems);
  const std::size_t row_bytes = chunks * kNvfp4ChunkBytes;
  std::vector<std::uint8_t> out(in.size());
  for (std::size_t tile = 0; tile < static_cast<std::size_t>(rows / kRowTile); ++tile) {
    for (std::size_t chunk = 0; chunk < chunks; ++chunk) {
      const std::size_t unit = (tile * chunks + chunk) * kUnitBytes;
      for (std::size_t r = 0; r < kRowTile; ++r) {
        const std::size_t v1 = (tile * kRowTile + r) * row_bytes + chunk * kNvfp4ChunkBytes;
        for (std::size_t b = 0; b < kNvfp4ChunkBytes; ++b) {
          const std::size_t v2 = unit + static_cast<std::size_t>(perm[r * kNvfp4ChunkBytes + b]);
          if constexpr (kToV2) {
            out[v2] = in[v1 + b];
          } else {
            out[v1 + b] = in[v2];
          }
        }
      }
    }
  }
  if constexpr (kToV2) {
    for (std::size_t u = 0; u < out.size(); u += kUnitBytes) map_value_words<nvfp4_v2_pack_word>(&out[u]);
  }
  return out;
}

}  // namespace

std::vector<std::uint8_t> nvfp4_to_v2(std::span<const std::uint8_t> v1, int rows, int cols) {
  check_shape(v1.size(), rows, cols, "nvfp4_to_v2");
  return convert<true>(v1, rows, cols);
}

std::vector<std::uint8_t> nvfp4_to_v1(std::span<const std::uint8_t> v2, int rows, int cols) {
  check_shape(v2.size(), rows, cols, "nvfp4_to_v1");
  return convert<false>(v2, rows, cols);
}

}  // namespace tpgraph
