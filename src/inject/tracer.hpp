// The injection library's state and the work of its CUPTI callbacks: record buffers decoded and
// written as chunks, launches held until their records tell which correlation id they carry, each
// executable graph's topology (and its versions after updates), and the footer at exit. The C
// callbacks that CUPTI and the process call live in inject.cpp and forward here.
#pragma once
#include <cuda.h>
#include <cupti.h>

#include <nlohmann/json.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/records/trace_file.hpp"
#include "inject/nvtx_log.hpp"
#include "inject/record_writer.hpp"
#include "inject/recorder.hpp"
#include "inject/self_cost.hpp"
#include "inject/topology.hpp"

namespace tpgraph::inject {

using nlohmann::json;
using tracefile::ChunkType;
using tracefile::WireLaunch;
using tracefile::WireRecord;

// Launches wait for the first graph records to tell which correlation id they carry (see
// LaunchLog); past this many they are written with the runtime call's id regardless.
constexpr std::size_t kMaxUndecidedLaunches = 1u << 16;
// Clones recorded on a thread with no graph instantiated yet (cudaGraphClone without instantiate).
constexpr std::size_t kMaxPendingClones = 1u << 20;

// Which correlation id the records of a graph launch carry when the runtime's cudaGraphLaunch calls
// the driver's cuGraphLaunch (each call has its own id): learnt from the first graph records that
// match a launch, so launches are written with the id their records carry.
enum class CarriedId { unknown, runtime, driver };

struct PendingLaunch {
  std::uint32_t runtime_correlation = 0;  // 0: launched through the driver API directly
  std::uint32_t driver_correlation = 0;   // 0: no nested driver call seen
  bool record = true;                     // the recorder chose it (always, without one)
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

class Tracer {
 public:
  // Everything the callbacks touch, except what the writer guards itself.
  RecordWriter writer;
  std::atomic<bool> quiet{false};
  CUpti_SubscriberHandle subscriber = nullptr;
  bool verbose_ = false;  // TPGRAPH_INJECT_VERBOSE: diagnostics on stderr
  // The file's size at most (TPGRAPH_MAX_FILE_BYTES, `trace --max-file-size`), held by the writer:
  // records stop once the file is within the end's reserve of it (limit_reached, said in a note),
  // and the writer refuses any chunk past it but the footer.
  static constexpr std::uint64_t kDefaultMaxFileBytes = std::uint64_t{4} << 30;
  std::atomic<bool> limit_reached{false};
  // Built only when `trace` asked for less than everything (a window, sampling, the flight recorder).
  std::unique_ptr<Recorder> recorder;
  // The program's NVTX ranges, appended by its threads (inject.cpp's listener), written by on_tick,
  // finish and the signal flush. Guards itself.
  NvtxLog nvtx_log;
  // tpgraph's own work in this process (callbacks, record buffers), written as the cost chunk.
  SelfCostMeter cost;

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

  // Returns the records decoded (for the cost chunk).
  std::size_t on_buffer(std::uint8_t* buffer, std::size_t valid_bytes);
  void on_context_created(CUcontext context);
  void on_context_destroyed(CUcontext context);
  void on_graph_exec_created(const CUpti_GraphData& data);
  void on_exec_updated(CUgraphExec exec, CUgraph graph);
  void on_exec_kernel_set(CUgraphExec exec, CUgraphNode node, CUfunction func, CUkernel kern);
  ConditionalNodes conditionals;  // guards itself
  void on_graph_node_cloned(const CUpti_GraphData& data);
  void on_launch(CUpti_CallbackDomain domain, const CUpti_CallbackData& data, CUgraphExec exec);
  void finish() noexcept;
  // After the footer nothing more is written (a chunk after it would be ignored by the reader).
  [[nodiscard]] bool finished() const noexcept { return finished_.load(); }
  [[nodiscard]] bool finishing() const noexcept { return finishing_.load(); }
  // A fatal signal: hand CUPTI's buffers back (forced: the process will not finish its work), write
  // the launches held so far and a note naming the signal. No footer: the file reads as cut short.
  void flush_at_signal(int signal) noexcept;
  // The recorder's window transitions, and the flight recorder when the dump signal asked for it.
  void on_tick() noexcept;
  // Origins (capture site, NVTX ranges) are taken only when asked: TPGRAPH_INJECT_ORIGIN=0 leaves
  // them out (the cost-of-tracing knobs, docs/trace.md).
  bool origins = true;
  // TPGRAPH_INJECT_COST=no-write: records decoded and interned but not written (the writer's share).
  bool discard_records = false;

  // TPGRAPH_INJECT_DETACH_MS (a cost measurement, never set by `trace`): CUPTI detached from the
  // process once that long has passed, to measure what the program pays once no subscriber is left.
  // The flush thread asks (requested); the next graph launch's outermost API exit detaches, as CUPTI
  // asks of cuptiFinalize; from then on nothing of tpgraph calls CUPTI (a CUPTI call would attach it
  // again). Not safe for every program: a PyTorch server's next GPU work after it failed with
  // "unspecified launch failure" (docs/trace.md, "Why CUPTI stays attached").
  // detaching: the flush and cuptiFinalize are under way on the thread that won the request.
  enum class Attachment { attached, detach_requested, detaching, detached };
  std::atomic<Attachment> attachment{Attachment::attached};
  // Why the detach was asked for (the note it leaves), set before the request.
  std::string detach_reason;
  // At a launch's outermost exit, when a detach was requested: flush CUPTI's buffers, cuptiFinalize.
  void detach_if_requested(const CUpti_CallbackData& data) noexcept;
  // Every context the program made, each synchronized (made current, synchronized, popped); returned.
  std::vector<CUcontext> synchronize_contexts();
  // No CUPTI call may be made: CUPTI is being detached or is.
  [[nodiscard]] bool detached() const noexcept {
    const Attachment a = attachment.load();
    return a == Attachment::detaching || a == Attachment::detached;
  }

 private:
  std::uint32_t intern_locked(const std::string& raw, std::string& chunks);
  void write_launches_locked(const std::unordered_set<std::uint32_t>& graph_correlations, bool final_flush);
  // The launches whose correlation id is decided, taken from those pending (none while the id a
  // runtime launch's records carry is not known yet, unless final_flush).
  std::vector<WireLaunch> decide_launches_locked(const std::unordered_set<std::uint32_t>& graph_correlations,
                                                 bool final_flush);
  // The launches chunk write_launches_locked writes (empty when there is none to write yet); under
  // the flight recorder the launches go to it instead.
  std::string launches_chunk_locked(const std::unordered_set<std::uint32_t>& graph_correlations, bool final_flush);
  // Counts `bytes` of records against --max-file-size: false once the limit is reached (noted once).
  bool admit_records_locked(std::uint64_t bytes);
  // Writes what the flight recorder holds, and a dump event naming `why`.
  void dump_flight_locked(const std::string& why);
  // Records (and the names before them) within the file's limit; false once the limit is reached.
  bool write_records_locked(const std::vector<WireRecord>& records, const std::string& names,
                            std::uint64_t graph_records);
  // The NVTX log's entries since the last call, as a chunk (under the state lock: never after the
  // footer). `wait` false: the log's lock is only tried (the signal flush).
  void write_nvtx_locked(bool wait);

  // Guards the names; taken before the state lock and the writer's, never after (on_buffer holds it
  // from interning a buffer's names until its chunks are written).
  std::mutex names_mutex_;
  std::unordered_map<std::string, std::uint32_t> names_;      // written name -> id
  std::unordered_map<std::string, std::uint32_t> id_of_raw_;  // name as CUPTI gives it -> id
  std::mutex state_mutex_;  // guards the members below; taken before the writer's lock, never after
  // What the library knows of each live executable graph: its number, its version and what its
  // last graph chunk said, so an update can be written as the next version.
  struct ExecState {
    std::uint32_t number = 0;
    std::uint32_t version = 0;
    std::uint32_t graph_id = 0;
    std::vector<std::pair<std::uint64_t, int>> clones;
    std::unordered_map<std::uint64_t, int> index_of_id;
    json nodes;
    json edges;
    std::uint64_t parameter_updates = 0;  // kernel parameter changes that kept the version
    tracefile::GraphOrigin origin;        // where the graph was captured (written with every version)
    bool device_launch = false;           // instantiated for launch from the device
  };
  void write_graph_locked(ExecState& state, const Topology& topology,
                          std::vector<std::pair<std::uint64_t, int>> clones);
  std::unordered_map<CUgraphExec, ExecState> execs_;
  // Changes whenever an exec is written (created, updated, a new version) or a context is destroyed:
  // threads' cached lookups (exec number and version, context device) are stale once it moved.
  // Written under the state lock, read without it.
  std::atomic<std::uint64_t> execs_generation_{0};
  std::uint32_t next_exec_ = 1;
  std::unordered_set<std::uint32_t> devices_written_;
  std::vector<CUcontext> contexts_;
  std::vector<PendingLaunch> undecided_;
  CarriedId carried_ = CarriedId::unknown;
  std::uint64_t records_written_ = 0;
  std::uint64_t graph_records_ = 0;
  std::uint64_t launches_seen_ = 0;
  std::uint64_t launches_recorded_ = 0;
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
extern Tracer* g_tracer;
// Set on the thread that flushes at a fatal signal: the buffer callback then only try-locks.
extern thread_local bool t_signal_flush;

}  // namespace tpgraph::inject
