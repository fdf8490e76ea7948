#include "core/report/run_outputs.hpp"

#include <fmt/core.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <ctime>
#include <fstream>
#include <optional>
#include <system_error>

#include "core/base/atomic_file.hpp"
#include "core/base/error.hpp"
#include "core/report/dot.hpp"
#include "core/report/output_folder.hpp"
#include "core/report/report.hpp"
#include "core/report/svg.hpp"
#include "core/report/trace.hpp"

namespace tpgraph {

std::vector<std::filesystem::path> write_run_outputs(const RunData& run, const RunAnalysis& analysis,
                                                     const std::filesystem::path& dir, bool write_records,
                                                     const OutputSelection& selection) {
  std::vector<std::filesystem::path> files;
  const auto write = [&](const std::filesystem::path& path, const std::string& text) {
    write_file_atomically(path, text);
    files.push_back(path);
  };
  // The raw records first: if anything later fails, the run can still be analysed again.
  if (write_records) write(dir / "records.json", run_data_to_json(run));
  const auto folders = variant_folder_names(run);
  for (const auto& folder : folders) {
    // A variant folder named like a top-level file would take its place (the readers refuse such
    // names; a RunData built in code is checked here).
    if (std::find(kRunFolderFiles.begin(), kRunFolderFiles.end(), folder) != kRunFolderFiles.end())
      throw InputError(
          fmt::format("variant '{}': its folder would be named like the run's {}; rename the variant", folder, folder));
  }
  for (std::size_t i = 0; i < run.variants.size(); ++i) {
    const VariantRun& v = run.variants[i];
    const std::filesystem::path sub = dir / folders[i];
    if (selection.trace) write(sub / "trace.json", render_chrome_trace(run, analysis, i));
    if (selection.timeline) write(sub / "timeline.svg", render_timeline_svg(run, analysis, i));
    write(sub / "graph.dot", layer_graph_dot(v.graph, v.scenario, &analysis.variants[i]));
    if (!v.cuda_graph_dot.empty()) write(sub / "cuda-graph.dot", v.cuda_graph_dot);
  }
  std::string report = render_report_markdown(run, analysis);
  if (!selection.report_appendix.empty()) report += "\n" + selection.report_appendix;
  write(dir / "report.md", report);
  write_file_atomically(dir / "report.json", [&](const WriteSink& sink) { write_report_json(run, analysis, sink); });
  files.push_back(dir / "report.json");
  return files;
}

namespace {

// Whether two files hold the same bytes, read a block at a time.
bool same_bytes(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::ifstream fa(a, std::ios::binary);
  std::ifstream fb(b, std::ios::binary);
  if (!fa || !fb) return false;
  std::array<char, 1 << 16> ba{};
  std::array<char, 1 << 16> bb{};
  while (fa && fb) {
    fa.read(ba.data(), ba.size());
    fb.read(bb.data(), bb.size());
    if (fa.gcount() != fb.gcount() || !std::equal(ba.begin(), ba.begin() + fa.gcount(), bb.begin())) return false;
  }
  return fa.eof() && fb.eof();
}

// What a non-empty --out holds, for the message: a couple of names.
std::string some_entries(const std::filesystem::path& dir) {
  std::string out;
  int shown = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    if (shown == 2) {
      out += ", ...";
      break;
    }
    out += fmt::format("{}{}", shown == 0 ? "" : ", ", e.path().filename().string());
    ++shown;
  }
  return out;
}

}  // namespace

bool same_folder(const std::filesystem::path& a, const std::filesystem::path& b) {
  std::error_code ec;
  const bool same = std::filesystem::equivalent(a, b, ec);
  return !ec && same;
}

namespace {

// The outputs' paths relative to the staging folder they were written into.
std::vector<std::string> relative_names(const std::vector<std::filesystem::path>& staged,
                                        const std::filesystem::path& staging) {
  std::vector<std::string> names;
  for (const auto& p : staged)
    if (p.filename() != "records.json") names.push_back(std::filesystem::relative(p, staging).string());
  return names;
}

// Renames each staged file into `dir`, reports last (a folder whose report.md is new has every file
// it speaks of). SIGINT, SIGTERM and SIGHUP wait until every file has moved: the renames take
// moments, and a folder left half old, half new would be refused by the next analyze.
std::vector<std::filesystem::path> move_into_place(std::vector<std::filesystem::path> staged,
                                                   const std::filesystem::path& staging,
                                                   const std::filesystem::path& dir) {
  std::stable_partition(staged.begin(), staged.end(), [&](const std::filesystem::path& p) {
    return p.parent_path() != staging || p.filename() == "records.json";
  });
  sigset_t stop{};
  sigset_t before{};
  sigemptyset(&stop);
  for (const int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, s);
  ::pthread_sigmask(SIG_BLOCK, &stop, &before);
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& from : staged) {
    const auto to = dir / std::filesystem::relative(from, staging);
    std::filesystem::create_directories(to.parent_path(), ec);
    std::filesystem::rename(from, to, ec);
    if (ec) {
      ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
      throw std::system_error(ec, fmt::format("{}: cannot move the finished file into place ({} of {} files moved, "
                                              "the folder mixes old and new outputs: analyze it again)",
                                              to.string(), files.size(), staged.size()));
    }
    files.push_back(to);
  }
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  return files;
}

}  // namespace

std::vector<std::filesystem::path> write_run_folder(const RunData& run, const RunAnalysis& analysis,
                                                    const std::filesystem::path& dir, bool in_place,
                                                    const OutputSelection& selection,
                                                    const std::filesystem::path& records_file,
                                                    const FolderLock* held_lock) {
  std::error_code ec;
  const auto status = std::filesystem::symlink_status(dir, ec);
  if (std::filesystem::exists(status) && !std::filesystem::is_directory(status))
    throw InputError(fmt::format("{}: exists and is not a folder; accepted: a new or empty folder", dir.string()));
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError(fmt::format("{}: cannot create the folder: {}", dir.string(), ec.message()));
  std::optional<FolderLock> own_lock;
  if (held_lock == nullptr || !held_lock->covers(dir)) own_lock.emplace(dir);
  // Under the lock, a staging folder here is one whose writer is gone (killed, out of memory).
  (void)remove_dead_writers_leftovers(dir);
  const OutputManifest previous = read_output_manifest(dir);
  // The input as one spelling of its path (./trace and trace are the same source).
  std::error_code path_ec;
  const std::string source =
      std::filesystem::weakly_canonical(records_file.empty() ? selection.source : records_file, path_ec).string();

  const std::filesystem::path staging = dir / fmt::format("{}{}", kStagingPrefix, static_cast<long>(::getpid()));
  const RemoveOnSignal remove_if_interrupted(staging);
  const auto remove_staging = [&] {
    std::error_code ignored;
    std::filesystem::remove_all(staging, ignored);
  };
  bool write_records = !in_place && selection.records;
  // A folder holding nothing but the outputs of this same input (an earlier analyze into it, even
  // one stopped midway) is written again.
  const bool our_outputs = previous.present && previous.source == source && holds_only_listed_outputs(dir, previous);
  if (!in_place && !our_outputs && !std::filesystem::is_empty(dir, ec)) {
    if (!selection.records)
      throw InputError(
          fmt::format("{}: the folder is not empty (it holds {}); accepted: a new or empty folder, "
                      "or the trace folder itself (analyze DIR without --out)",
                      dir.string(), some_entries(dir)));
    // A folder that already holds this very run (an earlier analyze into it) is analysed in place;
    // anything else may be another run's raw records, which no GPU-free command can recreate.
    std::filesystem::path ours = records_file;
    if (ours.empty()) {
      ours = staging / "records.json";
      write_file_atomically(ours, run_data_to_json(run));
    }
    const bool same = same_bytes(dir / "records.json", ours);
    if (records_file.empty()) remove_staging();
    if (!same)
      throw InputError(
          fmt::format("{}: the folder is not empty (it holds {}); accepted: a new or empty folder, "
                      "or the run's own folder (analyze RUN without --out)",
                      dir.string(), some_entries(dir)));
    write_records = false;
  }

  std::vector<std::filesystem::path> staged;
  try {
    const bool copy_records = write_records && !records_file.empty();
    if (copy_records) {
      std::filesystem::create_directories(staging);
      std::filesystem::copy_file(records_file, staging / "records.json");
      staged.push_back(staging / "records.json");
    }
    const auto written = write_run_outputs(run, analysis, staging, write_records && !copy_records, selection);
    staged.insert(staged.end(), written.begin(), written.end());
    // Before the first file moves, the manifest lists the old outputs and the new: however the swap
    // ends, every output in the folder is listed, and the next analyze recognises and clears it.
    OutputManifest listing{true, source, relative_names(staged, staging)};
    const std::vector<std::string> fresh = listing.files;
    for (const auto& f : previous.files)
      if (std::find(fresh.begin(), fresh.end(), f) == fresh.end()) listing.files.push_back(f);
    write_output_manifest(dir, listing);
    const auto files = move_into_place(staged, staging, dir);
    remove_staging();
    // Outputs of the previous analysis this one does not produce (a graph folder of a graph that
    // is gone, a trace.json under --no-trace) would read as part of this analysis.
    remove_outputs_not_rewritten(dir, previous.files, fresh);
    listing.files = fresh;
    write_output_manifest(dir, listing);
    return files;
  } catch (...) {
    remove_staging();
    throw;
  }
}

std::filesystem::path resolve_records_path(const std::filesystem::path& run) {
  std::error_code ec;
  const auto status = std::filesystem::status(run, ec);
  if (ec || !std::filesystem::exists(status))
    throw InputError(
        fmt::format("{}: no such file or folder (expected a run folder or its records.json)", run.string()));
  if (std::filesystem::is_directory(status)) {
    const auto file = run / "records.json";
    if (!std::filesystem::is_regular_file(file, ec))
      throw InputError(
          fmt::format("{}: no records.json in this folder (expected a folder written by 'tpgraph run')", run.string()));
    return file;
  }
  if (!std::filesystem::is_regular_file(status))
    throw InputError(fmt::format("{}: not a regular file (expected a run folder or its records.json)", run.string()));
  return run;
}

std::filesystem::path default_run_folder(const std::filesystem::path& runs_root) {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::array<char, 32> text{};
  const std::size_t n = std::strftime(text.data(), text.size(), "%Y%m%d-%H%M%S", &utc);
  return runs_root / std::string(text.data(), n);
}

}  // namespace tpgraph
