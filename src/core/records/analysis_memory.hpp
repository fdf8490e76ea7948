// How much host memory analysing an input takes, from the input's size alone, and the checks that
// refuse an input before it is read when that is more than the host (or its cgroup) has. The
// estimates are upper bounds: tests/unit/test_memory_bound.cpp runs `tpgraph analyze` on the
// wide-graph, many-replay and large-ordinal inputs of both formats and holds its peak resident set
// under them. docs/robustness.md states the bounds.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string_view>

#include "core/records/run_data.hpp"

namespace tpgraph {

// The analysis holds a slot (some 60 bytes) per launch and node. Over all the graphs of an input
// together, the slots may be at most kSlotsPerRecord per record + kSlotsPerNode per node +
// kSlotFloor: an input cannot ask for more memory than its bytes justify, whether with one wide
// graph launched often or with many graphs launched at the floor each. InputError naming the
// graph with the most slots otherwise.
void check_analysis_slots(const RunData& run, std::string_view origin);

// A trace folder's record files of `file_bytes` in all: the records (64 bytes each in memory, 56
// on disk), one sample per node and replay (bounded per record by the merge's slot rule), the
// writers' buffers, and the process itself.
// `unrecorded_slots`: the slots of launches and nodes no record fills (unrecorded_slots(run),
// known once the files are read; 0 before), 160 bytes each.
[[nodiscard]] std::int64_t trace_analysis_memory(std::int64_t file_bytes, std::int64_t unrecorded_slots = 0);

// A records.json of `file_bytes`: the text, the parsed records (some 150 bytes of JSON and 100 of
// model each), one sample per node and replay, the writers' buffers and the process.
[[nodiscard]] std::int64_t run_analysis_memory(std::int64_t file_bytes, std::int64_t unrecorded_slots = 0);

// Over all graphs: launches x nodes beyond the records (a record fills a slot).
[[nodiscard]] std::int64_t unrecorded_slots(const RunData& run);

// InputError, naming the folder or file, its size, what is needed and what is available, when the
// estimate exceeds `available` bytes (available_host_memory(); unknown when negative).
// Both run once before the input is read (slots unknown) and again once it is parsed.
void check_trace_analysis_fits(const std::filesystem::path& procs_dir, int files, std::int64_t file_bytes,
                               std::int64_t available, std::int64_t unrecorded_slots = 0);
void check_run_analysis_fits(const std::filesystem::path& records_json, std::int64_t available,
                             std::int64_t unrecorded_slots = 0);

}  // namespace tpgraph
