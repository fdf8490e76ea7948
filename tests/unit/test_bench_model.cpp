#include "catch.hpp"

#include <fmt/core.h>

#include <string>
#include <vector>

#include "core/analysis/bench_model.hpp"
#include "core/report/bench_report.hpp"

using namespace tpgraph;
using namespace tpgraph::bench;

namespace {

// Limits chosen so every figure below can be checked by hand: read 4 TB/s, copy 3 TB/s, MMA peak
// 800 TFLOP/s, cuBLAS 640 TFLOP/s, a 60 MB L2.
Limits made_up_limits() {
  Limits l;
  l.measured = true;
  l.read = StreamLimit{StreamKind::read, 1 << 30, 1 << 30, {{264, 256, 16, 4}, 268.4, 4.0}, {}};
  l.read->trials.push_back(l.read->best);
  l.write = StreamLimit{StreamKind::write, 1 << 30, 1 << 30, {{528, 256, 16, 2}, 300.0, 3.5}, {}};
  l.copy = StreamLimit{StreamKind::copy, 1 << 30, std::int64_t{2} << 30, {{1056, 256, 8, 1}, 700.0, 3.0}, {}};
  l.mma = MmaLimit{2048, {{160, 2, 264}, 1500.0, 800.0}, {}};
  l.cublas = TensorLimit{8192, 1718.0, 640.0};
  l.memcpy = MemcpyRate{std::int64_t{1} << 31, 1500.0, 2.9};
  l.l2_bytes = 60'000'000;
  return l;
}

// Three kernels, three replays each (the median is the middle value):
//   quant_z  33 MB moved, no weights      11 us -> 3.0 TB/s, all of copy's 3 TB/s; fits the L2
//   gate     400 MB of weights, 80 GFLOP  200 us -> weights at 2.0 TB/s (half of read), 400 TFLOP/s
//   down     200 MB of weights, 160 GFLOP 250 us -> weights at 0.8 TB/s, 640 TFLOP/s
// The GEMMs: 600 MB and 240 GFLOP, 500 us back to back. Weights at the read limit take 150 us, the
// FLOPs at the MMA peak 300 us: the floor is 300 us, bound by the MMA, and 500 us is 1.67x of it.
TokenMeasurement made_up_tokens() {
  TokenMeasurement m;
  m.tokens = 43;
  m.pairs = 344;
  m.active_experts = 196;
  m.layout = "v2";
  m.tile_gate_up = 3;
  m.tile_down = 5;
  m.steps = {{"quant_z", 33'000'000, 0, 0.0, {12.0, 10.0, 11.0}},
             {"gate", 420'000'000, 400'000'000, 80e9, {200.0, 190.0, 230.0}},
             {"down", 230'000'000, 200'000'000, 160e9, {260.0, 250.0, 240.0}}};
  m.chain_us = {700.0, 720.0, 710.0};
  m.gemms_us = {std::vector<double>{210.0}, {0.0}, {260.0}, {500.0, 490.0, 510.0}};
  return m;
}

bool starts_with(const std::string& text, const std::string& head) { return text.rfind(head, 0) == 0; }
bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("a kernel's rate is stated against its bound: a GEMM's weights against read, others against copy",
          "[bench]") {
  const TokenFigures t = analyze_bench_tokens(made_up_tokens(), made_up_limits());
  REQUIRE(t.steps.size() == 3);
  const StepFigures& quant = t.steps[0];
  CHECK(quant.median_us == 11.0);
  CHECK(quant.min_us == 10.0);
  CHECK(quant.bound == Bound::copy);
  CHECK(quant.tbps == Approx(3.0));
  CHECK(*quant.fraction_of_bound == Approx(1.0));
  CHECK(quant.fits_l2);
  CHECK_FALSE(quant.fraction_of_mma);  // no FLOPs: no tensor-core fraction at all

  const StepFigures& gate = t.steps[1];
  CHECK(gate.median_us == 200.0);
  CHECK(gate.bound == Bound::read);
  CHECK(gate.tbps == Approx(2.1));        // all 420 MB
  CHECK(gate.bound_tbps == Approx(2.0));  // the 400 MB of weights only
  CHECK(*gate.fraction_of_bound == Approx(0.5));
  CHECK_FALSE(gate.fits_l2);  // a GEMM's weights never count as cached
  CHECK(gate.tflops == Approx(400.0));
  CHECK(*gate.fraction_of_mma == Approx(0.5));
  CHECK(*gate.fraction_of_cublas == Approx(0.625));
}

TEST_CASE("the floor is the longer of the weights at the read limit and the FLOPs at the MMA peak", "[bench]") {
  const TokenFigures t = analyze_bench_tokens(made_up_tokens(), made_up_limits());
  CHECK(t.gemm_weight_bytes == 600'000'000);
  CHECK(t.gemm_flops == Approx(240e9));
  CHECK(t.gemms_us == 500.0);
  CHECK(t.gemm_us[0] == 210.0);
  CHECK(t.gemm_us[2] == 260.0);
  CHECK(t.chain_us == 710.0);
  CHECK(t.gemm_weight_tbps == Approx(1.2));
  CHECK(*t.gemm_fraction_of_read == Approx(0.3));
  CHECK(t.gemm_tflops == Approx(480.0));
  CHECK(*t.gemm_fraction_of_mma == Approx(0.6));
  CHECK(*t.gemm_fraction_of_cublas == Approx(0.75));
  CHECK(t.floor.weights_us == Approx(150.0));
  CHECK(t.floor.flops_us == Approx(300.0));
  CHECK(t.floor.us == Approx(300.0));
  CHECK(t.floor.bound == "mma");
  CHECK(t.over_floor() == Approx(500.0 / 300.0));
  // At the reference rates: 600 MB / 4.3 TB/s = 139.5 us, 240 GFLOP / 790 TFLOP/s = 303.8 us.
  CHECK(t.floor.reference_us == Approx(240e9 / 790e12 * 1e6));
  CHECK(t.over_reference_floor() == Approx(500.0 / (240e9 / 790e12 * 1e6)));
}

TEST_CASE("the floor falls back to cuBLAS's rate without an MMA peak, and to read when weights take longer",
          "[bench]") {
  Limits no_mma = made_up_limits();
  no_mma.mma.reset();
  const Floor cublas = gemm_floor(600'000'000, 600'000'000, 240e9, no_mma);
  CHECK_FALSE(cublas.flops_at_mma);
  CHECK(cublas.flops_us == Approx(375.0));  // 240 GFLOP at 640 TFLOP/s
  CHECK(cublas.us == Approx(375.0));
  CHECK(cublas.bound == "cublas");

  Limits slow_read = made_up_limits();
  slow_read.read->best.tbps = 1.0;
  const Floor read = gemm_floor(600'000'000, 600'000'000, 240e9, slow_read);
  CHECK(read.weights_us == Approx(600.0));
  CHECK(read.us == Approx(600.0));
  CHECK(read.bound == "read");
}

TEST_CASE("a GEMM's device-memory bytes are its weights, or all its bytes but twice the L2 where that is more",
          "[bench]") {
  // Weights 400 MB; with 600 MB of routed rows and outputs, at most 60 MB of which the L2 holds when
  // the kernel starts and 60 MB when it ends: 880 MB must cross device memory.
  CHECK(gemm_memory_bytes(1'000'000'000, 400'000'000, 60'000'000) == 880'000'000);
  CHECK(gemm_memory_bytes(420'000'000, 400'000'000, 60'000'000) == 400'000'000);  // activations fit: weights
  CHECK(gemm_memory_bytes(1'000'000'000, 400'000'000, 0) == 400'000'000);         // L2 unknown: weights only

  TokenMeasurement m = made_up_tokens();
  m.steps = {{"down", 1'000'000'000, 400'000'000, 80e9, {400.0, 400.0, 400.0}}};
  m.gemms_us = {std::vector<double>{0.0}, {0.0}, {400.0}, {400.0}};
  const TokenFigures t = analyze_bench_tokens(m, made_up_limits());
  CHECK(t.steps[0].memory_bytes == 880'000'000);
  CHECK(t.steps[0].bound_tbps == Approx(2.2));  // 880 MB in 400 us
  CHECK(*t.steps[0].fraction_of_bound == Approx(0.55));
  CHECK(t.gemm_memory_bytes == 880'000'000);
  CHECK(t.gemm_memory_tbps == Approx(2.2));
  CHECK(*t.gemm_fraction_of_read == Approx(0.55));
  // At 4 TB/s the 880 MB take 220 us, the weights alone 100 us, the FLOPs at 800 TFLOP/s 100 us.
  CHECK(t.floor.memory_us == Approx(220.0));
  CHECK(t.floor.weights_us == Approx(100.0));
  CHECK(t.floor.flops_us == Approx(100.0));
  CHECK(t.floor.us == Approx(220.0));
  CHECK(t.floor.bound == "read");
  CHECK(t.over_floor() == Approx(400.0 / 220.0));
  CHECK(t.floor.reference_us == Approx(880e6 / 4.3e12 * 1e6));
}

TEST_CASE("without measured limits there is no measured floor and no fraction, only the reference floor", "[bench]") {
  const TokenFigures t = analyze_bench_tokens(made_up_tokens(), Limits{});
  CHECK(t.floor.us == 0.0);
  CHECK(t.over_floor() == 0.0);
  CHECK(t.floor.reference_us == Approx(240e9 / 790e12 * 1e6));
  CHECK_FALSE(t.gemm_fraction_of_read);
  CHECK_FALSE(t.steps[1].fraction_of_bound);
  CHECK_FALSE(t.steps[0].fits_l2);  // the L2's size is one of the limits
  CHECK_FALSE(fraction_of(1.0, 0.0));
}

TEST_CASE("bench's enums print by name through fmt, width included", "[bench]") {
  CHECK(fmt::format("{}", StreamKind::copy) == "copy");
  CHECK(fmt::format("{:>6}", Bound::read) == "  read");
  CHECK(fmt::format("{:<6}|", StreamKind::write) == "write |");
}

TEST_CASE("bench's text shows every figure of a token count in its column", "[bench]") {
  TokenMeasurement m = made_up_tokens();
  m.tiles.push_back({0, 128, 64, {{{100.0}, {110.0}, {120.0}, {330.0}}}});
  const Limits limits = made_up_limits();
  const std::string text = render_bench_tokens(analyze_bench_tokens(m, limits), limits);
  INFO(text);
  CHECK(starts_with(text,
                    "\nt=43: pairs 344, active experts 196, layout v2, GEMM tile gate/up 3 down 5\n"
                    "  kernel     median us    min us  MB moved    TB/s  bound  %bound  TFLOP/s   %mma %cuBLAS\n"
                    "  quant_z         11.0      10.0      33.0    3.00   copy 100.0%*        -      -       -\n"
                    "  gate           200.0     190.0     420.0    2.10   read  50.0%     400.0  50.0%   62.5%\n"
                    "  down           250.0     240.0     230.0    0.92   read  20.0%     640.0  80.0%  100.0%\n"
                    "  * its bytes fit in the 60 MB L2: it can run past the device-memory limit\n"));
  CHECK(contains(text,
                 "  3 GEMMs       500.0 us (first to last event): device memory 600 MB (weights 600) at 1.20 TB/s ( "
                 "30.0% of read), 480.0 TFLOP/s ( 60.0% of MMA peak,  75.0% of cuBLAS)\n"
                 "           floor 300 us (device memory 600 MB at the read limit 150 us, weights alone 150 us; FLOPs "
                 "at the MMA peak 300 us) -> 1.67x; at the reference 4.3 TB/s, 790 TFLOP/s 304 us -> 1.65x\n"
                 "  chain         710.0 us (7 kernels, first to last event): 1.42x the 3 GEMMs\n"
                 "  (each kernel's median above: the graph with an event node between kernels)\n"
                 "  tiles (gate / up / down median us):  [0] 128x64: 100.0 / 110.0 / 120.0 = 330.0\n"));
}

TEST_CASE("the GEMMs and the chain are held to the floor as a layer runs them: programmatically, else plainly",
          "[bench]") {
  TokenMeasurement m = made_up_tokens();
  m.gemms_plain_us = {495.0, 492.0, 494.0};
  m.chain_plain_us = {690.0};
  const Limits limits = made_up_limits();
  TokenFigures plain = analyze_bench_tokens(m, limits);
  CHECK(plain.gemms_us == 494.0);
  CHECK(plain.gemms_timing == "plain");
  CHECK(plain.gemms_events_us == 500.0);
  CHECK(plain.chain_us == 690.0);
  CHECK(plain.chain_events_us == 710.0);

  m.gemms_programmatic_us = {460.0, 480.0, 470.0};
  m.chain_programmatic_us = {658.0};
  const TokenFigures t = analyze_bench_tokens(m, limits);
  CHECK(t.gemms_us == 470.0);
  CHECK(t.gemms_timing == "programmatic");
  CHECK(t.gemms_plain_us == 494.0);
  CHECK(t.gemms_events_us == 500.0);
  CHECK(t.gemm_tflops == Approx(240e9 / 470e-6 / 1e12));  // the rates use the chosen time
  CHECK(t.over_floor() == Approx(470.0 / 300.0));
  CHECK(t.chain_us == 658.0);
  CHECK(t.chain_timing == "programmatic");
  const std::string text = render_bench_tokens(t, limits);
  INFO(text);
  CHECK(contains(text, "  3 GEMMs       470.0 us (launched programmatically, no event between kernels): "));
  CHECK(contains(text, "           the same GEMMs plainly 494.0 us; with an event node between kernels 500.0 us\n"));
  CHECK(contains(text,
                 "  chain         658.0 us (7 kernels, launched programmatically, no event between kernels): 1.40x the "
                 "3 GEMMs; plainly 690.0 us; with an event node between kernels 710.0 us\n"));
  const nlohmann::json j = bench_tokens_json(t);
  CHECK(j["gemms_us"] == 470.0);
  CHECK(j["gemms_timing"] == "programmatic");
  CHECK(j["gemms_plain_us"] == 494.0);
  CHECK(j["gemms_events_us"] == 500.0);
  CHECK(j["chain_timing"] == "programmatic");
  CHECK(j["chain_events_us"] == 710.0);
}

TEST_CASE("bench's text without limits says the floor was not measured and leaves fractions blank", "[bench]") {
  BenchSetup setup{0, "NVIDIA H200", 132, "v2", 50, {}};
  CHECK(render_bench_header(setup) == "tpgraph bench on NVIDIA H200 (132 SMs), layout v2, 50 replays (median)\n");
  const std::string text = render_bench_tokens(analyze_bench_tokens(made_up_tokens(), setup.limits), setup.limits);
  CHECK(contains(text,
                 "  gate           200.0     190.0     420.0    2.10   read      -     "
                 "400.0      -       -\n"));
  CHECK(contains(text, "(    - of read)"));
  CHECK(contains(text, "           floor: limits not measured; at the reference 4.3 TB/s"));
}

TEST_CASE("bench's header lists each measured limit with the launch shape that gave it", "[bench]") {
  BenchSetup setup{0, "NVIDIA H200", 132, "v2", 50, made_up_limits()};
  CHECK(render_bench_header(setup) ==
        "tpgraph bench on NVIDIA H200 (132 SMs), layout v2, 50 replays (median)\n"
        "limits measured now (each the best of a sweep of launch shapes, 1024 MiB buffers):\n"
        "  read    4.00 TB/s  (264 blocks x 256 threads, 16-byte vectors x 4)\n"
        "  write   3.50 TB/s  (528 blocks x 256 threads, 16-byte vectors x 2)\n"
        "  copy    3.00 TB/s read + write  (1056 blocks x 256 threads, 8-byte vectors x 1)\n"
        "  MMA      800 TFLOP/s (wgmma m64n160k16 f32.f16.f16, 264 blocks x 2 warpgroups)\n"
        "  cuBLAS   640 TFLOP/s (fp16 -> fp32 8192^3), memcpy 2.90 TB/s read + write (2 GiB D2D)\n");
  setup.limits.mma->best.sm_ghz = 1.7854;  // read where the peak kernel could read its clock
  CHECK(contains(render_bench_header(setup),
                 "  MMA      800 TFLOP/s (wgmma m64n160k16 f32.f16.f16, 264 blocks x 2 warpgroups, SM clock 1.79 "
                 "GHz)\n"));
  setup.limits.mma.reset();
  CHECK(contains(render_bench_header(setup),
                 "  MMA    not measured: this build has no sm_90a code (the floor uses cuBLAS)\n"));
}

TEST_CASE("bench's JSON carries the same figures as its text, with the limits and their shapes", "[bench]") {
  BenchSetup setup{1, "NVIDIA H200", 132, "v2", 50, made_up_limits()};
  TokenMeasurement m = made_up_tokens();
  m.tiles.push_back({0, 128, 64, {{{100.0}, {110.0}, {120.0}, {330.0}}}});
  const auto j = bench_json(setup, {analyze_bench_tokens(m, setup.limits)}, {"0.1.0", "abcdef012345", "2027-01-01"});
  CHECK(j["schema"] == "tpgraph.bench/4");
  CHECK(j["git_revision"] == "abcdef012345");
  CHECK(j["date"] == "2027-01-01");
  CHECK(j["device"]["ordinal"] == 1);
  CHECK(j["device"]["l2_bytes"] == 60'000'000);
  CHECK(j["replays"] == 50);
  CHECK(j["limits"]["read"]["tbps"] == 4.0);
  CHECK(j["limits"]["read"]["shape"]["unroll"] == 4);
  CHECK(j["limits"]["read"]["trials"].size() == 1);
  CHECK(j["limits"]["copy"]["moved_bytes"] == std::int64_t{2} << 30);
  CHECK(j["limits"]["mma"]["shape"]["n"] == 160);
  CHECK(j["limits"]["mma"]["sm_clock_ghz"] == 0.0);  // not read
  CHECK(j["limits"]["cublas_fp16"]["tflops"] == 640.0);
  CHECK(j["limits"]["memcpy"]["tbps"] == 2.9);
  CHECK(j["reference_rates"]["read_tbps"] == 4.3);
  REQUIRE(j["results"].size() == 1);
  const auto& r = j["results"][0];
  CHECK(r["tokens"] == 43);
  CHECK(r["tile_down"] == 5);
  CHECK(r["gemms_us"] == 500.0);
  CHECK(r["gemms_per_kernel_us"]["down"] == 260.0);
  CHECK(r["floor_bound"] == "mma");
  CHECK(r["floor_us"].get<double>() == Approx(300.0));
  CHECK(r["floor_weights_us"].get<double>() == Approx(150.0));
  CHECK(r["floor_memory_us"].get<double>() == Approx(150.0));
  CHECK(r["gemm_memory_bytes"] == 600'000'000);
  CHECK(r["chain_us"] == 710.0);
  REQUIRE(r["kernels"].size() == 3);
  CHECK(r["kernels"][0]["kernel"] == "quant_z");
  CHECK(r["kernels"][0]["fits_l2"] == true);
  CHECK(r["kernels"][0]["fraction_of_mma"] == 0.0);
  CHECK(r["kernels"][1]["bound"] == "read");
  CHECK(r["kernels"][1]["fraction_of_bound"].get<double>() == Approx(0.5));
  CHECK(r["kernels"][1]["fraction_of_cublas"].get<double>() == Approx(0.625));
  REQUIRE(r["tile_sweep"].size() == 1);
  CHECK(r["tile_sweep"][0]["block_rows"] == 128);
  CHECK(r["tile_sweep"][0]["gemms_us"] == 330.0);
}

TEST_CASE("bench's JSON without limits has an empty limits object and a null floor bound", "[bench]") {
  const BenchSetup setup{0, "NVIDIA H200", 132, "v1", 5, {}};
  const auto j = bench_json(setup, {analyze_bench_tokens(made_up_tokens(), setup.limits)}, {"0.1.0", "x", "d"});
  CHECK(j["limits"].is_object());
  CHECK(j["limits"].empty());
  CHECK(j["device"]["l2_bytes"] == 0);
  const auto& r = j["results"][0];
  CHECK(r["floor_us"] == 0.0);
  CHECK(r["floor_bound"].is_null());
  CHECK(r["kernels"][1]["fraction_of_bound"] == 0.0);
  CHECK_FALSE(r.contains("tile_sweep"));
}
