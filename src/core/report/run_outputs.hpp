// Writes a run folder: records.json, report.md, report.json, and per variant <folder>/trace.json,
// timeline.svg, graph.dot and cuda-graph.dot. `tpgraph run` calls it after collecting;
// `tpgraph analyze` calls it on a loaded records.json. Every file is written under a temporary
// name and renamed, so a failure midway leaves no file that looks complete.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include "core/analysis/timeline.hpp"
#include "core/base/atomic_file.hpp"
#include "core/records/run_data.hpp"

namespace tpgraph {

// Which of the large per-variant files to write (trace.json can be ten times records.json).
struct OutputSelection {
  bool trace = true;     // <variant>/trace.json
  bool timeline = true;  // <variant>/timeline.svg
  // records.json; false for a trace folder, whose procs/ record files are the raw data.
  bool records = true;
  std::string report_appendix;  // markdown appended to report.md (a trace's processes and clocks)
  // The trace folder the outputs come from (a records.json names itself): recorded in the output
  // folder's manifest, so an analyze of the same input may write over its own earlier outputs.
  std::filesystem::path source;
};

// Writes every output of `run` (analysed as `analysis`) into `dir`, created if needed, and returns
// the files written, in order. With `write_records` false the folder's records.json is left as it
// is (analyze over its own folder). Each file is atomic; the folder as a whole is not (see
// write_run_folder).
std::vector<std::filesystem::path> write_run_outputs(const RunData& run, const RunAnalysis& analysis,
                                                     const std::filesystem::path& dir, bool write_records = true,
                                                     const OutputSelection& selection = {});

// Whether `a` and `b` name the same existing folder (false when either cannot be resolved): the
// `in_place` of write_run_folder when `a` is the output folder and `b` the folder read from.
[[nodiscard]] bool same_folder(const std::filesystem::path& a, const std::filesystem::path& b);

// `tpgraph analyze`'s writer: the run folder `dir` as a whole. Holds an exclusive lock on `dir`
// while it works (a second writer is refused, not interleaved; `held_lock`, when it is on `dir`, is
// one the caller already holds), removes what writers that are gone left there (staging folders),
// writes every output into a staging folder inside `dir` (removed on failure or SIGINT/SIGTERM) and
// only then renames each file into place, reports last, with those signals held off until the
// last file has moved. A manifest (output_folder.hpp) lists the outputs; the previous analysis's
// outputs that this one does not produce are removed. `dir` must be new or empty unless `in_place`
// (it is the run's own folder: records.json stays), it already holds this very records.json, or it
// holds only outputs of the same input (its manifest says so); otherwise an InputError says so,
// before anything is written. `records_file`, when given, is the records.json `run` was read from:
// it is copied byte for byte rather than written again from `run` (for a large run, writing it
// again would hold a second copy of every record as JSON). Returns the final paths.
std::vector<std::filesystem::path> write_run_folder(const RunData& run, const RunAnalysis& analysis,
                                                    const std::filesystem::path& dir, bool in_place,
                                                    const OutputSelection& selection = {},
                                                    const std::filesystem::path& records_file = {},
                                                    const FolderLock* held_lock = nullptr);

// `run` names a run folder (holding records.json) or a records.json itself; returns the file.
// Anything else is an InputError naming the path and what is accepted.
[[nodiscard]] std::filesystem::path resolve_records_path(const std::filesystem::path& run);

// runs/<UTC date and time>, e.g. runs/20261202-101500: the folder `run` uses without --out.
[[nodiscard]] std::filesystem::path default_run_folder(const std::filesystem::path& runs_root = "runs");

}  // namespace tpgraph
