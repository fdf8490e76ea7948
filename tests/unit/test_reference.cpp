#include "catch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "core/base/error.hpp"
#include "core/numerics/half.hpp"
#include "core/numerics/reference.hpp"

using namespace tpgraph;

namespace {

Geometry small_geometry() {
  Geometry g;
  g.experts = 8;
  g.top_k = 2;
  g.hidden = 128;
  g.ff = 64;
  g.tokens = 16;
  g.ranks = 2;
  return g;
}

std::vector<int> all_tokens(int n) {
  std::vector<int> t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), 0);
  return t;
}

bool same_bytes(const RankWeights& a, const RankWeights& b) {
  auto same = [](const std::vector<Nvfp4Matrix>& x, const std::vector<Nvfp4Matrix>& y) {
    if (x.size() != y.size()) return false;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (x[i].bytes != y[i].bytes || x[i].tensor_scale != y[i].tensor_scale) return false;
    }
    return true;
  };
  return same(a.gate, b.gate) && same(a.up, b.up) && same(a.down, b.down);
}

// A matrix written byte by byte from the v1 layout's definition: element (o, k) holds the E2M1
// code code(o, k) and every block scale is UE4M3 1.0 (0x38), so its value is
// e2m1(code) * tensor_scale.
Nvfp4Matrix matrix_from_codes(int rows, int cols, float tensor_scale, const std::function<int(int, int)>& code) {
  Nvfp4Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.tensor_scale = tensor_scale;
  for (int o = 0; o < rows; ++o) {
    for (int c = 0; c < cols / 64; ++c) {
      for (int i = 0; i < 32; ++i) {
        const int k = 64 * c + 2 * i;
        m.bytes.push_back(static_cast<std::uint8_t>(code(o, k) | (code(o, k + 1) << 4)));
      }
      for (int b = 0; b < 4; ++b) m.bytes.push_back(0x38);
    }
  }
  return m;
}

// --- a GPU-like computation of one rank, independent of reference.cpp --------------------------
// It follows the numerics contract with what a tensor-core kernel may do differently: fp32 sums
// in reverse order that truncate instead of rounding (Hopper's accumulators truncate), the scale
// applied in fp32 after the sum, and an exp two ulps off. `bug` plants one real mistake.
enum class Bug { none, wrong_expert, dropped_chunk, block_scale, missing_pair };

// a + b rounded toward zero: the rounding error from TwoSum says whether a+b rounded away.
float add_toward_zero(float a, float b) {
  const float s = a + b;
  const float bb = s - a;
  const float err = (a - (s - bb)) + (b - bb);
  if (err != 0.0f && std::signbit(err) != std::signbit(s)) return std::nextafter(s, 0.0f);
  return s;
}

float quantize_like_contract(const float* x, std::size_t n, std::vector<float>& x16) {
  float amax = 0.0f;
  for (std::size_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float s = amax == 0.0f ? 1.0f : amax;
  const float inv = 1.0f / s;
  x16.resize(n);
  for (std::size_t i = 0; i < n; ++i) x16[i] = half_to_float(float_to_half(x[i] * inv));
  return s;
}

std::vector<float> gemm_like_gpu(const Nvfp4Matrix& w, const std::vector<float>& x16, float xs, int k_used,
                                 bool bump_first_scale) {
  const auto cols = static_cast<std::size_t>(w.cols);
  const std::size_t row_bytes = cols / 64 * 36;
  std::vector<float> y(static_cast<std::size_t>(w.rows));
  std::vector<std::uint8_t> bytes(row_bytes);
  std::vector<float> w16(cols);
  for (std::size_t o = 0; o < y.size(); ++o) {
    std::copy_n(w.bytes.begin() + static_cast<std::ptrdiff_t>(o * row_bytes), row_bytes, bytes.begin());
    if (bump_first_scale && bytes[32] < 0x7e) ++bytes[32];
    nvfp4_decode_row(bytes, w16);
    float acc = 0.0f;
    for (int k = k_used - 1; k >= 0; --k)
      acc = add_toward_zero(acc, x16[static_cast<std::size_t>(k)] * w16[static_cast<std::size_t>(k)]);
    y[o] = (xs * w.tensor_scale) * acc;
  }
  return y;
}

std::vector<float> rank_like_gpu(const Geometry& g, const Routing& r, const RankWeights& w, const std::vector<float>& z,
                                 const std::vector<int>& tokens, Bug bug) {
  const auto h = static_cast<std::size_t>(g.hidden);
  std::vector<float> out(tokens.size() * h, 0.0f);
  std::vector<float> z16, a16;
  for (std::size_t ti = 0; ti < tokens.size(); ++ti) {
    for (int j = 0; j < g.top_k; ++j) {
      const auto p =
          static_cast<std::size_t>(tokens[ti]) * static_cast<std::size_t>(g.top_k) + static_cast<std::size_t>(j);
      if (bug == Bug::missing_pair && ti == 0 && j == g.top_k - 1) continue;
      int e = route_expert(p, g.experts);
      if (bug == Bug::wrong_expert && ti == 0 && j == 0) e = (e + 1) % g.experts;
      const auto ei = static_cast<std::size_t>(e);
      const float zs = quantize_like_contract(z.data() + static_cast<std::size_t>(tokens[ti]) * h, h, z16);
      const int k_gate = bug == Bug::dropped_chunk ? g.hidden - 64 : g.hidden;
      const auto gate = gemm_like_gpu(w.gate[ei], z16, zs, k_gate, false);
      const auto up = gemm_like_gpu(w.up[ei], z16, zs, g.hidden, false);
      std::vector<float> a(gate.size());
      for (std::size_t f = 0; f < a.size(); ++f) {
        const float ex = std::nextafter(std::nextafter(std::exp(-gate[f]), INFINITY), INFINITY);
        a[f] = (gate[f] / (1.0f + ex)) * up[f];
      }
      const float as = quantize_like_contract(a.data(), a.size(), a16);
      const auto y = gemm_like_gpu(w.down[ei], a16, as, g.ff, bug == Bug::block_scale);
      const float weight = r.pair_weight[p];
      for (std::size_t i = 0; i < h; ++i) out[ti * h + i] = std::fma(weight, y[i], out[ti * h + i]);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("weights and inputs are reproducible from the seed", "[reference]") {
  const Geometry g = small_geometry();
  const RankWeights a = make_rank_weights(g, 0, WeightsKind::random, 42);
  const RankWeights b = make_rank_weights(g, 0, WeightsKind::random, 42);
  CHECK(same_bytes(a, b));
  CHECK_FALSE(same_bytes(a, make_rank_weights(g, 0, WeightsKind::random, 43)));
  CHECK_FALSE(same_bytes(a, make_rank_weights(g, 1, WeightsKind::random, 42)));
  CHECK(make_layer_input(g, 42) == make_layer_input(g, 42));
  CHECK(make_layer_input(g, 42) != make_layer_input(g, 43));
  // Each matrix on its own, on one thread, gives the same bytes as the parallel build.
  for (int e = 0; e < g.experts; ++e) {
    const auto i = static_cast<std::size_t>(e);
    CHECK(make_expert_matrix(g, 0, WeightMatrix::gate, e, WeightsKind::random, 42).bytes == a.gate[i].bytes);
    CHECK(make_expert_matrix(g, 0, WeightMatrix::up, e, WeightsKind::random, 42).bytes == a.up[i].bytes);
    CHECK(make_expert_matrix(g, 0, WeightMatrix::down, e, WeightsKind::random, 42).bytes == a.down[i].bytes);
  }
  CHECK(a.gate[0].bytes != a.up[0].bytes);
  CHECK(a.gate[0].bytes != a.gate[1].bytes);
}

TEST_CASE("the generator's values are standard normal and a stream is position-addressable", "[reference]") {
  std::vector<float> v(1 << 16);
  const auto key = random_stream_key(5, 9, 2, 0);
  fill_normal(key, 0, 1.0f, v);
  double sum = 0, sum_sq = 0, amax = 0;
  std::size_t below_quartile = 0;
  for (const float x : v) {
    sum += x;
    sum_sq += static_cast<double>(x) * x;
    amax = std::max(amax, static_cast<double>(std::fabs(x)));
    if (x < -0.6745f) ++below_quartile;
  }
  const double n = static_cast<double>(v.size());
  CHECK(std::fabs(sum / n) < 0.02);
  CHECK(std::fabs(sum_sq / n - 1.0) < 0.02);
  CHECK(std::fabs(static_cast<double>(below_quartile) / n - 0.25) < 0.01);
  CHECK(amax > 3.5);
  CHECK(amax <= 5.78);
  std::vector<float> tail(1000);
  fill_normal(key, 5000, 1.0f, tail);
  CHECK(std::equal(tail.begin(), tail.end(), v.begin() + 5000));
  CHECK_THROWS_AS(fill_normal(key, 1, 1.0f, tail), std::invalid_argument);
}

TEST_CASE("random weights keep activations O(1); zero weights are all-zero bytes", "[reference]") {
  const Geometry g = small_geometry();
  const RankWeights w = make_rank_weights(g, 0, WeightsKind::random, 1);
  const auto gate = nvfp4_dequantize(w.gate[0]);
  double sum_sq = 0;
  for (const float x : gate) sum_sq += static_cast<double>(x) * x;
  // N(0, 1/hidden) plus the quantization noise (~0.09 relative rms).
  CHECK(sum_sq / static_cast<double>(gate.size()) * g.hidden == Approx(1.0).epsilon(0.05));
  const RankWeights zeros = make_rank_weights(g, 1, WeightsKind::zeros, 1);
  for (const auto* set : {&zeros.gate, &zeros.up, &zeros.down}) {
    for (const auto& m : *set) {
      CHECK(std::all_of(m.bytes.begin(), m.bytes.end(), [](std::uint8_t b) { return b == 0; }));
      CHECK(m.tensor_scale == 1.0f);
    }
  }
}

TEST_CASE("a hand-checkable layer: one expert, top-1, hidden = ff = 64", "[reference]") {
  Geometry g;
  g.experts = 1;
  g.top_k = 1;
  g.hidden = 64;
  g.ff = 64;
  g.tokens = 2;
  g.ranks = 1;
  const Routing r = build_routing(g);
  REQUIRE(r.pair_weight[0] == 1.0f);
  // E2M1 codes 0..7 are 0, .5, 1, 1.5, 2, 3, 4, 6; bit 3 is the sign.
  const float e2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  auto gate_code = [](int o, int) { return o % 8 | (o % 16 >= 8 ? 8 : 0); };  // constant per row
  auto down_code = [](int h, int f) { return (h + 3 * f) % 16; };
  RankWeights w;
  w.experts = 1;
  w.hidden = 64;
  w.ff = 64;
  // Token 0 is all ones: g[o] = 64 * e2m1(gate_code) / 64, u = 64 * 2 / 64 = 2.
  w.gate.push_back(matrix_from_codes(64, 64, 1.0f / 64, gate_code));
  w.up.push_back(matrix_from_codes(64, 64, 1.0f / 64, [](int, int) { return 4; }));
  w.down.push_back(matrix_from_codes(64, 64, 0.25f, down_code));
  std::vector<float> z(2 * 64, 1.0f);
  for (int k = 0; k < 64; ++k) z[64 + static_cast<std::size_t>(k)] = k % 2 == 0 ? 0.5f : -0.5f;  // token 1: g = u = 0

  auto value = [&](int code) { return (code & 8 ? -1.0 : 1.0) * e2m1[code & 7]; };
  std::vector<double> a(64);
  for (int o = 0; o < 64; ++o) {
    const double gv = value(gate_code(o, 0));
    a[static_cast<std::size_t>(o)] = gv / (1.0 + std::exp(-gv)) * 2.0;
  }
  const auto out = reference_layer_output(g, r, std::vector<RankWeights>{w}, z, all_tokens(2));
  REQUIRE(out.size() == 128);
  double amax_a = 0;
  for (const double v : a) amax_a = std::max(amax_a, std::fabs(v));
  for (int h = 0; h < 64; ++h) {
    double expected = 0;
    for (int f = 0; f < 64; ++f) expected += a[static_cast<std::size_t>(f)] * value(down_code(h, f)) * 0.25;
    INFO("h = " << h);
    // a16 carries a's fp16 rounding: at most 2^-12 * max|a| per term, times |w| <= 1.5, 64 terms.
    CHECK(std::fabs(out[static_cast<std::size_t>(h)] - expected) <= 64 * 1.5 * amax_a * 0x1p-12);
    CHECK(out[64 + static_cast<std::size_t>(h)] == 0.0f);  // token 1's g and u are exactly 0
  }
}

TEST_CASE("the ranks' outputs summed in rank order are the layer output", "[reference]") {
  Geometry g = small_geometry();
  g.ranks = 3;
  const Routing r = build_routing(g);
  const auto z = make_layer_input(g, 3);
  std::vector<RankWeights> ranks;
  for (int rank = 0; rank < g.ranks; ++rank) ranks.push_back(make_rank_weights(g, rank, WeightsKind::random, 3));
  const auto tokens = all_tokens(g.tokens);
  const auto layer = reference_layer_output(g, r, ranks, z, tokens);
  const auto o0 = reference_rank_output(g, r, ranks[0], z, tokens);
  const auto o1 = reference_rank_output(g, r, ranks[1], z, tokens);
  const auto o2 = reference_rank_output(g, r, ranks[2], z, tokens);
  REQUIRE(layer.size() == o0.size());
  for (std::size_t i = 0; i < layer.size(); ++i) REQUIRE(layer[i] == (o0[i] + o1[i]) + o2[i]);
  CHECK(o0 != o1);
}

TEST_CASE("a subset of tokens gives exactly the rows of the full per-stage computation", "[reference]") {
  const Geometry g = small_geometry();
  const Routing r = build_routing(g);
  const auto z = make_layer_input(g, 9);
  const RankWeights w = make_rank_weights(g, 1, WeightsKind::random, 9);
  const RankTrace trace = reference_rank_trace(g, r, w, z);
  const auto full = reference_rank_output(g, r, w, z, all_tokens(g.tokens));
  CHECK(full == trace.out);
  const std::vector<int> subset = {0, 5, 6, 15};
  const auto part = reference_rank_output(g, r, w, z, subset);
  const auto h = static_cast<std::size_t>(g.hidden);
  for (std::size_t i = 0; i < subset.size(); ++i) {
    for (std::size_t k = 0; k < h; ++k)
      REQUIRE(part[i * h + k] == trace.out[static_cast<std::size_t>(subset[i]) * h + k]);
  }
  // The output is not degenerate.
  const auto amax =
      std::accumulate(part.begin(), part.end(), 0.0f, [](float m, float v) { return std::max(m, std::fabs(v)); });
  CHECK(amax > 0.05f);
  CHECK(amax < 20.0f);
}

TEST_CASE("the trace's stages agree with the per-stage helpers", "[reference]") {
  const Geometry g = small_geometry();
  const Routing r = build_routing(g);
  const auto z = make_layer_input(g, 4);
  const RankWeights w = make_rank_weights(g, 0, WeightsKind::random, 4);
  const RankTrace tr = reference_rank_trace(g, r, w, z);
  const auto h = static_cast<std::size_t>(g.hidden);
  const auto ff = static_cast<std::size_t>(g.ff);
  // One CSR row of the first active expert, by hand from the helpers.
  const std::size_t row = 0;
  const auto e = static_cast<std::size_t>(r.active_experts[0]);
  std::vector<std::uint16_t> z16(h);
  const float zs = quantize_row_to_half(std::span(z).subspan(static_cast<std::size_t>(r.row_token[row]) * h, h), z16);
  CHECK(zs == tr.zs[row]);
  CHECK(std::equal(z16.begin(), z16.end(), tr.z16.begin()));
  std::vector<float> gate(ff);
  reference_gemm_rows(w.gate[e], z16, std::vector<float>{zs}, 1, gate);
  CHECK(std::equal(gate.begin(), gate.end(), tr.g.begin()));
  for (std::size_t f = 0; f < ff; ++f) CHECK(tr.a[f] == swiglu(tr.g[f], tr.u[f]));
  // swiglu itself: g * sigmoid(g) * u.
  CHECK(swiglu(0.0f, 3.0f) == 0.0f);
  CHECK(swiglu(2.0f, 1.0f) == Approx(2.0 / (1.0 + std::exp(-2.0))).epsilon(1e-6));
  CHECK(swiglu(-100.0f, 1.0f) == Approx(0.0).margin(1e-30));
}

TEST_CASE("zero weights give an all-zero output, which the comparison calls vacuous", "[reference]") {
  const Geometry g = small_geometry();
  const Routing r = build_routing(g);
  const auto z = make_layer_input(g, 2);
  const std::vector<RankWeights> ranks = {make_rank_weights(g, 0, WeightsKind::zeros, 2),
                                          make_rank_weights(g, 1, WeightsKind::zeros, 2)};
  const auto out = reference_layer_output(g, r, ranks, z, all_tokens(g.tokens));
  CHECK(std::all_of(out.begin(), out.end(), [](float v) { return v == 0.0f; }));
  const Comparison c = compare_to_reference(out, out);
  CHECK(c.passed());
  CHECK(c.vacuous());
}

TEST_CASE("sample_tokens is deterministic, sorted, and holds the first and the last token", "[reference]") {
  const auto s = sample_tokens(4096, 64);
  CHECK(s == sample_tokens(4096, 64));
  REQUIRE(s.size() == 64);
  CHECK(s.front() == 0);
  CHECK(s.back() == 4095);
  CHECK(std::adjacent_find(s.begin(), s.end(), [](int a, int b) { return a >= b; }) == s.end());
  // Spread over the batch: one token per stratum of (4094 / 62) tokens.
  CHECK(s[31] > 1000);
  CHECK(s[31] < 3000);
  CHECK(sample_tokens(43, 100) == all_tokens(43));
  CHECK(sample_tokens(1, 1) == std::vector<int>{0});
  CHECK(sample_tokens(10, 2) == std::vector<int>{0, 9});
  CHECK_THROWS_AS(sample_tokens(100, 1), InputError);
}

TEST_CASE("compare_to_reference counts errors against the tolerance times max|ref|", "[reference]") {
  std::vector<float> ref(1000);
  for (std::size_t i = 0; i < ref.size(); ++i) ref[i] = std::sin(static_cast<float>(i)) * 2.0f;
  const double absmax = 2.0 * std::fabs(std::sin(11.0));  // close to 2
  SECTION("identical") {
    const auto c = compare_to_reference(ref, ref);
    CHECK(c.passed());
    CHECK_FALSE(c.vacuous());
    CHECK(c.max_abs_err == 0.0);
    CHECK(c.compared == 1000);
    CHECK(c.tolerance == kReferenceTolerance);
  }
  SECTION("small errors pass, one large one fails") {
    auto gpu = ref;
    for (auto& v : gpu) v += static_cast<float>(0.2 * kReferenceTolerance * absmax);
    CHECK(compare_to_reference(gpu, ref).passed());
    gpu[17] += static_cast<float>(2 * kReferenceTolerance * absmax);
    const auto c = compare_to_reference(gpu, ref);
    CHECK_FALSE(c.passed());
    CHECK(c.mismatches == 1);
    CHECK(c.max_rel_err > kReferenceTolerance);
  }
  SECTION("NaN fails") {
    auto gpu = ref;
    gpu[3] = NAN;
    const auto c = compare_to_reference(gpu, ref);
    CHECK(c.nan_count == 1);
    CHECK_FALSE(c.passed());
  }
  SECTION("an all-zero GPU output is vacuous and fails against a non-zero reference") {
    const std::vector<float> gpu(ref.size(), 0.0f);
    const auto c = compare_to_reference(gpu, ref);
    CHECK(c.vacuous());
    CHECK_FALSE(c.passed());
  }
  CHECK_THROWS_AS(compare_to_reference(std::vector<float>(3), std::vector<float>(4)), std::invalid_argument);
}

// The tolerance's evidence at the real depth (hidden = 4096, ff = 640): a GPU-like computation
// passes with margin, and each planted bug fails.
TEST_CASE("a GPU-like fp32 computation passes the tolerance and planted bugs fail it", "[reference]") {
  Geometry g;
  g.experts = 4;
  g.top_k = 2;
  g.hidden = 4096;
  g.ff = 640;
  g.tokens = 4;
  g.ranks = 1;
  const Routing r = build_routing(g);
  const auto z = make_layer_input(g, 17);
  const RankWeights w = make_rank_weights(g, 0, WeightsKind::random, 17);
  const auto tokens = all_tokens(g.tokens);
  const auto ref = reference_rank_output(g, r, w, z, tokens);
  const auto ok = compare_to_reference(rank_like_gpu(g, r, w, z, tokens, Bug::none), ref);
  INFO("GPU-like max error / max|ref| = " << ok.max_rel_err);
  CHECK(ok.passed());
  CHECK(ok.max_rel_err < kReferenceTolerance / 5);
  CHECK(ok.max_rel_err > 0.0);  // the emulation really differs
  // Each bug touches token 0 (the block-scale one every token), so token 0 alone shows it.
  const std::vector<float> ref0(ref.begin(), ref.begin() + g.hidden);
  for (const Bug bug : {Bug::wrong_expert, Bug::dropped_chunk, Bug::block_scale, Bug::missing_pair}) {
    const auto c = compare_to_reference(rank_like_gpu(g, r, w, z, {0}, bug), ref0);
    INFO("bug " << static_cast<int>(bug) << ": max error / max|ref| = " << c.max_rel_err);
    CHECK_FALSE(c.passed());
  }
}
