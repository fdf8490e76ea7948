// What `tpgraph bench` measured and what it means, without a GPU: the GPU's own limits (streaming
// read, write and copy bandwidth, the tensor-core peak of the grouped GEMM's instruction, cuBLAS's
// fp16 GEMM, a device-to-device memcpy), one rank's kernel times per token count, and the
// arithmetic that turns them into rates, fractions of a limit and floors.
//
// src/cuda/bench_* measures and fills the *Measurement types; analyze_bench_tokens computes the
// figures; src/core/report/bench_report.hpp prints them as text and JSON. Nothing here is measured
// or rounded for printing, so the unit tests feed made-up timings and check every figure by hand.
//
// A GEMM's bound is the bytes it must move through device memory against the read limit: its
// weights, and its activations (routed rows in, outputs out) beyond what the L2 can hold at its
// start and at its end (memory_bytes below); every other kernel reads and writes, against the copy
// limit. The floor of a token count is the time the three GEMMs' device-memory bytes take at the
// read limit or their FLOPs at the MMA peak (cuBLAS's rate where the build has no wgmma), whichever
// is longer; the reference floor does the same at the fixed rates below.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/analysis/bench_shapes.hpp"
#include "core/base/enum_format.hpp"

namespace tpgraph::bench {

// Fixed reference rates of an H200, the ones the project's speed bars are stated against: device
// memory streamed at 4.3 TB/s, dense fp16 tensor work at 790 TFLOP/s. A floor at these rates stays
// comparable across runs and machines; the floor at the rates measured in the run is the honest one.
inline constexpr double kReferenceReadTbps = 4.3;
inline constexpr double kReferenceTensorTflops = 790.0;

[[nodiscard]] inline std::string_view format_as(StreamKind kind) { return to_string(kind); }
// "256 blocks x 256 threads, 16-byte vectors x 4"
[[nodiscard]] std::string describe(const StreamShape& shape);
// "wgmma m64n160k16 f32.f16.f16, 264 blocks x 2 warpgroups"
[[nodiscard]] std::string describe(const MmaPeakShape& shape);

struct StreamTrial {
  StreamShape shape;
  double median_us = 0;
  double tbps = 0;
};
struct StreamLimit {
  StreamKind kind = StreamKind::read;
  std::int64_t buffer_bytes = 0;  // the buffer read, written or copied
  std::int64_t moved_bytes = 0;   // per launch: copy counts read + write
  StreamTrial best;
  std::vector<StreamTrial> trials;  // every shape tried
};

struct MmaTrial {
  MmaPeakShape shape;
  double median_us = 0;
  double tflops = 0;
  double sm_ghz = 0;  // the SM clock over the shape's launches (0: not read)
};
struct MmaLimit {
  int iterations = 0;  // k16 x 4 steps per warpgroup per launch
  MmaTrial best;
  std::vector<MmaTrial> trials;
};

struct MemcpyRate {
  std::int64_t bytes = 0;  // one copy's size; read + write moves twice that
  double median_us = 0;
  double tbps = 0;  // (read + write) / median
};

struct TensorLimit {
  int n = 0;  // n x n x n
  double median_us = 0;
  double tflops = 0;  // 2 n^3 / median
};

// The limits of one run. `measured` is false under --no-limits: then every limit is absent and no
// fraction or measured floor is stated. `mma` is absent where the build has no wgmma.
struct Limits {
  bool measured = false;
  std::optional<StreamLimit> read;
  std::optional<StreamLimit> write;
  std::optional<StreamLimit> copy;
  std::optional<MmaLimit> mma;
  std::optional<TensorLimit> cublas;
  std::optional<MemcpyRate> memcpy;
  std::int64_t l2_bytes = 0;

  [[nodiscard]] std::optional<double> read_tbps() const;
  [[nodiscard]] std::optional<double> copy_tbps() const;
  [[nodiscard]] std::optional<double> mma_tflops() const;
  [[nodiscard]] std::optional<double> cublas_tflops() const;
};

// One kernel of the chain: its cost counted from the shapes (cuda::step_cost) and its time in
// every timed replay.
struct StepMeasurement {
  std::string kernel;             // "quant_z", "gate", ...
  std::int64_t bytes = 0;         // read plus written
  std::int64_t weight_bytes = 0;  // > 0 for a GEMM: its weights, of the active experts only
  double flops = 0;               // 2 per multiply-add
  std::vector<double> replay_us;  // one per timed replay
};

// The three GEMMs timed with one forced tile (--all-tiles).
struct TileMeasurement {
  int tile = 0;
  int block_rows = 0;
  int block_tokens = 0;
  std::array<std::vector<double>, 4> replay_us;  // gate, up, down, then the three back to back
};

// Everything bench measured for one token count.
struct TokenMeasurement {
  int tokens = 0;
  std::int64_t pairs = 0;
  int active_experts = 0;
  std::string layout;  // "v1" or "v2"
  int tile_gate_up = 0;
  int tile_down = 0;
  std::vector<StepMeasurement> steps;           // the chain's kernels in issue order
  std::vector<double> chain_us;                 // the whole chain, per replay
  std::array<std::vector<double>, 4> gemms_us;  // gate, up, down alone, then the three, per replay
  // The chain and the three GEMMs with no event between kernels, launched plainly and
  // programmatically (cuda/bench_chain.hpp, Timing), per replay; empty where not measured.
  std::vector<double> chain_plain_us, chain_programmatic_us;
  std::vector<double> gemms_plain_us, gemms_programmatic_us;
  std::vector<TileMeasurement> tiles;  // empty unless --all-tiles
};

// A fraction of a limit: absent where the limit was not measured (or is not positive).
[[nodiscard]] std::optional<double> fraction_of(double value, const std::optional<double>& limit);

// The bytes a GEMM must move through device memory: at least its weights (several times the L2,
// and read once per launch), and of all the bytes it reads and writes (`bytes`, weights included)
// every one but those the L2 may hold when it starts (inputs the kernel before left there) and
// when it ends (outputs not yet written back): bytes - 2 x L2. Each byte counted in `bytes` is
// read or written once by the kernel, so this is a lower bound of its device-memory traffic. An
// unknown L2 (0) leaves the weights alone.
[[nodiscard]] std::int64_t gemm_memory_bytes(std::int64_t bytes, std::int64_t weight_bytes, std::int64_t l2_bytes);

enum class Bound { read, copy };
[[nodiscard]] std::string_view to_string(Bound bound);
[[nodiscard]] inline std::string_view format_as(Bound bound) { return to_string(bound); }

struct StepFigures {
  std::string kernel;
  double median_us = 0;
  double min_us = 0;
  std::int64_t bytes = 0;
  std::int64_t weight_bytes = 0;
  std::int64_t memory_bytes = 0;  // a GEMM's gemm_memory_bytes, any other kernel's bytes
  double flops = 0;
  double tbps = 0;    // all bytes over the median
  double tflops = 0;  // 0 for a kernel without FLOPs
  Bound bound = Bound::copy;
  double bound_tbps = 0;  // memory_bytes over the median
  std::optional<double> fraction_of_bound;
  bool fits_l2 = false;                      // not a GEMM, and its bytes fit in L2: it can pass the device-memory limit
  std::optional<double> fraction_of_mma;     // absent for a kernel without FLOPs
  std::optional<double> fraction_of_cublas;  // likewise
};

// The floor of the three GEMMs. `us` is 0 where the limits were not measured.
struct Floor {
  double us = 0;
  double memory_us = 0;       // the GEMMs' device-memory bytes (memory_bytes) at the read limit (0 without it)
  double weights_us = 0;      // their weight bytes alone at the read limit (0 without it), for comparison
  double flops_us = 0;        // their FLOPs at the MMA peak, or cuBLAS's rate without one (0 without either)
  bool flops_at_mma = false;  // the FLOP floor used the MMA peak, not cuBLAS
  std::string_view bound;     // "read" (memory_us) or "mma" / "cublas" (flops_us): the longer of the two
  double reference_us = 0;    // at kReferenceReadTbps / kReferenceTensorTflops
};

struct TileFigures {
  int tile = 0;
  int block_rows = 0;
  int block_tokens = 0;
  std::array<double, 4> median_us{};  // gate, up, down, then the three
};

struct TokenFigures {
  int tokens = 0;
  std::int64_t pairs = 0;
  int active_experts = 0;
  std::string layout;
  int tile_gate_up = 0;
  int tile_down = 0;
  std::vector<StepFigures> steps;
  // The three GEMMs' median as a layer runs them, which the rates and the floor use: one graph
  // with no event between them, launched programmatically where that was measured, else plainly,
  // else the per-step graph's first to last event (`gemms_timing` says which).
  double gemms_us = 0;
  std::string_view gemms_timing;
  double gemms_events_us = 0;          // the per-step graph (an event node between kernels): first to last event
  std::array<double, 3> gemm_us{};     // median of gate, up, down alone
  std::int64_t gemm_weight_bytes = 0;  // summed over the chain's GEMMs
  std::int64_t gemm_memory_bytes = 0;  // likewise, their memory_bytes
  double gemm_flops = 0;
  double gemm_weight_tbps = 0;                  // weight bytes over gemms_us
  double gemm_memory_tbps = 0;                  // device-memory bytes (gemm_memory_bytes) over gemms_us
  double gemm_tflops = 0;                       // FLOPs over gemms_us
  std::optional<double> gemm_fraction_of_read;  // gemm_memory_tbps against the read limit
  std::optional<double> gemm_fraction_of_mma;
  std::optional<double> gemm_fraction_of_cublas;
  Floor floor;
  double chain_us = 0;  // the chain's median, chosen as gemms_us is
  std::string_view chain_timing;
  double chain_events_us = 0;
  // Medians of TokenMeasurement's series with no event between kernels; 0 where not measured.
  double chain_plain_us = 0;
  double chain_programmatic_us = 0;
  double gemms_plain_us = 0;
  double gemms_programmatic_us = 0;
  std::vector<TileFigures> tiles;

  [[nodiscard]] bool any_fits_l2() const;
  // gemms_us over the measured floor (0 without one) and over the reference floor.
  [[nodiscard]] double over_floor() const { return floor.us > 0 ? gemms_us / floor.us : 0.0; }
  [[nodiscard]] double over_reference_floor() const { return gemms_us / floor.reference_us; }
};

[[nodiscard]] StepFigures analyze_step(const StepMeasurement& step, const Limits& limits);
[[nodiscard]] Floor gemm_floor(std::int64_t weight_bytes, std::int64_t memory_bytes, double flops,
                               const Limits& limits);
[[nodiscard]] TokenFigures analyze_bench_tokens(const TokenMeasurement& m, const Limits& limits);

// Where and how bench ran: the header of its text and of its JSON.
struct BenchSetup {
  int device_ordinal = 0;
  std::string device_name;
  int sm_count = 0;
  std::string layout;
  int replays = 0;
  Limits limits;
};

}  // namespace tpgraph::bench
