// The layer's inputs (seeded weights and activations) and its CPU reference, for R ranks.
//
// Numerics contract, shared with kernels/ (the GPU must follow it step by step):
//  1. gather+quantize: for CSR row i (pair p, token t): x = z[t]; s = amax|x| (1 if 0);
//     inv = 1.0f / s; z16[i][k] = half_rn(x[k] * inv); zs[i] = s.
//  2. gate/up: g[i][o] = (zs[i] * tensor_scale_e) * sum_k z16[i][k] * w16_e[o][k], fp32 sum
//     (w16 = e2m1 * ue4m3, exact in fp16). On the GPU the sum's order is the tensor core's.
//  3. swiglu: a = (g / (1 + expf(-g))) * u, fp32.
//  4. quantize a like step 1 (per row over ff) -> a16, as.
//  5. down: y[i][h] = (as[i] * tensor_scale_e) * sum_f a16[i][f] * w16_e[h][f].
//  6. combine: out_r[t][h] = fmaf(w_{t,k-1}, y[row(t,k-1)][h], ... fmaf(w_{t,0}, y[row(t,0)][h], 0)),
//     pairs in ascending order j = 0..k-1.
//  7. join: layer[t][h] = out_0 + out_1 + ... + out_{R-1}, in rank order.
// The reference sums step 2/5 in double; tolerances are in reference.cpp (compare_to_reference).
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/geometry.hpp"
#include "core/nvfp4.hpp"
#include "core/router.hpp"

namespace tpgraph {

enum class WeightsKind { random, zeros };
[[nodiscard]] std::string_view to_string(WeightsKind w);

// One rank's slice of the FFN: for each expert, gate and up are ff x hidden, down is hidden x ff,
// all layout v1. Generated from (seed, rank, matrix, expert): reproducible and parallel.
struct RankWeights {
  int experts = 0;
  int hidden = 0;
  int ff = 0;
  std::vector<Nvfp4Matrix> gate, up, down;  // [experts]
};
[[nodiscard]] RankWeights make_rank_weights(const Geometry& g, int rank, WeightsKind kind,
                                            std::uint64_t seed);
// The layer input z[tokens][hidden], random normal from the seed.
[[nodiscard]] std::vector<float> make_layer_input(const Geometry& g, std::uint64_t seed);

// Reference output of the chosen tokens (sorted, unique): rows = tokens.size(), hidden each.
[[nodiscard]] std::vector<float> reference_rank_output(const Geometry& g, const Routing& routing,
                                                       const RankWeights& w, std::span<const float> z,
                                                       std::span<const int> tokens);
[[nodiscard]] std::vector<float> reference_layer_output(const Geometry& g, const Routing& routing,
                                                        std::span<const RankWeights> ranks,
                                                        std::span<const float> z,
                                                        std::span<const int> tokens);

// A deterministic sample of `count` tokens out of g.tokens (all of them if count >= tokens),
// always including the first and the last token.
[[nodiscard]] std::vector<int> sample_tokens(int tokens, int count);

struct Comparison {
  std::int64_t compared = 0;
  std::int64_t mismatches = 0;   // elements over the tolerance
  std::int64_t nonzero = 0;      // in the GPU output
  std::int64_t nan_count = 0;
  double absmax = 0;             // of the GPU output
  double max_abs_err = 0;
  double max_rel_err = 0;        // max_abs_err / reference absmax
  double tolerance = 0;          // stated bound on |gpu - ref| / absmax(ref)
  [[nodiscard]] bool passed() const { return mismatches == 0 && nan_count == 0; }
  [[nodiscard]] bool vacuous() const { return nonzero == 0; }
};
[[nodiscard]] Comparison compare_to_reference(std::span<const float> gpu, std::span<const float> ref);

}  // namespace tpgraph
