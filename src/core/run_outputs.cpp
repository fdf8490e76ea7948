#include "core/run_outputs.hpp"

#include <fmt/core.h>

#include <array>
#include <chrono>
#include <ctime>

#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "core/dot.hpp"
#include "core/report.hpp"
#include "core/svg.hpp"
#include "core/trace.hpp"

namespace tpgraph {

std::vector<std::filesystem::path> write_run_outputs(const RunData& run, const RunAnalysis& analysis,
                                                     const std::filesystem::path& dir, bool write_records) {
  std::vector<std::filesystem::path> files;
  const auto write = [&](const std::filesystem::path& path, const std::string& text) {
    write_file_atomically(path, text);
    files.push_back(path);
  };
  // The raw records first: if anything later fails, the run can still be analysed again.
  if (write_records) write(dir / "records.json", run_data_to_json(run));
  const auto folders = variant_folder_names(run);
  for (std::size_t i = 0; i < run.variants.size(); ++i) {
    const VariantRun& v = run.variants[i];
    const std::filesystem::path sub = dir / folders[i];
    write(sub / "trace.json", render_chrome_trace(run, analysis, i));
    write(sub / "timeline.svg", render_timeline_svg(run, analysis, i));
    write(sub / "graph.dot", layer_graph_dot(v.graph, v.scenario, &analysis.variants[i]));
    if (!v.cuda_graph_dot.empty()) write(sub / "cuda-graph.dot", v.cuda_graph_dot);
  }
  write(dir / "report.md", render_report_markdown(run, analysis));
  write(dir / "report.json", render_report_json(run, analysis));
  return files;
}

std::filesystem::path resolve_records_path(const std::filesystem::path& run) {
  std::error_code ec;
  const auto status = std::filesystem::status(run, ec);
  if (ec || !std::filesystem::exists(status))
    throw InputError(fmt::format("{}: no such file or folder (expected a run folder or its records.json)", run.string()));
  if (std::filesystem::is_directory(status)) {
    const auto file = run / "records.json";
    if (!std::filesystem::is_regular_file(file, ec))
      throw InputError(fmt::format("{}: no records.json in this folder (expected a folder written by 'tpgraph run')",
                                   run.string()));
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
