// The bookkeeping of an output folder that write_run_folder swaps outputs into: which files are
// tpgraph's outputs (a manifest beside them), and what a writer that is gone left behind (a staging
// folder, a half-finished swap). Every function here expects the caller to hold the folder's lock
// (FolderLock): the lock is what tells a dead writer's leftovers from a live writer's work.
#pragma once
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace tpgraph {

// The manifest's name in an output folder, and the prefix of a writer's staging folder there
// (followed by the writer's pid).
inline constexpr std::string_view kOutputManifest = ".tpgraph-outputs";
inline constexpr std::string_view kStagingPrefix = ".tpgraph-staging-";

// What the manifest says: the input the outputs were computed from (a records.json or a trace
// folder, as an absolute path) and the output files, relative to the folder.
struct OutputManifest {
  bool present = false;  // false when there is none, or it cannot be read as a manifest
  std::string source;
  std::vector<std::string> files;
};

// Reads `dir`'s manifest; one that is missing, larger than a manifest can be, or not a manifest
// reads as absent (never an error: the folder is then treated as holding no outputs of ours).
[[nodiscard]] OutputManifest read_output_manifest(const std::filesystem::path& dir);
// Writes `dir`'s manifest (atomically).
void write_output_manifest(const std::filesystem::path& dir, const OutputManifest& manifest);

// Removes the staging folders (and a manifest's temporary file) of writers that are gone: under the
// folder's lock no live writer has one. Returns how many were removed.
int remove_dead_writers_leftovers(const std::filesystem::path& dir);

// Whether everything in `dir` is the manifest or an output it lists (folders holding only such
// files): the folder holds nothing a new analysis of the same input could not recreate.
[[nodiscard]] bool holds_only_listed_outputs(const std::filesystem::path& dir, const OutputManifest& manifest);

// Removes the outputs `old_files` lists that `new_files` does not, and the folders that leaves
// empty. Only paths that name an output file (report.md, report.json, or <folder>/trace.json,
// timeline.svg, graph.dot, cuda-graph.dot) as a regular file are removed, whatever else a manifest
// lists: it may have come with a folder from someone else.
void remove_outputs_not_rewritten(const std::filesystem::path& dir, const std::vector<std::string>& old_files,
                                  const std::vector<std::string>& new_files);

}  // namespace tpgraph
