// The CPU reference of the layer: the numerics contract of reference.hpp, step by step.
#include "core/numerics/reference.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "core/base/error.hpp"
#include "core/base/parallel.hpp"
#include "core/numerics/half.hpp"

namespace tpgraph {
namespace {

std::size_t to_size(std::int64_t v) { return static_cast<std::size_t>(v); }

void require(bool ok, const std::string& what) {
  if (!ok) throw std::invalid_argument("reference: " + what);
}

void check_matrix(const Nvfp4Matrix& w) {
  require(w.rows >= 0 && w.cols >= 0 && w.cols % kNvfp4ChunkElems == 0 &&
              static_cast<std::int64_t>(w.bytes.size()) == nvfp4_matrix_bytes(w.rows, w.cols),
          "an NVFP4 matrix of " + std::to_string(w.rows) + " x " + std::to_string(w.cols) + " holds " +
              std::to_string(w.bytes.size()) + " bytes");
}

// The sum of exact products (fp16 x fp16 fits in 22 bits) in double. Eight interleaved partial sums
// keep the adds independent, so the loop runs at throughput; the order is fixed and its rounding
// (~1e-16 relative) is far below anything the comparison can see.
double dot_exact(const float* x, const float* w, int n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int l = 0; l < 8; ++l) acc[l] += static_cast<double>(x[k + l]) * static_cast<double>(w[k + l]);
  }
  for (; k < n; ++k) acc[k % 8] += static_cast<double>(x[k]) * static_cast<double>(w[k]);
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Steps 2 and 5 for one expert: y_rows[i][o] = (float)((double)(xs[i] * ts) * dot(x_rows[i], w16[o])).
// Each weight row is decoded once and used for every input row, so the matrix is read once.
void expert_gemm(const Nvfp4Matrix& w, std::span<const float* const> x_rows, std::span<const float> xs,
                 std::span<float* const> y_rows, std::vector<float>& w_row) {
  const auto cols = static_cast<std::size_t>(w.cols);
  const std::size_t row_bytes = cols / kNvfp4ChunkElems * kNvfp4ChunkBytes;
  w_row.resize(cols);
  std::vector<double> row_scale(x_rows.size());
  for (std::size_t i = 0; i < x_rows.size(); ++i) row_scale[i] = static_cast<double>(xs[i] * w.tensor_scale);
  for (std::size_t o = 0; o < static_cast<std::size_t>(w.rows); ++o) {
    nvfp4_decode_row(std::span(w.bytes).subspan(o * row_bytes, row_bytes), w_row);
    for (std::size_t i = 0; i < x_rows.size(); ++i) {
      y_rows[i][o] = static_cast<float>(row_scale[i] * dot_exact(x_rows[i], w_row.data(), w.cols));
    }
  }
}

std::vector<float> halves_to_floats(std::span<const std::uint16_t> h) {
  std::vector<float> f(h.size());
  for (std::size_t i = 0; i < h.size(); ++i) f[i] = half_to_float(h[i]);
  return f;
}

void check_tokens(std::span<const int> tokens, int n_tokens) {
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    require(tokens[i] >= 0 && tokens[i] < n_tokens,
            "token " + std::to_string(tokens[i]) + " is outside 0.." + std::to_string(n_tokens - 1));
    require(i == 0 || tokens[i - 1] < tokens[i], "the chosen tokens must be sorted and unique");
  }
}

void check_routing(const Geometry& g, const Routing& r) {
  require(r.tokens == g.tokens && r.top_k == g.top_k && r.experts == g.experts && r.n_pairs() == g.pairs() &&
              std::ssize(r.pair_row) == g.pairs() && std::ssize(r.pair_weight) == g.pairs() &&
              r.offsets.size() == r.active_experts.size() + 1,
          "the routing was built for another geometry");
}

void check_rank(const Geometry& g, const RankWeights& w) {
  require(w.experts == g.experts && w.hidden == g.hidden && w.ff == g.ff && std::ssize(w.gate) == g.experts &&
              std::ssize(w.up) == g.experts && std::ssize(w.down) == g.experts,
          "the rank's weights were built for another geometry");
  for (int e = 0; e < g.experts; ++e) {
    const auto i = static_cast<std::size_t>(e);
    for (const Nvfp4Matrix* m : {&w.gate[i], &w.up[i], &w.down[i]}) check_matrix(*m);
    require(w.gate[i].rows == g.ff && w.gate[i].cols == g.hidden && w.up[i].rows == g.ff && w.up[i].cols == g.hidden &&
                w.down[i].rows == g.hidden && w.down[i].cols == g.ff,
            "expert " + std::to_string(e) + "'s matrices do not match the geometry");
  }
}

// The active-expert index (into routing.active_experts) of a CSR row.
int active_index_of_row(const Routing& r, int row) {
  const auto it = std::upper_bound(r.offsets.begin(), r.offsets.end(), row);
  return static_cast<int>(it - r.offsets.begin()) - 1;
}

}  // namespace

float quantize_row_to_half(std::span<const float> x, std::span<std::uint16_t> out) {
  require(x.size() == out.size(), "quantize_row_to_half: input and output sizes differ");
  float amax = 0.0f;
  for (const float v : x) amax = std::max(amax, std::fabs(v));
  const float s = amax == 0.0f ? 1.0f : amax;
  const float inv = 1.0f / s;
  for (std::size_t k = 0; k < x.size(); ++k) out[k] = float_to_half(x[k] * inv);
  return s;
}

float swiglu(float g, float u) { return (g / (1.0f + std::exp(-g))) * u; }

void reference_gemm_rows(const Nvfp4Matrix& w, std::span<const std::uint16_t> x16, std::span<const float> xs,
                         int n_rows, std::span<float> y) {
  check_matrix(w);
  const auto n = static_cast<std::size_t>(std::max(n_rows, 0));
  require(n_rows >= 0 && x16.size() == n * static_cast<std::size_t>(w.cols) && xs.size() == n &&
              y.size() == n * static_cast<std::size_t>(w.rows),
          "reference_gemm_rows: sizes do not match n_rows and the matrix");
  const std::vector<float> x = halves_to_floats(x16);
  std::vector<const float*> x_rows(n);
  std::vector<float*> y_rows(n);
  for (std::size_t i = 0; i < n; ++i) {
    x_rows[i] = x.data() + i * static_cast<std::size_t>(w.cols);
    y_rows[i] = y.data() + i * static_cast<std::size_t>(w.rows);
  }
  std::vector<float> w_row;
  expert_gemm(w, x_rows, xs, y_rows, w_row);
}

void reference_gather_quantize(const Routing& routing, std::span<const float> z, int hidden,
                               std::span<std::uint16_t> z16, std::span<float> zs) {
  const auto h = static_cast<std::size_t>(hidden);
  const auto rows = to_size(routing.n_pairs());
  require(hidden > 0 && z.size() == static_cast<std::size_t>(routing.tokens) * h && z16.size() == rows * h &&
              zs.size() == rows,
          "reference_gather_quantize: sizes do not match the routing and hidden");
  for (std::size_t i = 0; i < rows; ++i) {
    const auto t = static_cast<std::size_t>(routing.row_token[i]);
    zs[i] = quantize_row_to_half(z.subspan(t * h, h), z16.subspan(i * h, h));
  }
}

void reference_grouped_gemm(const Routing& routing, std::span<const Nvfp4Matrix> w, std::span<const std::uint16_t> x16,
                            std::span<const float> xs, std::span<float> y) {
  require(std::ssize(w) == routing.experts && !w.empty(), "reference_grouped_gemm: one matrix per expert");
  const int out_f = w[0].rows;
  const int in_f = w[0].cols;
  for (const auto& m : w) {
    check_matrix(m);
    require(m.rows == out_f && m.cols == in_f, "reference_grouped_gemm: the experts' matrices differ in shape");
  }
  const auto rows = to_size(routing.n_pairs());
  require(x16.size() == rows * static_cast<std::size_t>(in_f) && xs.size() == rows &&
              y.size() == rows * static_cast<std::size_t>(out_f),
          "reference_grouped_gemm: sizes do not match the routing and the matrices");
  const int workers = worker_count(routing.n_active());
  struct Scratch {
    std::vector<float> x, w_row;
  };
  std::vector<Scratch> scratch(static_cast<std::size_t>(workers));
  parallel_for(routing.n_active(), workers, [&](std::int64_t a, int worker) {
    const auto first = static_cast<std::size_t>(routing.offsets[to_size(a)]);
    const auto last = static_cast<std::size_t>(routing.offsets[to_size(a) + 1]);
    const auto in = static_cast<std::size_t>(in_f);
    Scratch& s = scratch[static_cast<std::size_t>(worker)];
    // Only this expert's rows as floats: the whole x16 at t = 4096 would be 512 MiB.
    s.x.resize((last - first) * in);
    for (std::size_t i = 0; i < s.x.size(); ++i) s.x[i] = half_to_float(x16[first * in + i]);
    std::vector<const float*> x_rows;
    std::vector<float*> y_rows;
    for (std::size_t i = first; i < last; ++i) {
      x_rows.push_back(s.x.data() + (i - first) * in);
      y_rows.push_back(y.data() + i * static_cast<std::size_t>(out_f));
    }
    const auto expert = static_cast<std::size_t>(routing.active_experts[to_size(a)]);
    expert_gemm(w[expert], x_rows, xs.subspan(first, last - first), y_rows, s.w_row);
  });
}

std::vector<float> reference_combine(const Routing& routing, std::span<const float> y, int hidden,
                                     std::span<const int> tokens) {
  const auto h = static_cast<std::size_t>(hidden);
  require(hidden > 0 && y.size() == to_size(routing.n_pairs()) * h,
          "reference_combine: y must hold n_pairs x hidden values");
  check_tokens(tokens, routing.tokens);
  std::vector<float> out(tokens.size() * h, 0.0f);
  for (std::size_t ti = 0; ti < tokens.size(); ++ti) {
    float* acc = out.data() + ti * h;
    for (int j = 0; j < routing.top_k; ++j) {
      const auto p =
          static_cast<std::size_t>(tokens[ti]) * static_cast<std::size_t>(routing.top_k) + static_cast<std::size_t>(j);
      const float weight = routing.pair_weight[p];
      const float* yr = y.data() + static_cast<std::size_t>(routing.pair_row[p]) * h;
      for (std::size_t k = 0; k < h; ++k) acc[k] = std::fma(weight, yr[k], acc[k]);
    }
  }
  return out;
}

std::vector<float> reference_join(std::span<const std::vector<float>> partials) {
  require(!partials.empty(), "reference_join: no partial outputs");
  std::vector<float> out = partials[0];
  for (std::size_t r = 1; r < partials.size(); ++r) {
    require(partials[r].size() == out.size(), "reference_join: the ranks' outputs differ in size");
    for (std::size_t i = 0; i < out.size(); ++i) out[i] += partials[r][i];
  }
  return out;
}

RankTrace reference_rank_trace(const Geometry& g, const Routing& routing, const RankWeights& w,
                               std::span<const float> z) {
  check_routing(g, routing);
  check_rank(g, w);
  const auto h = static_cast<std::size_t>(g.hidden);
  const auto ff = static_cast<std::size_t>(g.ff);
  const auto rows = to_size(routing.n_pairs());
  require(z.size() == static_cast<std::size_t>(g.tokens) * h, "z must hold tokens x hidden values");
  RankTrace tr;
  tr.z16.resize(rows * h);
  tr.zs.resize(rows);
  reference_gather_quantize(routing, z, g.hidden, tr.z16, tr.zs);
  tr.g.resize(rows * ff);
  tr.u.resize(rows * ff);
  reference_grouped_gemm(routing, w.gate, tr.z16, tr.zs, tr.g);
  reference_grouped_gemm(routing, w.up, tr.z16, tr.zs, tr.u);
  tr.a.resize(rows * ff);
  for (std::size_t i = 0; i < rows * ff; ++i) tr.a[i] = swiglu(tr.g[i], tr.u[i]);
  tr.a16.resize(rows * ff);
  tr.as.resize(rows);
  for (std::size_t i = 0; i < rows; ++i) {
    tr.as[i] = quantize_row_to_half(std::span(tr.a).subspan(i * ff, ff), std::span(tr.a16).subspan(i * ff, ff));
  }
  tr.y.resize(rows * h);
  reference_grouped_gemm(routing, w.down, tr.a16, tr.as, tr.y);
  std::vector<int> all(static_cast<std::size_t>(g.tokens));
  for (int t = 0; t < g.tokens; ++t) all[static_cast<std::size_t>(t)] = t;
  tr.out = reference_combine(routing, tr.y, g.hidden, all);
  return tr;
}

std::vector<float> reference_rank_output(const Geometry& g, const Routing& routing, const RankWeights& w,
                                         std::span<const float> z, std::span<const int> tokens) {
  check_routing(g, routing);
  check_rank(g, w);
  check_tokens(tokens, g.tokens);
  const auto h = static_cast<std::size_t>(g.hidden);
  const auto ff = static_cast<std::size_t>(g.ff);
  const auto k = static_cast<std::size_t>(g.top_k);
  require(z.size() == static_cast<std::size_t>(g.tokens) * h, "z must hold tokens x hidden values");
  const std::size_t n_sel = tokens.size();

  // Step 1 once per chosen token (every pair of a token gathers the same row).
  std::vector<float> z16(n_sel * h);
  std::vector<float> zs(n_sel);
  {
    std::vector<std::uint16_t> bits(h);
    for (std::size_t ti = 0; ti < n_sel; ++ti) {
      zs[ti] = quantize_row_to_half(z.subspan(static_cast<std::size_t>(tokens[ti]) * h, h), bits);
      for (std::size_t i = 0; i < h; ++i) z16[ti * h + i] = half_to_float(bits[i]);
    }
  }

  // Slot ti*k + j is pair tokens[ti]*k + j; group the slots by expert so each matrix is read once.
  std::vector<std::vector<std::size_t>> slots_of(static_cast<std::size_t>(g.experts));
  for (std::size_t ti = 0; ti < n_sel; ++ti) {
    for (std::size_t j = 0; j < k; ++j) {
      const auto p = static_cast<std::size_t>(tokens[ti]) * k + j;
      const int a = active_index_of_row(routing, routing.pair_row[p]);
      slots_of[static_cast<std::size_t>(routing.active_experts[static_cast<std::size_t>(a)])].push_back(ti * k + j);
    }
  }
  std::vector<int> experts;
  for (int e = 0; e < g.experts; ++e) {
    if (!slots_of[static_cast<std::size_t>(e)].empty()) experts.push_back(e);
  }

  std::vector<float> y(n_sel * k * h);
  struct Scratch {
    std::vector<float> w_row, gate, up, a, a16;
    std::vector<std::uint16_t> a_bits;
  };
  const int workers = worker_count(std::ssize(experts));
  std::vector<Scratch> scratch(static_cast<std::size_t>(workers));
  parallel_for(std::ssize(experts), workers, [&](std::int64_t item, int worker) {
    const auto e = static_cast<std::size_t>(experts[to_size(item)]);
    const auto& slots = slots_of[e];
    const std::size_t n = slots.size();
    Scratch& s = scratch[static_cast<std::size_t>(worker)];
    s.gate.resize(n * ff);
    s.up.resize(n * ff);
    s.a.resize(ff);
    s.a16.resize(n * ff);
    s.a_bits.resize(ff);
    std::vector<const float*> x_rows(n);
    std::vector<float> xs(n), as(n);
    std::vector<float*> g_rows(n), u_rows(n), y_rows(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t ti = slots[i] / k;
      x_rows[i] = z16.data() + ti * h;
      xs[i] = zs[ti];
      g_rows[i] = s.gate.data() + i * ff;
      u_rows[i] = s.up.data() + i * ff;
      y_rows[i] = y.data() + slots[i] * h;
    }
    expert_gemm(w.gate[e], x_rows, xs, g_rows, s.w_row);
    expert_gemm(w.up[e], x_rows, xs, u_rows, s.w_row);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t f = 0; f < ff; ++f) s.a[f] = swiglu(g_rows[i][f], u_rows[i][f]);
      as[i] = quantize_row_to_half(s.a, s.a_bits);
      for (std::size_t f = 0; f < ff; ++f) s.a16[i * ff + f] = half_to_float(s.a_bits[f]);
      x_rows[i] = s.a16.data() + i * ff;
    }
    expert_gemm(w.down[e], x_rows, as, y_rows, s.w_row);
  });

  // Step 6, the same fma chain as reference_combine, over the slots instead of CSR rows.
  std::vector<float> out(n_sel * h, 0.0f);
  for (std::size_t ti = 0; ti < n_sel; ++ti) {
    float* acc = out.data() + ti * h;
    for (std::size_t j = 0; j < k; ++j) {
      const float weight = routing.pair_weight[static_cast<std::size_t>(tokens[ti]) * k + j];
      const float* yr = y.data() + (ti * k + j) * h;
      for (std::size_t i = 0; i < h; ++i) acc[i] = std::fma(weight, yr[i], acc[i]);
    }
  }
  return out;
}

std::vector<float> reference_layer_output(const Geometry& g, const Routing& routing, std::span<const RankWeights> ranks,
                                          std::span<const float> z, std::span<const int> tokens) {
  require(std::ssize(ranks) == g.ranks, "reference_layer_output: " + std::to_string(ranks.size()) +
                                            " ranks' weights for a geometry of " + std::to_string(g.ranks));
  std::vector<std::vector<float>> partials;
  partials.reserve(ranks.size());
  for (const auto& w : ranks) partials.push_back(reference_rank_output(g, routing, w, z, tokens));
  return reference_join(partials);
}

std::vector<int> sample_tokens(int tokens, int count) {
  if (tokens < 1) throw InputError("token sample: the batch has " + std::to_string(tokens) + " tokens; needs >= 1");
  if (count >= tokens) {
    std::vector<int> all(static_cast<std::size_t>(tokens));
    for (int t = 0; t < tokens; ++t) all[static_cast<std::size_t>(t)] = t;
    return all;
  }
  if (count < 2) {
    throw InputError("token sample: " + std::to_string(count) +
                     " tokens asked; the sample needs >= 2 (it always holds the first and the last token)");
  }
  // count < tokens, so the interior 1..tokens-2 has more tokens than strata: no stratum is empty.
  const std::int64_t interior = tokens - 2;
  const std::int64_t strata = count - 2;
  std::vector<int> out{0};
  for (std::int64_t i = 0; i < strata; ++i) {
    const std::int64_t lo = 1 + i * interior / strata;
    const std::int64_t hi = 1 + (i + 1) * interior / strata;
    const auto pick = random_stream_key(static_cast<std::uint64_t>(tokens), 3, static_cast<std::uint64_t>(count),
                                        static_cast<std::uint64_t>(i)) %
                      static_cast<std::uint64_t>(hi - lo);
    out.push_back(static_cast<int>(lo + static_cast<std::int64_t>(pick)));
  }
  out.push_back(tokens - 1);
  return out;
}

Comparison compare_to_reference(std::span<const float> gpu, std::span<const float> ref, double tolerance) {
  require(gpu.size() == ref.size(), "compare_to_reference: " + std::to_string(gpu.size()) + " GPU values vs " +
                                        std::to_string(ref.size()) + " reference values");
  Comparison c;
  c.compared = std::ssize(gpu);
  c.tolerance = tolerance;
  for (std::size_t i = 0; i < ref.size(); ++i) c.ref_absmax = std::max(c.ref_absmax, std::fabs(double{ref[i]}));
  const double bound = tolerance * c.ref_absmax;
  for (std::size_t i = 0; i < gpu.size(); ++i) {
    const double v = gpu[i];
    if (std::isnan(v)) {
      ++c.nan_count;
      ++c.mismatches;
      continue;
    }
    if (v != 0.0) ++c.nonzero;
    c.absmax = std::max(c.absmax, std::fabs(v));
    const double err = std::fabs(v - double{ref[i]});
    if (!(err <= bound)) ++c.mismatches;  // also catches a NaN or inf in the reference
    if (!std::isnan(err)) c.max_abs_err = std::max(c.max_abs_err, err);
  }
  c.max_rel_err = c.ref_absmax > 0 ? c.max_abs_err / c.ref_absmax : (c.max_abs_err > 0 ? INFINITY : 0.0);
  return c;
}

}  // namespace tpgraph
