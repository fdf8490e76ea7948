#include "inject/tracer.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "core/records/records.hpp"
#include "core/records/trace_recording.hpp"
#include "cupti/decode.hpp"
#include "inject/nvtx_ranges.hpp"
#include "inject/origin.hpp"
#include "inject/process_info.hpp"

namespace tpgraph::inject {

Tracer* g_tracer = nullptr;

namespace {
thread_local ThreadLaunch t_launch;
thread_local std::vector<GraphCloneSeen> t_clones;
// What this thread's last launch looked up: a program replays the same graphs on the same context,
// so a launch's entry takes neither a CUPTI call nor the state lock while no exec or context changed.
struct LaunchCache {
  CUcontext context = nullptr;
  std::uint32_t device = 0;
  CUgraphExec exec = nullptr;
  std::uint64_t generation = ~std::uint64_t{0};  // execs_generation_ when looked up
  std::uint32_t number = 0;
  std::uint32_t version = 0;
};
thread_local LaunchCache t_cache;
}  // namespace

thread_local bool t_signal_flush = false;

std::uint32_t Tracer::intern_locked(const std::string& raw, std::string& chunks) {
  if (raw.empty()) return 0;
  // Demangling costs microseconds: once per distinct raw name, not once per record.
  if (const auto known = id_of_raw_.find(raw); known != id_of_raw_.end()) return known->second;
  const std::string name = raw.starts_with("_Z") ? demangle(raw.c_str()) : raw;
  const auto [it, added] = names_.try_emplace(name, static_cast<std::uint32_t>(names_.size() + 1));
  if (added) chunks += tracefile::name_chunk(it->second, name);
  id_of_raw_.emplace(raw, it->second);
  return it->second;
}

std::size_t Tracer::on_buffer(std::uint8_t* buffer, std::size_t valid_bytes) {
  std::vector<WireRecord> records;
  std::vector<std::string> record_names;  // parallel to records: raw (mangled) names, interned under the lock
  records.reserve(valid_bytes / 128);
  record_names.reserve(valid_bytes / 128);
  const auto on_record = [&](const cupti::DecodedActivity& d) {
    WireRecord w;
    w.kind = static_cast<std::uint8_t>(d.kind);
    w.device = d.device;
    w.start_ns = d.start_ns;
    w.end_ns = d.end_ns;
    w.stream_id = d.stream_id;
    w.correlation_id = d.correlation_id;
    w.graph_id = d.graph_id;
    w.graph_node_id = d.graph_node_id;
    w.bytes = d.bytes;
    records.push_back(w);
    record_names.push_back(d.name());
  };
  if (const CUptiResult status = cupti::decode_buffer(buffer, valid_bytes, on_record, [](const CUpti_Activity&) {});
      status != CUPTI_SUCCESS)
    note("cuptiActivityGetNextRecord failed (" + result_text(status) + "): the rest of a buffer was lost");
  const std::size_t decoded = records.size();

  if (recorder != nullptr) {
    // Graph records of launches the window or the sampling left out: dropped (names alongside).
    std::vector<bool> keep = recorder->keep(records);
    std::size_t out = 0;
    for (std::size_t i = 0; i < records.size(); ++i) {
      if (!keep[i]) continue;
      records[out] = records[i];
      record_names[out] = std::move(record_names[i]);
      ++out;
    }
    records.resize(out);
    record_names.resize(out);
  }
  std::unordered_set<std::uint32_t> graph_correlations;
  std::uint64_t graph_records = 0;
  for (const WireRecord& r : records)
    if (r.graph_node_id != 0) {
      graph_correlations.insert(r.correlation_id);
      ++graph_records;
    }

  // The names are interned under a lock of their own, held until the chunks are written (a name
  // before the records that use it); the state lock, which every launch callback of the program
  // takes, only for the launches. In a fatal signal's flush this thread may already hold a lock (it
  // crashed inside the library): the buffer is then dropped rather than deadlock a dying process.
  std::unique_lock names_lock(names_mutex_, std::defer_lock);
  if (t_signal_flush ? !names_lock.try_lock() : (names_lock.lock(), false)) return decoded;
  if (finished_.load()) return decoded;
  std::string names;
  for (std::size_t i = 0; i < records.size(); ++i) records[i].name_id = intern_locked(record_names[i], names);
  if (!writer.ours()) return decoded;
  if (recorder != nullptr && recorder->keeps_last()) {
    // The flight recorder holds the records; the names go out now (a dump's records need them).
    if (names.empty() || write_records_locked({}, names, 0)) recorder->flight_add_records(records);
    names_lock.unlock();
    std::unique_lock state(state_mutex_, std::defer_lock);
    if (t_signal_flush ? !state.try_lock() : (state.lock(), false)) return decoded;
    // The launches decided now are filed after the state lock is let go (the recorder's own lock
    // taken first, so a dump, which takes both, sees them): filing a launch evicts an older one.
    recorder->flight_add_launches(decide_launches_locked(graph_correlations, false), state);
    return decoded;
  }
  std::unique_lock state(state_mutex_, std::defer_lock);
  if (t_signal_flush ? !state.try_lock() : (state.lock(), false)) return decoded;
  if (finished_.load()) return decoded;
  if (!admit_records_locked(names.size() + records.size() * sizeof(WireRecord))) return decoded;
  std::string launches = launches_chunk_locked(graph_correlations, false);
  if (discard_records) {
    if (!launches.empty()) (void)writer.write(launches);
    return decoded;
  }
  records_written_ += records.size();
  graph_records_ += graph_records;
  // The chunks are made and written outside the state lock: the program's launch callbacks take that
  // lock and must not wait for a megabyte to reach the disk. The file's lock is taken before the
  // state lock is let go, so chunks keep the order of the state sections that made them.
  auto file = t_signal_flush ? writer.try_lock() : writer.lock();
  if (!file.owns_lock()) return decoded;  // in a signal's flush, held by the interrupted code: dropped
  state.unlock();
  if (!names.empty()) (void)writer.write_locked(names);
  if (!records.empty()) (void)writer.write_locked(tracefile::records_chunk(records));
  if (!launches.empty()) (void)writer.write_locked(launches);
  return decoded;
}

namespace {

// Room kept below the file's limit for what follows the last records: the launches still held, NVTX
// closes, notes, the counts and the footer.
std::uint64_t end_reserve(std::uint64_t limit) {
  return std::clamp(limit / 16, std::uint64_t{64} << 10, std::uint64_t{16} << 20);
}

}  // namespace

bool Tracer::admit_records_locked(std::uint64_t bytes) {
  if (limit_reached.load()) return false;
  const std::uint64_t limit = writer.limit();
  if (writer.bytes() + bytes + end_reserve(limit) > limit) {
    // Bounded always: past the limit nothing more is recorded, the note says where it stopped, and
    // the flush thread switches CUPTI's activity off so the program runs at its own speed.
    if (!limit_reached.exchange(true)) {
      const std::uint64_t at = now_ns();
      note("limit: the record file reached " + std::to_string(writer.bytes()) + " bytes, within " +
           std::to_string(end_reserve(limit)) + " kept for its end of the limit (" + std::to_string(limit) +
           ", --max-file-size): recording stopped at " + std::to_string(at) + " ns; later work is not in the file");
      (void)writer.write(tracefile::recording_event_chunk("limit", at, "--max-file-size"));
    }
    quiet.store(true);
    return false;
  }
  return true;
}

bool Tracer::write_records_locked(const std::vector<WireRecord>& records, const std::string& names,
                                  std::uint64_t graph_records) {
  if (!admit_records_locked(names.size() + records.size() * sizeof(WireRecord))) return false;
  if (discard_records) return true;
  {
    auto file = writer.lock();
    if (!names.empty()) (void)writer.write_locked(names);
    if (!records.empty() && writer.write_locked(tracefile::records_chunk(records))) {
      records_written_ += records.size();
      graph_records_ += graph_records;
    }
  }
  return true;
}

void Tracer::dump_flight_locked(const std::string& why) {
  if (recorder == nullptr || !recorder->keeps_last()) return;
  recording::FlightRecorder::Dump dump = recorder->flight_take();
  // In chunks of 64 Ki records: a chunk stays far below the reader's limit whatever N and the graphs.
  constexpr std::size_t kPerChunk = std::size_t{1} << 16;
  std::uint64_t graph_records = 0;
  for (const WireRecord& r : dump.records) graph_records += r.graph_node_id != 0 ? 1 : 0;
  for (std::size_t at = 0; at < dump.records.size(); at += kPerChunk) {
    const std::vector<WireRecord> part(dump.records.begin() + static_cast<std::ptrdiff_t>(at),
                                       dump.records.begin() +
                                           static_cast<std::ptrdiff_t>(std::min(dump.records.size(), at + kPerChunk)));
    if (!write_records_locked(part, {}, 0)) return;
  }
  graph_records_ += graph_records;
  if (!dump.launches.empty()) (void)writer.write(tracefile::launches_chunk(dump.launches));
  (void)writer.write(tracefile::recording_event_chunk("dump", now_ns(),
                                                      why + ": " + std::to_string(dump.launches.size()) + " launches"));
}

void Tracer::write_launches_locked(const std::unordered_set<std::uint32_t>& graph_correlations, bool final_flush) {
  if (const std::string chunk = launches_chunk_locked(graph_correlations, final_flush); !chunk.empty())
    (void)writer.write(chunk);
}

std::vector<WireLaunch> Tracer::decide_launches_locked(const std::unordered_set<std::uint32_t>& graph_correlations,
                                                       bool final_flush) {
  // The choice matters only for a runtime launch whose driver call had an id of its own.
  const auto ambiguous = [](const PendingLaunch& p) {
    return p.runtime_correlation != 0 && p.driver_correlation != 0 && p.runtime_correlation != p.driver_correlation;
  };
  if (carried_ == CarriedId::unknown) {
    for (const PendingLaunch& p : undecided_) {
      if (!ambiguous(p)) continue;
      if (graph_correlations.count(p.driver_correlation) != 0) carried_ = CarriedId::driver;
      if (graph_correlations.count(p.runtime_correlation) != 0) carried_ = CarriedId::runtime;
      if (carried_ != CarriedId::unknown) {
        if (verbose_)
          std::fprintf(stderr, "tpgraph inject: graph records carry the %s call's correlation id\n",
                       carried_ == CarriedId::driver ? "driver (cuGraphLaunch)" : "runtime (cudaGraphLaunch)");
        break;
      }
    }
  }
  if (carried_ == CarriedId::unknown && !final_flush && undecided_.size() < kMaxUndecidedLaunches &&
      std::any_of(undecided_.begin(), undecided_.end(), ambiguous))
    return {};
  std::vector<WireLaunch> out;
  out.reserve(undecided_.size());
  for (PendingLaunch& p : undecided_) {
    WireLaunch w = p.launch;
    const bool use_driver = p.runtime_correlation == 0 || (carried_ == CarriedId::driver && p.driver_correlation != 0);
    w.correlation_id = use_driver ? p.driver_correlation : p.runtime_correlation;
    out.push_back(w);
  }
  undecided_.clear();
  return out;
}

std::string Tracer::launches_chunk_locked(const std::unordered_set<std::uint32_t>& graph_correlations,
                                          bool final_flush) {
  std::vector<WireLaunch> launches = decide_launches_locked(graph_correlations, final_flush);
  if (launches.empty()) return {};
  if (recorder != nullptr && recorder->keeps_last()) {
    recorder->flight_add_launches(launches);
    return {};
  }
  return tracefile::launches_chunk(launches);
}

void Tracer::on_context_created(CUcontext context) {
  std::uint32_t ordinal = 0;
  if (const CUptiResult s = cuptiGetDeviceId(context, &ordinal); s != CUPTI_SUCCESS) {
    note("a context's device could not be told (" + result_text(s) + "): no device chunk for it");
    return;
  }
  {
    const std::lock_guard state(state_mutex_);
    contexts_.push_back(context);
    if (!devices_written_.insert(ordinal).second) return;
  }
  CUdevice device = 0;
  std::array<char, 256> name{};
  std::array<char, 32> bus{};
  CUuuid uuid{};
  json j;
  j["ordinal"] = ordinal;
  if (cuDeviceGet(&device, static_cast<int>(ordinal)) == CUDA_SUCCESS) {
    if (cuDeviceGetName(name.data(), static_cast<int>(name.size()) - 1, device) == CUDA_SUCCESS)
      j["name"] = name.data();
    if (cuDeviceGetPCIBusId(bus.data(), static_cast<int>(bus.size()) - 1, device) == CUDA_SUCCESS)
      j["pci_bus_id"] = bus.data();
    if (cuDeviceGetUuid(&uuid, device) == CUDA_SUCCESS) j["uuid"] = tracefile::uuid_text(uuid.bytes);
  }
  (void)writer.write(tracefile::chunk(ChunkType::device, j.dump()));
}

void Tracer::on_context_destroyed(CUcontext context) {
  const std::lock_guard state(state_mutex_);
  std::erase(contexts_, context);
  execs_generation_.fetch_add(1, std::memory_order_release);  // a later context may reuse its address
}

void Tracer::on_graph_node_cloned(const CUpti_GraphData& data) {
  GraphCloneSeen seen;
  if (cuptiGetGraphNodeId(data.node, &seen.clone) != CUPTI_SUCCESS ||
      cuptiGetGraphNodeId(data.originalNode, &seen.original) != CUPTI_SUCCESS) {
    note("cuptiGetGraphNodeId failed in the node-clone callback: records of that node will not resolve");
    return;
  }
  if (t_clones.size() >= kMaxPendingClones) t_clones.clear();
  t_clones.push_back(seen);
}

// TPGRAPH_INJECT_TEST_UNREADABLE=all (or a list of exec numbers, "1,3"): those graphs are written
// as if their topology could not be read, so tests can drive the no-topology path on any program.
bool made_unreadable(std::uint32_t exec) {
  const char* v = std::getenv("TPGRAPH_INJECT_TEST_UNREADABLE");
  if (v == nullptr || v[0] == '\0') return false;
  const std::string list = std::string(",") + v + ",";
  return list == ",all," || list.find("," + std::to_string(exec) + ",") != std::string::npos;
}

void Tracer::write_graph_locked(ExecState& state, const Topology& topology,
                                std::vector<std::pair<std::uint64_t, int>> clones) {
  json j;
  j["exec"] = state.number;
  j["version"] = state.version;
  j["graph_id"] = state.graph_id;
  j["nodes"] = topology.nodes;
  j["edges"] = topology.edges;
  if (!state.origin.at.empty()) j["origin"] = json::parse(tracefile::origin_json(state.origin));
  if (state.device_launch) j["device_launch"] = true;
  json& out_clones = j["clones"] = json::array();
  for (const auto& [clone, index] : clones) out_clones.push_back({clone, index});
  std::string error = topology.error;
  if (error.empty() && made_unreadable(state.number))
    error = "made unreadable on purpose (TPGRAPH_INJECT_TEST_UNREADABLE)";
  if (!error.empty()) {
    j["topology_error"] = error;
    note("graph exec " + std::to_string(state.number) + " version " + std::to_string(state.version) +
         ": its topology could not be read (" + error + "); its records are kept without one");
  }
  state.clones = std::move(clones);
  execs_generation_.fetch_add(1, std::memory_order_release);  // launches look the exec up again
  state.index_of_id = topology.index_of_id;
  state.nodes = topology.nodes;
  state.edges = topology.edges;
  (void)writer.write(tracefile::chunk(ChunkType::graph, j.dump()));
}

void Tracer::on_graph_exec_created(const CUpti_GraphData& data) {
  // Clones seen on this thread since the last instantiation: those of this executable, plus any
  // of a cudaGraphClone, which the lookup below leaves out (their originals are not this graph's).
  std::vector<GraphCloneSeen> clones = std::exchange(t_clones, {});
  CUgraph graph = data.graph;
  CUdevice current = 0;
  const int device = cuCtxGetDevice(&current) == CUDA_SUCCESS ? static_cast<int>(current) : -1;
  Topology topology;
  if (graph == nullptr) topology.error = "the executable graph was created without its graph";
  else topology = read_topology(graph, device, conditionals);
  std::vector<std::pair<std::uint64_t, int>> resolved;
  for (const GraphCloneSeen& c : clones)
    if (const auto it = topology.index_of_id.find(c.original); it != topology.index_of_id.end())
      resolved.emplace_back(c.clone, it->second);
  std::uint32_t graph_id = 0;
  if (graph != nullptr) (void)cuptiGetGraphId(graph, &graph_id);
  tracefile::GraphOrigin origin;
  if (origins) origin = origin_of(graph);
  const std::lock_guard state(state_mutex_);
  ExecState& e = execs_[data.graphExec];
  e = ExecState{};
  e.number = next_exec_++;
  e.graph_id = graph_id;
  e.origin = std::move(origin);
  // A graph a kernel can launch: CUPTI records none of what its launches from the device run.
  cuuint64_t flags = 0;
  e.device_launch = cuGraphExecGetFlags(data.graphExec, &flags) == CUDA_SUCCESS &&
                    (flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH) != 0;
  write_graph_locked(e, topology, std::move(resolved));
}

// A whole-graph update (cudaGraphExecUpdate) gives the executable a new version: its nodes keep
// their instantiated ids (the update requires the same topology and pairs the nodes of the new
// graph with the executable's in the order cuGraphGetNodes lists them), so the clones carry over.
void Tracer::on_exec_updated(CUgraphExec exec, CUgraph graph) {
  if (exec == nullptr || graph == nullptr) return;
  CUdevice current = 0;
  const int device = cuCtxGetDevice(&current) == CUDA_SUCCESS ? static_cast<int>(current) : -1;
  const Topology topology = read_topology(graph, device, conditionals);
  const std::lock_guard state(state_mutex_);
  const auto it = execs_.find(exec);
  if (it == execs_.end()) return;
  ExecState& e = it->second;
  ++e.version;
  write_graph_locked(e, topology, e.clones);
}

// A per-node parameter change makes a new version only when the node runs another kernel: new
// arguments or launch dimensions (what frameworks change between replays) keep the version, and
// are counted.
void Tracer::on_exec_kernel_set(CUgraphExec exec, CUgraphNode node, CUfunction func, CUkernel kern) {
  const char* mangled = nullptr;
  if (func != nullptr) (void)cuFuncGetName(&mangled, func);
  else if (kern != nullptr) (void)cuKernelGetName(&mangled, kern);
  const std::string name = demangle(mangled);
  std::uint64_t id = 0;
  if (node == nullptr || cuptiGetGraphNodeId(node, &id) != CUPTI_SUCCESS) return;
  const std::lock_guard state(state_mutex_);
  const auto it = execs_.find(exec);
  if (it == execs_.end()) return;
  ExecState& e = it->second;
  const auto index = e.index_of_id.find(id);
  if (index == e.index_of_id.end() || name.empty()) return;
  json& n = e.nodes[static_cast<std::size_t>(index->second)];
  if (n.value("name", std::string()) == name) {
    ++e.parameter_updates;
    return;
  }
  n["name"] = name;
  ++e.version;
  // The edges are those of the version before (a parameter change cannot change them).
  Topology topology;
  topology.nodes = e.nodes;
  topology.edges = e.edges;
  topology.index_of_id = e.index_of_id;
  write_graph_locked(e, topology, e.clones);
}

void Tracer::on_launch(CUpti_CallbackDomain domain, const CUpti_CallbackData& data, CUgraphExec exec) {
  const bool runtime = domain == CUPTI_CB_DOMAIN_RUNTIME_API;
  ThreadLaunch& t = t_launch;
  if (data.callbackSite == CUPTI_API_ENTER) {
    if (runtime) {
      t = ThreadLaunch{};
      t.in_runtime = true;
      t.pending.runtime_correlation = data.correlationId;
    } else if (t.in_runtime) {
      t.pending.driver_correlation = data.correlationId;  // the driver call the runtime makes
      if (recorder != nullptr && t.pending.record) recorder->add_recorded(data.correlationId);
      return;
    } else {
      t = ThreadLaunch{};
      t.in_driver = true;
      t.pending.driver_correlation = data.correlationId;
    }
    t.pending.launch.host_start_ns = now_ns();
    LaunchCache& c = t_cache;
    const std::uint64_t generation = execs_generation_.load(std::memory_order_acquire);
    if (data.context != c.context || generation != c.generation) {
      std::uint32_t device = 0;
      c.context = data.context;
      c.device = data.context != nullptr && cuptiGetDeviceId(data.context, &device) == CUPTI_SUCCESS ? device : 0;
    }
    t.pending.launch.device = c.device;
    if (exec != c.exec || generation != c.generation) {
      const std::lock_guard state(state_mutex_);
      const auto it = execs_.find(exec);
      c.exec = exec;
      c.generation = execs_generation_.load(std::memory_order_relaxed);
      c.number = it != execs_.end() ? it->second.number : 0;
      c.version = it != execs_.end() ? it->second.version : 0;
    }
    t.pending.launch.exec = c.number;
    t.pending.launch.version = c.version;
    if (recorder != nullptr) {
      // Decided before the launch is submitted: the activity must be on while it is.
      t.pending.record = recorder->launch_enter(t.pending.launch.exec, t.pending.launch.host_start_ns);
      if (t.pending.record) recorder->add_recorded(data.correlationId);
      if (t.pending.record && recorder->defers_ranges()) nvtx_log.commit_deferred();  // the ranges around it
    }
    return;
  }
  // Exit: only the outermost call of the launch ends it.
  if (runtime ? !t.in_runtime : (t.in_runtime || !t.in_driver)) return;
  t.pending.launch.host_end_ns = now_ns();
  PendingLaunch done = t.pending;
  t = ThreadLaunch{};
  if (recorder != nullptr) recorder->launch_exit();
  const std::lock_guard state(state_mutex_);
  ++launches_seen_;
  if (done.runtime_correlation != 0) {
    ++runtime_launches_;
    if (done.driver_correlation != 0)
      ++(done.driver_correlation == done.runtime_correlation ? nested_same_id_ : nested_other_id_);
  }
  if (!done.record) return;  // counted by the recorder, not written
  ++launches_recorded_;
  undecided_.push_back(done);
}

std::vector<CUcontext> Tracer::synchronize_contexts() {
  std::vector<CUcontext> contexts;
  {
    const std::lock_guard state(state_mutex_);
    contexts = contexts_;
  }
  for (CUcontext c : contexts) {
    if (cuCtxPushCurrent(c) != CUDA_SUCCESS) continue;
    (void)cuCtxSynchronize();
    CUcontext popped = nullptr;
    (void)cuCtxPopCurrent(&popped);
  }
  return contexts;
}

void Tracer::detach_if_requested(const CUpti_CallbackData& data) noexcept {
  if (data.callbackSite != CUPTI_API_EXIT || t_launch.in_runtime || t_launch.in_driver ||
      attachment.load() != Attachment::detach_requested)
    return;
  Attachment requested = Attachment::detach_requested;
  if (!attachment.compare_exchange_strong(requested, Attachment::detaching)) return;
  // The activity kinds off, every context synchronized (once, on the program's thread) so that no
  // work runs whose records CUPTI still writes, the records flushed, the callbacks unsubscribed,
  // then cuptiFinalize. Even so, a PyTorch server's next GPU work after it failed ("unspecified
  // launch failure", H100, driver 580): docs/trace.md.
  for (const CUpti_ActivityKind kind : kActivityKinds) (void)cuptiActivityDisable(kind);
  (void)synchronize_contexts();
  (void)cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);  // nothing runs: every record has its end
  clock_without_cupti();
  if (subscriber != nullptr) (void)cuptiUnsubscribe(subscriber);
  const CUptiResult s = cuptiFinalize();
  subscriber = nullptr;
  attachment.store(Attachment::detached);
  note(s == CUPTI_SUCCESS
           ? "CUPTI was detached from the process (" + detach_reason + "): launches after it are not recorded"
           : "detaching CUPTI failed (" + result_text(s) + "): launches after it are not recorded");
}

}  // namespace tpgraph::inject
