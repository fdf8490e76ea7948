// tpgraph bench [--tokens LIST] [--layout v1|v2] [--json PATH]: how fast are one rank's kernels,
// against this GPU's own limits measured in the same run?
//
// Per token count, one rank's chain is captured in a CUDA graph with an event-record node between
// kernels and replayed; each kernel's time is the median over replays of the time between its two
// events. The three grouped GEMMs are also captured alone, back to back, and timed the same way;
// the two graphs' replays alternate, so both run under the same clocks.
// The weights one GEMM reads (289-425 MB) are several times the 60 MB L2, so replays cannot serve
// them from cache; the activations between kernels stay in L2 as they would in a real layer.
#include <cuda_runtime_api.h>
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <charconv>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "cli/device_limits.hpp"
#include "cli/kernel_layer.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/run_data.hpp"
#include "core/scenario.hpp"
#include "cuda/devices.hpp"
#include "cuda/error.hpp"
#include "cuda/layer_buffers.hpp"
#include "kernels/kernels.hpp"

namespace tpgraph::cli {
namespace {

// Floors of facts.md: NVFP4 weight bytes at 4.3 TB/s, FLOPs at 790 TFLOP/s (the bars).
constexpr double kFactsCopyTbps = 4.3;
constexpr double kFactsTensorTflops = 790.0;

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
  std::uint64_t seed = 1;
};

std::vector<int> parse_tokens(const std::string& text) {
  std::vector<int> out;
  std::string_view rest = text;
  while (true) {
    const auto comma = rest.find(',');
    const auto item = rest.substr(0, comma);
    int t = 0;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), t);
    if (item.empty() || ec != std::errc{} || end != item.data() + item.size() || t < 1) {
      throw InputError(fmt::format("--tokens: '{}' is not accepted; accepted: comma-separated token counts >= 1, "
                                   "e.g. 43,416,576,4096",
                                   text));
    }
    out.push_back(t);
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// A captured sequence of layer steps with an event-record node before, between and after them.
class TimedGraph {
 public:
  TimedGraph(const cuda::RankLayer& layer, std::vector<cuda::ChainStep> steps)
      : device_(layer.device()), steps_(std::move(steps)), stream_(cuda::make_stream(device_)) {
    const cuda::DeviceScope scope(device_);
    for (std::size_t i = 0; i <= steps_.size(); ++i) events_.push_back(cuda::make_event(device_));
    cudaGraph_t raw = nullptr;
    TPG_CUDA(cudaStreamBeginCapture(stream_.get(), cudaStreamCaptureModeThreadLocal));
    // External records are graph nodes whose times cudaEventElapsedTime can read after a replay.
    TPG_CUDA(cudaEventRecordWithFlags(events_[0].get(), stream_.get(), cudaEventRecordExternal));
    for (std::size_t i = 0; i < steps_.size(); ++i) {
      layer.enqueue(steps_[i], stream_.get());
      TPG_CUDA(cudaEventRecordWithFlags(events_[i + 1].get(), stream_.get(), cudaEventRecordExternal));
    }
    TPG_CUDA(cudaStreamEndCapture(stream_.get(), &raw));
    graph_ = cuda::Graph(raw, device_);
    exec_ = cuda::instantiate(graph_);
  }

  // Per step, and for the whole sequence (last entry): the times of every replay, in µs.
  [[nodiscard]] std::vector<std::vector<double>> replay(int warmup, int replays) const {
    warm(warmup);
    std::vector<std::vector<double>> us(steps_.size() + 1);
    for (int r = 0; r < replays; ++r) replay_once(us);
    return us;
  }

  void warm(int warmup) const {
    const cuda::DeviceScope scope(device_);
    for (int i = 0; i < warmup; ++i) TPG_CUDA(cudaGraphLaunch(exec_.get(), stream_.get()));
    TPG_CUDA(cudaStreamSynchronize(stream_.get()));
  }

  // One replay; appends each step's time and the whole sequence's to `us` (steps + 1 series).
  void replay_once(std::vector<std::vector<double>>& us) const {
    const cuda::DeviceScope scope(device_);
    TPG_CUDA(cudaGraphLaunch(exec_.get(), stream_.get()));
    TPG_CUDA(cudaStreamSynchronize(stream_.get()));
    for (std::size_t i = 0; i <= steps_.size(); ++i) {
      const std::size_t from = i < steps_.size() ? i : 0;
      const std::size_t to = i < steps_.size() ? i + 1 : steps_.size();
      float ms = 0;
      TPG_CUDA(cudaEventElapsedTime(&ms, events_[from].get(), events_[to].get()));
      us[i].push_back(static_cast<double>(ms) * 1e3);
    }
  }

  [[nodiscard]] std::size_t steps() const { return steps_.size(); }

 private:
  int device_;
  std::vector<cuda::ChainStep> steps_;
  cuda::Stream stream_;
  std::vector<cuda::Event> events_;
  cuda::Graph graph_;
  cuda::GraphExec exec_;
};

struct Limits {
  std::optional<CopyLimit> copy;
  std::optional<TensorLimit> tensor;
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
  layer.upload_input(make_layer_input(g, args.seed));
  {
    // One plain run first, so every intermediate the GEMMs-only graph reads holds real values.
    const cuda::DeviceScope scope(args.device);
    const cuda::Stream s = cuda::make_stream(args.device);
    layer.enqueue_chain(s.get());
    TPG_CUDA(cudaStreamSynchronize(s.get()));
  }
  const std::vector<cuda::ChainStep> chain(cuda::kChainSteps.begin(), cuda::kChainSteps.end());
  const std::vector<cuda::ChainStep> gemm_steps{cuda::ChainStep::gate, cuda::ChainStep::up, cuda::ChainStep::down};
  // The chain and the GEMMs-only graph take turns, replay by replay, so both see the same clocks:
  // the GPU's power management (clocks never locked here) lowers the clocks some 100 ms into a
  // heavy run, and whichever graph was timed second ran up to 5% slower at t=4096
  // (docs/kernel-notes.md, session 6).
  const TimedGraph chain_graph(layer, chain);
  const TimedGraph gemm_graph(layer, gemm_steps);
  chain_graph.warm(args.warmup);
  gemm_graph.warm(args.warmup);
  std::vector<std::vector<double>> chain_us(chain_graph.steps() + 1);
  std::vector<std::vector<double>> gemm_us(gemm_graph.steps() + 1);
  for (int r = 0; r < args.replays; ++r) {
    chain_graph.replay_once(chain_us);
    gemm_graph.replay_once(gemm_us);
  }

  const std::optional<double> copy_tbps = limits.copy ? std::optional(limits.copy->tbps) : std::nullopt;
  const std::optional<double> tensor_tflops = limits.tensor ? std::optional(limits.tensor->tflops) : std::nullopt;

  fmt::format_to(put, "\nt={}: pairs {}, active experts {}, layout {}, GEMM tile gate/up {} down {}\n", g.tokens,
                 routing.n_pairs(), routing.n_active(), to_string(layout), layer.gate_tile(), layer.down_tile());
  fmt::format_to(put, "  {:<9} {:>10} {:>9} {:>9} {:>7} {:>6} {:>8} {:>7}\n", "kernel", "median us", "min us",
                 "MB moved", "TB/s", "%copy", "TFLOP/s", "%fp16");
  nlohmann::json steps = nlohmann::json::array();
  std::int64_t gemm_weight_bytes = 0;
  double gemm_flops = 0;
  for (std::size_t i = 0; i < chain.size(); ++i) {
    StepFigures f{chain[i], median(chain_us[i]), *std::min_element(chain_us[i].begin(), chain_us[i].end()),
                  cuda::step_cost(chain[i], g, routing)};
    const double seconds = f.median_us * 1e-6;
    const double tbps = static_cast<double>(f.cost.bytes) / seconds / 1e12;
    const double tflops = f.cost.flops / seconds / 1e12;
    gemm_weight_bytes += f.cost.weight_bytes;
    gemm_flops += f.cost.flops;
    fmt::format_to(put, "  {:<9} {:>10.1f} {:>9.1f} {:>9.1f} {:>7.2f} {:>6} {:>8.1f} {:>7}\n", to_string(f.step),
                   f.median_us, f.min_us, static_cast<double>(f.cost.bytes) / 1e6, tbps, fraction(tbps, copy_tbps),
                   tflops, f.cost.flops > 0 ? fraction(tflops, tensor_tflops) : std::string("    -"));
    steps.push_back({{"kernel", std::string(to_string(f.step))},
                     {"median_us", f.median_us},
                     {"min_us", f.min_us},
                     {"bytes", f.cost.bytes},
                     {"weight_bytes", f.cost.weight_bytes},
                     {"flops", f.cost.flops},
                     {"tbps", tbps},
                     {"tflops", tflops},
                     {"fraction_of_copy", copy_tbps ? tbps / *copy_tbps : 0.0},
                     {"fraction_of_fp16", tensor_tflops && f.cost.flops > 0 ? tflops / *tensor_tflops : 0.0}});
  }
  const double gemms = median(gemm_us.back());
  const double chain_total = median(chain_us.back());
  const double facts_floor = std::max(static_cast<double>(gemm_weight_bytes) / (kFactsCopyTbps * 1e12),
                                      gemm_flops / (kFactsTensorTflops * 1e12)) * 1e6;
  const double measured_floor =
      copy_tbps && tensor_tflops
          ? std::max(static_cast<double>(gemm_weight_bytes) / (*copy_tbps * 1e12), gemm_flops / (*tensor_tflops * 1e12)) *
                1e6
          : 0.0;
  const double weight_tbps = static_cast<double>(gemm_weight_bytes) / (gemms * 1e-6) / 1e12;
  const double gemm_tflops = gemm_flops / (gemms * 1e-6) / 1e12;
  fmt::format_to(put, "  3 GEMMs  {:>10.1f} us back to back: weights {:.0f} MB at {:.2f} TB/s ({} of copy), {:.1f} "
                      "TFLOP/s ({} of fp16)\n",
                 gemms, static_cast<double>(gemm_weight_bytes) / 1e6, weight_tbps, fraction(weight_tbps, copy_tbps),
                 gemm_tflops, fraction(gemm_tflops, tensor_tflops));
  fmt::format_to(put, "           floor {:.0f} us (facts.md: 4.3 TB/s, 790 TFLOP/s) -> {:.2f}x", facts_floor,
                 gemms / facts_floor);
  if (measured_floor > 0) {
    fmt::format_to(put, "; floor at this run's limits {:.0f} us -> {:.2f}x", measured_floor, gemms / measured_floor);
  }
  fmt::format_to(put, "\n  chain    {:>10.1f} us (7 kernels, with event nodes between them)\n", chain_total);

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
                      {"floor_facts_us", facts_floor},
                      {"floor_measured_us", measured_floor},
                      {"chain_us", chain_total}};

  if (args.all_tiles) {
    fmt::format_to(put, "  tiles (gate / up / down median us):");
    nlohmann::json sweep = nlohmann::json::array();
    for (int tile = 0; tile < kernels::gemm_tile_count(); ++tile) {
      layer.replan(routing, tile);
      const auto us = TimedGraph(layer, gemm_steps).replay(args.warmup, std::max(10, args.replays / 4));
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
  if (args.replays < 1) throw InputError(fmt::format("--replays {}: needs >= 1", args.replays));
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
    limits.copy = measure_copy_bandwidth(args.device, std::int64_t{1} << 31, 20);
    limits.tensor = measure_tensor_throughput(args.device, 8192, 20);
    fmt::format_to(put, "limits measured now: device copy {:.2f} TB/s (2 GiB D2D from a graph, read + write), "
                        "cuBLAS fp16->fp32 8192^3 {:.0f} TFLOP/s\n",
                   limits.copy->tbps, limits.tensor->tflops);
  }
  fmt::print("{}", table);
  std::fflush(stdout);

  Geometry g;  // the harness's geometry; only the token count varies
  const RankWeights weights = make_rank_weights(g, 0, WeightsKind::random, args.seed);
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
    j["schema"] = "tpgraph.bench/1";
    j["tool_version"] = TPGRAPH_VERSION;
    j["git_revision"] = TPGRAPH_GIT_REVISION;
    j["date"] = utc_now_iso8601();
    j["device"] = {{"ordinal", device.ordinal}, {"name", device.name}, {"sm_count", device.sm_count}};
    j["layout"] = std::string(to_string(layout));
    j["replays"] = args.replays;
    j["limits"] = nlohmann::json::object();
    if (limits.copy) {
      j["limits"]["copy"] = {{"bytes", limits.copy->bytes}, {"median_us", limits.copy->median_us},
                             {"tbps", limits.copy->tbps}};
    }
    if (limits.tensor) {
      j["limits"]["fp16_tensor"] = {{"n", limits.tensor->n}, {"median_us", limits.tensor->median_us},
                                    {"tflops", limits.tensor->tflops}};
    }
    j["facts_floor_rates"] = {{"copy_tbps", kFactsCopyTbps}, {"tensor_tflops", kFactsTensorTflops}};
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
  cmd->add_option("--replays", args->replays, "timed graph replays per measurement (>= 1)")->capture_default_str();
  cmd->add_option("--warmup", args->warmup, "untimed replays before them")->capture_default_str();
  cmd->add_option("--device", args->device, "GPU to run on")->capture_default_str();
  cmd->add_option("--tile", args->tile,
                  fmt::format("force one GEMM tile (0..{}, docs/kernel-notes.md) instead of the planner's choice",
                              kernels::gemm_tile_count() - 1))
      ->check(CLI::Range(0, kernels::gemm_tile_count() - 1));
  cmd->add_flag("--all-tiles", args->all_tiles, "also time the three GEMMs with every tile");
  cmd->add_flag("--no-limits", args->no_limits, "skip measuring the copy and fp16 limits (for profilers)");
  cmd->add_option("--seed", args->seed, "seed of weights and inputs")->capture_default_str();
  cmd->callback([args] { run_bench(*args); });
}

}  // namespace tpgraph::cli
