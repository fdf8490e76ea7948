// tpgraph bench [--tokens LIST] [--layout v1|v2] [--json PATH]: how fast are one rank's kernels,
// against this GPU's own limits measured in the same run?
//
// The limits (cuda/bench_limits.hpp): streaming read, write and copy kernels, each at the best launch
// shape of a sweep, and the peak of the GEMM's own tensor-core instruction in a kernel that does
// nothing else, with cuBLAS's fp16 GEMM beside it. The floor of a token count is the time the
// three GEMMs' weight bytes take at the read limit or their FLOPs at the MMA peak, whichever is
// longer.
//
// Per token count, one rank's chain is captured in a CUDA graph with an event-record node between
// kernels and replayed (cuda/bench_chain.hpp); each kernel's time is the median over replays of
// the time between its two events. The three grouped GEMMs are also captured alone, back to back, and timed the same
// way; the two graphs' replays alternate, so both run under the same clocks. The weights one GEMM reads (289-425 MB)
// are several times the 60 MB L2, so replays cannot serve them from cache; the activations between kernels stay in L2
// as they would in a real layer.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/scenario_options.hpp"
#include "core/base/atomic_file.hpp"
#include "core/base/error.hpp"
#include "core/base/json_input.hpp"
#include "core/base/stats.hpp"
#include "core/base/version.hpp"
#include "core/base/whole_number.hpp"
#include "core/model/scenario.hpp"
#include "core/records/run_data.hpp"
#include "cuda/bench_chain.hpp"
#include "cuda/bench_limits.hpp"
#include "cuda/devices.hpp"
#include "cuda/layer_buffers.hpp"
#include "cuda_error/error.hpp"
#include "kernels/kernels.hpp"
#include "kernels/limits.hpp"

namespace tpgraph::cli {
namespace {

// Fixed reference rates of an H200, the ones the project's speed bars are stated against: weight
// bytes streamed at 4.3 TB/s, dense fp16 tensor work at 790 TFLOP/s. A floor at these rates stays
// comparable across runs and machines; the floor at the rates measured in the run is the honest one.
constexpr double kReferenceReadTbps = 4.3;
constexpr double kReferenceTensorTflops = 790.0;
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

using stats::median;

struct Limits {
  std::optional<cuda::StreamLimit> read;
  std::optional<cuda::StreamLimit> write;
  std::optional<cuda::StreamLimit> copy;
  std::optional<cuda::MmaLimit> mma;  // absent where the build has no wgmma
  std::optional<cuda::TensorLimit> cublas;
  std::optional<cuda::MemcpyRate> memcpy;
  std::int64_t l2_bytes = 0;

  [[nodiscard]] std::optional<double> read_tbps() const { return read ? std::optional(read->best.tbps) : std::nullopt; }
  [[nodiscard]] std::optional<double> copy_tbps() const { return copy ? std::optional(copy->best.tbps) : std::nullopt; }
  [[nodiscard]] std::optional<double> mma_tflops() const {
    return mma ? std::optional(mma->best.tflops) : std::nullopt;
  }
  [[nodiscard]] std::optional<double> cublas_tflops() const {
    return cublas ? std::optional(cublas->tflops) : std::nullopt;
  }
};

struct StepFigures {
  cuda::ChainStep step;
  double median_us = 0;
  double min_us = 0;
  cuda::StepCost cost;
};

std::string fraction(double value, const std::optional<double>& limit) {
  return limit && *limit > 0 ? fmt::format("{:5.1f}%", 100.0 * value / *limit) : std::string("    -");
}

nlohmann::json bench_tokens(const BenchArgs& args, const Geometry& g, const RankWeights& weights, Layout layout,
                            const Limits& limits, std::string& table) {
  auto put = std::back_inserter(table);
  const Routing routing = build_routing(g);
  cuda::RankLayer layer(args.device, g, routing, weights, layout, args.tile);
  layer.upload_input(make_layer_input(g, parse_integer_flag<std::uint64_t>(args.seed, "--seed")));
  const std::vector<cuda::ChainStep> chain(cuda::kChainSteps.begin(), cuda::kChainSteps.end());
  const cuda::ChainTimes times = cuda::time_rank_chain(layer, args.warmup, args.replays);
  const std::vector<std::vector<double>>& chain_us = times.chain_us;
  const std::vector<std::vector<double>>& gemm_us = times.gemm_us;

  const std::optional<double> read_tbps = limits.read_tbps();
  const std::optional<double> copy_tbps = limits.copy_tbps();
  const std::optional<double> mma_tflops = limits.mma_tflops();
  const std::optional<double> cublas_tflops = limits.cublas_tflops();

  fmt::format_to(put, "\nt={}: pairs {}, active experts {}, layout {}, GEMM tile gate/up {} down {}\n", g.tokens,
                 routing.n_pairs(), routing.n_active(), to_string(layout), layer.gate_tile(), layer.down_tile());
  // A GEMM's bound is its weight stream against the read limit; every other kernel reads and
  // writes, against the copy limit. A kernel whose bytes fit in L2 may find them there (its
  // producer just wrote them): its rate can pass the device-memory limit (marked *).
  fmt::format_to(put, "  {:<9} {:>10} {:>9} {:>9} {:>7} {:>6} {:>7} {:>8} {:>6} {:>7}\n", "kernel", "median us",
                 "min us", "MB moved", "TB/s", "bound", "%bound", "TFLOP/s", "%mma", "%cuBLAS");
  nlohmann::json steps = nlohmann::json::array();
  std::int64_t gemm_weight_bytes = 0;
  double gemm_flops = 0;
  bool any_in_l2 = false;
  for (std::size_t i = 0; i < chain.size(); ++i) {
    const bool ffn = chain[i] == cuda::ChainStep::gate || chain[i] == cuda::ChainStep::up;
    StepFigures f{chain[i], median(chain_us[i]), stats::min(chain_us[i]),
                  cuda::step_cost(chain[i], g, routing, ffn ? layer.gemm_rows(chain[i]) : 0)};
    const double seconds = f.median_us * 1e-6;
    const double tbps = static_cast<double>(f.cost.bytes) / seconds / 1e12;
    const double tflops = f.cost.flops / seconds / 1e12;
    const bool gemm = f.cost.weight_bytes > 0;
    const double bound_tbps = gemm ? static_cast<double>(f.cost.weight_bytes) / seconds / 1e12 : tbps;
    const std::optional<double>& bound_limit = gemm ? read_tbps : copy_tbps;
    const bool in_l2 = !gemm && limits.l2_bytes > 0 && f.cost.bytes <= limits.l2_bytes;
    any_in_l2 = any_in_l2 || in_l2;
    gemm_weight_bytes += f.cost.weight_bytes;
    gemm_flops += f.cost.flops;
    fmt::format_to(put, "  {:<9} {:>10.1f} {:>9.1f} {:>9.1f} {:>7.2f} {:>6} {:>6}{} {:>8} {:>6} {:>7}\n",
                   to_string(f.step), f.median_us, f.min_us, static_cast<double>(f.cost.bytes) / 1e6, tbps,
                   gemm ? "read" : "copy", fraction(bound_tbps, bound_limit), in_l2 ? "*" : " ",
                   f.cost.flops > 0 ? fmt::format("{:.1f}", tflops) : std::string("-"),
                   f.cost.flops > 0 ? fraction(tflops, mma_tflops) : std::string("    -"),
                   f.cost.flops > 0 ? fraction(tflops, cublas_tflops) : std::string("    -"));
    steps.push_back({{"kernel", std::string(to_string(f.step))},
                     {"median_us", f.median_us},
                     {"min_us", f.min_us},
                     {"bytes", f.cost.bytes},
                     {"weight_bytes", f.cost.weight_bytes},
                     {"flops", f.cost.flops},
                     {"tbps", tbps},
                     {"tflops", tflops},
                     {"bound", gemm ? "read" : "copy"},
                     {"bound_tbps", bound_tbps},
                     {"fraction_of_bound", bound_limit ? bound_tbps / *bound_limit : 0.0},
                     {"fits_l2", in_l2},
                     {"fraction_of_mma", mma_tflops && f.cost.flops > 0 ? tflops / *mma_tflops : 0.0},
                     {"fraction_of_cublas", cublas_tflops && f.cost.flops > 0 ? tflops / *cublas_tflops : 0.0}});
  }
  if (any_in_l2) {
    fmt::format_to(put, "  * its bytes fit in the {:.0f} MB L2: it can run past the device-memory limit\n",
                   static_cast<double>(limits.l2_bytes) / 1e6);
  }
  const double gemms = median(gemm_us.back());
  const double chain_total = median(chain_us.back());
  const double reference_floor = std::max(static_cast<double>(gemm_weight_bytes) / (kReferenceReadTbps * 1e12),
                                          gemm_flops / (kReferenceTensorTflops * 1e12)) *
                                 1e6;
  // The measured floor: weights at the read limit or FLOPs at the MMA peak (cuBLAS where the build
  // has no wgmma), whichever takes longer.
  const std::optional<double> floor_tflops = mma_tflops ? mma_tflops : cublas_tflops;
  const double weight_floor = read_tbps ? static_cast<double>(gemm_weight_bytes) / (*read_tbps * 1e12) * 1e6 : 0.0;
  const double math_floor = floor_tflops ? gemm_flops / (*floor_tflops * 1e12) * 1e6 : 0.0;
  const double measured_floor = read_tbps && floor_tflops ? std::max(weight_floor, math_floor) : 0.0;
  const char* floor_bound = weight_floor >= math_floor ? "read" : (mma_tflops ? "mma" : "cublas");
  const double weight_tbps = static_cast<double>(gemm_weight_bytes) / (gemms * 1e-6) / 1e12;
  const double gemm_tflops = gemm_flops / (gemms * 1e-6) / 1e12;
  fmt::format_to(put,
                 "  3 GEMMs  {:>10.1f} us back to back: weights {:.0f} MB at {:.2f} TB/s ({} of read), {:.1f} "
                 "TFLOP/s ({} of MMA peak, {} of cuBLAS)\n",
                 gemms, static_cast<double>(gemm_weight_bytes) / 1e6, weight_tbps, fraction(weight_tbps, read_tbps),
                 gemm_tflops, fraction(gemm_tflops, mma_tflops), fraction(gemm_tflops, cublas_tflops));
  if (measured_floor > 0) {
    fmt::format_to(
        put, "           floor {:.0f} us (weights at the read limit {:.0f} us, FLOPs at the {} {:.0f} us) -> {:.2f}x",
        measured_floor, weight_floor, mma_tflops ? "MMA peak" : "cuBLAS rate", math_floor, gemms / measured_floor);
  } else {
    fmt::format_to(put, "           floor: limits not measured");
  }
  fmt::format_to(put, "; at the reference {} TB/s, {} TFLOP/s {:.0f} us -> {:.2f}x\n", kReferenceReadTbps,
                 kReferenceTensorTflops, reference_floor, gemms / reference_floor);
  fmt::format_to(put, "  chain    {:>10.1f} us (7 kernels, with event nodes between them)\n", chain_total);

  nlohmann::json j = {{"tokens", g.tokens},
                      {"pairs", routing.n_pairs()},
                      {"active_experts", routing.n_active()},
                      {"layout", std::string(to_string(layout))},
                      {"tile_gate_up", layer.gate_tile()},
                      {"tile_down", layer.down_tile()},
                      {"kernels", steps},
                      {"gemms_us", gemms},
                      {"gemms_per_kernel_us",
                       {{"gate", median(gemm_us[0])}, {"up", median(gemm_us[1])}, {"down", median(gemm_us[2])}}},
                      {"gemm_weight_bytes", gemm_weight_bytes},
                      {"gemm_flops", gemm_flops},
                      {"floor_us", measured_floor},
                      {"floor_bound", measured_floor > 0 ? nlohmann::json(floor_bound) : nlohmann::json(nullptr)},
                      {"floor_weights_us", weight_floor},
                      {"floor_flops_us", math_floor},
                      {"floor_reference_us", reference_floor},
                      {"chain_us", chain_total}};

  if (args.all_tiles) {
    fmt::format_to(put, "  tiles (gate / up / down median us):");
    nlohmann::json sweep = nlohmann::json::array();
    for (int tile = 0; tile < kernels::gemm_tile_count(); ++tile) {
      layer.replan(routing, tile);
      const auto us = cuda::time_gemms(layer, args.warmup, std::max(10, args.replays / 4));
      const auto shape = kernels::gemm_tile(tile);
      fmt::format_to(put, "  [{}] {}x{}: {:.1f} / {:.1f} / {:.1f} = {:.1f}", tile, shape.block_rows(),
                     shape.block_tokens(), median(us[0]), median(us[1]), median(us[2]), median(us[3]));
      sweep.push_back({{"tile", tile},
                       {"block_rows", shape.block_rows()},
                       {"block_tokens", shape.block_tokens()},
                       {"gate_us", median(us[0])},
                       {"up_us", median(us[1])},
                       {"down_us", median(us[2])},
                       {"gemms_us", median(us[3])}});
    }
    fmt::format_to(put, "\n");
    j["tile_sweep"] = sweep;
  }
  return j;
}

void run_bench(const BenchArgs& args) {
  const std::vector<int> tokens = parse_tokens(args.tokens);
  const Layout layout = parse_layout(args.layout, "--layout");
  (void)parse_integer_flag<std::uint64_t>(args.seed, "--seed");  // a bad seed is bad input, GPU or not
  cuda::require_device("tpgraph bench times the kernels and needs");
  const auto devices = cuda::query_devices();
  if (args.device < 0 || args.device >= static_cast<int>(devices.size())) {
    throw NoDeviceError(fmt::format("--device {}: {} GPU(s) visible", args.device, devices.size()));
  }
  const DeviceInfo& device = devices[static_cast<std::size_t>(args.device)];

  Limits limits;
  std::string table;
  auto put = std::back_inserter(table);
  fmt::format_to(put, "tpgraph bench on {} ({} SMs), layout {}, {} replays (median)\n", device.name, device.sm_count,
                 to_string(layout), args.replays);
  if (!args.no_limits) {
    limits.read = cuda::measure_stream_limit(args.device, kernels::StreamKind::read, kStreamBytes, 10);
    limits.write = cuda::measure_stream_limit(args.device, kernels::StreamKind::write, kStreamBytes, 10);
    limits.copy = cuda::measure_stream_limit(args.device, kernels::StreamKind::copy, kStreamBytes, 10);
    if (kernels::mma_peak_built()) limits.mma = cuda::measure_mma_peak(args.device, 10);
    limits.cublas = cuda::measure_tensor_throughput(args.device, 8192, 20);
    limits.memcpy = cuda::measure_memcpy(args.device, std::int64_t{1} << 31, 20);
    limits.l2_bytes = cuda::l2_cache_bytes(args.device);
    fmt::format_to(put, "limits measured now (each the best of a sweep of launch shapes, {} MiB buffers):\n",
                   kStreamBytes >> 20);
    for (const cuda::StreamLimit* l : {&*limits.read, &*limits.write, &*limits.copy}) {
      fmt::format_to(put, "  {:<6} {:5.2f} TB/s{}  ({})\n", cuda::to_string(l->kind), l->best.tbps,
                     l->kind == kernels::StreamKind::copy ? " read + write" : "", cuda::describe(l->best.shape));
    }
    if (limits.mma) {
      fmt::format_to(put, "  MMA    {:5.0f} TFLOP/s ({})\n", limits.mma->best.tflops,
                     cuda::describe(limits.mma->best.shape));
    } else {
      fmt::format_to(put, "  MMA    not measured: this build has no sm_90a code (the floor uses cuBLAS)\n");
    }
    fmt::format_to(put, "  cuBLAS {:5.0f} TFLOP/s (fp16 -> fp32 {}^3), memcpy {:.2f} TB/s read + write (2 GiB D2D)\n",
                   limits.cublas->tflops, limits.cublas->n, limits.memcpy->tbps);
  }
  fmt::print("{}", table);
  std::fflush(stdout);

  Geometry g;  // the harness's geometry; only the token count varies
  const RankWeights weights =
      make_rank_weights(g, 0, WeightsKind::random, parse_integer_flag<std::uint64_t>(args.seed, "--seed"));
  nlohmann::json results = nlohmann::json::array();
  for (const int t : tokens) {
    g.tokens = t;
    validate(g);
    std::string part;
    results.push_back(bench_tokens(args, g, weights, layout, limits, part));
    fmt::print("{}", part);
    std::fflush(stdout);
    table += part;
  }

  if (args.json) {
    nlohmann::json j;
    j["schema"] = "tpgraph.bench/2";
    j["tool_version"] = build_version();
    j["git_revision"] = build_git_revision();
    j["date"] = utc_now_iso8601();
    j["device"] = {{"ordinal", device.ordinal},
                   {"name", device.name},
                   {"sm_count", device.sm_count},
                   {"l2_bytes", limits.l2_bytes}};
    j["layout"] = std::string(to_string(layout));
    j["replays"] = args.replays;
    j["limits"] = nlohmann::json::object();
    auto stream_json = [](const cuda::StreamLimit& l) {
      auto shape = [](const kernels::StreamShape& s) {
        return nlohmann::json{
            {"blocks", s.blocks}, {"threads", s.threads}, {"vector_bytes", s.vector_bytes}, {"unroll", s.unroll}};
      };
      nlohmann::json trials = nlohmann::json::array();
      for (const auto& t : l.trials)
        trials.push_back({{"shape", shape(t.shape)}, {"median_us", t.median_us}, {"tbps", t.tbps}});
      return nlohmann::json{{"buffer_bytes", l.buffer_bytes}, {"moved_bytes", l.moved_bytes},
                            {"median_us", l.best.median_us},  {"tbps", l.best.tbps},
                            {"shape", shape(l.best.shape)},   {"trials", trials}};
    };
    if (limits.read) j["limits"]["read"] = stream_json(*limits.read);
    if (limits.write) j["limits"]["write"] = stream_json(*limits.write);
    if (limits.copy) j["limits"]["copy"] = stream_json(*limits.copy);
    if (limits.mma) {
      auto shape = [](const kernels::MmaPeakShape& s) {
        return nlohmann::json{{"n", s.n}, {"warpgroups", s.warpgroups}, {"blocks", s.blocks}};
      };
      nlohmann::json trials = nlohmann::json::array();
      for (const auto& t : limits.mma->trials) {
        trials.push_back({{"shape", shape(t.shape)}, {"median_us", t.median_us}, {"tflops", t.tflops}});
      }
      j["limits"]["mma"] = {{"instruction",
                             "wgmma.mma_async.m64nNk16.f32.f16.f16, A registers, B shared (128B swizzle)"},
                            {"iterations", limits.mma->iterations},
                            {"median_us", limits.mma->best.median_us},
                            {"tflops", limits.mma->best.tflops},
                            {"shape", shape(limits.mma->best.shape)},
                            {"trials", trials}};
    }
    if (limits.cublas) {
      j["limits"]["cublas_fp16"] = {
          {"n", limits.cublas->n}, {"median_us", limits.cublas->median_us}, {"tflops", limits.cublas->tflops}};
    }
    if (limits.memcpy) {
      j["limits"]["memcpy"] = {
          {"bytes", limits.memcpy->bytes}, {"median_us", limits.memcpy->median_us}, {"tbps", limits.memcpy->tbps}};
    }
    j["reference_rates"] = {{"read_tbps", kReferenceReadTbps}, {"tensor_tflops", kReferenceTensorTflops}};
    j["results"] = results;
    write_file_atomically(*args.json, j.dump(2) + "\n");
  }
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "one rank's kernel times against this GPU's measured limits (needs a GPU)");
  cmd->add_option("--tokens", args->tokens, "token counts, comma-separated")->capture_default_str();
  cmd->add_option("--layout", args->layout, "NVFP4 weight layout: v1 | v2")->capture_default_str();
  cmd->add_option("--json", args->json, "also write every figure as JSON to this file");
  // The same bounds as a scenario's replays and warmup, read by the same parser.
  add_integer_flag(*cmd, "--replays", args->replays, 1, kMaxReplays, "timed graph replays per measurement");
  add_integer_flag(*cmd, "--warmup", args->warmup, 0, kMaxWarmup, "untimed replays before them");
  add_integer_flag(*cmd, "--device", args->device, 0, kMaxDevice, "GPU to run on");
  add_integer_flag(*cmd, "--tile", args->tile, 0, kernels::gemm_tile_count() - 1,
                   "force one GEMM tile (docs/kernel-notes.md) instead of the planner's choice");
  cmd->add_flag("--all-tiles", args->all_tiles, "also time the three GEMMs with every tile");
  cmd->add_flag("--no-limits", args->no_limits, "skip measuring the memory and tensor-core limits (for profilers)");
  cmd->add_option("--seed", args->seed, "seed of weights and inputs (0 .. 2^64-1)")->capture_default_str();
  cmd->callback([args] { run_bench(*args); });
}

}  // namespace tpgraph::cli
