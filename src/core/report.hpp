// The run's report in three siblings that say the same thing: the terminal table, report.md and
// report.json. Each reads the run (what was recorded) and its analysis (what it means); none
// recomputes anything, so `tpgraph analyze` reproduces them byte for byte.
#pragma once
#include <string>
#include <vector>

#include "core/run_data.hpp"
#include "core/timeline.hpp"

namespace tpgraph {

// Bumped whenever a field of report.json changes meaning or disappears.
inline constexpr int kReportSchemaVersion = 1;

// The folder name of each variant's outputs: its scenario name made safe for a path, unique.
[[nodiscard]] std::vector<std::string> variant_folder_names(const RunData& run);

// "GPU 0: NVIDIA H200" (the name when the run recorded it).
[[nodiscard]] std::string device_label(const RunEnvironment& env, int ordinal);
// "" unless ranks share a GPU; else a sentence saying which ranks share which GPU and that the
// verdict then means stream concurrency on one GPU, not two GPUs.
[[nodiscard]] std::string shared_gpu_note(const RunEnvironment& env, const VariantTimeline& v);
// "" when collection was clean; else a banner line naming every problem.
[[nodiscard]] std::string collection_banner(const VariantTimeline& v);

[[nodiscard]] std::string render_terminal_table(const RunData& run, const RunAnalysis& analysis);
[[nodiscard]] std::string render_report_markdown(const RunData& run, const RunAnalysis& analysis);
[[nodiscard]] std::string render_report_json(const RunData& run, const RunAnalysis& analysis);

}  // namespace tpgraph
