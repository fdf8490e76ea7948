// libtpgraph_inject.so: loaded by the CUDA driver into a program started by `tpgraph trace`
// (CUDA_INJECTION64_PATH), it subscribes to CUPTI and streams what the program's GPUs did to the
// process's record file (core/records/trace_file.hpp). It runs inside someone else's program: it never
// exits, never lets an exception out of a callback, and on an error of its own writes a note and
// goes quiet rather than disturb the work it watches.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cxxabi.h>
#include <pthread.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/records/records.hpp"
#include "core/records/trace_file.hpp"
#include "cupti/copy_label.hpp"
#include "inject/record_writer.hpp"

namespace tpgraph::inject {

namespace {

using nlohmann::json;
using tracefile::ChunkType;
using tracefile::WireLaunch;
using tracefile::WireRecord;

// A few MB per buffer; with the flush period below, a process killed by SIGKILL loses at most the
// last ~quarter second of records.
constexpr std::size_t kBufferBytes = std::size_t{4} << 20;
constexpr std::size_t kBufferAlign = 8;  // CUPTI's records are 8-byte aligned
constexpr std::uint32_t kFlushPeriodMs = 250;
// Launches wait for the first graph records to tell which correlation id they carry (see
// LaunchLog); past this many they are written with the runtime call's id regardless.
constexpr std::size_t kMaxUndecidedLaunches = 1u << 16;
// Clones recorded on a thread with no graph instantiated yet (cudaGraphClone without instantiate).
constexpr std::size_t kMaxPendingClones = 1u << 20;

// GRAPH_TRACE must never be among these: it replaces every per-node kernel record with one record
// per graph launch (measured on the H200).
constexpr std::array kActivityKinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                       CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET};

std::string result_text(CUptiResult status) {
  const char* text = nullptr;
  if (cuptiGetResultString(status, &text) != CUPTI_SUCCESS || text == nullptr)
    return "CUPTI error " + std::to_string(static_cast<int>(status));
  return text;
}

std::string driver_text(CUresult status) {
  const char* name = nullptr;
  if (cuGetErrorName(status, &name) != CUDA_SUCCESS || name == nullptr)
    return "CUDA error " + std::to_string(static_cast<int>(status));
  return name;
}

std::string demangle(const char* name) {
  if (name == nullptr) return {};
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string self_exe() {
  std::array<char, 4096> buffer{};
  const ssize_t n = ::readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  return n > 0 ? std::string(buffer.data(), static_cast<std::size_t>(n)) : std::string();
}

std::string host_name() {
  std::array<char, 256> buffer{};
  if (::gethostname(buffer.data(), buffer.size() - 1) != 0) return "unknown-host";
  std::string host(buffer.data());
  // The host becomes part of a file name.
  for (char& c : host)
    if (c == '/' || c == '\0') c = '_';
  return host.empty() ? "unknown-host" : host;
}

std::uint64_t now_ns() {
  std::uint64_t t = 0;
  return cuptiGetTimestamp(&t) == CUPTI_SUCCESS ? t : 0;
}

// Who else may hold CUPTI: the error and the hints the environment and the loaded libraries give.
std::string other_tool_hint() {
  std::vector<std::string> hints;
  for (const char* var : {"NSYS_PROFILING_SESSION_ID", "NSYS_TARGET_STD_REDIRECT_ACTIVE", "NSIGHT_SYSTEMS"})
    if (std::getenv(var) != nullptr) hints.push_back(std::string("Nsight Systems (") + var + " is set)");
  if (const char* preload = std::getenv("LD_PRELOAD"); preload != nullptr) {
    const std::string p(preload);
    if (p.find("sanitizer") != std::string::npos) hints.push_back("compute-sanitizer (LD_PRELOAD names it)");
    if (p.find("nsys") != std::string::npos || p.find("Nsight") != std::string::npos)
      hints.push_back("Nsight (LD_PRELOAD names it)");
  }
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::unordered_set<std::string> seen;
  while (std::getline(maps, line)) {
    for (const char* lib : {"libToolsInjection", "libsanitizer", "libnvperf", "libkineto", "libcupti"}) {
      const auto at = line.find(lib);
      if (at == std::string::npos) continue;
      const auto slash = line.find('/');
      const std::string path = slash == std::string::npos ? line.substr(at) : line.substr(slash);
      if (seen.insert(path).second && std::string_view(lib) != "libcupti") hints.push_back("loaded: " + path);
    }
  }
  std::string out;
  for (const auto& h : hints) out += (out.empty() ? "" : "; ") + h;
  return out.empty() ? "no other tool could be named" : out;
}

// Which correlation id the records of a graph launch carry when the runtime's cudaGraphLaunch calls
// the driver's cuGraphLaunch (each call has its own id): learnt from the first graph records that
// match a launch, so launches are written with the id their records carry.
enum class CarriedId { unknown, runtime, driver };

struct PendingLaunch {
  std::uint32_t runtime_correlation = 0;  // 0: launched through the driver API directly
  std::uint32_t driver_correlation = 0;   // 0: no nested driver call seen
  WireLaunch launch;
};

// The launch being made on this thread: a runtime call and the driver call it makes inside.
struct ThreadLaunch {
  bool in_runtime = false;
  bool in_driver = false;
  PendingLaunch pending;
};

struct GraphCloneSeen {
  std::uint64_t clone = 0;
  std::uint64_t original = 0;
};

thread_local ThreadLaunch t_launch;
thread_local std::vector<GraphCloneSeen> t_clones;

class Tracer {
 public:
  // Everything the callbacks touch, except what the writer guards itself.
  RecordWriter writer;
  std::atomic<bool> quiet{false};
  CUpti_SubscriberHandle subscriber = nullptr;
  bool verbose_ = false;  // TPGRAPH_INJECT_VERBOSE: diagnostics on stderr

  void note(const std::string& text) noexcept {
    try {
      (void)writer.write(tracefile::chunk(ChunkType::note, text));
    } catch (...) {
    }
  }

  // An error of ours: say so once and stop doing work in callbacks.
  void fail(const std::string& what) noexcept {
    if (quiet.exchange(true)) return;
    note("tpgraph injection stopped recording: " + what);
  }

  void on_buffer(std::uint8_t* buffer, std::size_t valid_bytes);
  void on_context_created(CUcontext context);
  void on_context_destroyed(CUcontext context);
  void on_graph_exec_created(const CUpti_GraphData& data);
  void on_graph_node_cloned(const CUpti_GraphData& data);
  void on_launch(CUpti_CallbackDomain domain, const CUpti_CallbackData& data, CUgraphExec exec);
  void finish() noexcept;
  // After the footer nothing more is written (a chunk after it would be ignored by the reader).
  [[nodiscard]] bool finished() const noexcept { return finished_.load(); }

 private:
  std::uint32_t intern_locked(const std::string& raw, std::string& chunks);
  void write_launches_locked(const std::unordered_set<std::uint32_t>& graph_correlations, bool final_flush);

  std::mutex state_mutex_;  // guards the members below; taken before the writer's lock, never after
  std::unordered_map<std::string, std::uint32_t> names_;      // written name -> id
  std::unordered_map<std::string, std::uint32_t> id_of_raw_;  // name as CUPTI gives it -> id
  std::unordered_map<CUgraphExec, std::uint32_t> exec_numbers_;
  std::uint32_t next_exec_ = 1;
  std::unordered_set<std::uint32_t> devices_written_;
  std::vector<CUcontext> contexts_;
  std::vector<PendingLaunch> undecided_;
  CarriedId carried_ = CarriedId::unknown;
  std::uint64_t records_written_ = 0;
  std::uint64_t graph_records_ = 0;
  std::uint64_t launches_seen_ = 0;
  // How launches were made, for the verbose summary: through the runtime (and whether its driver
  // call showed up with an id of its own) or through the driver directly.
  std::uint64_t runtime_launches_ = 0;
  std::uint64_t nested_same_id_ = 0;
  std::uint64_t nested_other_id_ = 0;
  std::uint64_t buffers_refused_ = 0;
  std::atomic<bool> finishing_{false};  // finish() has begun (it runs once)
  std::atomic<bool> finished_{false};   // the footer is written

 public:
  void buffer_refused() noexcept {
    const std::lock_guard guard(state_mutex_);
    ++buffers_refused_;
  }
};

// CUPTI's buffer callbacks carry no user pointer: the tracer is process-wide. It is never destroyed
// (CUPTI may call back during the process's teardown).
Tracer* g_tracer = nullptr;

template <class Cupti>
WireRecord wire_fields(const Cupti& r, ActivityKind kind) {
  WireRecord w;
  w.kind = static_cast<std::uint8_t>(kind);
  w.device = r.deviceId;
  w.start_ns = r.start;
  w.end_ns = r.end;
  w.stream_id = r.streamId;
  w.correlation_id = r.correlationId;
  w.graph_id = r.graphId;
  w.graph_node_id = r.graphNodeId;
  return w;
}

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

void Tracer::on_buffer(std::uint8_t* buffer, std::size_t valid_bytes) {
  std::vector<WireRecord> records;
  std::vector<std::string> record_names;  // parallel to records: raw (mangled) names, interned under the lock
  records.reserve(valid_bytes / 128);
  record_names.reserve(valid_bytes / 128);
  CUpti_Activity* activity = nullptr;
  for (;;) {
    const CUptiResult status = cuptiActivityGetNextRecord(buffer, valid_bytes, &activity);
    if (status == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // the end of the buffer
    if (status != CUPTI_SUCCESS) {
      note("cuptiActivityGetNextRecord failed (" + result_text(status) + "): the rest of a buffer was lost");
      break;
    }
    // The struct versions are those of the CUPTI 13 headers (Kernel10, Memcpy6, MemcpyPtoP4,
    // Memset4); newer libcupti keep their leading fields.
    switch (activity->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        const auto& k = *reinterpret_cast<const CUpti_ActivityKernel10*>(activity);
        records.push_back(wire_fields(k, ActivityKind::kernel));
        record_names.emplace_back(k.name != nullptr ? k.name : "");
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto& m = *reinterpret_cast<const CUpti_ActivityMemcpy6*>(activity);
        records.push_back(wire_fields(m, ActivityKind::memcpy));
        records.back().bytes = m.bytes;
        record_names.emplace_back(cupti::copy_label(m.copyKind));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const auto& p = *reinterpret_cast<const CUpti_ActivityMemcpyPtoP4*>(activity);
        records.push_back(wire_fields(p, ActivityKind::memcpy_peer));
        records.back().bytes = p.bytes;
        record_names.push_back("memcpy PtoP " + std::to_string(p.srcDeviceId) + "->" + std::to_string(p.dstDeviceId));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto& m = *reinterpret_cast<const CUpti_ActivityMemset4*>(activity);
        records.push_back(wire_fields(m, ActivityKind::memset));
        records.back().bytes = m.bytes;
        record_names.emplace_back("memset");
        break;
      }
      default: break;
    }
  }

  std::unordered_set<std::uint32_t> graph_correlations;
  std::uint64_t graph_records = 0;
  for (const WireRecord& r : records)
    if (r.graph_node_id != 0) {
      graph_correlations.insert(r.correlation_id);
      ++graph_records;
    }

  const std::lock_guard state(state_mutex_);
  if (finished_.load()) return;
  std::string names;
  for (std::size_t i = 0; i < records.size(); ++i) records[i].name_id = intern_locked(record_names[i], names);
  if (!writer.ours()) return;
  {
    auto file = writer.lock();
    if (!names.empty()) (void)writer.write_locked(names);
    if (!records.empty() && writer.write_locked(tracefile::records_chunk(records))) {
      records_written_ += records.size();
      graph_records_ += graph_records;
    }
  }
  write_launches_locked(graph_correlations, false);
}

void Tracer::write_launches_locked(const std::unordered_set<std::uint32_t>& graph_correlations, bool final_flush) {
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
    return;
  if (undecided_.empty()) return;
  std::vector<WireLaunch> out;
  out.reserve(undecided_.size());
  for (PendingLaunch& p : undecided_) {
    WireLaunch w = p.launch;
    const bool use_driver = p.runtime_correlation == 0 || (carried_ == CarriedId::driver && p.driver_correlation != 0);
    w.correlation_id = use_driver ? p.driver_correlation : p.runtime_correlation;
    out.push_back(w);
  }
  undecided_.clear();
  (void)writer.write(tracefile::launches_chunk(out));
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
    if (cuDeviceGetUuid(&uuid, device) == CUDA_SUCCESS) {
      // nvidia-smi's form: GPU-8-4-4-4-12 hex digits.
      std::string text = "GPU-";
      static constexpr char kHex[] = "0123456789abcdef";
      for (int i = 0; i < 16; ++i) {
        if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
        const auto b = static_cast<unsigned char>(uuid.bytes[i]);
        text += kHex[b >> 4];
        text += kHex[b & 0xf];
      }
      j["uuid"] = text;
    }
  }
  (void)writer.write(tracefile::chunk(ChunkType::device, j.dump()));
}

void Tracer::on_context_destroyed(CUcontext context) {
  const std::lock_guard state(state_mutex_);
  std::erase(contexts_, context);
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

std::string node_type(CUgraphNodeType type) {
  switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return "kernel";
    case CU_GRAPH_NODE_TYPE_MEMCPY: return "memcpy";
    case CU_GRAPH_NODE_TYPE_MEMSET: return "memset";
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return "mem_alloc";
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return "mem_free";
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "event_record";
    default: return "other";
  }
}

const char* memory_label(CUmemorytype type) {
  switch (type) {
    case CU_MEMORYTYPE_HOST: return "H";
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_ARRAY: return "D";
    default: return nullptr;  // unified: the direction is only known when it runs
  }
}

// One node of a graph chunk, read from the captured graph while it still exists.
json describe_node(CUgraphNode node, int instantiating_device, std::string& problem) {
  json j;
  std::uint64_t id = 0;
  if (cuptiGetGraphNodeId(node, &id) != CUPTI_SUCCESS) problem = "cuptiGetGraphNodeId failed for a node";
  j["id"] = id;
  CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
  if (const CUresult s = cuGraphNodeGetType(node, &type); s != CUDA_SUCCESS)
    problem = "cuGraphNodeGetType: " + driver_text(s);
  j["type"] = node_type(type);
  int device = instantiating_device;
  std::int64_t bytes = 0;
  std::string name;
  switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      CUDA_KERNEL_NODE_PARAMS p{};
      if (const CUresult s = cuGraphKernelNodeGetParams(node, &p); s != CUDA_SUCCESS) {
        problem = "cuGraphKernelNodeGetParams: " + driver_text(s);
        break;
      }
      const char* mangled = nullptr;
      if (p.func != nullptr) {
        (void)cuFuncGetName(&mangled, p.func);
      } else if (p.kern != nullptr) {
        (void)cuKernelGetName(&mangled, p.kern);
        CUdevice d = 0;
        if (p.ctx != nullptr && cuCtxGetDevice_v2(&d, p.ctx) == CUDA_SUCCESS) device = d;
      }
      name = demangle(mangled);
      break;
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
      CUDA_MEMCPY3D p{};
      if (cuGraphMemcpyNodeGetParams(node, &p) == CUDA_SUCCESS) {
        bytes = static_cast<std::int64_t>(p.WidthInBytes * std::max<std::size_t>(p.Height, 1) *
                                          std::max<std::size_t>(p.Depth, 1));
        const char* from = memory_label(p.srcMemoryType);
        const char* to = memory_label(p.dstMemoryType);
        name = from != nullptr && to != nullptr ? std::string("memcpy ") + from + "to" + to : "memcpy";
      }
      break;
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      CUDA_MEMSET_NODE_PARAMS p{};
      if (cuGraphMemsetNodeGetParams(node, &p) == CUDA_SUCCESS)
        bytes = static_cast<std::int64_t>(p.width * std::max<std::size_t>(p.height, 1) * p.elementSize);
      name = "memset";
      break;
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
      CUDA_MEM_ALLOC_NODE_PARAMS p{};
      if (cuGraphMemAllocNodeGetParams(node, &p) == CUDA_SUCCESS) bytes = static_cast<std::int64_t>(p.bytesize);
      break;
    }
    case CU_GRAPH_NODE_TYPE_GRAPH: name = "child graph (its nodes are not listed)"; break;
    default: break;
  }
  j["name"] = name;
  j["bytes"] = bytes;
  if (device >= 0) j["device"] = device;
  return j;
}

void Tracer::on_graph_exec_created(const CUpti_GraphData& data) {
  // Clones seen on this thread since the last instantiation: those of this executable, plus any
  // of a cudaGraphClone, which the lookup below leaves out (their originals are not this graph's).
  std::vector<GraphCloneSeen> clones = std::exchange(t_clones, {});
  CUgraph graph = data.graph;
  if (graph == nullptr) {
    note("an executable graph was created without its graph: its topology is unknown");
    return;
  }
  std::uint32_t exec = 0;
  {
    const std::lock_guard state(state_mutex_);
    exec = next_exec_++;
    exec_numbers_[data.graphExec] = exec;
  }
  CUdevice current = 0;
  const int device = cuCtxGetDevice(&current) == CUDA_SUCCESS ? static_cast<int>(current) : -1;

  std::size_t count = 0;
  if (const CUresult s = cuGraphGetNodes(graph, nullptr, &count); s != CUDA_SUCCESS) {
    note("cuGraphGetNodes failed (" + driver_text(s) + "): graph exec " + std::to_string(exec) + " has no topology");
    return;
  }
  std::vector<CUgraphNode> nodes(count);
  if (count > 0 && cuGraphGetNodes(graph, nodes.data(), &count) != CUDA_SUCCESS) {
    note("cuGraphGetNodes failed: graph exec " + std::to_string(exec) + " has no topology");
    return;
  }
  nodes.resize(count);
  std::unordered_map<CUgraphNode, int> index_of_handle;
  std::unordered_map<std::uint64_t, int> index_of_id;
  json j;
  j["exec"] = exec;
  std::uint32_t graph_id = 0;
  (void)cuptiGetGraphId(graph, &graph_id);
  j["graph_id"] = graph_id;
  json& out_nodes = j["nodes"] = json::array();
  std::string problem;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    json n = describe_node(nodes[i], device, problem);
    index_of_handle[nodes[i]] = static_cast<int>(i);
    index_of_id[n["id"].get<std::uint64_t>()] = static_cast<int>(i);
    out_nodes.push_back(std::move(n));
  }
  json& out_edges = j["edges"] = json::array();
  std::size_t edge_count = 0;
  if (const CUresult s = cuGraphGetEdges(graph, nullptr, nullptr, nullptr, &edge_count); s != CUDA_SUCCESS) {
    problem = "cuGraphGetEdges: " + driver_text(s);
  } else if (edge_count > 0) {
    std::vector<CUgraphNode> from(edge_count);
    std::vector<CUgraphNode> to(edge_count);
    if (const CUresult e = cuGraphGetEdges(graph, from.data(), to.data(), nullptr, &edge_count); e != CUDA_SUCCESS) {
      problem = "cuGraphGetEdges: " + driver_text(e);
    } else {
      for (std::size_t i = 0; i < edge_count; ++i) {
        const auto a = index_of_handle.find(from[i]);
        const auto b = index_of_handle.find(to[i]);
        if (a != index_of_handle.end() && b != index_of_handle.end()) out_edges.push_back({a->second, b->second});
      }
    }
  }
  json& out_clones = j["clones"] = json::array();
  for (const GraphCloneSeen& c : clones)
    if (const auto it = index_of_id.find(c.original); it != index_of_id.end())
      out_clones.push_back({c.clone, it->second});
  if (!problem.empty()) note("graph exec " + std::to_string(exec) + ": " + problem);
  (void)writer.write(tracefile::chunk(ChunkType::graph, j.dump()));
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
      return;
    } else {
      t = ThreadLaunch{};
      t.in_driver = true;
      t.pending.driver_correlation = data.correlationId;
    }
    t.pending.launch.host_start_ns = now_ns();
    std::uint32_t device = 0;
    if (data.context != nullptr && cuptiGetDeviceId(data.context, &device) == CUPTI_SUCCESS)
      t.pending.launch.device = device;
    const std::lock_guard state(state_mutex_);
    if (const auto it = exec_numbers_.find(exec); it != exec_numbers_.end()) t.pending.launch.exec = it->second;
    return;
  }
  // Exit: only the outermost call of the launch ends it.
  if (runtime ? !t.in_runtime : (t.in_runtime || !t.in_driver)) return;
  t.pending.launch.host_end_ns = now_ns();
  PendingLaunch done = t.pending;
  t = ThreadLaunch{};
  const std::lock_guard state(state_mutex_);
  ++launches_seen_;
  if (done.runtime_correlation != 0) {
    ++runtime_launches_;
    if (done.driver_correlation != 0)
      ++(done.driver_correlation == done.runtime_correlation ? nested_same_id_ : nested_other_id_);
  }
  undecided_.push_back(done);
}

void Tracer::finish() noexcept {
  if (finishing_.exchange(true) || !writer.ours()) return;
  try {
    std::vector<CUcontext> contexts;
    {
      const std::lock_guard state(state_mutex_);
      contexts = contexts_;
    }
    // A forced flush also returns records of work still running (without an end): synchronize first.
    for (CUcontext c : contexts) {
      if (cuCtxPushCurrent(c) != CUDA_SUCCESS) continue;
      (void)cuCtxSynchronize();
      CUcontext popped = nullptr;
      (void)cuCtxPopCurrent(&popped);
    }
    if (const CUptiResult s = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); s != CUPTI_SUCCESS)
      note("the final flush of CUPTI's buffers failed (" + result_text(s) + "): the last records may be missing");
    std::size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) != CUPTI_SUCCESS) dropped = 0;
    for (CUcontext c : contexts) {
      std::size_t more = 0;
      if (cuptiActivityGetNumDroppedRecords(c, 0, &more) == CUPTI_SUCCESS) dropped += more;
    }
    if (subscriber != nullptr) {
      std::uint32_t enabled = 0;
      if (cuptiGetCallbackState(&enabled, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED) != CUPTI_SUCCESS ||
          enabled == 0)
        note("tpgraph's CUPTI callbacks were disabled by someone else during the run: graphs may be missing");
    }
    {
      // Under the state lock, so no buffer being written lands after the footer.
      const std::lock_guard state(state_mutex_);
      write_launches_locked({}, true);
      if (buffers_refused_ > 0)
        note(std::to_string(buffers_refused_) + " record buffers could not be allocated: their records were dropped");
      if (launches_seen_ > 0 && graph_records_ == 0)
        note(std::to_string(launches_seen_) +
             " graph launches were seen but no graph record came back: another tool may have taken CUPTI's "
             "activity buffers");
      else if (!contexts.empty() && records_written_ == 0 && !quiet.load())
        note("CUDA contexts were created but no activity record came back");
      if (verbose_)
        std::fprintf(stderr,
                     "tpgraph inject: %llu records, %llu graph launches (%llu through the runtime: %llu with a driver "
                     "call of the same correlation id, %llu of another id)\n",
                     static_cast<unsigned long long>(records_written_), static_cast<unsigned long long>(launches_seen_),
                     static_cast<unsigned long long>(runtime_launches_),
                     static_cast<unsigned long long>(nested_same_id_),
                     static_cast<unsigned long long>(nested_other_id_));
      json footer;
      footer["records"] = records_written_;
      footer["dropped"] = static_cast<std::uint64_t>(dropped);
      footer["end_ns"] = now_ns();
      (void)writer.write(tracefile::chunk(ChunkType::footer, footer.dump()));
      finished_.store(true);
    }
  } catch (...) {
    // Nothing more can be written: the reader reports the file as cut short.
  }
}

// --- CUPTI and process hooks (C linkage callbacks; nothing escapes them) --------------------------

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(kBufferAlign, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
  if (*buffer == nullptr && g_tracer != nullptr) g_tracer->buffer_refused();
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid_bytes) {
  const std::unique_ptr<std::uint8_t, decltype(&std::free)> owned(buffer, &std::free);
  Tracer* tracer = g_tracer;
  if (tracer == nullptr || buffer == nullptr || valid_bytes == 0 || tracer->quiet.load() || tracer->finished() ||
      !tracer->writer.ours())
    return;
  try {
    tracer->on_buffer(buffer, valid_bytes);
  } catch (const std::exception& e) {
    tracer->fail(std::string("reading a record buffer failed: ") + e.what());
  } catch (...) {
    tracer->fail("reading a record buffer failed");
  }
}

CUgraphExec launched_exec(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* params) {
  if (params == nullptr) return nullptr;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    if (cbid == CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000)
      return reinterpret_cast<CUgraphExec>(static_cast<const cudaGraphLaunch_v10000_params*>(params)->graphExec);
    return reinterpret_cast<CUgraphExec>(static_cast<const cudaGraphLaunch_ptsz_v10000_params*>(params)->graphExec);
  }
  if (cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch) return static_cast<const cuGraphLaunch_params*>(params)->hGraph;
  return static_cast<const cuGraphLaunch_ptsz_params*>(params)->hGraphExec;
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata) {
  Tracer* tracer = g_tracer;
  if (tracer == nullptr || cbdata == nullptr || tracer->quiet.load() || tracer->finished() || !tracer->writer.ours())
    return;
  try {
    if (domain == CUPTI_CB_DOMAIN_RESOURCE) {
      const auto& resource = *static_cast<const CUpti_ResourceData*>(cbdata);
      const auto* graph = static_cast<const CUpti_GraphData*>(resource.resourceDescriptor);
      switch (cbid) {
        case CUPTI_CBID_RESOURCE_CONTEXT_CREATED: return tracer->on_context_created(resource.context);
        case CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING: return tracer->on_context_destroyed(resource.context);
        case CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED:
          if (graph != nullptr) tracer->on_graph_node_cloned(*graph);
          return;
        case CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED:
          if (graph != nullptr) tracer->on_graph_exec_created(*graph);
          return;
        default: return;
      }
    }
    if (domain == CUPTI_CB_DOMAIN_RUNTIME_API || domain == CUPTI_CB_DOMAIN_DRIVER_API) {
      const auto& data = *static_cast<const CUpti_CallbackData*>(cbdata);
      tracer->on_launch(domain, data, launched_exec(domain, cbid, data.functionParams));
    }
  } catch (const std::exception& e) {
    tracer->fail(std::string("a CUPTI callback failed: ") + e.what());
  } catch (...) {
    tracer->fail("a CUPTI callback failed");
  }
}

void at_exit() {
  if (g_tracer != nullptr) g_tracer->finish();
}

void in_fork_child() {
  if (g_tracer == nullptr) return;
  g_tracer->quiet.store(true);
  g_tracer->writer.abandon_in_child();
}

bool verbose() {
  const char* v = std::getenv("TPGRAPH_INJECT_VERBOSE");
  return v != nullptr && v[0] != '\0' && v[0] != '0';
}

json meta_json() {
  json j;
  j["host"] = host_name();
  j["boot_id"] = read_first_line("/proc/sys/kernel/random/boot_id");
  j["pid"] = static_cast<std::int64_t>(::getpid());
  j["ppid"] = static_cast<std::int64_t>(::getppid());
  j["exe"] = self_exe();
  json env = json::object();
  for (const char* var : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "CUDA_VISIBLE_DEVICES"})
    if (const char* value = std::getenv(var); value != nullptr) env[var] = value;
  j["env"] = env;
  std::uint32_t version = 0;
  j["cupti_version"] = cuptiGetVersion(&version) == CUPTI_SUCCESS ? version : 0;
  j["started_ns"] = now_ns();
  return j;
}

// Subscribes and enables everything; a failure names what failed.
std::string start_cupti(Tracer& tracer) {
  if (const CUptiResult s = cuptiSubscribe(&tracer.subscriber, on_callback, nullptr); s != CUPTI_SUCCESS) {
    tracer.subscriber = nullptr;
    std::string text =
        "another tool holds CUPTI, this process runs untraced: cuptiSubscribe failed (" + result_text(s) + ")";
    if (s == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED) text += "; holder: " + other_tool_hint();
    return text;
  }
  const std::pair<CUpti_CallbackDomain, CUpti_CallbackId> callbacks[] = {
      {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_CREATED},
      {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING},
      {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED},
      {CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_v10000},
      {CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaGraphLaunch_ptsz_v10000},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz},
  };
  for (const auto& [domain, cbid] : callbacks)
    if (const CUptiResult s = cuptiEnableCallback(1, tracer.subscriber, domain, cbid); s != CUPTI_SUCCESS)
      return "enabling a CUPTI callback failed (" + result_text(s) + ")";
  if (const CUptiResult s = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed); s != CUPTI_SUCCESS)
    return "cuptiActivityRegisterCallbacks failed (" + result_text(s) + ")";
  for (const CUpti_ActivityKind kind : kActivityKinds)
    if (const CUptiResult s = cuptiActivityEnable(kind); s != CUPTI_SUCCESS)
      return "enabling activity kind " + std::to_string(static_cast<int>(kind)) + " failed (" + result_text(s) + ")";
  if (const CUptiResult s = cuptiActivityFlushPeriod(kFlushPeriodMs); s != CUPTI_SUCCESS)
    tracer.note("cuptiActivityFlushPeriod failed (" + result_text(s) +
                "): records reach the file only as buffers fill, a killed process loses more");
  return {};
}

int initialize() {
  static std::atomic<bool> started{false};
  if (started.exchange(true)) return 1;
  const char* dir = std::getenv(tracefile::kTraceDirEnv);
  if (dir == nullptr || dir[0] == '\0') return 1;
  auto tracer = std::make_unique<Tracer>();
  std::string error;
  if (!tracer->writer.open(dir, host_name(), &error)) {
    std::fprintf(stderr, "tpgraph inject: %s (this process runs untraced)\n", error.c_str());
    return 1;
  }
  tracer->verbose_ = verbose();
  (void)tracer->writer.write(tracefile::chunk(ChunkType::meta, meta_json().dump()));
  g_tracer = tracer.release();  // lives until the process ends: CUPTI may call back at teardown
  const std::string failure = start_cupti(*g_tracer);
  if (!failure.empty()) {
    g_tracer->note(failure);
    g_tracer->quiet.store(true);
    if (g_tracer->subscriber != nullptr) {
      for (const CUpti_ActivityKind kind : kActivityKinds) (void)cuptiActivityDisable(kind);
      (void)cuptiUnsubscribe(g_tracer->subscriber);
      g_tracer->subscriber = nullptr;
    }
    json footer = {{"records", 0}, {"dropped", 0}, {"end_ns", now_ns()}};
    (void)g_tracer->writer.write(tracefile::chunk(ChunkType::footer, footer.dump()));
    if (verbose()) std::fprintf(stderr, "tpgraph inject: %s\n", failure.c_str());
    return 1;
  }
  if (pthread_atfork(nullptr, nullptr, in_fork_child) != 0 || std::atexit(at_exit) != 0)
    g_tracer->note("the exit or fork handler could not be installed: the file may end without a footer");
  if (verbose()) std::fprintf(stderr, "tpgraph inject: recording to %s\n", g_tracer->writer.path().c_str());
  return 1;
}

}  // namespace

}  // namespace tpgraph::inject

// The entry point the CUDA driver calls once it has loaded the library named by
// CUDA_INJECTION64_PATH. Whatever happens, the program goes on.
extern "C" __attribute__((visibility("default"))) int InitializeInjection(void) {
  try {
    return tpgraph::inject::initialize();
  } catch (...) {
    return 1;
  }
}
