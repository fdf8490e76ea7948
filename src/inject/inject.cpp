// libtpgraph_inject.so: loaded by the CUDA driver into a program started by `tpgraph trace`
// (CUDA_INJECTION64_PATH), it subscribes to CUPTI and streams what the program's GPUs did to the
// process's record file (core/records/trace_file.hpp). It runs inside someone else's program: it never
// exits, never lets an exception out of a callback, and on an error of its own writes a note and
// goes quiet rather than disturb the work it watches.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/records/trace_file.hpp"
#include "core/records/trace_recording.hpp"
#include "inject/nvtx_ranges.hpp"
#include "inject/origin.hpp"
#include "inject/process_info.hpp"
#include "inject/tracer.hpp"

namespace tpgraph::inject {
namespace {

// Buffers of 1 MB, handed back at least every 200 ms by the flush thread below, so a process
// killed without warning (SIGKILL, the OOM killer, _exit) keeps all but its last fraction of a
// second (docs/trace.md, "How a process ends"). CUPTI's own periodic flush only returns FULL buffers.
constexpr std::size_t kDefaultBufferBytes = std::size_t{1} << 20;
constexpr std::size_t kBufferAlign = 8;  // CUPTI's records are 8-byte aligned
constexpr std::uint32_t kDefaultFlushMs = 200;

// The knobs the overhead and kill tests turn (docs/trace.md): TPGRAPH_INJECT_BUFFER_KB,
// TPGRAPH_INJECT_FLUSH_MS (0: no flush thread) and TPGRAPH_INJECT_FLUSH_FORCED=1 (the thread forces
// partly filled buffers out, records of running work then lack an end).
std::uint64_t env_number(const char* name, std::uint64_t fallback, std::uint64_t max) {
  const char* v = std::getenv(name);
  if (v == nullptr || v[0] == '\0') return fallback;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  return end != v && *end == '\0' && n <= max ? n : fallback;
}

std::size_t g_buffer_bytes = kDefaultBufferBytes;

// The cost-of-tracing knob (TPGRAPH_INJECT_COST, docs/trace.md "The cost of tracing, itemised"):
// which part of the library runs, so each part's cost is the difference of two runs.
enum class CostMode {
  full,       // everything (the default)
  activity,   // CUPTI's activity records only: no callback of tpgraph's, buffers freed undecoded
  callbacks,  // tpgraph's callbacks only: no activity kind enabled
  no_write,   // everything but the file: records decoded and interned, not written
  subscribe,  // CUPTI subscribed, nothing enabled: the cost of a subscriber alone
};
CostMode g_cost = CostMode::full;

CostMode cost_mode_from_env() {
  const char* v = std::getenv("TPGRAPH_INJECT_COST");
  const std::string mode = v != nullptr ? v : "";
  if (mode == "activity") return CostMode::activity;
  if (mode == "callbacks") return CostMode::callbacks;
  if (mode == "no-write") return CostMode::no_write;
  if (mode == "subscribe") return CostMode::subscribe;
  return CostMode::full;
}

// --- CUPTI and process hooks (C linkage callbacks; nothing escapes them) --------------------------

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(kBufferAlign, g_buffer_bytes));
  *size = *buffer != nullptr ? g_buffer_bytes : 0;
  *max_records = 0;
  if (*buffer == nullptr && g_tracer != nullptr) g_tracer->buffer_refused();
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid_bytes) {
  const std::unique_ptr<std::uint8_t, decltype(&std::free)> owned(buffer, &std::free);
  Tracer* tracer = g_tracer;
  if (tracer == nullptr || buffer == nullptr || valid_bytes == 0 || tracer->quiet.load() || tracer->finished() ||
      !tracer->writer.ours() || g_cost == CostMode::activity)
    return;
  try {
    const std::uint64_t start = monotonic_ns();
    const std::size_t records = tracer->on_buffer(buffer, valid_bytes);
    tracer->cost.add_buffer(monotonic_ns() - start, records);
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

// The driver calls that build or change graphs, at their successful exit: conditional nodes made
// (their bodies can only be learnt then), executables updated. True when `cbid` is one of them.
bool on_graph_edit(Tracer& tracer, CUpti_CallbackId cbid, const CUpti_CallbackData& data) {
  const void* params = data.functionParams;
  const bool done = data.callbackSite == CUPTI_API_EXIT && params != nullptr && data.functionReturnValue != nullptr &&
                    *static_cast<const CUresult*>(data.functionReturnValue) == CUDA_SUCCESS;
  switch (cbid) {
    case CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode: {
      const auto* p = static_cast<const cuGraphAddNode_params*>(params);
      if (done && p->phGraphNode != nullptr) tracer.conditionals.on_node_added(*p->phGraphNode, p->nodeParams);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode_v2: {
      const auto* p = static_cast<const cuGraphAddNode_v2_params*>(params);
      if (done && p->phGraphNode != nullptr) tracer.conditionals.on_node_added(*p->phGraphNode, p->nodeParams);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate: {
      const auto* p = static_cast<const cuGraphExecUpdate_params*>(params);
      if (done) tracer.on_exec_updated(p->hGraphExec, p->hGraph);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2: {
      const auto* p = static_cast<const cuGraphExecUpdate_v2_params*>(params);
      if (done) tracer.on_exec_updated(p->hGraphExec, p->hGraph);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2: {
      const auto* p = static_cast<const cuGraphExecKernelNodeSetParams_v2_params*>(params);
      if (done && p->nodeParams != nullptr)
        tracer.on_exec_kernel_set(p->hGraphExec, p->hNode, p->nodeParams->func, p->nodeParams->kern);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuProfilerStart:
    case CUPTI_DRIVER_TRACE_CBID_cuProfilerStop:
      if (data.callbackSite == CUPTI_API_ENTER && tracer.recorder != nullptr)
        tracer.recorder->profiler(cbid == CUPTI_DRIVER_TRACE_CBID_cuProfilerStart, now_ns());
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz:
      if (data.callbackSite == CUPTI_API_ENTER && tracer.origins) on_capture_begin();
      return true;
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture:
    case CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz: {
      // Both parameter structs are {stream, CUgraph*}.
      const auto* p = static_cast<const cuStreamEndCapture_params*>(params);
      if (done && tracer.origins && p->phGraph != nullptr) on_capture_end(*p->phGraph);
      return true;
    }
    case CUPTI_DRIVER_TRACE_CBID_cuGraphExecNodeSetParams: {
      const auto* p = static_cast<const cuGraphExecNodeSetParams_params*>(params);
      if (done && p->nodeParams != nullptr && p->nodeParams->type == CU_GRAPH_NODE_TYPE_KERNEL)
        tracer.on_exec_kernel_set(p->hGraphExec, p->hNode, p->nodeParams->kernel.func, p->nodeParams->kernel.kern);
      return true;
    }
    default: return false;
  }
}

// The graph launch callbacks (runtime and driver): their time per launch is tpgraph's cost of a replay.
bool is_launch_callback(CUpti_CallbackDomain domain, CUpti_CallbackId cbid) {
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) return true;  // only the launches are enabled there
  return domain == CUPTI_CB_DOMAIN_DRIVER_API &&
         (cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch || cbid == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz);
}

void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* cbdata) {
  Tracer* tracer = g_tracer;
  if (tracer == nullptr || cbdata == nullptr || tracer->quiet.load() || tracer->finished() || !tracer->writer.ours())
    return;
  const SelfCostMeter::Callback timed(tracer->cost, is_launch_callback(domain, cbid));
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
      if (domain == CUPTI_CB_DOMAIN_DRIVER_API && on_graph_edit(*tracer, cbid, data)) return;
      tracer->on_launch(domain, data, launched_exec(domain, cbid, data.functionParams));
      tracer->detach_if_requested(data);
    }
  } catch (const std::exception& e) {
    tracer->fail(std::string("a CUPTI callback failed: ") + e.what());
  } catch (...) {
    tracer->fail("a CUPTI callback failed");
  }
}

// TPGRAPH_INJECT_NVTX=0, or a cost mode without tpgraph's callbacks: NVTX ranges are not recorded
// (the --nvtx-range window still hears them).
bool g_record_nvtx = true;

std::uint32_t this_thread_id() {
  thread_local const auto id = static_cast<std::uint32_t>(::syscall(SYS_gettid));
  return id;
}

// A range the program opened or closed, on the program's thread: the --nvtx-range window hears of
// it, and the NVTX log keeps it while records are recorded (with a recorder: while its window is
// open; the close of a range whose open was kept always, so no range is cut by the window's edge;
// with sampling or a launch count, only ranges a recorded launch is made inside: NvtxLog's
// deferred opens). Returns whether an open was kept (or held).
bool on_nvtx_range(const nvtx::RangeEvent& e) {
  Tracer* tracer = g_tracer;
  if (tracer == nullptr || tracer->quiet.load() || tracer->finished()) return false;
  try {
    const std::uint64_t now = now_ns();
    const bool window_open = tracer->recorder == nullptr || tracer->recorder->nvtx(e.name, e.opened, now);
    if (!g_record_nvtx || e.id == 0 || now == 0) return false;
    using tracefile::NvtxKind;
    if (!e.opened) {
      if (e.open_kept) tracer->nvtx_log.close(e.push ? NvtxKind::pop : NvtxKind::end, e.id, now, this_thread_id());
      return false;
    }
    if (!window_open || tracer->limit_reached.load()) return false;
    if (e.push && tracer->recorder != nullptr && tracer->recorder->defers_ranges())
      return tracer->nvtx_log.open_deferred(NvtxKind::push, e.id, e.name, now, this_thread_id());
    return tracer->nvtx_log.open(e.push ? NvtxKind::push : NvtxKind::start, e.id, e.name, now, this_thread_id());
  } catch (...) {
    return false;
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
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphAddNode_v2},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphExecUpdate_v2},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphExecKernelNodeSetParams_v2},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuGraphExecNodeSetParams},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStart},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuProfilerStop},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_ptsz},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamBeginCapture_v2_ptsz},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture},
      {CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamEndCapture_ptsz},
  };
  if (g_cost == CostMode::subscribe) return {};
  // TPGRAPH_INJECT_LAUNCH_CALLBACKS=driver: the graph launches are seen at the driver's cuGraphLaunch
  // only (a cost measurement: the runtime's callbacks are what a program of many runtime calls pays for).
  const char* launch_domains = std::getenv("TPGRAPH_INJECT_LAUNCH_CALLBACKS");
  const bool driver_only = launch_domains != nullptr && std::string_view(launch_domains) == "driver";
  if (g_cost != CostMode::activity) {
    for (const auto& [domain, cbid] : callbacks) {
      if (driver_only && domain == CUPTI_CB_DOMAIN_RUNTIME_API) continue;
      if (const CUptiResult s = cuptiEnableCallback(1, tracer.subscriber, domain, cbid); s != CUPTI_SUCCESS)
        return "enabling a CUPTI callback failed (" + result_text(s) + ")";
    }
  }
  if (const CUptiResult s = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed); s != CUPTI_SUCCESS)
    return "cuptiActivityRegisterCallbacks failed (" + result_text(s) + ")";
  if (g_cost == CostMode::callbacks) return {};
  for (const CUpti_ActivityKind kind : kActivityKinds)
    if (const CUptiResult s = cuptiActivityEnable(kind); s != CUPTI_SUCCESS)
      return "enabling activity kind " + std::to_string(static_cast<int>(kind)) + " failed (" + result_text(s) + ")";
  return {};
}

// TPGRAPH_INJECT_DETACH_MS: when CUPTI is to be detached (0: never), on the monotonic clock. Only the
// flush thread reads it.
std::uint64_t g_detach_at_ns = 0;

// The flush thread's part in a detach: asks for it once TPGRAPH_INJECT_DETACH_MS's time has come.
// True while CUPTI is not attached: no CUPTI call may be made then (it would attach CUPTI again).
bool detach_step(Tracer& tracer) {
  if (g_detach_at_ns != 0 && monotonic_ns() >= g_detach_at_ns) {
    g_detach_at_ns = 0;
    if (tracer.attachment.load() == Tracer::Attachment::attached) {
      tracer.detach_reason = "TPGRAPH_INJECT_DETACH_MS, a cost measurement";
      tracer.attachment.store(Tracer::Attachment::detach_requested);
    }
  }
  return tracer.attachment.load() != Tracer::Attachment::attached;
}

// Hands CUPTI's buffers back every `period_ms`: a detached thread that ends when the tracer does.
void start_flush_thread(std::uint32_t period_ms, std::uint32_t flag) {
  std::thread([period_ms, flag] {
    for (;;) {
      std::this_thread::sleep_for(std::chrono::milliseconds(period_ms));
      Tracer* tracer = g_tracer;
      const bool detached = tracer != nullptr && !tracer->finishing() && detach_step(*tracer);
      if (tracer != nullptr) tracer->on_tick();  // makes no CUPTI call while CUPTI is not attached
      if (detached) continue;
      if (tracer != nullptr && tracer->limit_reached.load()) {
        for (const CUpti_ActivityKind kind : kActivityKinds) (void)cuptiActivityDisable(kind);
        return;
      }
      if (tracer == nullptr || tracer->quiet.load() || tracer->finishing() || !tracer->writer.ours()) return;
      (void)cuptiActivityFlushAll(flag);
    }
  }).detach();
}

// Fatal signals flush what they can, then the signal takes its course (the previous handler, or
// the default action). Termination signals are watched only where the program left them at their
// default: a program's own handler decides what its SIGTERM means.
constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
constexpr int kTerminationSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE};
struct sigaction g_previous[NSIG];

void on_signal(int signal, siginfo_t*, void*) {
  static std::atomic<bool> flushing{false};
  const int saved_errno = errno;
  if (!flushing.exchange(true) && g_tracer != nullptr) {
    // A flush that blocks on a lock the crash left held must not keep the process alive: SIGALRM's
    // default action ends it, where the program has not claimed SIGALRM.
    struct sigaction alarm_action {};
    if (sigaction(SIGALRM, nullptr, &alarm_action) == 0 && alarm_action.sa_handler == SIG_DFL) alarm(3);
    g_tracer->flush_at_signal(signal);
  }
  sigaction(signal, &g_previous[signal], nullptr);
  errno = saved_errno;
  raise(signal);  // delivered when this handler returns, to the previous disposition
}

void install_signal_handlers() {
  struct sigaction action {};
  action.sa_sigaction = on_signal;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (const int signal : kFatalSignals) (void)sigaction(signal, &action, &g_previous[signal]);
  for (const int signal : kTerminationSignals) {
    struct sigaction current {};
    if (sigaction(signal, nullptr, &current) != 0 || current.sa_handler != SIG_DFL ||
        (current.sa_flags & SA_SIGINFO) != 0)
      continue;
    (void)sigaction(signal, &action, &g_previous[signal]);
  }
}

// The knobs of the environment, and the recorder when `trace` asked for less than everything: built
// before CUPTI can call back, applied (activity off outside the window) once CUPTI is started.
void configure(Tracer& tracer) {
  tracer.writer.set_limit(env_number("TPGRAPH_MAX_FILE_BYTES", Tracer::kDefaultMaxFileBytes, ~std::uint64_t{0}));
  g_cost = cost_mode_from_env();
  tracer.origins = env_number("TPGRAPH_INJECT_ORIGIN", 1, 1) == 1;
  tracer.discard_records = g_cost == CostMode::no_write;
  g_record_nvtx =
      env_number("TPGRAPH_INJECT_NVTX", 1, 1) == 1 && g_cost != CostMode::activity && g_cost != CostMode::subscribe;
  std::vector<std::string> problems;
  recording::Options options = recording_options_from_env(problems);
  for (const auto& p : problems) tracer.note(p);
  if (const auto detach_ms = env_number("TPGRAPH_INJECT_DETACH_MS", 0, 24ull * 3600 * 1000); detach_ms > 0) {
    // The flush thread asks for the detach; a window or sampling would call CUPTI after it.
    if (options.records_everything() && env_number("TPGRAPH_INJECT_FLUSH_MS", kDefaultFlushMs, 60000) > 0) {
      g_detach_at_ns = monotonic_ns() + detach_ms * 1'000'000ull;
    } else {
      tracer.note("TPGRAPH_INJECT_DETACH_MS is taken only when everything is recorded and the flush thread runs");
    }
  }
  if (options.records_everything()) return;
  (void)tracer.writer.write(tracefile::recording_policy_chunk(options.describe()));
  // The flight recorder keeps the last ranges with its last launches (written at a dump, not as they
  // come): 64 entries per launch kept per graph, at least 4096.
  if (options.keep_last > 0)
    tracer.nvtx_log.keep_last(std::max<std::size_t>(4096, std::size_t{64} * options.keep_last));
  tracer.recorder = std::make_unique<Recorder>(std::move(options), now_ns(), tracer.cost);
}

// --dump-on: the signal only asks; the flush thread writes the flight recorder (a handler that
// wrote could deadlock on a lock the interrupted thread holds).
void on_dump_signal(int) {
  if (g_tracer != nullptr && g_tracer->recorder != nullptr) g_tracer->recorder->dump_requested.store(true);
}

void install_dump_signal(Tracer& tracer) {
  const auto signal = env_number("TPGRAPH_DUMP_ON", 0, NSIG - 1);
  if (signal == 0 || tracer.recorder == nullptr || !tracer.recorder->keeps_last()) return;
  if (env_number("TPGRAPH_INJECT_FLUSH_MS", kDefaultFlushMs, 60000) == 0)
    tracer.note("--dump-on: no flush thread (TPGRAPH_INJECT_FLUSH_MS=0), so the signal writes nothing");
  struct sigaction action {};
  action.sa_handler = on_dump_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (sigaction(static_cast<int>(signal), &action, nullptr) != 0)
    tracer.note("--dump-on: the signal handler could not be installed");
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
  configure(*tracer);
  g_tracer = tracer.release();  // lives until the process ends: CUPTI may call back at teardown
  g_buffer_bytes = static_cast<std::size_t>(env_number("TPGRAPH_INJECT_BUFFER_KB", kDefaultBufferBytes >> 10, 1u << 20))
                   << 10;
  if (g_buffer_bytes < (std::size_t{64} << 10)) g_buffer_bytes = std::size_t{64} << 10;
  const char* yield = std::getenv("TPGRAPH_YIELD_TO_PROFILER");
  const std::string failure =
      yield != nullptr && yield[0] == '1'
          ? std::string(tracefile::kYieldedNote) + " (--yield-to-profiler): this process was not recorded"
          : start_cupti(*g_tracer);
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
  install_signal_handlers();
  if (g_tracer->recorder != nullptr) g_tracer->recorder->start();
  if (g_tracer->recorder != nullptr || g_record_nvtx) nvtx::set_listener(&on_nvtx_range);
  install_dump_signal(*g_tracer);
  if (const auto period = env_number("TPGRAPH_INJECT_FLUSH_MS", kDefaultFlushMs, 60000); period > 0)
    start_flush_thread(static_cast<std::uint32_t>(period),
                       env_number("TPGRAPH_INJECT_FLUSH_FORCED", 0, 1) == 1 ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
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

// The entry point NVTX calls when NVTX_INJECTION64_PATH names this library (`trace` sets it): the
// program's range calls come to inject/nvtx_ranges.cpp from then on.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  try {
    return tpgraph::inject::nvtx::install(get_export_table);
  } catch (...) {
    return 0;
  }
}
