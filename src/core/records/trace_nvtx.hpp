// The nvtx chunk of the record file (trace_file.hpp holds the file's layout): the program's NVTX
// ranges as the injection library saw them opened and closed. Added within format version 1: a
// reader that predates it skips the chunk with a note, and files without it read as before.
//
// Payload (little-endian, binary: a server opens thousands of ranges a second):
//   u32 name count, then per name: u32 id (from 1), u32 length, the name's bytes
//   WireNvtx[] (32 bytes each) for the rest of the payload
// A name is written once per process, in the chunk of the first event that uses it; later chunks
// name it by id. Events are in the order the library took them (per thread, the call order).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/records/trace_file.hpp"

namespace tpgraph::tracefile {

// What a reader keeps of one file, whatever the file claims: events past the first kMaxNvtxEvents
// and names past the first kMaxNvtxNames are skipped with a note (the injection library keeps at
// most 1,048,576 opens per process, so a file it wrote stays within both).
inline constexpr std::size_t kMaxNvtxEvents = std::size_t{1} << 22;
inline constexpr std::size_t kMaxNvtxNames = std::size_t{1} << 16;

// --- writing (the injection library) ---
[[nodiscard]] std::string nvtx_chunk(const std::vector<std::pair<std::uint32_t, std::string>>& names,
                                     const std::vector<WireNvtx>& events);

// --- reading ---
// Adds one nvtx chunk to `log`; "" or what was wrong with it (what could be read is kept).
[[nodiscard]] std::string read_nvtx_chunk(std::string_view payload, NvtxLog& log);

}  // namespace tpgraph::tracefile
