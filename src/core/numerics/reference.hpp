// The layer's inputs (seeded weights and activations) and its CPU reference, for R ranks.
//
// Numerics contract, shared with kernels/ (the GPU must follow it step by step). half_rn is
// float_to_half (half.hpp); w16_e[o][k] = e2m1 * ue4m3 of expert e's matrix (nvfp4_decode_row), exact
// in fp16; ts_e is that matrix's fp32 tensor scale. All arithmetic is fp32 unless said otherwise.
//  1. gather+quantize: for CSR row i (pair p, token t): x = z[t]; s = max_k |x[k]| (1 if 0);
//     inv = 1.0f / s; z16[i][k] = half_rn(x[k] * inv); zs[i] = s.
//  2. gate/up: g[i][o] = (zs[i] * ts_e) * sum_k z16[i][k] * w16_e[o][k]. Each product of two fp16
//     values is exact in fp32; the GPU sums them in fp32 in its tensor core's order.
//  3. swiglu: a = (g / (1.0f + expf(-g))) * u.
//  4. quantize a like step 1 (per row over ff) -> a16, as.
//  5. down: y[i][h] = (as[i] * ts_e) * sum_f a16[i][f] * w16_e[h][f].
//  6. combine: out_r[t][h] = fmaf(w_{t,k-1}, y[row(t,k-1)][h], ... fmaf(w_{t,0}, y[row(t,0)][h], 0.0f)),
//     pairs in ascending order j = 0..k-1 (pair t*k+j, weight Routing::pair_weight, row pair_row).
//  7. join: layer[t][h] = out_0[t][h]; then layer[t][h] += out_r[t][h] for r = 1..R-1, in rank order.
//
// What the reference does exactly (and so where it may differ from the GPU by rounding only):
//  - steps 1, 4, 6, 7 are the same fp32 operations, bit for bit (std::fma for fmaf);
//  - step 3 uses std::exp(float); the GPU's expf may differ by an ulp or two;
//  - steps 2 and 5: dot = sum of the exact products in double (eight interleaved partial sums over
//    k mod 8, added pairwise at the end), then y = (float)((double)(xs * ts_e) * dot), where
//    xs * ts_e is the fp32 product. The GPU rounds the fp32 sum, then multiplies in fp32.
// So the reference is the exact layer up to ~1e-15 relative in steps 2/5 plus one rounding; the GPU
// differs from it by its fp32 accumulation, which can move one a16 rounding in step 4 (see the
// tolerance below).
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/base/enum_format.hpp"
#include "core/numerics/geometry.hpp"
#include "core/numerics/nvfp4.hpp"
#include "core/numerics/router.hpp"

namespace tpgraph {

enum class WeightsKind { random, zeros };
[[nodiscard]] std::string_view to_string(WeightsKind w);
[[nodiscard]] inline std::string_view format_as(WeightsKind w) { return to_string(w); }

// One rank's slice of the FFN: for each expert, gate and up are ff x hidden, down is hidden x ff,
// all layout v1. Generated from (seed, rank, matrix, expert): reproducible and parallel.
struct RankWeights {
  int experts = 0;
  int hidden = 0;
  int ff = 0;
  std::vector<Nvfp4Matrix> gate, up, down;  // [experts]
};
// random: each matrix is N(0, 1/in_features) (in_features = its cols), so every activation stays
// O(1), quantized by nvfp4_quantize. zeros: every byte 0 and tensor scale 1 (decodes to 0).
// Work is spread over std::thread::hardware_concurrency() threads, one matrix at a time; the bytes
// do not depend on the thread count.
[[nodiscard]] RankWeights make_rank_weights(const Geometry& g, int rank, WeightsKind kind, std::uint64_t seed);
// The layer input z[tokens][hidden], N(0, 1), from a stream of the seed that no weight uses.
[[nodiscard]] std::vector<float> make_layer_input(const Geometry& g, std::uint64_t seed);

enum class WeightMatrix { gate, up, down };
// One matrix of make_rank_weights on its own (gate/up: ff x hidden, down: hidden x ff): the same
// bytes, e.g. to check one expert without building a whole rank.
[[nodiscard]] Nvfp4Matrix make_expert_matrix(const Geometry& g, int rank, WeightMatrix matrix, int expert,
                                             WeightsKind kind, std::uint64_t seed);

// The counter-based generator behind both: element n of stream `key` is a standard normal from
// Box-Muller on a 64-bit hash of (key, n / 2), cos branch for even n, sin for odd. The logarithm
// and the sine/cosine are polynomials in plain fp32 (no libm), so the values are the same on
// every machine and compiler that keeps fp32 (-ffp-contract=off). |value| <= 5.77 (u1 >= 2^-24).
[[nodiscard]] std::uint64_t random_stream_key(std::uint64_t seed, std::uint64_t domain, std::uint64_t a,
                                              std::uint64_t b);
// out[i] = scale * normal(key, first + i); `first` and out.size() must be even.
void fill_normal(std::uint64_t key, std::uint64_t first, float scale, std::span<float> out);

// Reference output of the chosen tokens (sorted, unique): rows = tokens.size(), hidden each.
// Only the chosen tokens' pairs are computed; each expert matrix they use is read once per call,
// one row at a time, and the experts are spread over hardware_concurrency() threads.
[[nodiscard]] std::vector<float> reference_rank_output(const Geometry& g, const Routing& routing, const RankWeights& w,
                                                       std::span<const float> z, std::span<const int> tokens);
[[nodiscard]] std::vector<float> reference_layer_output(const Geometry& g, const Routing& routing,
                                                        std::span<const RankWeights> ranks, std::span<const float> z,
                                                        std::span<const int> tokens);

// A deterministic sample of `count` tokens out of `tokens` (all of them if count >= tokens), sorted
// and unique, always including the first and the last token: one token drawn from each of count-2
// equal strata of the interior. A count below 2 that does not cover every token throws InputError.
[[nodiscard]] std::vector<int> sample_tokens(int tokens, int count);

// --- per-stage helpers, so each kernel can be checked on its own --------------------------------

// Step 1 / 4 on one row: out[k] = half_rn(x[k] * (1.0f / s)), returns s = max|x| (1 if all 0).
float quantize_row_to_half(std::span<const float> x, std::span<std::uint16_t> out);
// Step 3 on one element.
[[nodiscard]] float swiglu(float g, float u);
// Step 2 / 5 for one expert matrix over given rows: x16 is n_rows x w.cols (binary16 bits), xs the
// n_rows row scales, y is n_rows x w.rows.
void reference_gemm_rows(const Nvfp4Matrix& w, std::span<const std::uint16_t> x16, std::span<const float> xs,
                         int n_rows, std::span<float> y);
// Step 1 over every CSR row: z16 is n_pairs x hidden, zs n_pairs.
void reference_gather_quantize(const Routing& routing, std::span<const float> z, int hidden,
                               std::span<std::uint16_t> z16, std::span<float> zs);
// Step 2 / 5 over every CSR row, each row with its expert's matrix (w indexed by expert id):
// x16 is n_pairs x cols, y is n_pairs x rows. Parallel over active experts.
void reference_grouped_gemm(const Routing& routing, std::span<const Nvfp4Matrix> w, std::span<const std::uint16_t> x16,
                            std::span<const float> xs, std::span<float> y);
// Step 6 for the chosen tokens (sorted, unique) from y over every CSR row (n_pairs x hidden).
[[nodiscard]] std::vector<float> reference_combine(const Routing& routing, std::span<const float> y, int hidden,
                                                   std::span<const int> tokens);
// Step 7: the ranks' partial outputs (equal sizes) summed in rank order.
[[nodiscard]] std::vector<float> reference_join(std::span<const std::vector<float>> partials);

// Every intermediate of one rank over every CSR row and token (steps 1-6), built from the
// per-stage helpers above. Meant for small geometries and for checking one kernel's input and
// output; reference_rank_output is the fast path for large ones.
struct RankTrace {
  std::vector<std::uint16_t> z16;  // n_pairs x hidden
  std::vector<float> zs;           // n_pairs
  std::vector<float> g, u, a;      // n_pairs x ff
  std::vector<std::uint16_t> a16;  // n_pairs x ff
  std::vector<float> as;           // n_pairs
  std::vector<float> y;            // n_pairs x hidden
  std::vector<float> out;          // tokens x hidden
};
[[nodiscard]] RankTrace reference_rank_trace(const Geometry& g, const Routing& routing, const RankWeights& w,
                                             std::span<const float> z);

// --- comparison ----------------------------------------------------------------------------------

// An element passes when |gpu - ref| <= kReferenceTolerance * max|ref| over the compared outputs.
// Why 2e-3. What a correct GPU kernel may do differently from the reference:
//  - fp32 accumulation of the exact fp16 products over K = hidden <= 4096 in its own order, and
//    Hopper's tensor cores truncate rather than round; the sum of |terms| is ~sqrt(K) times |g|, so
//    each g, u carries ~1e-6..1e-5 relative error;
//  - a g or u that differs in its last bits can flip one half_rn of a16 (or move the row's amax)
//    in step 4: one fp16 ulp, <= 2^-11 of `as`, on a few of the ff = 640 terms of the down sum;
//  - fp32 rounding of (xs * ts_e) * sum instead of one rounding of the double product;
//  - expf vs std::exp: an ulp or two.
// Measured (tests/unit/test_reference.cpp emulates such a kernel; the issue-2 report has the larger
// run): at hidden = 4096, ff = 640, top-8 of 16 experts, 131072 outputs, the largest error over
// max|ref| was 3.4e-5..3.8e-5 for fp32 sums in order, 4.9e-5..7.7e-5 for exact 16-term partial
// sums truncated into an fp32 accumulator, 8.7e-5..9.9e-5 for reverse-order sums truncating at
// every add — all with a perturbed exp. Planted bugs, each touching one token: one pair on the
// wrong expert 0.23..0.93, one pair missing 0.33..0.76, the last 64 of K dropped in gate
// 0.10..0.14, the first block scale of every down row one UE4M3 code too big 0.013..0.017.
// 2e-3 is 20x above the worst emulated kernel and 6x below the subtlest bug.
inline constexpr double kReferenceTolerance = 2e-3;

struct Comparison {
  std::int64_t compared = 0;
  std::int64_t mismatches = 0;  // elements over the tolerance (NaN in either counts)
  std::int64_t nonzero = 0;     // in the GPU output
  std::int64_t nan_count = 0;   // in the GPU output
  double absmax = 0;            // of the GPU output
  double ref_absmax = 0;        // of the reference
  double max_abs_err = 0;
  double max_rel_err = 0;  // max_abs_err / reference absmax
  double tolerance = 0;    // stated bound on |gpu - ref| / absmax(ref)
  [[nodiscard]] bool passed() const { return mismatches == 0 && nan_count == 0; }
  [[nodiscard]] bool vacuous() const { return nonzero == 0; }
};
[[nodiscard]] Comparison compare_to_reference(std::span<const float> gpu, std::span<const float> ref,
                                              double tolerance = kReferenceTolerance);

}  // namespace tpgraph
