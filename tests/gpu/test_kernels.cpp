// The kernels against the CPU reference (src/core/numerics/reference.hpp), on the GPU.
//
// Tolerance: kReferenceTolerance (2e-3 of the compared output's max |ref|), the one compare_to_reference
// states. The GPU sums exact fp16 products in fp32 in the tensor core's order where the reference
// sums them in double; that moves g, u and y by ~1e-6 relative, and can flip one fp16 rounding of
// a16 (one ulp, 2^-11) on a few of the down GEMM's terms, together far below 1e-4 of max |ref|. A
// wrong row, expert, scale or block moves outputs by 1e-2 or more. The stages with no sum (quantize,
// combine) are compared bit for bit, swiglu (expf against std::exp, 1-2 ulps) at 1e-5.
//
// Every run poisons the outputs first (NaN bytes), so an element no kernel wrote shows as a NaN.
#include "catch.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numeric>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "core/numerics/half.hpp"
#include "core/numerics/reference.hpp"
#include "core/numerics/router.hpp"
#include "cuda/capture.hpp"
#include "cuda/layer_buffers.hpp"
#include "cuda/owners.hpp"
#include "kernels/kernels.hpp"
#include "kernels/limits.hpp"

using namespace tpgraph;

namespace {

struct Case {
  Geometry g;
  Routing routing;
  const RankWeights* weights = nullptr;
  std::vector<float> z;
};

// Weights depend on the geometry's experts, hidden and ff only: build each set once per process.
const RankWeights& weights_for(const Geometry& g) {
  static std::map<std::tuple<int, int, int>, RankWeights> cache;
  const auto key = std::make_tuple(g.experts, g.hidden, g.ff);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make_rank_weights(g, 0, WeightsKind::random, 1)).first;
  return it->second;
}

// z of a t-token batch is the first t rows of one 4096-token input, so batches share tokens.
std::vector<float> input_prefix(const Geometry& g) {
  Geometry big = g;
  big.tokens = std::max(g.tokens, 4096);
  static std::map<std::tuple<int, int>, std::vector<float>> cache;
  const auto key = std::make_tuple(big.tokens, g.hidden);
  auto it = cache.find(key);
  if (it == cache.end()) it = cache.emplace(key, make_layer_input(big, 7)).first;
  return {it->second.begin(), it->second.begin() + std::int64_t{g.tokens} * g.hidden};
}

Case make_case(const Geometry& g) {
  Case c;
  c.g = g;
  c.routing = build_routing(g);
  c.weights = &weights_for(g);
  c.z = input_prefix(g);
  return c;
}

Geometry small_geometry(int experts, int top_k, int hidden, int ff, int tokens) {
  Geometry g;
  g.experts = experts;
  g.top_k = top_k;
  g.hidden = hidden;
  g.ff = ff;
  g.tokens = tokens;
  g.ranks = 1;
  return g;
}

RankTrace run_chain(const Case& c, Layout layout, int tile = -1) {
  cuda::RankLayer layer(0, c.g, c.routing, *c.weights, layout, tile);
  layer.upload_input(c.z);
  layer.poison();
  const cuda::Stream stream = cuda::make_stream(0);
  layer.enqueue_chain(stream.get());
  TPG_CUDA(cudaStreamSynchronize(stream.get()));
  return layer.download_trace();
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <class T>
std::int64_t nan_count(const std::vector<T>& v) {
  std::int64_t n = 0;
  for (const T x : v) {
    if constexpr (std::is_same_v<T, std::uint16_t>) {
      n += std::isnan(half_to_float(x)) ? 1 : 0;
    } else {
      n += std::isnan(x) ? 1 : 0;
    }
  }
  return n;
}

void require_all_written(const RankTrace& t) {
  CHECK(nan_count(t.z16) == 0);
  CHECK(nan_count(t.zs) == 0);
  CHECK(nan_count(t.g) == 0);
  CHECK(nan_count(t.u) == 0);
  CHECK(nan_count(t.a) == 0);
  CHECK(nan_count(t.a16) == 0);
  CHECK(nan_count(t.as) == 0);
  CHECK(nan_count(t.y) == 0);
  CHECK(nan_count(t.out) == 0);
}

void require_close(const std::vector<float>& gpu, const std::vector<float>& ref, double tolerance, const char* what) {
  const Comparison cmp = compare_to_reference(gpu, ref, tolerance);
  INFO(what << ": compared " << cmp.compared << ", mismatches " << cmp.mismatches << ", NaN " << cmp.nan_count
            << ", max rel err " << cmp.max_rel_err << " (tolerance " << tolerance << "), absmax " << cmp.absmax);
  CHECK(cmp.passed());
  CHECK(!cmp.vacuous());
}

// Each stage of the GPU chain against the CPU's version of that stage fed with the GPU's own input
// to it, so a failure names the kernel.
void check_stages(const Case& c, const RankTrace& gpu) {
  const auto pairs = static_cast<std::size_t>(c.routing.n_pairs());
  const auto hidden = static_cast<std::size_t>(c.g.hidden);
  const auto ff = static_cast<std::size_t>(c.g.ff);
  require_all_written(gpu);

  std::vector<std::uint16_t> z16(pairs * hidden);
  std::vector<float> zs(pairs);
  reference_gather_quantize(c.routing, c.z, c.g.hidden, z16, zs);
  CHECK(same_bits(gpu.z16, z16));
  CHECK(same_bits(gpu.zs, zs));

  std::vector<float> g(pairs * ff), u(pairs * ff);
  reference_grouped_gemm(c.routing, c.weights->gate, gpu.z16, gpu.zs, g);
  reference_grouped_gemm(c.routing, c.weights->up, gpu.z16, gpu.zs, u);
  require_close(gpu.g, g, kReferenceTolerance, "gate");
  require_close(gpu.u, u, kReferenceTolerance, "up");

  std::vector<float> a(pairs * ff);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = swiglu(gpu.g[i], gpu.u[i]);
  require_close(gpu.a, a, 1e-5, "swiglu");

  std::vector<std::uint16_t> a16(pairs * ff);
  std::vector<float> as(pairs);
  for (std::size_t i = 0; i < pairs; ++i) {
    as[i] = quantize_row_to_half(std::span(gpu.a).subspan(i * ff, ff), std::span(a16).subspan(i * ff, ff));
  }
  CHECK(same_bits(gpu.a16, a16));
  CHECK(same_bits(gpu.as, as));

  std::vector<float> y(pairs * hidden);
  reference_grouped_gemm(c.routing, c.weights->down, gpu.a16, gpu.as, y);
  require_close(gpu.y, y, kReferenceTolerance, "down");

  std::vector<int> all(static_cast<std::size_t>(c.g.tokens));
  std::iota(all.begin(), all.end(), 0);
  CHECK(same_bits(gpu.out, reference_combine(c.routing, gpu.y, c.g.hidden, all)));
  require_close(gpu.out, reference_rank_output(c.g, c.routing, *c.weights, c.z, all), kReferenceTolerance,
                "rank output");
}

void check_same_outputs(const RankTrace& a, const RankTrace& b) {
  CHECK(same_bits(a.g, b.g));
  CHECK(same_bits(a.u, b.u));
  CHECK(same_bits(a.a16, b.a16));
  CHECK(same_bits(a.y, b.y));
  CHECK(same_bits(a.out, b.out));
}

std::vector<int> row_counts(const Routing& r) {
  std::vector<int> rows(static_cast<std::size_t>(r.experts), 0);
  for (int a = 0; a < r.n_active(); ++a) {
    rows[static_cast<std::size_t>(r.active_experts[static_cast<std::size_t>(a)])] =
        r.offsets[static_cast<std::size_t>(a) + 1] - r.offsets[static_cast<std::size_t>(a)];
  }
  return rows;
}

}  // namespace

TEST_CASE("each kernel matches its CPU stage on small shapes, both layouts", "[gpu][kernels]") {
  // The last shape's rows are wider than one 16-column block per thread (gather + quantize: 256
  // threads a token; quantize: 32 lanes a row), so the blocks past the one each thread holds in
  // registers are read a second time.
  const Geometry shapes[] = {small_geometry(8, 1, 128, 64, 37), small_geometry(8, 2, 256, 64, 100),
                             small_geometry(16, 4, 192, 128, 1), small_geometry(12, 3, 320, 192, 260),
                             small_geometry(8, 2, 4160, 576, 20)};
  for (const Geometry& g : shapes) {
    for (const Layout layout : {Layout::v1, Layout::v2}) {
      DYNAMIC_SECTION("E=" << g.experts << " k=" << g.top_k << " hidden=" << g.hidden << " ff=" << g.ff
                           << " t=" << g.tokens << " " << to_string(layout)) {
        const Case c = make_case(g);
        check_stages(c, run_chain(c, layout));
      }
    }
  }
}

TEST_CASE("experts with 0, 1 and tile-misaligned row counts, every tile and layout, bit-identical", "[gpu][kernels]") {
  // Find batches whose routing has the row counts that stress the tiling: an inactive expert, an
  // expert with one row, one whose rows end mid-tile, and (second batch) one spanning several
  // 64-row token blocks with a ragged end.
  auto find = [](int experts, int top_k, int hidden, int ff, int t_from, int t_to, auto&& wanted) {
    for (int t = t_from; t <= t_to; ++t) {
      const Geometry g = small_geometry(experts, top_k, hidden, ff, t);
      if (wanted(row_counts(build_routing(g)))) return g;
    }
    FAIL("no batch in the searched range has the row counts the test needs");
    return Geometry{};
  };
  const Geometry sparse = find(64, 2, 128, 64, 2, 400, [](const std::vector<int>& rows) {
    const bool zero = std::count(rows.begin(), rows.end(), 0) > 0;
    const bool one = std::count(rows.begin(), rows.end(), 1) > 0;
    const bool ragged = std::any_of(rows.begin(), rows.end(), [](int n) { return n > 8 && n % 8 != 0; });
    return zero && one && ragged;
  });
  // Dense: hidden 1024 and ff 192 (3 chunks), so the down GEMM's wgmma blocks walk several row
  // blocks whose weight copies straddle them, and an expert needs two wgmma token blocks.
  const int wgmma_tokens = kernels::gemm_tile(4).block_tokens();
  const Geometry dense = find(8, 2, 1024, 192, 300, 900, [&](const std::vector<int>& rows) {
    return std::any_of(rows.begin(), rows.end(), [&](int n) { return n > wgmma_tokens && n % 64 != 0 && n % 8 != 0; });
  });
  for (const Geometry& g : {sparse, dense}) {
    DYNAMIC_SECTION("E=" << g.experts << " k=" << g.top_k << " t=" << g.tokens) {
      const Case c = make_case(g);
      const RankTrace first = run_chain(c, Layout::v2, 0);
      check_stages(c, first);
      for (int tile = 0; tile < kernels::gemm_tile_count(); ++tile) {
        for (const Layout layout : {Layout::v1, Layout::v2}) {
          INFO("tile " << tile << " " << to_string(layout));
          check_same_outputs(first, run_chain(c, layout, tile));
        }
      }
    }
  }
}

TEST_CASE("the full geometry matches the reference at t = 1, 43, 416, 576, 4096", "[gpu][kernels][full]") {
  for (const int t : {1, 43, 416, 576, 4096}) {
    DYNAMIC_SECTION("t=" << t) {
      Geometry g;
      g.tokens = t;
      const Case c = make_case(g);
      const RankTrace gpu = run_chain(c, Layout::v2);
      require_all_written(gpu);
      const std::vector<int> tokens = sample_tokens(t, 48);
      std::vector<float> sampled;
      sampled.reserve(tokens.size() * static_cast<std::size_t>(g.hidden));
      for (const int token : tokens) {
        const auto* row = gpu.out.data() + static_cast<std::ptrdiff_t>(token) * g.hidden;
        sampled.insert(sampled.end(), row, row + g.hidden);
      }
      require_close(sampled, reference_rank_output(g, c.routing, *c.weights, c.z, tokens), kReferenceTolerance,
                    "sampled rank output");
    }
  }
}

TEST_CASE("layouts v1 and v2 give bitwise identical outputs on the full geometry", "[gpu][kernels][full]") {
  for (const int t : {43, 416}) {
    DYNAMIC_SECTION("t=" << t) {
      Geometry g;
      g.tokens = t;
      const Case c = make_case(g);
      check_same_outputs(run_chain(c, Layout::v1), run_chain(c, Layout::v2));
    }
  }
}

TEST_CASE("a token's output is bitwise the same in a 43-token and a 4096-token batch", "[gpu][kernels][full]") {
  Geometry small;
  small.tokens = 43;
  Geometry big;
  big.tokens = 4096;
  const RankTrace a = run_chain(make_case(small), Layout::v2);
  const RankTrace b = run_chain(make_case(big), Layout::v2);
  REQUIRE(a.out.size() == static_cast<std::size_t>(43) * static_cast<std::size_t>(small.hidden));
  CHECK(std::memcmp(a.out.data(), b.out.data(), a.out.size() * sizeof(float)) == 0);
  CHECK(nan_count(a.out) == 0);
}

// The layer's output after one eager chain on `stream`, its buffers poisoned first.
std::vector<float> eager_output(const cuda::RankLayer& layer, cudaStream_t stream) {
  layer.poison();
  layer.enqueue_chain(stream);
  TPG_CUDA(cudaStreamSynchronize(stream));
  return layer.download_out();
}

// Three replays of `graph` (the chain captured), each on poisoned buffers, give `expected`'s bits.
void check_replays(const cuda::Graph& graph, const cuda::RankLayer& layer, cudaStream_t stream,
                   const std::vector<float>& expected) {
  const cuda::GraphExec exec = cuda::instantiate(graph);
  for (int replay = 0; replay < 3; ++replay) {
    layer.poison();
    TPG_CUDA(cudaGraphLaunch(exec.get(), stream));
    TPG_CUDA(cudaStreamSynchronize(stream));
    INFO("replay " << replay);
    CHECK(same_bits(layer.download_out(), expected));
  }
}

TEST_CASE("replays of the captured chain are deterministic and match eager issue", "[gpu][kernels][full]") {
  Geometry g;
  g.tokens = 416;
  const Case c = make_case(g);
  cuda::RankLayer layer(0, c.g, c.routing, *c.weights, Layout::v2);
  layer.upload_input(c.z);
  const cuda::Stream stream = cuda::make_stream(0);
  const std::vector<float> eager = eager_output(layer, stream.get());
  REQUIRE(nan_count(eager) == 0);
  check_replays(cuda::capture_graph(stream.get(), 0, [&] { layer.enqueue_chain(stream.get()); }), layer, stream.get(),
                eager);
}

// Edges of `graph` whose data says programmatic (type 1: the next kernel may start while this one runs).
std::size_t programmatic_edges(cudaGraph_t graph) {
  std::size_t n = 0;
  TPG_CUDA(cudaGraphGetEdges(graph, nullptr, nullptr, nullptr, &n));
  std::vector<cudaGraphNode_t> from(n), to(n);
  std::vector<cudaGraphEdgeData> data(n);
  TPG_CUDA(cudaGraphGetEdges(graph, from.data(), to.data(), data.data(), &n));
  return static_cast<std::size_t>(std::count_if(data.begin(), data.end(), [](const cudaGraphEdgeData& e) {
    return e.type == cudaGraphDependencyTypeProgrammatic;
  }));
}

TEST_CASE("the chain launched programmatically gives the bits of plain issue, eager and replayed",
          "[gpu][kernels][full]") {
  // mma tiles of 8 and of 32 routed rows, then wgmma tiles with pair blocks; up runs beside gate
  // (kernels::GemmWait::at_exit) in every programmatic chain.
  for (const int t : {43, 416, 4096}) {
    DYNAMIC_SECTION("t=" << t) {
      Geometry g;
      g.tokens = t;
      const Case c = make_case(g);
      cuda::RankLayer layer(0, c.g, c.routing, *c.weights, Layout::v2);
      layer.upload_input(c.z);
      const cuda::Stream stream = cuda::make_stream(0);
      const std::vector<float> plain = eager_output(layer, stream.get());
      REQUIRE(nan_count(plain) == 0);

      const kernels::ProgrammaticLaunches programmatic;
      CHECK(same_bits(eager_output(layer, stream.get()), plain));
      const cuda::Graph graph = cuda::capture_graph(stream.get(), 0, [&] { layer.enqueue_chain(stream.get()); });
      // Seven kernels, one after the other: six programmatic edges.
      CHECK(programmatic_edges(graph.get()) == cuda::kChainSteps.size() - 1);
      check_replays(graph, layer, stream.get(), plain);
    }
  }
}

TEST_CASE("join_reduce adds the partials in rank order", "[gpu][kernels]") {
  const std::size_t n = 1000;
  std::vector<float> root(n), p1(n), p2(n);
  for (std::size_t i = 0; i < n; ++i) {
    root[i] = 1.0f + static_cast<float>(i) * 1e-3f;
    p1[i] = 1e8f;
    p2[i] = -1e8f;
  }
  auto d_root = cuda::to_device<float>(0, root);
  auto d_p1 = cuda::to_device<float>(0, p1);
  auto d_p2 = cuda::to_device<float>(0, p2);
  const std::vector<const float*> ptrs{d_p1.get(), d_p2.get()};
  auto d_ptrs = cuda::to_device<const float*>(0, ptrs);
  const cuda::Stream stream = cuda::make_stream(0);
  kernels::join_reduce(d_ptrs.get(), 2, static_cast<std::int64_t>(n), d_root.get(), stream.get());
  TPG_CUDA(cudaStreamSynchronize(stream.get()));
  const auto got = d_root.download();
  // ((root + 1e8) - 1e8) loses root's fraction: the order shows.
  for (std::size_t i = 0; i < n; ++i) {
    const float expected = (root[i] + p1[i]) + p2[i];
    REQUIRE(got[i] == expected);
  }
}

TEST_CASE("the streaming limit kernels read, write and copy every byte at every launch shape", "[gpu][limits]") {
  // Not a multiple of any grid x unroll: the grid-stride loops' remainders run too.
  const std::int64_t bytes = 16 * std::int64_t{100003};
  const auto n = static_cast<std::size_t>(bytes);
  std::vector<std::uint8_t> pattern(n);
  for (std::size_t i = 0; i < n; ++i) pattern[i] = static_cast<std::uint8_t>(i * 131 + (i >> 9));
  const auto src = cuda::to_device<std::uint8_t>(0, pattern);
  const cuda::DeviceBuffer<std::uint8_t> dst(0, n);
  const cuda::DeviceBuffer<std::uint32_t> sink(0, 1);
  const cuda::Stream stream = cuda::make_stream(0);
  TPG_CUDA(cudaMemset(sink.get(), 0xee, sizeof(std::uint32_t)));
  for (const int blocks : {1, 7, 264}) {
    for (const int vector_bytes : {4, 8, 16}) {
      for (const int unroll : {1, 2, 4}) {
        const kernels::StreamShape shape{blocks, 256, vector_bytes, unroll};
        INFO(blocks << " blocks, " << vector_bytes << "-byte vectors x " << unroll);
        TPG_CUDA(cudaMemset(dst.get(), 0, n));
        kernels::stream_memory(kernels::StreamKind::copy, src.get(), dst.get(), bytes, shape, sink.get(), stream.get());
        TPG_CUDA(cudaStreamSynchronize(stream.get()));
        CHECK(dst.download() == pattern);
        kernels::stream_memory(kernels::StreamKind::write, nullptr, dst.get(), bytes, shape, sink.get(), stream.get());
        TPG_CUDA(cudaStreamSynchronize(stream.get()));
        const auto written = dst.download();
        CHECK(std::all_of(written.begin(), written.end(), [](std::uint8_t b) { return b == 0x5a; }));
        // Read back the 0x5a fill (as bench does): its fold never hits the guarded value, so sink keeps its bytes.
        kernels::stream_memory(kernels::StreamKind::read, dst.get(), nullptr, bytes, shape, sink.get(), stream.get());
        TPG_CUDA(cudaStreamSynchronize(stream.get()));
        CHECK(sink.download()[0] == 0xeeeeeeeeu);
      }
    }
  }
  CHECK_THROWS_AS(kernels::stream_memory(kernels::StreamKind::read, src.get(), nullptr, bytes,
                                         kernels::StreamShape{1, 256, 32, 1}, sink.get(), stream.get()),
                  std::invalid_argument);
  CHECK_THROWS_AS(kernels::stream_memory(kernels::StreamKind::read, src.get(), nullptr, bytes + 4,
                                         kernels::StreamShape{1, 256, 16, 1}, sink.get(), stream.get()),
                  std::invalid_argument);
}

TEST_CASE("the tensor-core peak kernel runs every shape bench sweeps", "[gpu][limits]") {
  const cuda::DeviceBuffer<float> sink(0, 4);
  TPG_CUDA(cudaMemset(sink.get(), 0, 4 * sizeof(float)));
  const cuda::Stream stream = cuda::make_stream(0);
  if (!kernels::mma_peak_built()) {
    // A build without sm_90a code refuses to measure rather than trap in the kernel.
    CHECK_THROWS_AS(kernels::mma_peak(kernels::MmaPeakShape{160, 2, 4}, 8, sink.get(), stream.get()),
                    std::invalid_argument);
    return;
  }
  for (const int n : {64, 128, 160}) {
    for (const int warpgroups : {1, 2, 3}) {
      const kernels::MmaPeakShape shape{n, warpgroups, 4};
      INFO("N " << n << ", " << warpgroups << " warpgroups");
      kernels::mma_peak(shape, 8, sink.get(), stream.get());
      TPG_CUDA(cudaStreamSynchronize(stream.get()));
      CHECK(kernels::mma_peak_flops(shape, 8) == 2.0 * 64 * n * 16 * 4 * 8 * warpgroups * 4);
    }
  }
  const auto s = sink.download();
  CHECK(std::all_of(s.begin(), s.end(), [](float v) { return v == 0.0f; }));  // the guarded store never fires
  // With a clocks buffer, block 0's SM cycles and nanoseconds add up over launches: a clock between
  // 0.3 and 3.5 GHz (bench's sm_clock_ghz), and a second launch adds to both.
  const cuda::DeviceBuffer<unsigned long long> clocks(0, 2);
  TPG_CUDA(cudaMemset(clocks.get(), 0, clocks.bytes()));
  const kernels::MmaPeakShape timed{64, 2, 4};
  kernels::mma_peak(timed, 256, sink.get(), stream.get(), clocks.get());
  TPG_CUDA(cudaStreamSynchronize(stream.get()));
  const auto once = clocks.download();
  kernels::mma_peak(timed, 256, sink.get(), stream.get(), clocks.get());
  TPG_CUDA(cudaStreamSynchronize(stream.get()));
  const auto twice = clocks.download();
  REQUIRE(once[1] > 0);
  const double ghz = static_cast<double>(once[0]) / static_cast<double>(once[1]);
  CHECK(ghz > 0.3);
  CHECK(ghz < 3.5);
  CHECK(twice[0] > once[0]);
  CHECK(twice[1] > once[1]);
  CHECK_THROWS_AS(kernels::mma_peak(kernels::MmaPeakShape{96, 1, 1}, 8, sink.get(), stream.get()),
                  std::invalid_argument);
  CHECK_THROWS_AS(kernels::mma_peak(kernels::MmaPeakShape{160, 4, 1}, 8, sink.get(), stream.get()),
                  std::invalid_argument);
}
