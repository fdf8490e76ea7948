// Private to the merge of record files (traced_run.cpp, traced_graphs.cpp): the merge as named
// steps over shared state, and the pieces of a traced graph the steps build. traced_run.hpp says
// what the merge does; this says how it is cut up.
#pragma once
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/records/record_join.hpp"
#include "core/records/traced_run.hpp"

namespace tpgraph::trace_merge {

[[nodiscard]] double ns_us(std::uint64_t later, std::uint64_t earlier);
[[nodiscard]] bool is_collective(std::string_view name);
[[nodiscard]] NodeKind kind_of_type(std::string_view type);
[[nodiscard]] std::string host_key(const tracefile::ProcessFile& p);

// FNV-1a over the graph's shape: node types and names in node order, then the sorted edges.
[[nodiscard]] std::uint64_t fingerprint(const tracefile::TracedGraph& g);

// Where a graph record of one process goes: (graph index in the file, node index).
struct Slot {
  int graph = -1;
  int node = -1;
};

struct ProcessIndex {
  NodeResolver resolver;  // instantiated (or captured) node id -> slot index
  std::vector<Slot> slots;
  // [graph] its shape class: graphs of one class have the same shape, so one's node indices are
  // valid in every other's (classify_shapes). Named for the fingerprint, which only buckets them.
  std::vector<std::uint64_t> graph_fingerprint;
  // [graph] its executable's place among the process's executables of its shape class and version
  // (0, 1, ... in order of their first chunk): a server's graphs for batch sizes whose kernels are the
  // same stay apart, and tied processes pair their n-th executables of a shape (classify_shapes).
  std::vector<std::size_t> shape_ordinal;
  // An exec updated after instantiation has a graph chunk per version, with the same instantiated
  // ids: the resolver keeps the last; each version's own ids -> slot decide by the launch's version.
  std::map<int, std::unordered_map<std::uint64_t, int>> versioned;  // [graph] for execs with versions

  // The slot of a record's node id in `graph` (the chunk its launch ran, -1: unknown).
  [[nodiscard]] int resolve(std::uint64_t id, int graph, const std::vector<tracefile::TracedGraph>& graphs) const {
    const int s = resolver.resolve(id);
    if (s < 0 || graph < 0 || slots[static_cast<std::size_t>(s)].graph == graph) return s;
    const auto it = versioned.find(graph);
    if (it == versioned.end()) return s;
    const auto own = it->second.find(id);
    return own != it->second.end() &&
                   graphs[static_cast<std::size_t>(graph)].exec ==
                       graphs[static_cast<std::size_t>(slots[static_cast<std::size_t>(s)].graph)].exec
               ? own->second
               : s;
  }
};

// Where each record of a process goes.
struct Placement {
  std::vector<int> group;  // [record]: its group; -1: eager, or matched nothing
  std::vector<int> node;   // [record]: node in the group's template graph; -1: a graph without topology
};

// Records of kernels a graph launched from the device (a conditional node's body) carry
// correlation id 0: each is given the launch of its graph (the record's CUPTI graph id) that began
// last before it, found among the records of the same graph that carry a launch's correlation id.
// Launches of one executable never overlap, so the launch running at the record's start is that one.
void attribute_device_launched_records(tracefile::ProcessFile& p);

// Each graph of the process instantiated for launch from the device ("pid 12 exec 3 (2 nodes)"):
// CUPTI records nothing its device launches run.
void add_device_launched(const tracefile::ProcessFile& p, std::vector<std::string>& out);

// A process whose recording stopped at the size limit (a "limit" recording event) still wrote the
// launches whose records it refused: those after its last launch with a record are left out, with
// a note, rather than analysed as launches whose every node lost its record.
void drop_launches_after_limit(tracefile::ProcessFile& p);

// Every graph chunk of a process: its slots, the resolver of record node ids, fingerprints.
[[nodiscard]] ProcessIndex index_process(const tracefile::ProcessFile& p);
// Gives every graph of every process its shape class: graphs whose hash collides but whose shapes
// differ get classes of their own, so a collision can never lay one graph's records on another.
void classify_shapes(const std::vector<tracefile::ProcessFile>& files, std::vector<ProcessIndex>& index);

// A graph's child-graph and conditional bodies for the analysis: each owner (which leaves no
// record) passes its predecessors on to its bodies' roots, and each body's leaves (through nested
// owners, to their own leaves) come before the owner's successors. Node indices of the graph.
struct BodyStructure {
  std::vector<std::pair<int, int>> edges;  // added to the graph's own edges
  std::vector<NestedNode> nesting;         // [node], empty when nothing is nested
};
[[nodiscard]] BodyStructure body_structure(const tracefile::TracedGraph& g);

// One variant to be: processes that are ranks of one replay of one graph (and version), or one
// process's graph whose topology is unknown.
struct Group {
  std::vector<std::size_t> processes;  // in rank order
  std::size_t template_process = 0;    // whose graph chunk gives the nodes
  int template_graph = -1;             // -1: no graph chunk
  std::uint32_t version = 0;
  bool topology = true;
  std::string reason;  // no topology: why
  std::uint64_t first_start = std::numeric_limits<std::uint64_t>::max();
};

// The nodes of a graph without topology: each distinct (stream, name, k-th occurrence on the
// stream within a launch) in order of first appearance. Its records get `node` set; `replay` is
// set by the caller.
void stream_nodes(std::vector<ActivityRecord>& records, LayerGraph& graph, std::vector<NestedNode>& nesting,
                  int device);

// Per nccl kernel node of a variant with several ranks: arrival skew and transfer time.
[[nodiscard]] std::vector<CollectiveSummary> summarize_collectives(const VariantRun& v,
                                                                   const tracefile::TracedGraph& tmpl, int ranks,
                                                                   int replays);

// The same as notes of the variant ("collective X (node 3): arrival skew r0 ..."), appended to `out`.
void add_collectives(VariantRun& v, const tracefile::TracedGraph& tmpl, int ranks, int replays,
                     std::vector<CollectiveSummary>& out);

// A process's row of the processes table: what its file says (the merge adds the counts it finds).
[[nodiscard]] TracedProcess process_row(const tracefile::ProcessFile& f);

// The hosts, CUPTI version and earliest start (ISO 8601 UTC) of the processes.
void trace_environment(const std::vector<tracefile::ProcessFile>& files, RunEnvironment& env);

// Every variant's timestamped records as one shared list of outside work, labelled "pid N: kernel
// (graph-K)"; each variant counts those of processes other than its own (`processes`:
// [variant][rank] the merge's process index, `pids` the same as pids).
void add_outside_work(std::vector<VariantRun>& variants, const std::vector<std::vector<int>>& processes,
                      const std::vector<std::vector<std::int64_t>>& pids);

}  // namespace tpgraph::trace_merge
