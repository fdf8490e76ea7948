// The run's report in three siblings that say the same thing: the terminal table, report.md and
// report.json. Each reads the run (what was recorded) and its analysis (what it means); none
// recomputes anything, so `tpgraph analyze` reproduces them byte for byte.
// One file per format (report_text.cpp, report_markdown.cpp, report_json.cpp); what they share
// lives in report_common.hpp, the tables in table.hpp.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/analysis/timeline.hpp"
#include "core/records/run_data.hpp"

namespace tpgraph {

// Bumped whenever a field of report.json changes meaning or disappears.
inline constexpr int kReportSchemaVersion = 2;

// The folder name of each variant's outputs: its scenario name made safe for a path, unique.
[[nodiscard]] std::vector<std::string> variant_folder_names(const RunData& run);

// "GPU 0: NVIDIA H200" (the name when the run recorded it).
[[nodiscard]] std::string device_label(const RunEnvironment& env, int ordinal);
// "" unless ranks share a GPU; else a sentence saying which ranks share which GPU and that the
// verdict then means stream concurrency on one GPU, not two GPUs.
[[nodiscard]] std::string shared_gpu_note(const RunEnvironment& env, const VariantTimeline& v);
// "" when collection was clean; else a banner line naming every problem.
[[nodiscard]] std::string collection_banner(const VariantTimeline& v);

// What decided the verdict and what the other overlap says, e.g. "PARTIAL on busy overlap 0.18
// (rank 1 shares the root's GPU: their kernels ran at the same time 18% of the time); window
// overlap 0.98 would say OVERLAPPED". Every output prints it.
[[nodiscard]] std::string verdict_basis_text(const VariantTimeline& v);
// A node's label, "replay start" for -1.
[[nodiscard]] std::string node_name(const LayerGraph& g, int node);
// "r0.gate", "r0.gate of another replay", "work matching no node".
[[nodiscard]] std::string occupant_name(const LayerGraph& g, const Occupant& o);
// "waited 732.1 µs: contention 730.0 (r0.gate 730.0), idle 2.1", and where arrival applies
// "; arrival 120.0 (r1.combine ended after r0.combine)". `ready_from` names the latter.
[[nodiscard]] std::string wait_parts_text(const LayerGraph& g, double wait_us, const WaitParts& parts, int ready_from);
// A node's typical wait (its median replay) in the form above, led by its label.
[[nodiscard]] std::string typical_wait_text(const LayerGraph& g, const VariantTimeline& v, const NodeWaitSummary& w);

// `tpgraph analyze RUN --replay N`: replay N of every variant in full (every node's start,
// duration, wait and its parts, the overlaps and the critical path). InputError when N is not a
// replay of the run.
[[nodiscard]] std::string render_replay_detail(const RunData& run, const RunAnalysis& analysis, int replay);

// A trace's first lines for the terminal: CLEAN / NOT CLEAN and why, graphs without topology,
// truncated files, the program's profiler, the rank rule, what tracing cost; "" for a run.
[[nodiscard]] std::string render_trace_heading(const RunData& run, const RunAnalysis& analysis);
[[nodiscard]] std::string render_terminal_table(const RunData& run, const RunAnalysis& analysis);
[[nodiscard]] std::string render_report_markdown(const RunData& run, const RunAnalysis& analysis);
[[nodiscard]] std::string render_report_json(const RunData& run, const RunAnalysis& analysis);
// The same text handed to `sink` piece by piece: the replay lists are never held whole.
void write_report_json(const RunData& run, const RunAnalysis& analysis,
                       const std::function<void(std::string_view)>& sink);

}  // namespace tpgraph
