#include "core/records/traced_run.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "core/base/error.hpp"
#include "core/base/stats.hpp"
#include "core/numerics/geometry.hpp"
#include "core/records/record_join.hpp"
#include "core/records/traced_merge.hpp"

namespace tpgraph {

namespace fs = std::filesystem;
using tracefile::ProcessFile;
using tracefile::TracedGraph;

std::string short_kernel_name(std::string_view demangled) {
  std::string_view s = demangled;
  // Drop the parameter list: the parenthesis that closes at the end, matched backwards (a name may
  // hold other parentheses: "(anonymous namespace)::f").
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (std::size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        if (i > 0) s = s.substr(0, i);
        break;
      }
    }
  }
  // Drop template arguments.
  std::string out;
  int depth = 0;
  for (const char c : s) {
    if (c == '<') {
      ++depth;
      continue;
    }
    if (c == '>') {
      if (depth > 0) --depth;
      continue;
    }
    if (depth == 0) out.push_back(c);
  }
  if (const auto colon = out.rfind("::"); colon != std::string::npos) out = out.substr(colon + 2);
  if (const auto space = out.rfind(' '); space != std::string::npos) out = out.substr(space + 1);
  std::string clean;
  for (const char c : out)
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') clean.push_back(c);
  if (clean.size() > 48) clean.resize(48);
  return clean.empty() ? std::string("kernel") : clean;
}

bool is_trace_folder(const fs::path& dir) {
  std::error_code ec;
  return fs::is_directory(dir / "procs", ec) && !fs::exists(dir / "records.json", ec);
}

std::vector<ProcessFile> read_process_files(const fs::path& procs_dir) {
  std::error_code ec;
  if (!fs::is_directory(procs_dir, ec))
    throw InputError(fmt::format("{}: not a folder of trace record files", procs_dir.string()));
  std::vector<fs::path> paths;
  for (const auto& entry : fs::directory_iterator(procs_dir, ec)) {
    if (entry.path().extension() == tracefile::kSuffix && entry.is_regular_file(ec)) paths.push_back(entry.path());
  }
  if (ec) throw InputError(fmt::format("{}: cannot be listed: {}", procs_dir.string(), ec.message()));
  std::sort(paths.begin(), paths.end());
  std::int64_t file_bytes = 0;
  for (const auto& p : paths) {
    const auto size = fs::file_size(p, ec);
    if (!ec) file_bytes += static_cast<std::int64_t>(std::min<std::uintmax_t>(size, std::uintmax_t{1} << 52));
  }
  check_trace_analysis_fits(procs_dir, static_cast<int>(paths.size()), file_bytes, available_host_memory());
  std::vector<ProcessFile> out;
  out.reserve(paths.size());
  for (const auto& p : paths) out.push_back(tracefile::read_process_file(p.string()));
  return out;
}

std::int64_t trace_analysis_memory(std::int64_t file_bytes) {
  constexpr std::int64_t kProcess = std::int64_t{256} << 20;
  return file_bytes / 2 * 7 + kProcess;  // 3.5x the files
}

void check_trace_analysis_fits(const fs::path& procs_dir, int files, std::int64_t file_bytes, std::int64_t available) {
  const std::int64_t needed = trace_analysis_memory(file_bytes);
  if (available < 0 || needed <= available) return;
  throw InputError(
      fmt::format("{}: {} record file{} of {} in all; analysing them takes about {} of host memory and {} is "
                  "available; accepted: record files whose analysis fits in memory (analyze the trace folder on "
                  "a machine with more, or trace fewer replays)",
                  procs_dir.string(), files, files == 1 ? "" : "s", format_bytes(file_bytes), format_bytes(needed),
                  format_bytes(available)));
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
