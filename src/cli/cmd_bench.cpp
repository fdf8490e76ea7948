// tpgraph bench [--tokens LIST] [--layout v1|v2] [--json PATH]: how fast are one rank's kernels,
// against this GPU's own limits measured in the same run?
//
// The limits (cuda/bench_limits.hpp): streaming read, write and copy kernels, each at the best launch
// shape of a sweep, and the peak of the GEMM's own tensor-core instruction in a kernel that does
// nothing else, with cuBLAS's fp16 GEMM beside it. The floor of a token count is the time the
// three GEMMs' device-memory bytes (core/analysis/bench_model.hpp: their weights, and their
// activations past what the L2 can hold) take at the read limit or their FLOPs at the MMA peak,
// whichever is longer.
//
// Per token count, one rank's chain is captured in a CUDA graph with an event-record node between
// kernels and replayed (cuda/bench_chain.hpp); each kernel's time is the median over replays of
// the time between its two events. The chain and the three grouped GEMMs alone are also captured
// with events only around them, launched plainly and programmatically (what the floor is held
// against: bench_model.hpp, TokenFigures::gemms_us); all the graphs' replays alternate, so all run
// under the same clocks. The weights one GEMM reads (289-425 MB) are several times the 60 MB L2, so
// replays cannot serve them from cache; the activations between kernels stay in L2 as they would in
// a real layer.
//
// This file parses and wires: src/cuda/bench_* measures, core/analysis/bench_model computes every
// rate, fraction and floor, core/report/bench_report prints the text and the JSON.
#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/scenario_options.hpp"
#include "core/analysis/bench_model.hpp"
#include "core/base/atomic_file.hpp"
#include "core/base/error.hpp"
#include "core/base/json_input.hpp"
#include "core/base/version.hpp"
#include "core/base/whole_number.hpp"
#include "core/model/scenario.hpp"
#include "core/records/run_data.hpp"
#include "core/report/bench_report.hpp"
#include "cuda/bench_chain.hpp"
#include "cuda/bench_limits.hpp"
#include "cuda/devices.hpp"
#include "cuda/layer_buffers.hpp"

namespace tpgraph::cli {
namespace {

// Streaming buffers: 16 times the H200's 60 MB L2, so the limits are device memory's.
constexpr std::int64_t kStreamBytes = std::int64_t{1} << 30;

struct BenchArgs {
  std::string tokens = "43,416,576,4096";
  std::string layout = "v2";
  std::optional<std::string> json;
  int replays = 50;
  int warmup = 5;
  int device = 0;
  int tile = -1;
  bool all_tiles = false;
  bool no_limits = false;
  std::string seed = "1";  // parsed strictly: "-1" or 2^64 are refused, never wrapped
};

std::vector<int> parse_tokens(const std::string& text) {
  std::vector<int> out;
  std::string_view rest = text;
  while (true) {
    const auto comma = rest.find(',');
    const auto t = whole_number<int>(rest.substr(0, comma));
    if (!t || *t < 1) {
      throw InputError(
          fmt::format("--tokens: '{}' is not accepted; accepted: comma-separated token counts >= 1, "
                      "e.g. 43,416,576,4096",
                      escaped_excerpt(text)));
    }
    out.push_back(*t);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

// Prints and flushes at once: each part of bench's text is shown as soon as it is measured.
void show(const std::string& text) {
  fmt::print("{}", text);
  std::fflush(stdout);
}

bench::TokenFigures bench_tokens(const BenchArgs& args, const Geometry& g, const RankWeights& weights, Layout layout,
                                 const bench::Limits& limits) {
  const Routing routing = build_routing(g);
  cuda::RankLayer layer(args.device, g, routing, weights, layout, args.tile);
  layer.upload_input(make_layer_input(g, parse_integer_flag<std::uint64_t>(args.seed, "--seed")));
  const bench::TokenMeasurement measured =
      cuda::measure_bench_tokens(layer, routing, args.warmup, args.replays, args.all_tiles);
  return bench::analyze_bench_tokens(measured, limits);
}

int run_bench(const BenchArgs& args) {
  const std::vector<int> tokens = parse_tokens(args.tokens);
  const Layout layout = parse_layout(args.layout, "--layout");
  const std::uint64_t seed = parse_integer_flag<std::uint64_t>(args.seed, "--seed");  // bad input, GPU or not
  cuda::require_device("tpgraph bench times the kernels and needs");
  const auto devices = cuda::query_devices();
  if (args.device < 0 || args.device >= static_cast<int>(devices.size())) {
    throw NoDeviceError(fmt::format("--device {}: {} GPU(s) visible", args.device, devices.size()));
  }
  const DeviceInfo& device = devices[static_cast<std::size_t>(args.device)];

  bench::BenchSetup setup{device.ordinal, device.name, device.sm_count, std::string(to_string(layout)),
                          args.replays,   {}};
  if (!args.no_limits) setup.limits = cuda::measure_limits(args.device, kStreamBytes);
  // The L2's size is the device's, measured or not: the reference floor's device-memory bytes use it.
  setup.limits.l2_bytes = cuda::l2_cache_bytes(args.device);
  show(bench::render_bench_header(setup));

  Geometry g;  // the harness's geometry; only the token count varies
  const RankWeights weights = make_rank_weights(g, 0, WeightsKind::random, seed);
  std::vector<bench::TokenFigures> results;
  for (const int t : tokens) {
    g.tokens = t;
    validate(g);
    results.push_back(bench_tokens(args, g, weights, layout, setup.limits));
    show(bench::render_bench_tokens(results.back(), setup.limits));
  }
  if (args.json) {
    const bench::BenchProvenance provenance{std::string(build_version()), std::string(build_git_revision()),
                                            utc_now_iso8601()};
    write_file_atomically(*args.json, bench::bench_json(setup, results, provenance).dump(2) + "\n");
  }
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "one rank's kernel times against this GPU's measured limits (needs a GPU)");
  cmd->add_option("--tokens", args->tokens, "token counts, comma-separated")->capture_default_str();
  cmd->add_option("--layout", args->layout, "NVFP4 weight layout: v1 | v2")->capture_default_str();
  cmd->add_option("--json", args->json, "also write every figure as JSON to this file");
  // The same bounds as a scenario's replays and warmup, read by the same parser.
  add_integer_flag(*cmd, "--replays", args->replays, 1, kMaxReplays, "timed graph replays per measurement");
  add_integer_flag(*cmd, "--warmup", args->warmup, 0, kMaxWarmup, "untimed replays before them");
  add_integer_flag(*cmd, "--device", args->device, 0, kMaxDevice, "GPU to run on");
  add_integer_flag(*cmd, "--tile", args->tile, 0, cuda::bench_tile_count() - 1,
                   "force one GEMM tile (docs/kernel-notes.md) instead of the planner's choice");
  cmd->add_flag("--all-tiles", args->all_tiles, "also time the three GEMMs with every tile");
  cmd->add_flag("--no-limits", args->no_limits, "skip measuring the memory and tensor-core limits (for profilers)");
  cmd->add_option("--seed", args->seed, "seed of weights and inputs (0 .. 2^64-1)")->capture_default_str();
  return {cmd, [args] { return run_bench(*args); }};
}

}  // namespace tpgraph::cli
