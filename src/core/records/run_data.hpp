// A run as the capture fills it and the analysis reads it: the environment it ran in and, per
// variant, the scenario, the layer graph, every CUPTI record (tied to a node and a replay), the
// event-node spans and the host costs. Saved as records.json so `tpgraph analyze` recomputes every
// output offline, without a GPU and without rebuilding the graph.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/version.hpp"
#include "core/model/layer_graph.hpp"
#include "core/model/scenario.hpp"
#include "core/numerics/reference.hpp"
#include "core/records/nvtx_timeline.hpp"
#include "core/records/records.hpp"
#include "core/records/trace_cost.hpp"

namespace tpgraph {

// Bumped whenever a field of records.json changes meaning or disappears.
inline constexpr int kRunSchemaVersion = 1;

struct DeviceInfo {
  int ordinal = 0;
  std::string name;  // "NVIDIA H200"
  int sm_count = 0;
  std::int64_t memory_bytes = 0;
  std::string pci_bus_id;  // "0000:19:00.0"
};

struct RunEnvironment {
  std::string tool_version{build_version()};
  std::string git_revision{build_git_revision()};
  int driver_version = 0;           // cudaDriverGetVersion: 13000 for 13.0
  int runtime_version = 0;          // cudaRuntimeGetVersion
  int cupti_version = 0;            // cuptiGetVersion: 130001
  std::vector<DeviceInfo> devices;  // the visible GPUs
  std::string hostname;
  std::string started_at;  // ISO 8601 UTC, "2026-12-02T10:15:00Z"
};

// Host name and the current UTC time filled in, versions and devices left for the caller.
[[nodiscard]] RunEnvironment host_environment();
// "2026-12-02T10:15:00Z" for now.
[[nodiscard]] std::string utc_now_iso8601();

// A traced graph's node: where it sits among conditional and child-graph bodies (tpgraph trace).
struct NestedNode {
  int parent = -1;  // the owning child-graph or conditional node; -1: the graph itself
  int body = 0;     // which of the owner's bodies
  enum class Conditional : std::uint8_t { none, if_, while_, switch_ } conditional = Conditional::none;
  // Inside a while body (at any depth): several records per launch are its iterations.
  bool repeats = false;
  // Inside a conditional body (at any depth): a launch may not run it, so no record is not missing.
  bool optional = false;
  std::uint32_t stream = 0;  // a graph without topology: the CUDA stream its records ran on
};

// A traced process's graph work on a GPU, as the other processes' variants see it: contention
// named by process (LayerGraph::outside_labels[label]).
struct OutsideWork {
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  int device = 0;   // the global device, as Node::device
  int label = 0;    // index in LayerGraph::outside_labels
  int process = 0;  // the merge's process index: a variant skips its own processes' work
};

struct VariantRun {
  Scenario scenario;
  LayerGraph graph;
  int visible_devices = 1;
  bool ranks_share_gpu = false;  // two or more ranks on one GPU: overlap means stream concurrency
  // Warm-up replays already dropped; replay indices 0..N-1.
  std::vector<ActivityRecord> records;
  std::vector<EventSpan> event_spans;
  std::vector<double> host_launch_us;  // per replay: host time of the launch call (µs), GPU idle
  HostCosts costs;                     // capture, instantiate, queued launches
  double replay_us_untraced = 0;       // median wall per replay with CUPTI kernel tracing off; 0: not measured
  double replay_us_traced = 0;         // ... and on; 0: not measured
  CollectionHealth health;
  std::string cuda_graph_dot;              // the driver's verbose DOT dump; empty when not taken (eager issue)
  std::optional<Comparison> output_check;  // layer output against the CPU reference
  std::vector<std::string> notes;          // anything the capture wants every output to repeat
  // Traced graphs only (not in records.json): capture site, NVTX ranges at capture and shape
  // (tracefile::graph_identity), "" where unknown; `diff` pairs graphs by it first.
  std::string identity;
  // Traced graphs only (not in records.json). Why the graph's topology is unknown ("": it is
  // known): its nodes are then the distinct kernels and copies per stream, with no edges, and the
  // analysis computes no wait or critical path for it.
  std::string topology_error;
  std::vector<NestedNode> nesting;  // [node], or empty: no node is nested
  // Every traced process's graph work, one list shared by all variants (millions of records are
  // not copied per variant); this variant counts only what its own processes did not run.
  std::shared_ptr<const std::vector<OutsideWork>> outside;
  std::vector<int> own_processes;
  // The NVTX ranges each rank's process recorded ([rank], null where none; empty when no rank's
  // process recorded any), shared with the process's other variants, and those open around the
  // graph's launches.
  std::vector<std::shared_ptr<const NvtxTimeline>> nvtx;
  NvtxLaunches nvtx_launches;
};

// What a trace could not see, for the report's first line (tpgraph trace and analyze of a trace).
struct TraceCompleteness {
  std::uint64_t records = 0;             // graph records in all the files
  std::uint64_t unmatched = 0;           // graph records that reached no node and no graph without topology
  std::uint64_t launches = 0;            // graph launches the files hold
  std::uint64_t eager_records = 0;       // records of work outside graphs
  std::uint64_t yielded = 0;             // processes where tpgraph left CUPTI to the program's profiler
  std::vector<std::string> no_topology;  // per graph: "pid 12 exec 3: why"
  std::vector<std::string> truncated;    // per file: "pid 12: why"
  // Per graph instantiated for launch from the device: "pid 12 exec 3 (2 nodes)". CUPTI gives no
  // record of a graph launched from the device, so what those launches ran is not in the trace.
  std::vector<std::string> unseen;
  std::string rank_rule;              // how processes became ranks
  std::vector<std::string> profiler;  // CUPTI taken from, or by, another profiler
  // What was recorded where not everything was: windows, sampling, the flight recorder, the size limit.
  std::vector<std::string> recording;
  // Launches with no graph record at all (a window that never opened, records lost) are not clean.
  [[nodiscard]] bool clean() const {
    return unmatched == 0 && no_topology.empty() && truncated.empty() && unseen.empty() &&
           (records > 0 || launches == 0);
  }
  // "CLEAN: ..." or "NOT CLEAN: ..." with every count: the first line of every output of a trace.
  [[nodiscard]] std::string line() const;
};

struct RunData {
  int schema_version = kRunSchemaVersion;
  RunEnvironment env;
  std::vector<VariantRun> variants;
  std::optional<TraceCompleteness> trace;  // set for a trace, never for a run of the layer
  // A trace analysed from its folder: what tracing cost (trace_cost.hpp). Not in records.json.
  std::optional<TracingCost> tracing_cost;
};

// records.json text (and back). Parsing validates the schema version and every field; a bad
// document is an InputError naming `origin` and the problem.
[[nodiscard]] std::string run_data_to_json(const RunData& run);
[[nodiscard]] RunData parse_run_data(std::string_view json_text, std::string_view origin);

// Written to a temporary name beside `path` and renamed, so a failed write never leaves a file
// that looks complete.
void save_raw_records(const std::filesystem::path& path, const RunData& run);
// Refuses before reading a file whose analysis would not fit in memory (analysis_memory.hpp).
[[nodiscard]] RunData load_raw_records(const std::filesystem::path& path);

}  // namespace tpgraph
