// The trace folder around the merge (traced_run.cpp): reading procs/, the checks on what the record
// files hold before and after the merge, and the trace's own report section.
#include "core/records/trace_folder.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <fstream>
#include <limits>

#include "core/base/atomic_file.hpp"
#include "core/base/error.hpp"
#include "core/base/json_input.hpp"
#include "core/numerics/geometry.hpp"
#include "core/records/analysis_memory.hpp"
#include "core/records/trace_cost.hpp"

namespace tpgraph {

namespace fs = std::filesystem;
using tracefile::ProcessFile;
using tracefile::TracedGraph;

namespace trace_folder {

// A graph whose edges close a cycle has no order to analyse it in: it is taken out of its process
// (its records then match no node and are counted so), and the note names the file, so one
// corrupt graph does not refuse every other process's.
void set_aside_cyclic_graphs(std::vector<ProcessFile>& files, std::vector<std::string>& notes) {
  for (auto& f : files) {
    std::erase_if(f.graphs, [&](const TracedGraph& g) {
      std::vector<int> indegree(g.nodes.size(), 0);
      std::vector<std::vector<int>> succ(g.nodes.size());
      for (const auto& [a, b] : g.edges) {
        succ[static_cast<std::size_t>(a)].push_back(b);
        ++indegree[static_cast<std::size_t>(b)];
      }
      std::vector<int> ready;
      for (std::size_t i = 0; i < g.nodes.size(); ++i)
        if (indegree[i] == 0) ready.push_back(static_cast<int>(i));
      std::size_t ordered = 0;
      while (!ready.empty()) {
        const auto n = static_cast<std::size_t>(ready.back());
        ready.pop_back();
        ++ordered;
        for (const int m : succ[n])
          if (--indegree[static_cast<std::size_t>(m)] == 0) ready.push_back(m);
      }
      if (ordered == g.nodes.size()) return false;
      notes.push_back(
          fmt::format("{}: graph exec {} (version {}) has a cycle in its edges: it is not analysed and "
                      "its records count as matching no node",
                      tracefile::printable(f.path), g.exec, g.version));
      return true;
    });
  }
}

// The rule records.json's reader applies (body_of_records), for a trace folder: a timestamped
// record further than kStrayRecordNs from the body of every graph's records would become the
// trace's time base; it is counted and set aside, and the note says how many and where.
void set_aside_stray_records(RunData& run, std::vector<std::string>& notes) {
  std::vector<std::uint64_t> starts;
  for (const auto& v : run.variants)
    for (const auto& a : v.records)
      if (a.start_ns != 0 && a.end_ns >= a.start_ns) starts.push_back(a.start_ns);
  const auto body = body_of_records(std::move(starts));
  if (!body) return;
  for (auto& v : run.variants) {
    std::uint64_t earliest = std::numeric_limits<std::uint64_t>::max(), latest = 0;
    const auto stray = [&](const ActivityRecord& a) {
      if (a.start_ns == 0 || a.end_ns < a.start_ns || !body->stray(a.start_ns)) return false;
      earliest = std::min(earliest, a.start_ns);
      latest = std::max(latest, a.start_ns);
      return true;
    };
    const auto count = std::erase_if(v.records, stray);
    if (count > 0)
      notes.push_back(fmt::format(
          "{}: {} record{} set aside: they start more than an hour from the trace's other records ({} to {} ns; "
          "these at {} to {} ns) and would move its time base",
          v.scenario.name, count, count == 1 ? "" : "s", body->first, body->last, earliest, latest));
  }
}

void check_merged(RunData& run, std::vector<std::string>& notes) {
  set_aside_stray_records(run, notes);
  check_analysis_slots(run, "the trace");
}

void copy_notes_into_graphs(TracedRun& out) {
  // Every graph repeats the whole-trace notes up to kCopiedNotesBytes: notes of a megabyte copied
  // into each of a thousand graphs would take a gigabyte; the rest are in the trace's own section.
  constexpr std::size_t kCopiedNotesBytes = 64 << 10;
  std::size_t copied = 0, copied_bytes = 0;
  while (copied < out.notes.size() && copied_bytes + out.notes[copied].size() <= kCopiedNotesBytes)
    copied_bytes += out.notes[copied++].size();
  for (auto& v : out.run.variants) {
    v.notes.insert(v.notes.end(), out.notes.begin(), out.notes.begin() + static_cast<std::ptrdiff_t>(copied));
    if (copied < out.notes.size())
      v.notes.push_back(fmt::format("{} more whole-trace notes: see the traced processes section of report.md",
                                    out.notes.size() - copied));
    if (!out.clock_text.empty()) v.notes.push_back("clocks: " + out.clock_text);
  }
}

}  // namespace trace_folder

bool is_trace_folder(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir / tracefile::kProcsFolder, ec) && !fs::exists(dir / "records.json", ec);
}

namespace {

// What an entry named like a record file is when it is not one to read, or "".
std::string not_a_record_file(const fs::directory_entry& entry) {
  std::error_code ec;
  const fs::file_status link = entry.symlink_status(ec);
  if (ec) return fmt::format("cannot be inspected ({})", ec.message());
  const fs::file_status target = entry.status(ec);
  if (fs::is_symlink(link) && (ec || !fs::exists(target))) return "a symbolic link to nothing";
  if (ec) return fmt::format("cannot be inspected ({})", ec.message());
  if (fs::is_regular_file(target)) return "";
  if (fs::is_directory(target)) return "a folder";
  if (fs::is_fifo(target)) return "a FIFO";
  if (fs::is_block_file(target) || fs::is_character_file(target)) return "a device";
  if (fs::is_socket(target)) return "a socket";
  return "not a regular file";
}

}  // namespace

TraceFolder read_process_files(const fs::path& procs_dir) {
  const std::string folder = tracefile::printable(procs_dir.string());
  std::error_code ec;
  if (!fs::is_directory(procs_dir, ec)) throw InputError(fmt::format("{}: not a folder of trace record files", folder));
  TraceFolder out;
  std::vector<fs::path> paths;
  fs::directory_iterator it(procs_dir, ec);
  // Each entry is judged on its own (no error code carried from one entry to the next), so what is
  // read and what is refused does not depend on the order the folder lists them in.
  for (; !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const fs::directory_entry& entry = *it;
    if (entry.path().extension() != tracefile::kSuffix) continue;
    const std::string why = not_a_record_file(entry);
    if (why.empty()) {
      paths.push_back(entry.path());
    } else {
      out.notes.push_back(
          fmt::format("{}: {}, not a record file (skipped)", tracefile::printable(entry.path().string()), why));
    }
  }
  if (ec) throw InputError(fmt::format("{}: cannot be listed: {}", folder, ec.message()));
  std::sort(paths.begin(), paths.end());
  std::sort(out.notes.begin(), out.notes.end());
  std::int64_t file_bytes = 0;
  for (const auto& p : paths) {
    const auto size = fs::file_size(p, ec);
    if (!ec) file_bytes += static_cast<std::int64_t>(std::min<std::uintmax_t>(size, std::uintmax_t{1} << 52));
  }
  check_trace_analysis_fits(procs_dir, static_cast<int>(paths.size()), file_bytes, available_host_memory());
  out.procs_dir = procs_dir;
  out.file_bytes = file_bytes;
  out.files.reserve(paths.size());
  for (const auto& p : paths) {
    const std::string name = tracefile::printable(p.string());
    const auto size = fs::file_size(p, ec);
    // A process killed before it wrote its header leaves nothing, or part of the magic.
    if (!ec && size < tracefile::kMagic.size()) {
      std::string head(static_cast<std::size_t>(size), '\0');
      std::ifstream(p, std::ios::binary).read(head.data(), static_cast<std::streamsize>(head.size()));
      if (tracefile::kMagic.substr(0, head.size()) == head) {
        out.notes.push_back(fmt::format("{}: {} (the process ended before writing its header; skipped)", name,
                                        size == 0 ? "empty" : fmt::format("{} bytes", size)));
        continue;
      }
    }
    tracefile::ProcessFile f = tracefile::read_process_file(p.string());
    if (!f.has_meta) {
      if (f.records.empty() && f.graphs.empty()) {
        out.notes.push_back(
            fmt::format("{}: no meta chunk and no records (the process ended at start; skipped)", name));
        continue;
      }
      throw InputError(fmt::format(
          "{}: no meta chunk (host, pid) before its records, so its process cannot be placed among the others; "
          "accepted: record files as `tpgraph trace` writes them, which begin with one",
          name));
    }
    out.files.push_back(std::move(f));
  }
  return out;
}

TracedRun merge_trace_folder(TraceFolder folder, const TraceMergeOptions& options) {
  const int files = static_cast<int>(folder.files.size());
  TracedRun out = merge_traces(std::move(folder.files), options);
  check_trace_analysis_fits(folder.procs_dir, files, folder.file_bytes, available_host_memory(),
                            unrecorded_slots(out.run));
  out.notes.insert(out.notes.begin(), folder.notes.begin(), folder.notes.end());
  for (auto& v : out.run.variants) v.notes.insert(v.notes.end(), folder.notes.begin(), folder.notes.end());
  return out;
}

CostCalibration read_cost_file(const std::filesystem::path& trace_dir) {
  const std::filesystem::path path = trace_dir / kCostFile;
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
    return cost_not_measured("the trace folder has no cost.json (traced by a tpgraph that did not calibrate)");
  try {
    return parse_cost_file(read_regular_file(path, "cost file", 1 << 16), kCostFile);
  } catch (const InputError& e) {
    return cost_not_measured(e.what());
  }
}

void write_cost_file(const std::filesystem::path& trace_dir, const CostCalibration& c) {
  write_file_atomically(trace_dir / kCostFile, cost_file_json(c));
}

void attach_tracing_cost(TracedRun& traced, CostCalibration calibration) {
  TracingCost cost;
  cost.calibration = std::move(calibration);
  for (const auto& p : traced.processes) cost.processes.push_back({p.pid, p.self_cost});
  traced.run.tracing_cost = std::move(cost);
}

std::string render_trace_summary(const TracedRun& t) {
  std::string out = "## Traced processes\n\n";
  out +=
      "| process | host | RANK | GPUs | file | records | graph / eager | eager busy µs | graphs | launches | dropped | unmatched |\n";
  out += "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  for (const auto& p : t.processes) {
    std::string uuids;
    for (const auto& u : p.device_uuids) uuids += (uuids.empty() ? "" : " ") + (u.size() > 12 ? u.substr(0, 12) : u);
    out += fmt::format("| pid {} | {} | {} | {} | {} | {} | {} / {} | {:.1f} | {} | {} | {} | {} |\n", p.pid, p.host,
                       p.rank ? std::to_string(*p.rank) : "-", uuids.empty() ? "-" : uuids,
                       p.complete ? "complete" : "TRUNCATED", p.records, p.graph_records, p.eager_records,
                       p.eager_busy_us, p.graphs, p.launches, p.dropped, p.unmatched);
  }
  out += "\n";
  if (!t.clock_text.empty()) out += fmt::format("Clocks: {}.\n\n", t.clock_text);
  if (!t.collectives.empty()) {
    out +=
        "## Collectives\n\n| graph | kernel | node | arrival skew per rank (µs) | transfer µs |\n| --- | --- | --- | --- | --- |\n";
    for (const auto& c : t.collectives) {
      std::string skew;
      for (std::size_t k = 0; k < c.arrival_skew_us.size(); ++k)
        skew += fmt::format("{}r{} {:.1f}", k ? ", " : "", k, c.arrival_skew_us[k]);
      out += fmt::format("| {} | {} | {} | {} | {:.1f} |\n", c.variant, short_kernel_name(c.name), c.node_index, skew,
                         c.transfer_us);
    }
    out += "\n";
  }
  for (const auto& n : t.notes) out += fmt::format("- {}\n", n);
  return out;
}

}  // namespace tpgraph
