#include "core/records/analysis_memory.hpp"

#include <fmt/core.h>

#include <algorithm>

#include "core/base/error.hpp"
#include "core/numerics/geometry.hpp"  // format_bytes

namespace tpgraph {

namespace {
constexpr std::int64_t kProcess = std::int64_t{256} << 20;  // the program, its libraries and fixed buffers
constexpr std::int64_t kUnrecordedSlot = 160;               // a slot's samples, its share of the writers
}  // namespace

std::int64_t trace_analysis_memory(std::int64_t file_bytes, std::int64_t unrecorded_slots) {
  return file_bytes / 2 * 7 + kUnrecordedSlot * unrecorded_slots + kProcess;
}

std::int64_t run_analysis_memory(std::int64_t file_bytes, std::int64_t unrecorded_slots) {
  return file_bytes * 8 + kUnrecordedSlot * unrecorded_slots + kProcess;
}

std::int64_t unrecorded_slots(const RunData& run) {
  std::int64_t out = 0;
  for (const auto& v : run.variants) {
    const auto slots =
        static_cast<std::int64_t>(std::max(v.scenario.replays, 0)) * static_cast<std::int64_t>(v.graph.nodes.size());
    out += std::max<std::int64_t>(0, slots - static_cast<std::int64_t>(v.records.size()));
  }
  return out;
}

void check_analysis_slots(const RunData& run, std::string_view origin) {
  std::uint64_t slots = 0, records = 0, nodes = 0;
  const VariantRun* widest = nullptr;
  std::uint64_t widest_slots = 0;
  for (const auto& v : run.variants) {
    const std::uint64_t s = static_cast<std::uint64_t>(std::max(v.scenario.replays, 0)) * v.graph.nodes.size();
    slots += s;
    records += v.records.size();
    nodes += v.graph.nodes.size();
    if (widest == nullptr || s > widest_slots) widest = &v, widest_slots = s;
  }
  if (widest == nullptr || slots <= kSlotsPerRecord * records + kSlotsPerNode * nodes + kSlotFloor) return;
  throw InputError(fmt::format(
      "{}: {} slots (launches x nodes) over {} graph{} with {} records and {} nodes, the most in {}: {} launches of a "
      "graph of {} nodes (all ranks) with {} records; analysing them takes a slot per launch and node, more than the "
      "input justifies; accepted: at most {} per record + {} per node + {} slots over all graphs",
      origin, slots, run.variants.size(), run.variants.size() == 1 ? "" : "s", records, nodes, widest->scenario.name,
      widest->scenario.replays, widest->graph.nodes.size(), widest->records.size(), kSlotsPerRecord, kSlotsPerNode,
      kSlotFloor));
}

void check_trace_analysis_fits(const std::filesystem::path& procs_dir, int files, std::int64_t file_bytes,
                               std::int64_t available, std::int64_t unrecorded_slots) {
  const std::int64_t needed = trace_analysis_memory(file_bytes, unrecorded_slots);
  if (available < 0 || needed <= available) return;
  throw InputError(
      fmt::format("{}: {} record file{} of {} in all; analysing them takes about {} of host memory and {} is "
                  "available; accepted: record files whose analysis fits in memory (analyze the trace folder on "
                  "a machine with more, or trace fewer replays)",
                  procs_dir.string(), files, files == 1 ? "" : "s", format_bytes(file_bytes), format_bytes(needed),
                  format_bytes(available)));
}

void check_run_analysis_fits(const std::filesystem::path& records_json, std::int64_t available,
                             std::int64_t unrecorded_slots) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(records_json, ec);
  if (ec) return;  // the reader says what is wrong with the file
  const auto bytes = static_cast<std::int64_t>(size);
  const std::int64_t needed = run_analysis_memory(bytes, unrecorded_slots);
  if (available < 0 || needed <= available) return;
  throw InputError(
      fmt::format("{}: a records file of {}; analysing it takes about {} of host memory and {} is available; accepted: "
                  "records whose analysis fits in memory (analyze the run on a machine with more)",
                  records_json.string(), format_bytes(bytes), format_bytes(needed), format_bytes(available)));
}

}  // namespace tpgraph
