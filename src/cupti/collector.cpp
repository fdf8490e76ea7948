#include "cupti/collector.hpp"

#include "core/records/record_join.hpp"
#include "cupti/decode.hpp"
#include "cupti/error.hpp"

#include <cuda_runtime_api.h>
#include <cupti.h>
#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <unordered_map>
#include <utility>

namespace tpgraph::cupti {

namespace {

// Big enough that a replay loop of a few thousand nodes rarely needs a second buffer mid-run.
constexpr std::size_t kBufferBytes = std::size_t{8} << 20;
// CUPTI's records are 8-byte aligned (PACKED_ALIGNMENT); the buffer must be too.
constexpr std::size_t kBufferAlign = 8;

// The kinds set_tracing turns off and on. External correlation stays on: it costs nothing without
// API records. API records are needed only because CUPTI emits external correlation records just
// before them; both API kinds, so a launch tags its work whichever id its records carry.
constexpr std::array kTracedKinds = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,           CUPTI_ACTIVITY_KIND_MEMSET,
    CUPTI_ACTIVITY_KIND_RUNTIME,           CUPTI_ACTIVITY_KIND_DRIVER,
};
// Coverage::trace_records: what the injection library enables (kActivityKinds, src/inject/recorder.hpp).
constexpr std::array kTraceRecordKinds = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUPTI_ACTIVITY_KIND_MEMCPY,
    CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET,
};

std::span<const CUpti_ActivityKind> kinds_of(Collector::Coverage coverage) {
  if (coverage == Collector::Coverage::trace_records) return kTraceRecordKinds;
  return kTracedKinds;
}

struct FreeDeleter {
  void operator()(std::uint8_t* p) const noexcept { std::free(p); }
};
using OwnedBuffer = std::unique_ptr<std::uint8_t, FreeDeleter>;

// A record as delivered, before it is tied to a node and a replay (the external correlation
// record that names its replay may arrive in a later buffer).
struct RawRecord {
  ActivityRecord record;
  std::uint32_t context_id = 0;
};

// What one delivered buffer held.
struct Delivery {
  std::vector<RawRecord> records;
  std::vector<std::pair<std::uint32_t, std::uint64_t>> replay_tags;  // correlation id -> CUSTOM0
  std::vector<std::pair<std::uint32_t, std::uint64_t>> node_tags;    // correlation id -> CUSTOM1
};

}  // namespace

struct Collector::State {
  CUpti_SubscriberHandle subscriber = nullptr;
  std::span<const CUpti_ActivityKind> kinds;  // those set_tracing toggles
  bool external_correlation = true;
  std::vector<RawRecord> records;
  CorrelationTags tags;  // replay and eager-node tags by correlation id
  // Clones are kept across variants (CUPTI node ids are unique in the process, so an instantiation
  // that happens before begin_variant still resolves); the captured nodes are the variant's.
  NodeResolver nodes;
  std::vector<std::string> warnings;
};

namespace {

// CUPTI's callbacks take no user pointer for activity buffers, so the live collector's state is
// process-wide. Everything in it is guarded by g_mutex; no CUDA or CUPTI call is made while it is
// held (a flush runs the completion callback, which takes it).
std::mutex g_mutex;
Collector::State* g_state = nullptr;

void warn(const std::string& message) noexcept {
  try {
    std::fprintf(stderr, "tpgraph: CUPTI warning: %s\n", message.c_str());
    const std::lock_guard lock(g_mutex);
    if (g_state != nullptr) g_state->warnings.push_back(message);
  } catch (...) {
    // A warning that cannot be stored is still printed; the watched work goes on.
  }
}

void warn_if_failed(CUptiResult status, const char* what) noexcept {
  if (status == CUPTI_SUCCESS) return;
  try {
    warn(fmt::format("{} failed: {}", what, result_name(status)));
  } catch (...) {
  }
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  // Declining (null) makes CUPTI drop records, which the dropped count reports.
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

// Reads one buffer: the kept records through the shared decoder, the replay and node tags from the
// external correlation records the collector pushed around each launch.
Delivery parse_buffer(std::uint8_t* buffer, std::size_t valid_bytes) {
  Delivery out;
  const auto on_record = [&](const DecodedActivity& d) {
    RawRecord raw;
    raw.record.kind = d.kind;
    raw.record.start_ns = d.start_ns;
    raw.record.end_ns = d.end_ns;
    raw.record.device = static_cast<std::int16_t>(d.device);
    raw.record.stream_id = d.stream_id;
    raw.record.correlation_id = d.correlation_id;
    raw.record.graph_id = d.graph_id;
    raw.record.graph_node_id = d.graph_node_id;
    raw.record.bytes = static_cast<std::int64_t>(d.bytes);
    raw.record.name = d.name();
    raw.context_id = d.context;
    out.records.push_back(std::move(raw));
  };
  const auto on_other = [&](const CUpti_Activity& activity) {
    if (activity.kind != CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION) return;  // API records: only their tags matter
    const auto& e = reinterpret_cast<const CUpti_ActivityExternalCorrelation&>(activity);
    if (e.externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
      out.replay_tags.emplace_back(e.correlationId, e.externalId);
    } else if (e.externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1) {
      out.node_tags.emplace_back(e.correlationId, e.externalId);
    }
  };
  warn_if_failed(decode_buffer(buffer, valid_bytes, on_record, on_other),
                 "cuptiActivityGetNextRecord (rest of the buffer skipped)");
  return out;
}

void CUPTIAPI buffer_completed(CUcontext /*context*/, std::uint32_t /*stream_id*/, std::uint8_t* buffer,
                               std::size_t /*size*/, std::size_t valid_bytes) {
  const OwnedBuffer owned(buffer);
  if (buffer == nullptr || valid_bytes == 0) return;
  try {
    Delivery delivery = parse_buffer(buffer, valid_bytes);
    const std::lock_guard lock(g_mutex);
    if (g_state == nullptr) return;  // delivered after the collector ended: nobody wants it
    Collector::State& state = *g_state;
    state.records.insert(state.records.end(), std::make_move_iterator(delivery.records.begin()),
                         std::make_move_iterator(delivery.records.end()));
    // Replays travel as the two's complement of an int (warm-ups are negative); nodes as node + 1.
    for (const auto& [correlation, id] : delivery.replay_tags)
      state.tags.replay[correlation] = static_cast<std::int64_t>(id);
    for (const auto& [correlation, id] : delivery.node_tags) {
      if (id != 0 && id <= static_cast<std::uint64_t>(INT32_MAX))
        state.tags.node[correlation] = static_cast<int>(id - 1);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tpgraph: CUPTI warning: a record buffer was lost: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "tpgraph: CUPTI warning: a record buffer was lost\n");
  }
}

void CUPTIAPI on_callback(void* /*userdata*/, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE || cbid != CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) return;
  const auto* resource = static_cast<const CUpti_ResourceData*>(cbdata);
  const auto* graph = static_cast<const CUpti_GraphData*>(resource->resourceDescriptor);
  if (graph == nullptr) return;
  std::uint64_t clone = 0;
  std::uint64_t original = 0;
  if (cuptiGetGraphNodeId(graph->node, &clone) != CUPTI_SUCCESS ||
      cuptiGetGraphNodeId(graph->originalNode, &original) != CUPTI_SUCCESS) {
    warn("cuptiGetGraphNodeId failed in the graph-node clone callback: a node may stay unmatched");
    return;
  }
  try {
    const std::lock_guard lock(g_mutex);
    if (g_state != nullptr) g_state->nodes.add_clone(clone, original);
  } catch (...) {
    std::fprintf(stderr, "tpgraph: CUPTI warning: a graph-node clone was not recorded\n");
  }
}

// The primary context of every device that has one: the devices tpgraph's work can be on (it uses
// the runtime API only). Asking about the others would create contexts on GPUs the run never used.
struct ActiveContext {
  CUdevice device = 0;
  CUcontext context = nullptr;
};

// The driver functions the flush needs, found through cuda::find_driver_entry_point (tpgraph does
// not link libcuda).
struct DriverApi {
  decltype(&::cuDeviceGetCount) device_get_count = nullptr;
  decltype(&::cuDeviceGet) device_get = nullptr;
  decltype(&::cuDevicePrimaryCtxGetState) primary_ctx_get_state = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) primary_ctx_release = nullptr;
  decltype(&::cuCtxPushCurrent) ctx_push_current = nullptr;
  decltype(&::cuCtxPopCurrent) ctx_pop_current = nullptr;
  decltype(&::cuCtxSynchronize) ctx_synchronize = nullptr;
  decltype(&::cuGetErrorName) get_error_name = nullptr;
  bool ok = false;
};

template <class F>
void load_driver_function(const char* name, F& fn, bool& ok) noexcept {
  fn = reinterpret_cast<F>(cuda::find_driver_entry_point(name));
  if (fn == nullptr) ok = false;
}

const DriverApi& driver_api() noexcept {
  static const DriverApi api = [] {
    DriverApi a;
    a.ok = true;
    load_driver_function("cuDeviceGetCount", a.device_get_count, a.ok);
    load_driver_function("cuDeviceGet", a.device_get, a.ok);
    load_driver_function("cuDevicePrimaryCtxGetState", a.primary_ctx_get_state, a.ok);
    load_driver_function("cuDevicePrimaryCtxRetain", a.primary_ctx_retain, a.ok);
    load_driver_function("cuDevicePrimaryCtxRelease", a.primary_ctx_release, a.ok);
    load_driver_function("cuCtxPushCurrent", a.ctx_push_current, a.ok);
    load_driver_function("cuCtxPopCurrent", a.ctx_pop_current, a.ok);
    load_driver_function("cuCtxSynchronize", a.ctx_synchronize, a.ok);
    load_driver_function("cuGetErrorName", a.get_error_name, a.ok);
    return a;
  }();
  return api;
}

std::vector<ActiveContext> active_primary_contexts() {
  std::vector<ActiveContext> out;
  const DriverApi& cu = driver_api();
  int count = 0;
  // The runtime initialises the driver; asking it for the device count first makes sure it has.
  if (!cu.ok || cudaGetDeviceCount(&count) != cudaSuccess || cu.device_get_count(&count) != CUDA_SUCCESS) {
    (void)cudaGetLastError();
    warn("the CUDA driver could not list devices: nothing synchronized before the flush");
    return out;
  }
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = 0;
    unsigned int flags = 0;
    int active = 0;
    if (cu.device_get(&device, ordinal) != CUDA_SUCCESS ||
        cu.primary_ctx_get_state(device, &flags, &active) != CUDA_SUCCESS || active == 0) {
      continue;
    }
    CUcontext context = nullptr;
    if (cu.primary_ctx_retain(&context, device) == CUDA_SUCCESS) out.push_back({device, context});
  }
  return out;
}

void release(const std::vector<ActiveContext>& contexts) noexcept {
  for (const ActiveContext& c : contexts) (void)driver_api().primary_ctx_release(c.device);
}

// A record is complete only once its work has finished: synchronize before a forced flush.
void synchronize(const std::vector<ActiveContext>& contexts) noexcept {
  const DriverApi& cu = driver_api();
  for (const ActiveContext& c : contexts) {
    if (cu.ctx_push_current(c.context) != CUDA_SUCCESS) {
      warn(fmt::format("could not make device {}'s context current to synchronize it", c.device));
      continue;
    }
    const CUresult status = cu.ctx_synchronize();
    if (status != CUDA_SUCCESS) {
      const char* name = nullptr;
      (void)cu.get_error_name(status, &name);
      warn(fmt::format("synchronizing device {} failed ({}): its records may be incomplete", c.device,
                       name != nullptr ? name : "unknown"));
    }
    CUcontext popped = nullptr;
    (void)cu.ctx_pop_current(&popped);
  }
}

void synchronize_and_flush() noexcept {
  try {
    const std::vector<ActiveContext> contexts = active_primary_contexts();
    synchronize(contexts);
    release(contexts);
  } catch (...) {
    warn("listing the devices to synchronize failed");
  }
  warn_if_failed(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
}

// Dropped counts are reset by reading them. Since CUDA 6 buffers are global, so the global queue
// is the one that counts; each context and each stream seen is asked too in case a driver keeps
// them apart.
std::uint64_t read_dropped(const std::vector<ActiveContext>& contexts,
                           const std::set<std::pair<std::uint32_t, std::uint32_t>>& streams_seen) {
  std::uint64_t total = 0;
  int failures = 0;
  auto add = [&](CUcontext context, std::uint32_t stream) {
    std::size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(context, stream, &dropped) == CUPTI_SUCCESS) {
      total += dropped;
    } else {
      ++failures;
    }
  };
  add(nullptr, 0);
  for (const ActiveContext& c : contexts) {
    std::uint32_t context_id = 0;
    if (cuptiGetContextId(c.context, &context_id) != CUPTI_SUCCESS) {
      ++failures;
      continue;
    }
    add(c.context, 0);
    for (const auto& [ctx, stream] : streams_seen) {
      if (ctx == context_id && stream != 0) add(c.context, stream);
    }
  }
  if (failures > 0) {
    warn(fmt::format("{} dropped-record queries failed: the dropped count may be low", failures));
  }
  return total;
}

}  // namespace

Collector::Collector(Coverage coverage) : state_(std::make_unique<State>()) {
  state_->kinds = kinds_of(coverage);
  state_->external_correlation = coverage == Coverage::run;
  {
    const std::lock_guard lock(g_mutex);
    if (g_state != nullptr) {
      throw std::logic_error("a CUPTI collector is already running in this process (only one can be)");
    }
    g_state = state_.get();
  }
  std::vector<CUpti_ActivityKind> enabled;
  auto undo = [&]() noexcept {
    for (const CUpti_ActivityKind kind : enabled) (void)cuptiActivityDisable(kind);
    if (state_->subscriber != nullptr) (void)cuptiUnsubscribe(state_->subscriber);
    state_->subscriber = nullptr;
    const std::lock_guard lock(g_mutex);
    g_state = nullptr;
  };
  auto fail = [&](const char* what, CUptiResult status) {
    undo();
    std::string hint;
    if (status == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) {
      hint = " (another profiler, such as Nsight Systems, is attached to this process)";
    } else if (status == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES) {
      hint = " (this user may not profile the GPU)";
    }
    check(status, fmt::format("starting CUPTI: {}{}", what, hint).c_str());
  };

  if (const CUptiResult s = cuptiSubscribe(&state_->subscriber, on_callback, nullptr); s != CUPTI_SUCCESS) {
    state_->subscriber = nullptr;
    fail("cuptiSubscribe", s);
  }
  if (const CUptiResult s =
          cuptiEnableCallback(1, state_->subscriber, CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
      s != CUPTI_SUCCESS) {
    fail("enabling the graph-node clone callback", s);
  }
  if (const CUptiResult s = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed); s != CUPTI_SUCCESS) {
    fail("cuptiActivityRegisterCallbacks", s);
  }
  auto enable = [&](CUpti_ActivityKind kind) {
    if (const CUptiResult s = cuptiActivityEnable(kind); s != CUPTI_SUCCESS) {
      fail(fmt::format("enabling activity kind {}", static_cast<int>(kind)).c_str(), s);
    }
    enabled.push_back(kind);
  };
  if (state_->external_correlation) enable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  for (const CUpti_ActivityKind kind : state_->kinds) enable(kind);
}

Collector::~Collector() {
  for (const CUpti_ActivityKind kind : state_->kinds) (void)cuptiActivityDisable(kind);
  if (state_->external_correlation) (void)cuptiActivityDisable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  // Return every buffer CUPTI holds while this collector can still free it.
  synchronize_and_flush();
  if (state_->subscriber != nullptr) (void)cuptiUnsubscribe(state_->subscriber);
  const std::lock_guard lock(g_mutex);
  g_state = nullptr;
}

void Collector::begin_variant() {
  synchronize_and_flush();
  {
    const std::vector<ActiveContext> contexts = active_primary_contexts();
    const std::uint64_t stale = read_dropped(contexts, {});
    release(contexts);
    if (stale > 0) {
      warn(fmt::format("{} records of earlier work were dropped (not this variant's)", stale));
    }
  }
  const std::lock_guard lock(g_mutex);
  state_->records.clear();
  state_->tags = {};
  state_->nodes.clear_nodes();
}

void Collector::map_node(CUgraphNode captured, int node) {
  std::uint64_t id = 0;
  if (const CUptiResult s = cuptiGetGraphNodeId(captured, &id); s != CUPTI_SUCCESS) {
    warn_if_failed(s, fmt::format("cuptiGetGraphNodeId for layer node {}", node).c_str());
    return;
  }
  const std::lock_guard lock(g_mutex);
  state_->nodes.map_node(id, node);
}

Collector::Tag::Tag(int replay, int node) {
  // The replay goes through CUPTI's unsigned id as its two's complement, so warm-ups (negative)
  // come back unchanged.
  const auto replay_id = static_cast<std::uint64_t>(static_cast<std::int64_t>(replay));
  const std::uint64_t node_id = node < 0 ? 0 : static_cast<std::uint64_t>(node) + 1;
  if (const CUptiResult s = cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, replay_id);
      s != CUPTI_SUCCESS) {
    warn_if_failed(s, "pushing the replay tag");
    return;
  }
  if (const CUptiResult s = cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, node_id);
      s != CUPTI_SUCCESS) {
    warn_if_failed(s, "pushing the node tag");
    (void)cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, nullptr);
    return;
  }
  active_ = true;
}

Collector::Tag::Tag(Tag&& other) noexcept : active_(std::exchange(other.active_, false)) {}

Collector::Tag& Collector::Tag::operator=(Tag&& other) noexcept {
  if (this != &other) {
    pop();
    active_ = std::exchange(other.active_, false);
  }
  return *this;
}

Collector::Tag::~Tag() { pop(); }

void Collector::Tag::pop() noexcept {
  if (!active_) return;
  active_ = false;
  warn_if_failed(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1, nullptr),
                 "popping the node tag");
  warn_if_failed(cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, nullptr),
                 "popping the replay tag");
}

Collector::Tag Collector::tag(int replay, int node) { return Tag(replay, node); }

void Collector::set_tracing(bool on) {
  for (const CUpti_ActivityKind kind : state_->kinds) {
    warn_if_failed(on ? cuptiActivityEnable(kind) : cuptiActivityDisable(kind),
                   on ? "enabling an activity kind" : "disabling an activity kind");
  }
}

std::vector<ActivityRecord> Collector::collect(CollectionHealth& health) {
  const std::vector<ActiveContext> contexts = active_primary_contexts();
  synchronize(contexts);
  warn_if_failed(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");

  std::vector<ActivityRecord> out;
  std::set<std::pair<std::uint32_t, std::uint32_t>> streams_seen;
  {
    const std::lock_guard lock(g_mutex);
    std::vector<RawRecord> raw = std::exchange(state_->records, {});
    out.reserve(raw.size());
    for (RawRecord& r : raw) {
      streams_seen.emplace(r.context_id, r.record.stream_id);
      out.push_back(std::move(r.record));
    }
    join_records(out, state_->nodes, state_->tags, health);
  }
  health.dropped += read_dropped(contexts, streams_seen);
  release(contexts);
  return out;
}

std::vector<std::string> Collector::take_warnings() {
  const std::lock_guard lock(g_mutex);
  return std::exchange(state_->warnings, {});
}

std::uint32_t Collector::cupti_version() {
  std::uint32_t version = 0;
  return cuptiGetVersion(&version) == CUPTI_SUCCESS ? version : 0;
}

std::uint64_t Collector::timestamp_ns() {
  std::uint64_t now = 0;
  return cuptiGetTimestamp(&now) == CUPTI_SUCCESS ? now : 0;
}

}  // namespace tpgraph::cupti
