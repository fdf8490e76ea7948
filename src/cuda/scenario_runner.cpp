#include "cuda/scenario_runner.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <set>
#include <stdexcept>
#include <utility>

#include "core/analysis/steady.hpp"
#include "core/base/error.hpp"
#include "core/base/stats.hpp"
#include "cuda/devices.hpp"
#include "cuda/layer_buffers.hpp"
#include "cuda_error/error.hpp"
#include "kernels/kernels.hpp"

namespace tpgraph::cuda {
namespace {

void say(const Progress& progress, std::string_view line) {
  if (progress) progress(line);
}

}  // namespace

// Every rank's layer (weights, routing, GEMM plans, z, out, a resident workspace) for one set of
// inputs, layout and rank-to-GPU map, shared by the variants that agree on them.
struct DeviceModel {
  std::shared_ptr<const LayerInputs> inputs;
  Layout layout = Layout::v2;
  std::vector<int> devices;  // [rank]
  std::vector<RankLayer> ranks;

  [[nodiscard]] bool serves(const LayerInputs* in, Layout l, const std::vector<int>& d) const {
    return inputs.get() == in && layout == l && devices == d;
  }
};

std::vector<int> preflight(const Scenario& s, const DeviceModel* reused) {
  validate(s);
  require_device(fmt::format("running scenario '{}' needs", s.name));
  const int visible = visible_device_count();
  const std::vector<int> devices = rank_devices(s, visible);
  enable_peer_access(devices);
  std::map<int, std::int64_t> needed;
  for (const auto& [device, bytes] : memory_per_device(s, visible)) needed[device] += bytes;
  if (reused != nullptr) {
    // A reused model already holds each rank's resident part (weights, routing, z, out, workspace).
    const std::int64_t resident = memory_per_rank(s.geometry).total();
    for (const int d : reused->devices) needed[d] -= resident;
  }
  check_memory({needed.begin(), needed.end()});
  return devices;
}

// The variant's own state beside the shared model: where each rank's current workspace is (the
// model's resident one, or the block the layer's alloc node returned), the pool fresh blocks come
// from, and the root's staging of the other ranks' partials for the join.
struct PreparedVariant::Buffers {
  struct Rank {
    RankWorkspace work;
    void* fresh = nullptr;
    cudaMemPool_t pool = nullptr;
  };
  std::vector<Rank> ranks;
  DeviceBuffer<float> staging;          // (ranks - 1) x tokens x hidden on the root
  DeviceBuffer<const float*> partials;  // device pointers into staging, for join_reduce
};

bool shares_weights(const LayerInputs& in, const Scenario& s) {
  const Geometry& a = in.geometry;
  const Geometry& b = s.geometry;
  return in.rank_weights && a.experts == b.experts && a.hidden == b.hidden && a.ff == b.ff && a.ranks == b.ranks &&
         in.seed == s.seed && in.weights == s.weights;
}

std::shared_ptr<const LayerInputs> make_layer_inputs(const Scenario& s, int sample_count, const Progress& progress,
                                                     std::shared_ptr<const std::vector<RankWeights>> weights) {
  const Geometry& g = s.geometry;
  auto in = std::make_shared<LayerInputs>();
  in->geometry = g;
  in->seed = s.seed;
  in->weights = s.weights;
  in->routing = build_routing(g);
  if (!weights) {
    auto made = std::make_shared<std::vector<RankWeights>>();
    for (int r = 0; r < g.ranks; ++r) {
      say(progress, fmt::format("generating rank {} weights ({} experts, {}x{} and {}x{}, {})", r, g.experts, g.ff,
                                g.hidden, g.hidden, g.ff, s.weights));
      made->push_back(make_rank_weights(g, r, s.weights, s.seed));
    }
    weights = std::move(made);
  }
  if (std::ssize(*weights) != g.ranks) throw std::logic_error("make_layer_inputs: weights of another rank count");
  in->rank_weights = std::move(weights);
  in->z = make_layer_input(g, s.seed);
  if (sample_count <= 0) return in;  // no output check wanted (dot --captured)
  in->sample = sample_tokens(g.tokens, g.tokens == 1 ? 1 : std::clamp(sample_count, 2, g.tokens));
  say(progress, fmt::format("CPU reference at {} sampled tokens", in->sample.size()));
  for (int r = 0; r < g.ranks; ++r) {
    in->rank_reference.push_back(
        reference_rank_output(g, in->routing, (*in->rank_weights)[static_cast<std::size_t>(r)], in->z, in->sample));
  }
  in->layer_reference = reference_layer_output(g, in->routing, *in->rank_weights, in->z, in->sample);
  return in;
}

PreparedVariant::PreparedVariant(const Scenario& s, std::shared_ptr<const LayerInputs> inputs,
                                 std::shared_ptr<DeviceModel> model, RunObserver* observer, const Progress& progress)
    : scenario_(s), inputs_(std::move(inputs)), model_(std::move(model)), observer_(observer) {
  if (!inputs_ || !inputs_->serves(scenario_)) throw std::logic_error("PreparedVariant: inputs of another geometry");
  visible_ = visible_device_count();
  const Geometry& geo = scenario_.geometry;
  const std::vector<int> devices = rank_devices(scenario_, visible_);
  if (model_ && !model_->serves(inputs_.get(), scenario_.layout, devices)) model_.reset();
  graph_ = build_layer_graph(scenario_, inputs_->routing, visible_);

  if (!model_) {
    say(progress,
        fmt::format("uploading weights ({} layout) for ranks on GPUs {}", scenario_.layout, fmt::join(devices, ",")));
    auto m = std::make_shared<DeviceModel>();
    m->inputs = inputs_;
    m->layout = scenario_.layout;
    m->devices = devices;
    m->ranks.reserve(static_cast<std::size_t>(geo.ranks));
    for (int r = 0; r < geo.ranks; ++r) {
      m->ranks.emplace_back(devices[static_cast<std::size_t>(r)], geo, inputs_->routing,
                            (*inputs_->rank_weights)[static_cast<std::size_t>(r)], scenario_.layout);
      m->ranks.back().upload_input(inputs_->z);
    }
    model_ = std::move(m);
  }

  issuer_ = std::make_unique<GraphIssuer>(graph_);
  buffers_ = std::make_unique<Buffers>();
  Buffers& b = *buffers_;
  const std::int64_t layer_elems = std::int64_t{geo.tokens} * geo.hidden;
  const std::set<int> distinct(devices.begin(), devices.end());
  for (int r = 0; r < geo.ranks; ++r) {
    const RankLayer& layer = model_->ranks[static_cast<std::size_t>(r)];
    Buffers::Rank rb;
    rb.work = layer.workspace();
    if (scenario_.alloc == AllocKind::fresh) {
      TPG_CUDA(cudaDeviceGetDefaultMemPool(&rb.pool, layer.device()));
      // An allocation captured from a pool takes the pool's access list, so the other GPUs of the
      // run are granted access here, before capture.
      for (const int other : distinct) {
        if (other == layer.device()) continue;
        cudaMemAccessDesc desc{};
        desc.location.type = cudaMemLocationTypeDevice;
        desc.location.id = other;
        desc.flags = cudaMemAccessFlagsProtReadWrite;
        TPG_CUDA(cudaMemPoolSetAccess(rb.pool, &desc, 1));
      }
    }
    b.ranks.push_back(rb);
  }
  if (scenario_.join != JoinKind::none && geo.ranks > 1) {
    const int root = devices[0];
    b.staging = DeviceBuffer<float>(root, static_cast<std::size_t>(layer_elems * (geo.ranks - 1)));
    std::vector<const float*> pointers;
    for (int r = 1; r < geo.ranks; ++r) pointers.push_back(b.staging.get() + layer_elems * (r - 1));
    b.partials = to_device<const float*>(root, pointers);
  }
  if (scenario_.root_busy > 0) {
    // The trunk work is a gate-shaped GEMM over the root's resident workspace: quantize the root's z
    // into it once now, so the busy kernels never read uninitialised operands.
    const RankLayer& root = model_->ranks[0];
    DeviceScope scope(root.device());
    root.enqueue(ChainStep::quantize_z, root.workspace(), issuer_->root_stream());
    TPG_CUDA(cudaStreamSynchronize(issuer_->root_stream()));
  }

  // One eager walk first, so lazy module loading and per-kernel setup (the GEMM's shared-memory
  // attribute) happen outside the capture.
  issuer_->issue_eager([this](const Node& n, cudaStream_t st) { issue_node(n, st); });
  synchronize(*issuer_);

  if (observer_ != nullptr) observer_->begin_variant();
  if (scenario_.issue == IssueKind::graph) {
    say(progress,
        fmt::format("capturing {} nodes on {} stream{}", graph_.nodes.size(), geo.ranks, geo.ranks == 1 ? "" : "s"));
    const auto capture_start = std::chrono::steady_clock::now();
    captured_ =
        std::make_unique<CapturedGraph>(issuer_->capture([this](const Node& n, cudaStream_t st) { issue_node(n, st); },
                                                         [this](cudaGraphNode_t captured, int node) {
                                                           if (observer_ != nullptr)
                                                             observer_->node_captured(captured, node);
                                                         }));
    const auto captured_at = std::chrono::steady_clock::now();
    check_captured_graph(graph_, *captured_);
    const auto instantiate_start = std::chrono::steady_clock::now();
    exec_ = instantiate(captured_->graph);
    const auto instantiated_at = std::chrono::steady_clock::now();
    capture_ms_ = std::chrono::duration<double, std::milli>(captured_at - capture_start).count();
    instantiate_ms_ = std::chrono::duration<double, std::milli>(instantiated_at - instantiate_start).count();
  }
}

std::vector<double> PreparedVariant::queued_launches(int count) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(count));
  synchronize(*issuer_);
  for (int i = 0; i < count; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    launch();
    out.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  synchronize(*issuer_);
  return out;
}

void PreparedVariant::launch() {
  if (exec_) {
    DeviceScope scope(issuer_->device(0));
    check(cudaGraphLaunch(exec_.get(), issuer_->root_stream()), "cudaGraphLaunch");
  } else {
    issuer_->issue_eager([this](const Node& n, cudaStream_t st) { issue_node(n, st); });
  }
}

void PreparedVariant::wait() { synchronize(*issuer_); }

void PreparedVariant::poison() {
  for (const RankLayer& rank : model_->ranks) rank.poison();
  if (buffers_->staging.size() > 0) {
    DeviceScope scope(buffers_->staging.device());
    TPG_CUDA(cudaMemset(buffers_->staging.get(), 0xff, buffers_->staging.bytes()));
    // The memset runs on the legacy stream, which the ranks' non-blocking streams do not wait for.
    TPG_CUDA(cudaDeviceSynchronize());
  }
}

std::vector<float> PreparedVariant::rank_output(int rank) const {
  return model_->ranks.at(static_cast<std::size_t>(rank)).download_out();
}

PreparedVariant::~PreparedVariant() {
  if (issuer_) {
    for (int r = 0; r < graph_.ranks; ++r) {
      int previous = 0;
      if (cudaGetDevice(&previous) != cudaSuccess) break;
      check_noexcept(cudaSetDevice(issuer_->device(r)), "cudaSetDevice (cleanup)");
      check_noexcept(cudaStreamSynchronize(issuer_->stream(r)), "cudaStreamSynchronize (cleanup)");
      check_noexcept(cudaSetDevice(previous), "cudaSetDevice (restore)");
    }
  }
  const bool had_graph_memory = exec_ && scenario_.alloc == AllocKind::fresh;
  exec_.reset();
  captured_.reset();
  // Graph allocations stay reserved by the driver after their executable is gone; hand them back so
  // the next variant's memory check sees them free.
  if (had_graph_memory && model_) {
    for (const int d : model_->devices) check_noexcept(cudaDeviceGraphMemTrim(d), "cudaDeviceGraphMemTrim");
  }
}

bool PreparedVariant::ranks_share_gpu() const {
  const std::set<int> distinct(model_->devices.begin(), model_->devices.end());
  return static_cast<int>(distinct.size()) < scenario_.geometry.ranks;
}

void PreparedVariant::issue_node(const Node& node, cudaStream_t stream) {
  if (tagging_ && observer_ != nullptr) observer_->push_tag(tag_replay_, node.id);
  struct PopTag {
    RunObserver* observer;
    ~PopTag() {
      if (observer != nullptr) observer->pop_tag();
    }
  } pop{tagging_ ? observer_ : nullptr};

  const Geometry& geo = scenario_.geometry;
  const RankLayer& layer = model_->ranks[static_cast<std::size_t>(node.rank)];
  Buffers::Rank& rb = buffers_->ranks[static_cast<std::size_t>(node.rank)];
  const std::int64_t layer_elems = std::int64_t{geo.tokens} * geo.hidden;
  switch (node.role) {
    case Role::busy: layer.enqueue(ChainStep::gate, layer.workspace(), stream); return;
    case Role::quantize_z: layer.enqueue(ChainStep::quantize_z, rb.work, stream); return;
    case Role::gate: layer.enqueue(ChainStep::gate, rb.work, stream); return;
    case Role::up: layer.enqueue(ChainStep::up, rb.work, stream); return;
    case Role::swiglu: layer.enqueue(ChainStep::swiglu, rb.work, stream); return;
    case Role::quantize_a: layer.enqueue(ChainStep::quantize_a, rb.work, stream); return;
    case Role::down: layer.enqueue(ChainStep::down, rb.work, stream); return;
    case Role::combine: layer.enqueue(ChainStep::combine, rb.work, stream); return;
    case Role::peer_copy: {
      // cudaMemcpyPeerAsync cannot be captured into a graph; with unified addressing a default-kind
      // copy between two GPUs' pointers is the same peer transfer, captured as a memcpy node.
      const auto bytes =
          static_cast<std::size_t>(std::int64_t{scenario_.copy_row_count()} * geo.hidden) * sizeof(float);
      TPG_CUDA(cudaMemcpyAsync(model_->ranks[static_cast<std::size_t>(node.peer)].z(), model_->ranks[0].z(), bytes,
                               cudaMemcpyDefault, stream));
      return;
    }
    case Role::join_copy: {
      float* dst = buffers_->staging.get() + layer_elems * (node.peer - 1);
      TPG_CUDA(cudaMemcpyAsync(dst, model_->ranks[static_cast<std::size_t>(node.peer)].out(),
                               static_cast<std::size_t>(layer_elems) * sizeof(float), cudaMemcpyDefault, stream));
      return;
    }
    case Role::reduce:
      kernels::join_reduce(buffers_->partials.get(), geo.ranks - 1, layer_elems, model_->ranks[0].out(), stream);
      return;
    case Role::alloc: {
      void* block = nullptr;
      TPG_CUDA(cudaMallocFromPoolAsync(&block, workspace_bytes(geo), rb.pool, stream));
      rb.fresh = block;
      rb.work = carve_workspace(block, geo);
      return;
    }
    case Role::free_mem:
      TPG_CUDA(cudaFreeAsync(rb.fresh, stream));
      rb.fresh = nullptr;
      rb.work = layer.workspace();
      return;
    case Role::span_begin:
    case Role::span_end:
    case Role::traced:  // a traced program's node: never issued by tpgraph
      break;
  }
  throw std::logic_error(fmt::format("issue_node: '{}' is not issued by the runner", node.label));
}

ReplayTimes PreparedVariant::replay(int first, int count, bool tag) {
  const bool tagged = tag && observer_ != nullptr;
  if (exec_) {
    const cudaGraphExec_t exec = exec_.get();
    const cudaStream_t root = issuer_->root_stream();
    DeviceScope scope(issuer_->device(0));
    return run_replays(
        *issuer_,
        [&](int replay) {
          if (tagged) observer_->push_tag(replay, -1);
          const cudaError_t status = cudaGraphLaunch(exec, root);
          if (tagged) observer_->pop_tag();
          check(status, "cudaGraphLaunch");
        },
        first, count, true);
  }
  return run_replays(
      *issuer_,
      [&](int replay) {
        tag_replay_ = replay;
        tagging_ = tagged;
        issuer_->issue_eager([this](const Node& n, cudaStream_t st) { issue_node(n, st); });
        tagging_ = false;
      },
      first, count, true);
}

Comparison PreparedVariant::check_output() const {
  const Geometry& geo = scenario_.geometry;
  const auto& sample = inputs_->sample;
  const std::size_t row = static_cast<std::size_t>(geo.hidden);
  std::vector<float> gpu, ref;
  auto read_rows = [&](int device, const float* base) {
    DeviceScope scope(device);
    const std::size_t at = gpu.size();
    gpu.resize(at + sample.size() * row);
    for (std::size_t i = 0; i < sample.size(); ++i) {
      TPG_CUDA(cudaMemcpy(gpu.data() + at + i * row, base + static_cast<std::size_t>(sample[i]) * row,
                          row * sizeof(float), cudaMemcpyDeviceToHost));
    }
  };
  const auto& devices = model_->devices;
  if (scenario_.join == JoinKind::reduce && geo.ranks > 1) {
    read_rows(devices[0], model_->ranks[0].out());
    ref = inputs_->layer_reference;
  } else {
    for (int r = 0; r < geo.ranks; ++r) {
      read_rows(devices[static_cast<std::size_t>(r)], model_->ranks[static_cast<std::size_t>(r)].out());
      const auto& rr = inputs_->rank_reference[static_cast<std::size_t>(r)];
      ref.insert(ref.end(), rr.begin(), rr.end());
    }
    if (scenario_.join == JoinKind::copy) {
      for (int r = 1; r < geo.ranks; ++r) {
        read_rows(devices[0], buffers_->staging.get() + std::int64_t{geo.tokens} * geo.hidden * (r - 1));
        const auto& rr = inputs_->rank_reference[static_cast<std::size_t>(r)];
        ref.insert(ref.end(), rr.begin(), rr.end());
      }
    }
  }
  return compare_to_reference(gpu, ref);
}

ScenarioRunner::ScenarioRunner(RunObserver* observer, RunnerSettings settings, Progress progress)
    : observer_(observer), settings_(settings), progress_(std::move(progress)) {}

std::shared_ptr<const LayerInputs> ScenarioRunner::inputs_for(const Scenario& s) {
  if (!inputs_ || !inputs_->serves(s)) {
    model_.reset();  // built from the old inputs: its memory goes back before the new one is made
    std::shared_ptr<const std::vector<RankWeights>> weights;
    if (inputs_ && shares_weights(*inputs_, s)) weights = inputs_->rank_weights;
    inputs_.reset();
    inputs_ = make_layer_inputs(s, settings_.check_tokens, progress_, std::move(weights));
  }
  return inputs_;
}

std::unique_ptr<PreparedVariant> ScenarioRunner::prepare_apart(const Scenario& s) {
  // Its whole footprint, beside whatever the runner's own variants hold now.
  (void)preflight(s, nullptr);
  return std::make_unique<PreparedVariant>(s, inputs_for(s), nullptr, observer_, progress_);
}

void ScenarioRunner::preflight_all(std::span<const Scenario> scenarios) {
  for (const Scenario& s : scenarios) {
    // Nothing is reused yet, so each scenario is checked for its whole footprint: the check stays
    // true when the variant before it shares no model with it.
    (void)preflight(s, nullptr);
    checked_.push_back(s);
  }
}

std::unique_ptr<PreparedVariant> ScenarioRunner::prepare(const Scenario& s) {
  // Devices, peer access and memory are checked before the weights are generated: a scenario that
  // cannot run fails in a second, not after minutes of host work.
  const auto checked = std::find(checked_.begin(), checked_.end(), s);
  const bool already_checked = checked != checked_.end();
  if (already_checked) {
    checked_.erase(checked);
  } else {
    validate(s);
    require_device(fmt::format("running scenario '{}' needs", s.name));
  }
  const std::vector<int> devices = rank_devices(s, visible_device_count());
  const bool reuse = inputs_ && inputs_->serves(s) && model_ && model_->serves(inputs_.get(), s.layout, devices);
  if (!reuse) model_.reset();
  if (!already_checked) (void)preflight(s, model_.get());
  auto inputs = inputs_for(s);
  auto prepared =
      std::make_unique<PreparedVariant>(s, std::move(inputs), std::exchange(model_, nullptr), observer_, progress_);
  model_ = prepared->model();
  return prepared;
}

int ScenarioRunner::warm_up_until_steady(PreparedVariant& prepared, std::vector<std::string>& notes) {
  say(progress_,
      fmt::format("warm-up: until the span is steady (blocks of {}, at most {})", kAutoWarmupBlock, kMaxAutoWarmup));
  // The wall time of each replay, launch to completion: what the analysis's span follows, known on
  // the host right after each replay without tracing.
  std::vector<double> spans;
  WarmupDecision decision;
  while (!decision.done) {
    const int block = static_cast<int>(kAutoWarmupBlock);
    const ReplayTimes times = prepared.replay(-static_cast<int>(spans.size()) - block, block, false);
    spans.insert(spans.end(), times.wall_us.begin(), times.wall_us.end());
    decision = auto_warmup_decision(spans);
  }
  notes.push_back(auto_warmup_note(spans.size(), decision));
  say(progress_, notes.back());
  return static_cast<int>(spans.size());
}

VariantRun ScenarioRunner::run(const Scenario& s) {
  auto prepared = prepare(s);
  VariantRun v;
  v.scenario = s;
  v.graph = prepared->graph();
  v.visible_devices = prepared->visible_devices();
  v.ranks_share_gpu = prepared->ranks_share_gpu();
  if (v.ranks_share_gpu) {
    v.notes.push_back(
        fmt::format("ranks share a GPU ({}), each on its own stream: overlap here is stream concurrency on one GPU, "
                    "not two GPUs working at once",
                    fmt::join(prepared->model()->devices, ",")));
  }
  if (const CapturedGraph* captured = prepared->captured()) v.cuda_graph_dot = driver_dot(captured->graph);

  const bool traced = settings_.trace && observer_ != nullptr;
  if (observer_ != nullptr) observer_->set_tracing(false);
  if (s.warmup == kWarmupAuto) {
    v.scenario.warmup = warm_up_until_steady(*prepared, v.notes);
  } else {
    say(progress_, fmt::format("warm-up: {} replays", s.warmup));
    (void)prepared->replay(-s.warmup, s.warmup, false);
  }
  say(progress_, fmt::format("replaying {} times, tracing off", s.replays));
  const ReplayTimes untraced = prepared->replay(0, s.replays, false);
  v.host_launch_us = untraced.launch_us;
  v.costs.capture_ms = prepared->capture_ms();
  v.costs.instantiate_ms = prepared->instantiate_ms();
  // A short burst: enough launches to queue behind each other, few enough not to fill the launch queue.
  v.costs.queued_launch_us = prepared->queued_launches(std::min(s.replays, 20));
  v.replay_us_untraced = stats::median(untraced.wall_us);
  if (traced) {
    say(progress_, fmt::format("replaying {} times, tracing on", s.replays));
    observer_->set_tracing(true);
    const ReplayTimes with_cupti = prepared->replay(0, s.replays, true);
    v.replay_us_traced = stats::median(with_cupti.wall_us);
    v.event_spans = with_cupti.spans;
    v.records = observer_->collect(v.health);
    observer_->set_tracing(false);
    for (std::string& w : observer_->take_warnings()) v.notes.push_back("CUPTI: " + std::move(w));
    v.notes.push_back(
        "host launch times are from the replays with tracing off, CUPTI still attached (its "
        "subscriber alone made each launch of the baseline layer some 25 µs slower on the H200: "
        "`run --no-trace` measures the launch alone); event spans and records from the replays "
        "with tracing on");
  } else {
    v.event_spans = untraced.spans;
    v.notes.push_back(
        "not traced (run --no-trace, or no CUPTI): no activity records by choice; the event spans "
        "and host launch times are the whole measurement");
  }
  say(progress_, "checking the output against the CPU reference");
  v.output_check = prepared->check_output();
  if (s.weights == WeightsKind::zeros || v.output_check->vacuous()) {
    v.notes.push_back("VACUOUS: the weights or the output are all zero, so the output check proves nothing");
  }
  if (!v.output_check->passed()) {
    v.notes.push_back(
        fmt::format("OUTPUT CHECK FAILED: {} of {} sampled values off the CPU reference by more "
                    "than {:.1e} of its absmax (worst {:.2e}), {} NaN",
                    v.output_check->mismatches, v.output_check->compared, v.output_check->tolerance,
                    v.output_check->max_rel_err, v.output_check->nan_count));
  }
  return v;
}

}  // namespace tpgraph::cuda
