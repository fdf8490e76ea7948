// Writes a run folder: records.json, report.md, report.json, and per variant <folder>/trace.json,
// timeline.svg, graph.dot and cuda-graph.dot. `tpgraph run` calls it after collecting;
// `tpgraph analyze` calls it on a loaded records.json. Every file is written under a temporary
// name and renamed, so a failure midway leaves no file that looks complete.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "core/run_data.hpp"
#include "core/timeline.hpp"

namespace tpgraph {

// Writes every output of `run` (analysed as `analysis`) into `dir`, created if needed, and returns
// the files written, in order. With `write_records` false the folder's records.json is left as it
// is (analyze over its own folder).
std::vector<std::filesystem::path> write_run_outputs(const RunData& run, const RunAnalysis& analysis,
                                                     const std::filesystem::path& dir, bool write_records = true);

// `run` names a run folder (holding records.json) or a records.json itself; returns the file.
// Anything else is an InputError naming the path and what is accepted.
[[nodiscard]] std::filesystem::path resolve_records_path(const std::filesystem::path& run);

// runs/<UTC date and time>, e.g. runs/20261202-101500: the folder `run` uses without --out.
[[nodiscard]] std::filesystem::path default_run_folder(const std::filesystem::path& runs_root = "runs");

}  // namespace tpgraph
