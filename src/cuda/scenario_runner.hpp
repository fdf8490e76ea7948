// One scenario on the GPUs, from inputs to a filled VariantRun: the layer's inputs on every rank's
// device, the layer graph captured once (or walked eagerly every replay), the captured graph checked
// against the layer graph, warm-up and timed replays, and the output checked against the CPU
// reference. `tpgraph run`, `tpgraph check`, `tpgraph dot --captured` and the GPU tests all go
// through here: there is one issuer of the layer.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/model/layer_graph.hpp"
#include "core/model/scenario.hpp"
#include "core/numerics/reference.hpp"
#include "core/numerics/router.hpp"
#include "core/records/run_data.hpp"
#include "cuda/capture.hpp"
#include "cuda/replay.hpp"

namespace tpgraph::cuda {

// What a profiler learns while a scenario runs. The CUPTI collector implements it
// (cupti/observer.hpp; this layer does not link CUPTI); check, tests and `run --no-trace` pass none.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  // After the variant's uploads, before its capture: forget the previous variant.
  virtual void begin_variant() = 0;
  virtual void node_captured(cudaGraphNode_t captured, int node) = 0;
  virtual void set_tracing(bool on) = 0;
  // Everything this thread issues until pop_tag belongs to `replay` and, issued eagerly, to layer
  // node `node` (-1: a whole graph launch).
  virtual void push_tag(int replay, int node) = 0;
  virtual void pop_tag() = 0;
  // The traced replays' records, tied to nodes and replays; health counts added to.
  [[nodiscard]] virtual std::vector<ActivityRecord> collect(CollectionHealth& health) = 0;
  [[nodiscard]] virtual std::vector<std::string> take_warnings() = 0;
};

// A progress line for stderr ("capturing", "replaying 100 ..."); may be empty.
using Progress = std::function<void(std::string_view line)>;

// The host side of one geometry, seed and weights kind: routing, every rank's weights, the layer
// input, and the CPU reference at the sampled tokens. Building the weights is the slow host part,
// so every variant at one geometry shares one.
struct LayerInputs {
  Geometry geometry;
  std::uint64_t seed = 0;
  WeightsKind weights = WeightsKind::random;
  Routing routing;
  // [rank]; shared between inputs that differ only in tokens (weights do not depend on them)
  std::shared_ptr<const std::vector<RankWeights>> rank_weights;
  std::vector<float> z;                            // tokens x hidden
  std::vector<int> sample;                         // tokens the output check reads
  std::vector<std::vector<float>> rank_reference;  // [rank]: out_r at `sample`
  std::vector<float> layer_reference;              // the join's sum at `sample`

  [[nodiscard]] bool serves(const Scenario& s) const {
    return geometry == s.geometry && seed == s.seed && weights == s.weights;
  }
};
// sample_count 0: no sample and no reference (nothing will be checked). `weights`, when given, are
// every rank's weights of `s` already made (shares_weights), and are not made again.
[[nodiscard]] std::shared_ptr<const LayerInputs> make_layer_inputs(
    const Scenario& s, int sample_count, const Progress& progress = {},
    std::shared_ptr<const std::vector<RankWeights>> weights = nullptr);
// Whether `in`'s weights are those `s` would make: same experts, hidden, ff, ranks, seed and kind.
[[nodiscard]] bool shares_weights(const LayerInputs& in, const Scenario& s);

struct DeviceModel;  // every rank's resident weights, routing, GEMM plans and input (scenario_runner.cpp)

// The checks before anything is generated or allocated: a GPU is visible (NoDeviceError), every
// rank's GPU exists (NoDeviceError), the GPUs that exchange data reach each other (enabled; else
// InputError), and each GPU has the memory the scenario needs less what `reused` already holds
// there (InputError saying needed and free). Returns each rank's GPU.
std::vector<int> preflight(const Scenario& s, const DeviceModel* reused);

// A scenario set up on its GPUs and captured (graph issue) or ready to walk (eager issue).
class PreparedVariant {
 public:
  // The caller has run preflight() for `s` (ScenarioRunner::prepare does). Uploads (or reuses
  // `model` when it matches the scenario's geometry, layout and devices) and allocates; calls
  // observer->begin_variant() after the uploads and captures with observer->node_captured().
  PreparedVariant(const Scenario& s, std::shared_ptr<const LayerInputs> inputs, std::shared_ptr<DeviceModel> model,
                  RunObserver* observer, const Progress& progress);
  ~PreparedVariant();
  PreparedVariant(const PreparedVariant&) = delete;
  PreparedVariant& operator=(const PreparedVariant&) = delete;

  [[nodiscard]] const Scenario& scenario() const { return scenario_; }
  [[nodiscard]] const LayerGraph& graph() const { return graph_; }
  [[nodiscard]] int visible_devices() const { return visible_; }
  [[nodiscard]] bool ranks_share_gpu() const;
  [[nodiscard]] std::shared_ptr<DeviceModel> model() const { return model_; }
  // The captured graph; null with eager issue.
  [[nodiscard]] const CapturedGraph* captured() const { return captured_.get(); }
  // Capture and instantiate times (0 with eager issue).
  [[nodiscard]] double capture_ms() const { return capture_ms_; }
  [[nodiscard]] double instantiate_ms() const { return instantiate_ms_; }
  // `count` launches (graph) or eager walks issued back to back, then one wait: the host time of each
  // call while the GPU is still busy with the earlier ones.
  [[nodiscard]] std::vector<double> queued_launches(int count);

  // `count` replays numbered from `first`, each waited for; tagged for the observer when `tag`.
  [[nodiscard]] ReplayTimes replay(int first, int count, bool tag);
  // The layer output after the last replay against the CPU reference at the sampled tokens: the
  // root's sum with join reduce, else every rank's out_r (and, with join copy, the root's staged
  // copies of them).
  [[nodiscard]] Comparison check_output() const;

  // What `tpgraph check` drives, one replay at a time:
  // Fills every rank's resident workspace and out, and the root's staging, with 0xff bytes (NaN as
  // fp32 and fp16), so an element no kernel wrote shows. Synchronous.
  void poison();
  // One replay (graph launch or eager walk) enqueued on the ranks' streams, not waited for.
  void launch();
  // Waits for everything issued on every rank's stream.
  void wait();
  // Rank r's out [tokens][hidden]; with join reduce, rank 0's holds the layer output.
  [[nodiscard]] std::vector<float> rank_output(int rank) const;
  [[nodiscard]] const LayerInputs& inputs() const { return *inputs_; }

 private:
  struct Buffers;
  void issue_node(const Node& node, cudaStream_t stream);

  Scenario scenario_;
  std::shared_ptr<const LayerInputs> inputs_;
  std::shared_ptr<DeviceModel> model_;
  RunObserver* observer_ = nullptr;
  int visible_ = 0;
  LayerGraph graph_;
  std::unique_ptr<Buffers> buffers_;
  std::unique_ptr<GraphIssuer> issuer_;
  std::unique_ptr<CapturedGraph> captured_;
  double capture_ms_ = 0;
  double instantiate_ms_ = 0;
  GraphExec exec_;
  int tag_replay_ = -1;  // eager issue: the replay the walk belongs to, for per-node tags
  bool tagging_ = false;
};

struct RunnerSettings {
  bool trace = true;      // replay again with the observer's tracing on (needs an observer)
  int check_tokens = 32;  // tokens of the output check (all of them when fewer); 0: no check
};

// Runs scenarios one after another, sharing the host inputs and the device model between variants
// of one geometry.
class ScenarioRunner {
 public:
  ScenarioRunner(RunObserver* observer, RunnerSettings settings, Progress progress);

  // Set up, capture, warm up W (or until steady: Scenario::warmup auto), replay N untraced (host launch times, replay
  // wall time) and, with tracing, N traced (records, event spans), collect, check the output. Throws when the captured
  // graph differs from the layer graph; a failed output check is recorded, not thrown.
  [[nodiscard]] VariantRun run(const Scenario& s);
  // Set up and capture only (dot --captured, check, tests). Runs preflight() first unless
  // preflight_all already checked this scenario.
  [[nodiscard]] std::unique_ptr<PreparedVariant> prepare(const Scenario& s);
  // As prepare, but on a device model of its own (never shared with another variant): a variant
  // that runs at the same time as one from prepare() (check's concurrent arm).
  [[nodiscard]] std::unique_ptr<PreparedVariant> prepare_apart(const Scenario& s);
  // preflight() for every scenario before any of them runs, so a bad one stops a run of several
  // before any GPU work; run() and prepare() of these scenarios then do not check them again.
  void preflight_all(std::span<const Scenario> scenarios);
  // The observer of the variants run from now on (nullptr: none).
  void set_observer(RunObserver* observer) { observer_ = observer; }

 private:
  std::shared_ptr<const LayerInputs> inputs_for(const Scenario& s);
  // Scenario warmup auto: replays in blocks until auto_warmup_decision (core/analysis/steady) says
  // done; returns how many ran and adds the note that says why they stopped.
  int warm_up_until_steady(PreparedVariant& prepared, std::vector<std::string>& notes);

  RunObserver* observer_;
  RunnerSettings settings_;
  Progress progress_;
  std::shared_ptr<const LayerInputs> inputs_;
  std::shared_ptr<DeviceModel> model_;
  std::vector<Scenario> checked_;  // preflight_all's scenarios not yet prepared
};

}  // namespace tpgraph::cuda
