// From the record files of a traced program (`tpgraph trace`, one file per process) to the model the
// timeline analysis reads: a RunData whose variants are the program's graphs. GPU-free.
//
// How processes become ranks: only where something ties them. A graph holding a collective (a
// kernel named nccl*), or any graph under --ranks-together, is matched across processes by
// shape (node types and kernel names in node order, and the edges), and launches by ordinal
// (the k-th launch of that graph in each process): one variant whose ranks are those processes, in
// RANK order (else pid order), its graph the disjoint union of each process's copy, node labels
// prefixed "r<rank>.". Any other graph is its own process's variant: independent processes are
// never put on one replay, and what the others ran on the same GPU is outside work (contention
// named "pid N: kernel"). A process that launches two executables of one graph has their launches
// ordered by correlation id (launch order). An executable updated after instantiation (a graph
// chunk per version) gives a variant per version, named graph-N.vK, so no median mixes them.
//
// Completeness: every record reaches a node, or a graph without topology (its chunk says why, or an
// executable was launched whose chunk never came): such a graph's records become a per-stream
// timeline (nodes are what ran, no edges), or it is counted unmatched; RunData::trace says it.
//
// Time base: CUPTI timestamps of processes on one host share CLOCK_REALTIME. Files from several
// hosts (different boot ids) are refused unless the clocks are declared synced, or aligned on the
// ends of matched collectives (kernels named nccl*, matched by graph and node position): each
// host's offset is the median difference of those ends to the first host's, and the residual (median
// |difference - offset|) is reported.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/records/run_data.hpp"
#include "core/records/trace_file.hpp"

namespace tpgraph {

enum class ClockPolicy { same_host, assume_synced, align_collectives };

struct TraceMergeOptions {
  ClockPolicy clocks = ClockPolicy::same_host;
  bool ranks_together = false;  // every process launching a graph is a rank of one replay of it
};

// Per process: what it was and what it recorded, for the report.
struct TracedProcess {
  std::string file;
  std::string host;
  std::int64_t pid = 0;
  std::optional<int> rank;
  std::string cuda_visible_devices;
  std::vector<std::string> device_uuids;
  bool complete = false;
  std::string truncation;
  std::uint64_t records = 0;
  std::uint64_t graph_records = 0;
  std::uint64_t eager_records = 0;
  double eager_busy_us = 0;  // summed durations of eager kernels/copies
  std::uint64_t dropped = 0;
  std::uint64_t unmatched = 0;  // graph records whose node id reached no known node
  int graphs = 0;
  std::uint64_t launches = 0;
  double clock_offset_us = 0;     // added to this process's timestamps (alignment)
  tracefile::SelfCost self_cost;  // tpgraph's own work in it (its file's cost chunk)
};

// A collective node matched across ranks in one variant.
struct CollectiveSummary {
  std::string variant;
  std::string name;                     // the kernel name
  int node_index = 0;                   // position in each process's graph
  std::vector<double> arrival_skew_us;  // [rank] median over replays of (latest start - its start)
  double transfer_us = 0;               // median over replays of (earliest end - latest start)
};

struct TracedRun {
  RunData run;
  std::vector<TracedProcess> processes;
  std::vector<CollectiveSummary> collectives;
  std::vector<std::string> notes;  // whole-trace findings (clock policy, truncated files, ...)
  std::string clock_text;          // how the processes were put on one time base
};

// A trace folder's record files as read, and what was set aside: an entry named *.tpgt that is not
// a regular file (a symbolic link to nothing, a folder, a FIFO, a device), or a file that is empty or
// holds part of the header alone (a process killed at start), each named in a note.
struct TraceFolder {
  std::vector<tracefile::ProcessFile> files;
  std::vector<std::string> notes;
  std::filesystem::path procs_dir;
  std::int64_t file_bytes = 0;  // the record files' sizes, in all
};

// Reads every *.tpgt file in `procs_dir` (sorted by name). InputError, naming the file, for one that
// is not a record file (another file's bytes), or has records but no meta chunk (no host or pid to
// place them).
[[nodiscard]] TraceFolder read_process_files(const std::filesystem::path& procs_dir);

// Merges the files into one model. InputError when files of several hosts are given with
// ClockPolicy::same_host, or when alignment finds no collective to align on.
[[nodiscard]] TracedRun merge_traces(std::vector<tracefile::ProcessFile> files, const TraceMergeOptions& options);
// The same for a folder: its notes join the whole-trace findings.
[[nodiscard]] TracedRun merge_trace_folder(TraceFolder folder, const TraceMergeOptions& options);

// The trace folder's cost.json (trace_cost.hpp); a folder without one (traced before tpgraph
// calibrated) or with an unreadable one reads as not measured, saying why. Never throws for the file.
[[nodiscard]] CostCalibration read_cost_file(const std::filesystem::path& trace_dir);
// Written atomically into the trace folder.
void write_cost_file(const std::filesystem::path& trace_dir, const CostCalibration& c);
// Sets traced.run.tracing_cost: `calibration` (cost.json, or made just now by `trace`) and every
// process's cost chunk.
void attach_tracing_cost(TracedRun& traced, CostCalibration calibration);

// The hash that buckets graphs by shape before they are compared in full. A test hook: a fuzz
// harness or a unit test makes every graph collide to show that grouping does not rest on it;
// nullptr restores the fingerprint. Not thread-safe; set it before merging.
using GraphHash = std::uint64_t (*)(const tracefile::TracedGraph&);
void set_graph_hash_for_testing(GraphHash hash);

// "name<...>(args)" -> "name": the last component of a demangled kernel name, for node labels.
[[nodiscard]] std::string short_kernel_name(std::string_view demangled);

// A trace folder holds procs/ with record files; a run folder holds records.json.
[[nodiscard]] bool is_trace_folder(const std::filesystem::path& dir);

// The trace's own report section (markdown): processes, files, clock policy, collectives, eager work.
[[nodiscard]] std::string render_trace_summary(const TracedRun& traced);

}  // namespace tpgraph
