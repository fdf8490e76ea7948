#include "core/analysis/bench_model.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <tuple>
#include <utility>

#include "core/base/stats.hpp"

namespace tpgraph::bench {

std::string_view to_string(StreamKind kind) {
  switch (kind) {
    case StreamKind::read: return "read";
    case StreamKind::write: return "write";
    case StreamKind::copy: return "copy";
  }
  return "?";
}

std::string_view to_string(Bound bound) { return bound == Bound::read ? "read" : "copy"; }

std::string describe(const StreamShape& shape) {
  return fmt::format("{} blocks x {} threads, {}-byte vectors x {}", shape.blocks, shape.threads, shape.vector_bytes,
                     shape.unroll);
}

std::string describe(const MmaPeakShape& shape) {
  return fmt::format("wgmma m64n{}k16 f32.f16.f16, {} blocks x {} warpgroups", shape.n, shape.blocks, shape.warpgroups);
}

std::optional<double> Limits::read_tbps() const { return read ? std::optional(read->best.tbps) : std::nullopt; }
std::optional<double> Limits::copy_tbps() const { return copy ? std::optional(copy->best.tbps) : std::nullopt; }
std::optional<double> Limits::mma_tflops() const { return mma ? std::optional(mma->best.tflops) : std::nullopt; }
std::optional<double> Limits::cublas_tflops() const { return cublas ? std::optional(cublas->tflops) : std::nullopt; }

std::optional<double> fraction_of(double value, const std::optional<double>& limit) {
  if (!limit || *limit <= 0) return std::nullopt;
  return value / *limit;
}

std::int64_t gemm_memory_bytes(std::int64_t bytes, std::int64_t weight_bytes, std::int64_t l2_bytes) {
  if (l2_bytes <= 0) return weight_bytes;
  return std::max(weight_bytes, bytes - 2 * l2_bytes);
}

namespace {
// Bytes over microseconds in TB/s, FLOPs over microseconds in TFLOP/s.
double tera_rate(double amount, double us) { return amount / (us * 1e-6) / 1e12; }
// Microseconds `amount` takes at `tera_per_s` (TB/s or TFLOP/s).
double time_at(double amount, double tera_per_s) { return amount / (tera_per_s * 1e12) * 1e6; }
}  // namespace

StepFigures analyze_step(const StepMeasurement& step, const Limits& limits) {
  StepFigures f;
  f.kernel = step.kernel;
  f.median_us = stats::median(step.replay_us);
  f.min_us = stats::min(step.replay_us);
  f.bytes = step.bytes;
  f.weight_bytes = step.weight_bytes;
  const bool gemm = step.weight_bytes > 0;
  f.memory_bytes = gemm ? gemm_memory_bytes(step.bytes, step.weight_bytes, limits.l2_bytes) : step.bytes;
  f.flops = step.flops;
  f.tbps = tera_rate(static_cast<double>(step.bytes), f.median_us);
  f.tflops = tera_rate(step.flops, f.median_us);
  f.bound = gemm ? Bound::read : Bound::copy;
  f.bound_tbps = tera_rate(static_cast<double>(f.memory_bytes), f.median_us);
  f.fraction_of_bound = fraction_of(f.bound_tbps, gemm ? limits.read_tbps() : limits.copy_tbps());
  f.fits_l2 = !gemm && limits.l2_bytes > 0 && step.bytes <= limits.l2_bytes;
  if (step.flops > 0) {
    f.fraction_of_mma = fraction_of(f.tflops, limits.mma_tflops());
    f.fraction_of_cublas = fraction_of(f.tflops, limits.cublas_tflops());
  }
  return f;
}

Floor gemm_floor(std::int64_t weight_bytes, std::int64_t memory_bytes, double flops, const Limits& limits) {
  Floor floor;
  const auto bytes = static_cast<double>(memory_bytes);
  floor.reference_us = std::max(time_at(bytes, kReferenceReadTbps), time_at(flops, kReferenceTensorTflops));
  const std::optional<double> read_tbps = limits.read_tbps();
  const std::optional<double> mma_tflops = limits.mma_tflops();
  const std::optional<double> flops_tflops = mma_tflops ? mma_tflops : limits.cublas_tflops();
  floor.flops_at_mma = mma_tflops.has_value();
  floor.memory_us = read_tbps ? time_at(bytes, *read_tbps) : 0.0;
  floor.weights_us = read_tbps ? time_at(static_cast<double>(weight_bytes), *read_tbps) : 0.0;
  floor.flops_us = flops_tflops ? time_at(flops, *flops_tflops) : 0.0;
  floor.us = read_tbps && flops_tflops ? std::max(floor.memory_us, floor.flops_us) : 0.0;
  floor.bound = floor.memory_us >= floor.flops_us ? "read" : (floor.flops_at_mma ? "mma" : "cublas");
  return floor;
}

bool TokenFigures::any_fits_l2() const {
  return std::any_of(steps.begin(), steps.end(), [](const StepFigures& s) { return s.fits_l2; });
}

TokenFigures analyze_bench_tokens(const TokenMeasurement& m, const Limits& limits) {
  TokenFigures t;
  t.tokens = m.tokens;
  t.pairs = m.pairs;
  t.active_experts = m.active_experts;
  t.layout = m.layout;
  t.tile_gate_up = m.tile_gate_up;
  t.tile_down = m.tile_down;
  for (const StepMeasurement& step : m.steps) {
    t.steps.push_back(analyze_step(step, limits));
    t.gemm_weight_bytes += step.weight_bytes;
    if (step.weight_bytes > 0) t.gemm_memory_bytes += t.steps.back().memory_bytes;
    t.gemm_flops += step.flops;
  }
  for (std::size_t i = 0; i < t.gemm_us.size(); ++i) t.gemm_us[i] = stats::median(m.gemms_us[i]);
  const auto median_or_0 = [](const std::vector<double>& us) { return us.empty() ? 0.0 : stats::median(us); };
  // The fastest honest way a layer runs its kernels: programmatically, else plainly, else with events.
  const auto as_a_layer_runs = [](double events, double plain, double programmatic) {
    if (programmatic > 0) return std::pair<double, std::string_view>{programmatic, "programmatic"};
    if (plain > 0) return std::pair<double, std::string_view>{plain, "plain"};
    return std::pair<double, std::string_view>{events, "events"};
  };
  t.gemms_events_us = stats::median(m.gemms_us[3]);
  t.gemms_plain_us = median_or_0(m.gemms_plain_us);
  t.gemms_programmatic_us = median_or_0(m.gemms_programmatic_us);
  std::tie(t.gemms_us, t.gemms_timing) = as_a_layer_runs(t.gemms_events_us, t.gemms_plain_us, t.gemms_programmatic_us);
  t.gemm_weight_tbps = tera_rate(static_cast<double>(t.gemm_weight_bytes), t.gemms_us);
  t.gemm_tflops = tera_rate(t.gemm_flops, t.gemms_us);
  t.gemm_memory_tbps = tera_rate(static_cast<double>(t.gemm_memory_bytes), t.gemms_us);
  t.gemm_fraction_of_read = fraction_of(t.gemm_memory_tbps, limits.read_tbps());
  t.gemm_fraction_of_mma = fraction_of(t.gemm_tflops, limits.mma_tflops());
  t.gemm_fraction_of_cublas = fraction_of(t.gemm_tflops, limits.cublas_tflops());
  t.floor = gemm_floor(t.gemm_weight_bytes, t.gemm_memory_bytes, t.gemm_flops, limits);
  t.chain_events_us = stats::median(m.chain_us);
  t.chain_plain_us = median_or_0(m.chain_plain_us);
  t.chain_programmatic_us = median_or_0(m.chain_programmatic_us);
  std::tie(t.chain_us, t.chain_timing) = as_a_layer_runs(t.chain_events_us, t.chain_plain_us, t.chain_programmatic_us);
  for (const TileMeasurement& tile : m.tiles) {
    TileFigures f{tile.tile, tile.block_rows, tile.block_tokens, {}};
    for (std::size_t i = 0; i < f.median_us.size(); ++i) f.median_us[i] = stats::median(tile.replay_us[i]);
    t.tiles.push_back(f);
  }
  return t;
}

}  // namespace tpgraph::bench
