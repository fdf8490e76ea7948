#include "core/report/bench_report.hpp"

#include <fmt/core.h>

#include <iterator>
#include <string>
#include <string_view>

namespace tpgraph::bench {
namespace {

using Out = std::back_insert_iterator<std::string>;

// "  72.4%", or "    -" where the limit was not measured: the columns stay aligned either way.
std::string percent(const std::optional<double>& fraction) {
  return fraction ? fmt::format("{:5.1f}%", 100.0 * *fraction) : std::string("    -");
}

void put_limits(Out put, const Limits& limits) {
  const std::int64_t buffer_bytes = limits.read ? limits.read->buffer_bytes : 0;
  fmt::format_to(put, "limits measured now (each the best of a sweep of launch shapes, {} MiB buffers):\n",
                 buffer_bytes >> 20);
  for (const auto* l : {&limits.read, &limits.write, &limits.copy}) {
    if (!*l) continue;
    const StreamLimit& s = **l;
    fmt::format_to(put, "  {:<6} {:5.2f} TB/s{}  ({})\n", s.kind, s.best.tbps,
                   s.kind == StreamKind::copy ? " read + write" : "", describe(s.best.shape));
  }
  if (limits.mma) {
    fmt::format_to(put, "  MMA    {:5.0f} TFLOP/s ({}{})\n", limits.mma->best.tflops, describe(limits.mma->best.shape),
                   limits.mma->best.sm_ghz > 0 ? fmt::format(", SM clock {:.2f} GHz", limits.mma->best.sm_ghz) : "");
  } else {
    fmt::format_to(put, "  MMA    not measured: this build has no sm_90a code (the floor uses cuBLAS)\n");
  }
  if (limits.cublas && limits.memcpy) {
    fmt::format_to(put, "  cuBLAS {:5.0f} TFLOP/s (fp16 -> fp32 {}^3), memcpy {:.2f} TB/s read + write (2 GiB D2D)\n",
                   limits.cublas->tflops, limits.cublas->n, limits.memcpy->tbps);
  }
}

void put_step(Out put, const StepFigures& f) {
  const bool math = f.flops > 0;
  fmt::format_to(put, "  {:<9} {:>10.1f} {:>9.1f} {:>9.1f} {:>7.2f} {:>6} {:>6}{} {:>8} {:>6} {:>7}\n", f.kernel,
                 f.median_us, f.min_us, static_cast<double>(f.bytes) / 1e6, f.tbps, f.bound,
                 percent(f.fraction_of_bound), f.fits_l2 ? "*" : " ",
                 math ? fmt::format("{:.1f}", f.tflops) : std::string("-"), percent(f.fraction_of_mma),
                 percent(f.fraction_of_cublas));
}

// How a sequence was timed (TokenFigures::gemms_timing).
std::string_view timing_words(std::string_view timing) {
  if (timing == "programmatic") return "launched programmatically, no event between kernels";
  if (timing == "plain") return "no event between kernels";
  return "first to last event";
}

// "; plainly 319.6 us, with an event between kernels 323.7 us": the other timings of a sequence.
std::string other_timings(std::string_view chosen, double plain, double events) {
  std::string out;
  if (chosen == "programmatic") out += fmt::format("; plainly {:.1f} us", plain);
  if (chosen != "events") out += fmt::format("; with an event node between kernels {:.1f} us", events);
  return out;
}

void put_gemms_and_floor(Out put, const TokenFigures& t) {
  fmt::format_to(put,
                 "  3 GEMMs  {:>10.1f} us ({}): device memory {:.0f} MB (weights {:.0f}) at {:.2f} TB/s ({} "
                 "of read), {:.1f} TFLOP/s ({} of MMA peak, {} of cuBLAS)\n",
                 t.gemms_us, timing_words(t.gemms_timing), static_cast<double>(t.gemm_memory_bytes) / 1e6,
                 static_cast<double>(t.gemm_weight_bytes) / 1e6, t.gemm_memory_tbps, percent(t.gemm_fraction_of_read),
                 t.gemm_tflops, percent(t.gemm_fraction_of_mma), percent(t.gemm_fraction_of_cublas));
  const Floor& f = t.floor;
  if (f.us > 0) {
    fmt::format_to(
        put,
        "           floor {:.0f} us (device memory {:.0f} MB at the read limit {:.0f} us, weights alone {:.0f} "
        "us; FLOPs at the {} {:.0f} us) -> {:.2f}x",
        f.us, static_cast<double>(t.gemm_memory_bytes) / 1e6, f.memory_us, f.weights_us,
        f.flops_at_mma ? "MMA peak" : "cuBLAS rate", f.flops_us, t.over_floor());
  } else {
    fmt::format_to(put, "           floor: limits not measured");
  }
  fmt::format_to(put, "; at the reference {} TB/s, {} TFLOP/s {:.0f} us -> {:.2f}x\n", kReferenceReadTbps,
                 kReferenceTensorTflops, f.reference_us, t.over_reference_floor());
  if (t.gemms_timing != "events") {
    fmt::format_to(put, "           the same GEMMs{}\n",
                   other_timings(t.gemms_timing, t.gemms_plain_us, t.gemms_events_us).substr(1));
  }
}

}  // namespace

std::string render_bench_header(const BenchSetup& setup) {
  std::string out;
  auto put = std::back_inserter(out);
  fmt::format_to(put, "tpgraph bench on {} ({} SMs), layout {}, {} replays (median)\n", setup.device_name,
                 setup.sm_count, setup.layout, setup.replays);
  if (setup.limits.measured) put_limits(put, setup.limits);
  return out;
}

std::string render_bench_tokens(const TokenFigures& t, const Limits& limits) {
  std::string out;
  auto put = std::back_inserter(out);
  fmt::format_to(put, "\nt={}: pairs {}, active experts {}, layout {}, GEMM tile gate/up {} down {}\n", t.tokens,
                 t.pairs, t.active_experts, t.layout, t.tile_gate_up, t.tile_down);
  fmt::format_to(put, "  {:<9} {:>10} {:>9} {:>9} {:>7} {:>6} {:>7} {:>8} {:>6} {:>7}\n", "kernel", "median us",
                 "min us", "MB moved", "TB/s", "bound", "%bound", "TFLOP/s", "%mma", "%cuBLAS");
  for (const StepFigures& f : t.steps) put_step(put, f);
  if (t.any_fits_l2()) {
    fmt::format_to(put, "  * its bytes fit in the {:.0f} MB L2: it can run past the device-memory limit\n",
                   static_cast<double>(limits.l2_bytes) / 1e6);
  }
  put_gemms_and_floor(put, t);
  fmt::format_to(put, "  chain    {:>10.1f} us (7 kernels, {}): {:.2f}x the 3 GEMMs{}\n", t.chain_us,
                 timing_words(t.chain_timing), t.gemms_us > 0 ? t.chain_us / t.gemms_us : 0.0,
                 other_timings(t.chain_timing, t.chain_plain_us, t.chain_events_us));
  fmt::format_to(put, "  (each kernel's median above: the graph with an event node between kernels)\n");
  if (!t.tiles.empty()) {
    fmt::format_to(put, "  tiles (gate / up / down median us):");
    for (const TileFigures& tile : t.tiles) {
      fmt::format_to(put, "  [{}] {}x{}: {:.1f} / {:.1f} / {:.1f} = {:.1f}", tile.tile, tile.block_rows,
                     tile.block_tokens, tile.median_us[0], tile.median_us[1], tile.median_us[2], tile.median_us[3]);
    }
    fmt::format_to(put, "\n");
  }
  return out;
}

namespace {

// 0 where a fraction is absent: the schema keeps every field a number.
double or_zero(const std::optional<double>& v) { return v.value_or(0.0); }

nlohmann::json step_json(const StepFigures& f) {
  return {{"kernel", f.kernel},
          {"median_us", f.median_us},
          {"min_us", f.min_us},
          {"bytes", f.bytes},
          {"weight_bytes", f.weight_bytes},
          {"memory_bytes", f.memory_bytes},
          {"flops", f.flops},
          {"tbps", f.tbps},
          {"tflops", f.tflops},
          {"bound", std::string(to_string(f.bound))},
          {"bound_tbps", f.bound_tbps},
          {"fraction_of_bound", or_zero(f.fraction_of_bound)},
          {"fits_l2", f.fits_l2},
          {"fraction_of_mma", or_zero(f.fraction_of_mma)},
          {"fraction_of_cublas", or_zero(f.fraction_of_cublas)}};
}

nlohmann::json stream_shape_json(const StreamShape& s) {
  return {{"blocks", s.blocks}, {"threads", s.threads}, {"vector_bytes", s.vector_bytes}, {"unroll", s.unroll}};
}

nlohmann::json stream_limit_json(const StreamLimit& l) {
  nlohmann::json trials = nlohmann::json::array();
  for (const StreamTrial& t : l.trials) {
    trials.push_back({{"shape", stream_shape_json(t.shape)}, {"median_us", t.median_us}, {"tbps", t.tbps}});
  }
  return {{"buffer_bytes", l.buffer_bytes},
          {"moved_bytes", l.moved_bytes},
          {"median_us", l.best.median_us},
          {"tbps", l.best.tbps},
          {"shape", stream_shape_json(l.best.shape)},
          {"trials", trials}};
}

nlohmann::json mma_limit_json(const MmaLimit& mma) {
  auto shape = [](const MmaPeakShape& s) {
    return nlohmann::json{{"n", s.n}, {"warpgroups", s.warpgroups}, {"blocks", s.blocks}};
  };
  nlohmann::json trials = nlohmann::json::array();
  for (const MmaTrial& t : mma.trials) {
    trials.push_back(
        {{"shape", shape(t.shape)}, {"median_us", t.median_us}, {"tflops", t.tflops}, {"sm_clock_ghz", t.sm_ghz}});
  }
  // The instruction the peak kernel issues (src/kernels/limits.hpp), the grouped GEMM's own.
  return {{"instruction", "wgmma.mma_async.m64nNk16.f32.f16.f16, A registers, B shared (128B swizzle)"},
          {"iterations", mma.iterations},
          {"median_us", mma.best.median_us},
          {"tflops", mma.best.tflops},
          {"sm_clock_ghz", mma.best.sm_ghz},
          {"shape", shape(mma.best.shape)},
          {"trials", trials}};
}

nlohmann::json limits_json(const Limits& limits) {
  nlohmann::json j = nlohmann::json::object();
  if (limits.read) j["read"] = stream_limit_json(*limits.read);
  if (limits.write) j["write"] = stream_limit_json(*limits.write);
  if (limits.copy) j["copy"] = stream_limit_json(*limits.copy);
  if (limits.mma) j["mma"] = mma_limit_json(*limits.mma);
  if (limits.cublas) {
    j["cublas_fp16"] = {
        {"n", limits.cublas->n}, {"median_us", limits.cublas->median_us}, {"tflops", limits.cublas->tflops}};
  }
  if (limits.memcpy) {
    j["memcpy"] = {
        {"bytes", limits.memcpy->bytes}, {"median_us", limits.memcpy->median_us}, {"tbps", limits.memcpy->tbps}};
  }
  return j;
}

nlohmann::json tiles_json(const std::vector<TileFigures>& tiles) {
  nlohmann::json sweep = nlohmann::json::array();
  for (const TileFigures& t : tiles) {
    sweep.push_back({{"tile", t.tile},
                     {"block_rows", t.block_rows},
                     {"block_tokens", t.block_tokens},
                     {"gate_us", t.median_us[0]},
                     {"up_us", t.median_us[1]},
                     {"down_us", t.median_us[2]},
                     {"gemms_us", t.median_us[3]}});
  }
  return sweep;
}

}  // namespace

nlohmann::json bench_tokens_json(const TokenFigures& t) {
  nlohmann::json steps = nlohmann::json::array();
  for (const StepFigures& f : t.steps) steps.push_back(step_json(f));
  const Floor& f = t.floor;
  nlohmann::json j = {{"tokens", t.tokens},
                      {"pairs", t.pairs},
                      {"active_experts", t.active_experts},
                      {"layout", t.layout},
                      {"tile_gate_up", t.tile_gate_up},
                      {"tile_down", t.tile_down},
                      {"kernels", steps},
                      {"gemms_us", t.gemms_us},
                      {"gemms_timing", std::string(t.gemms_timing)},
                      {"gemms_events_us", t.gemms_events_us},
                      {"gemms_per_kernel_us", {{"gate", t.gemm_us[0]}, {"up", t.gemm_us[1]}, {"down", t.gemm_us[2]}}},
                      {"gemm_weight_bytes", t.gemm_weight_bytes},
                      {"gemm_memory_bytes", t.gemm_memory_bytes},
                      {"gemm_memory_tbps", t.gemm_memory_tbps},
                      {"gemm_flops", t.gemm_flops},
                      {"floor_us", f.us},
                      {"floor_bound", f.us > 0 ? nlohmann::json(std::string(f.bound)) : nlohmann::json(nullptr)},
                      {"floor_memory_us", f.memory_us},
                      {"floor_weights_us", f.weights_us},
                      {"floor_flops_us", f.flops_us},
                      {"floor_reference_us", f.reference_us},
                      {"chain_us", t.chain_us},
                      {"chain_timing", std::string(t.chain_timing)},
                      {"chain_events_us", t.chain_events_us},
                      {"gemms_plain_us", t.gemms_plain_us},
                      {"gemms_programmatic_us", t.gemms_programmatic_us},
                      {"chain_plain_us", t.chain_plain_us},
                      {"chain_programmatic_us", t.chain_programmatic_us}};
  if (!t.tiles.empty()) j["tile_sweep"] = tiles_json(t.tiles);
  return j;
}

nlohmann::json bench_json(const BenchSetup& setup, const std::vector<TokenFigures>& results,
                          const BenchProvenance& provenance) {
  nlohmann::json j;
  j["schema"] = kBenchSchema;
  j["tool_version"] = provenance.tool_version;
  j["git_revision"] = provenance.git_revision;
  j["date"] = provenance.date;
  j["device"] = {{"ordinal", setup.device_ordinal},
                 {"name", setup.device_name},
                 {"sm_count", setup.sm_count},
                 {"l2_bytes", setup.limits.l2_bytes}};
  j["layout"] = setup.layout;
  j["replays"] = setup.replays;
  j["limits"] = limits_json(setup.limits);
  j["reference_rates"] = {{"read_tbps", kReferenceReadTbps}, {"tensor_tflops", kReferenceTensorTflops}};
  nlohmann::json tokens = nlohmann::json::array();
  for (const TokenFigures& t : results) tokens.push_back(bench_tokens_json(t));
  j["results"] = tokens;
  return j;
}

}  // namespace tpgraph::bench
