// The record file each traced process writes (`tpgraph trace`): what the injection library streams
// to disk while the program runs, and what `trace` and `analyze` read back. GPU-free: the writer's
// encoding and the reader live here so both sides share one definition and the reader is fuzzed.
//
// Layout (little-endian): the 8-byte magic "TPGTRACE", a u32 format version, then chunks, each
//   u32 type | u32 payload bytes | payload
// written with one write() per chunk, in the order the process produced them. A file whose last
// chunk is not a footer was cut short (the process was killed, or ended with _exit): every complete
// chunk before the cut is still read, and the reader says the file is truncated.
//
// Chunk payloads:
//   meta     JSON: host, boot_id, pid, ppid, exe, env {RANK, LOCAL_RANK, WORLD_SIZE,
//            CUDA_VISIBLE_DEVICES} (only those set), cupti_version, started_ns (CUPTI clock)
//   device   JSON: ordinal, name, uuid, pci_bus_id (one chunk per device the process used)
//   name     u32 id, then the name's bytes (kernel names interned by the writer, demangled)
//   graph    JSON: a graph instantiated by the process, taken in the instantiation callback (the
//            program may destroy the captured graph right after), or again after an update of the
//            executable: exec (the writer's own number of the executable graph, from 1), version
//            (0 at instantiation, +1 per update; launches name it), graph_id (CUPTI's id of the
//            captured graph), nodes [{id: CUPTI id of the captured node, type (kNodeTypes), name,
//            bytes, device, parent and body (for a node inside a child graph or a conditional
//            node's body: the owning node's index and which body), cond ({kind: "if"|"while"|
//            "switch", bodies}: a conditional node)}], edges [[from, to] or [from, to, type,
//            from_port, to_port] as node indices; type 0 full completion, 1 programmatic, 2 launch
//            completion (CU_GRAPH_DEPENDENCY_TYPE_*)], clones [[instantiated node id, node index]]:
//            the ids the records carry; topology_error (present when the nodes or edges could not
//            be read: the graph's records are then shown without a topology, never dropped);
//            device_launch (true when instantiated for launch from the device; absent otherwise)
//   records  WireRecord[] (fixed size, see below)
//   launches WireLaunch[]: graph launches with the host time of the launch call
//            origin (optional, trace_recording.hpp): where the graph came from
//   note     UTF-8 text the report repeats (a warning, "another tool holds CUPTI", ...)
//   footer   JSON: records, dropped, end_ns; present only when the process ended cleanly
//   recording JSON (trace_recording.hpp): what was recorded when a window, sampling or the flight
//            recorder was asked for; absent when everything was. Added within version 1: a reader
//            that predates it skips the chunk with a note, and files without it read as before.
//   nvtx     binary (trace_nvtx.hpp): the program's NVTX ranges opened and closed, with the names
//            first used since the previous nvtx chunk. Added within version 1 like recording.
//   cost     JSON (trace_cost.hpp): tpgraph's own work in the process, its callbacks and its record
//            processing, timed; at exit and at a fatal signal. Added within version 1 like recording.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/records/records.hpp"
#include "core/records/trace_cost.hpp"

namespace tpgraph::tracefile {

inline constexpr std::string_view kMagic = "TPGTRACE";
inline constexpr std::uint32_t kVersion = 1;
// A chunk larger than this is refused by the reader (a graph of a million nodes is ~60 MB).
inline constexpr std::uint32_t kMaxChunkBytes = 256u << 20;
// A trace folder: `tpgraph trace` names it to the traced processes in this environment variable,
// and each process writes its record file into the folder's kProcsFolder, named
// <host>.<pid>.<n>.tpgt: n counts the process images of one pid (a program that execs another is
// traced again under the same pid), so no image ever opens another's file.
inline constexpr const char* kTraceDirEnv = "TPGRAPH_TRACE_DIR";
inline constexpr std::string_view kProcsFolder = "procs";
// The note of a process in which tpgraph left CUPTI to the program's own profiler (it recorded nothing).
inline constexpr std::string_view kYieldedNote = "profiler: tpgraph yielded CUPTI to the program's own profiler";
// File name suffix of a process's record file.
inline constexpr std::string_view kSuffix = ".tpgt";

enum class ChunkType : std::uint32_t {
  meta = 1,
  device = 2,
  name = 3,
  graph = 4,
  records = 5,
  launches = 6,
  note = 7,
  footer = 8,
  recording = 9,
  nvtx = 10,
  cost = 11,
};

// One CUPTI activity record as stored (56 bytes, no padding between fields).
struct WireRecord {
  std::uint8_t kind = 0;  // ActivityKind
  std::uint8_t reserved[3] = {0, 0, 0};
  std::uint32_t device = 0;
  std::uint64_t start_ns = 0;
  std::uint64_t end_ns = 0;
  std::uint32_t stream_id = 0;
  std::uint32_t correlation_id = 0;
  std::uint32_t graph_id = 0;
  std::uint32_t name_id = 0;        // 0: none; else a name chunk's id
  std::uint64_t graph_node_id = 0;  // the instantiated node's CUPTI id; 0: not from a graph
  std::uint64_t bytes = 0;
};
static_assert(sizeof(WireRecord) == 56);

// One graph launch (cudaGraphLaunch / cuGraphLaunch) as seen by the API callback.
struct WireLaunch {
  std::uint32_t correlation_id = 0;  // shared by every record of the launch
  std::uint32_t exec = 0;            // the graph chunk's exec number; 0: unknown executable
  std::uint64_t host_start_ns = 0;   // CUPTI clock at the call's entry
  std::uint64_t host_end_ns = 0;     // ... and exit
  std::uint32_t device = 0;
  std::uint32_t version = 0;  // the executable's graph version at the launch (TracedGraph::version)
};
static_assert(sizeof(WireLaunch) == 32);

// One NVTX range opened or closed by the program (an nvtx chunk's entry, trace_nvtx.hpp).
enum class NvtxKind : std::uint8_t { push = 1, pop = 2, start = 3, end = 4 };
struct WireNvtx {
  std::uint64_t at_ns = 0;  // CUPTI's clock at the call, as the launches' host times
  // Pairs a close with its open: the same number at a push and its pop (the injection library's
  // count), or at a start and its end (NVTX's range id). Opens and closes of other kinds never pair.
  std::uint64_t range = 0;
  std::uint32_t thread = 0;  // the OS thread id (gettid) of the call
  std::uint32_t name = 0;    // an id of a name of this or an earlier nvtx chunk; 0: no name (closes)
  std::uint8_t kind = 0;     // NvtxKind
  std::uint8_t reserved[7] = {0, 0, 0, 0, 0, 0, 0};
};
static_assert(sizeof(WireNvtx) == 32);

// A process's NVTX events as read: the names by id and the events in file order.
struct NvtxLog {
  std::unordered_map<std::uint32_t, std::string> names;
  std::vector<WireNvtx> events;
};

// --- writing (the injection library) -----------------------------------------------------------

// Little-endian u32 as the file stores it (chunk headers, the nvtx chunk's counts).
inline void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xffu));
}
// The u32 at `at` in `bytes` (the caller checked that four bytes are there).
[[nodiscard]] inline std::uint32_t get_u32(std::string_view bytes, std::size_t at) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(i)]);
  return v;
}

// The file's first 12 bytes.
[[nodiscard]] std::string file_header();
// One chunk: type, length and payload, ready for a single write().
[[nodiscard]] std::string chunk(ChunkType type, std::string_view payload);
// A GPU's 16-byte UUID as the device chunk stores it, nvidia-smi's form: GPU- and 8-4-4-4-12 hex digits.
[[nodiscard]] std::string uuid_text(const char (&bytes)[16]);
[[nodiscard]] std::string name_chunk(std::uint32_t id, std::string_view name);
[[nodiscard]] std::string records_chunk(const std::vector<WireRecord>& records);
[[nodiscard]] std::string launches_chunk(const std::vector<WireLaunch>& launches);

// --- reading (trace, analyze) ------------------------------------------------------------------

// The node types a graph chunk names; anything else is read as "other".
inline constexpr std::string_view kNodeTypes[] = {"kernel",   "memcpy",       "memset",      "mem_alloc",
                                                  "mem_free", "event_record", "event_wait",  "host",
                                                  "empty",    "graph",        "conditional", "other"};

enum class ConditionalKind : std::uint8_t { none, if_, while_, switch_ };

struct GraphNodeInfo {
  std::uint64_t id = 0;  // CUPTI id of the captured node
  std::string type;      // one of kNodeTypes
  std::string name;
  std::int64_t bytes = 0;
  int device = -1;  // -1: not known
  // A node of a child graph or of a conditional node's body: the owning node (an index in the same
  // graph, always before this node) and which of its bodies; -1 for a node of the graph itself.
  int parent = -1;
  int body = 0;
  ConditionalKind conditional = ConditionalKind::none;  // set on a conditional node
  int bodies = 0;                                       // a conditional node's body count
};

// An edge's data (CUgraphEdgeData): when the dependency is triggered and what it carries.
struct EdgeData {
  std::uint8_t type = 0;  // 0: full completion, 1: programmatic (PDL), 2: launch completion
  std::uint8_t from_port = 0;
  std::uint8_t to_port = 0;
  friend bool operator==(const EdgeData&, const EdgeData&) = default;
};

// Where a graph came from, as the injection library saw it (trace_recording.hpp): the NVTX ranges
// open on the capturing thread and the program's frames, innermost first, at capture begin (or at
// instantiation for a graph built node by node).
struct GraphOrigin {
  std::string at;                  // "capture" or "instantiation"; "" when not recorded
  std::vector<std::string> nvtx;   // outermost first
  std::vector<std::string> stack;  // the capture site first: frames outside CUDA and framework libraries
};

struct TracedGraph {
  std::uint32_t exec = 0;
  std::uint32_t version = 0;  // 0 at instantiation, +1 per cudaGraphExecUpdate / node update
  std::uint64_t graph_id = 0;
  std::vector<GraphNodeInfo> nodes;
  std::vector<std::pair<int, int>> edges;             // node indices, validated
  std::vector<EdgeData> edge_data;                    // parallel to edges
  std::vector<std::pair<std::uint64_t, int>> clones;  // instantiated node id -> node index
  std::string topology_error;                         // "": nodes and edges were read; else why not (its records stay)
  GraphOrigin origin;
  bool device_launch = false;  // instantiated for launch from the device (CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH)
};

// What a process recorded when not everything was (the recording chunks): the policy, the window's
// transitions, dumps of the flight recorder, where the size limit stopped it, launch counts.
struct RecordingEvent {
  std::string event;  // "open", "close", "dump", "limit"
  std::uint64_t at_ns = 0;
  std::string why;
};
struct RecordingCount {
  std::uint32_t exec = 0;
  std::uint64_t seen = 0;       // launches of the graph
  std::uint64_t in_window = 0;  // ... while the window was open
  std::uint64_t recorded = 0;   // ... recorded (sampled, under the launch count)
};
struct RecordingLog {
  std::string policy;  // Options::describe(); "" when no recording chunk was read
  std::vector<RecordingEvent> events;
  std::vector<RecordingCount> counts;
  std::uint64_t filtered = 0;              // graph records of launches not recorded, dropped by the library
  std::uint64_t evicted = 0;               // flight recorder: launches forgotten (older than the last N)
  std::uint64_t transitions_left_out = 0;  // window openings and closings past the first 64, not written
};

struct TracedDevice {
  int ordinal = 0;
  std::string name;
  std::string uuid;
  std::string pci_bus_id;
};

struct ProcessFile {
  std::string path;  // where it was read from, for messages
  // meta
  std::string host;
  std::string boot_id;
  std::int64_t pid = 0;
  std::int64_t ppid = 0;
  std::string exe;
  std::optional<int> rank, local_rank, world_size;
  std::string cuda_visible_devices;
  int cupti_version = 0;
  std::uint64_t started_ns = 0;
  bool has_meta = false;
  std::vector<TracedDevice> devices;
  std::vector<TracedGraph> graphs;
  std::vector<ActivityRecord> records;  // node and replay left -1: the join fills them
  std::vector<WireLaunch> launches;
  std::vector<std::string> notes;
  RecordingLog recording;
  NvtxLog nvtx;
  SelfCost self_cost;  // the last cost chunk; present false without one
  // footer
  bool complete = false;  // the footer was read: the process ended cleanly
  std::uint64_t footer_records = 0;
  std::uint64_t dropped = 0;
  std::uint64_t end_ns = 0;
  std::string truncation;  // "" or why reading stopped early ("cut inside a records chunk")
};

// Parses one process file. A wrong magic or version is an InputError naming `origin`; a file cut
// short keeps what it had and says so in `truncation`. Every count, index and length is checked
// against what the file actually holds.
[[nodiscard]] ProcessFile parse_process_file(std::string_view bytes, std::string_view origin);

// A name from the traced program as every output may carry it: well-formed UTF-8 (each byte of a
// malformed sequence becomes '?'), control characters (C0, DEL, C1: escape sequences, newlines,
// NUL) as '?', at most 4096 bytes and never half a character. The reader applies it to every
// string it takes from a file.
[[nodiscard]] std::string printable(std::string_view text);
[[nodiscard]] ProcessFile read_process_file(const std::string& path);

}  // namespace tpgraph::tracefile
