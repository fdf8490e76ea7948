// The record file's content for servers (trace_file.hpp holds the file's layout): the recording
// chunk and a graph chunk's origin. Both were added within format version 1 and are optional, so
// files written before them read as before.
//
// recording chunk, JSON, one object per chunk, one of
//   {"policy": "<Options::describe()>"}                         once, at initialisation
//   {"event": "open"|"close"|"dump"|"limit", "at_ns": T, "why": "delay elapsed"}
//   {"counts": [[exec, seen, in_window, recorded], ...], "filtered": n, "evicted": n,
//    "transitions_left_out": n (optional: openings and closings past the first 64, not written)}   at exit
// graph chunk, key "origin": {"at": "capture"|"instantiation", "nvtx": [outermost first],
//   "stack": ["frame", ...] (the capture site first)}
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/records/trace_file.hpp"

namespace tpgraph::tracefile {

// --- writing (the injection library) ---
[[nodiscard]] std::string recording_policy_chunk(std::string_view policy);
[[nodiscard]] std::string recording_event_chunk(std::string_view event, std::uint64_t at_ns, std::string_view why);
[[nodiscard]] std::string recording_counts_chunk(const std::vector<RecordingCount>& counts, std::uint64_t filtered,
                                                 std::uint64_t evicted, std::uint64_t transitions_left_out = 0);
// The "origin" value of a graph chunk, as JSON text.
[[nodiscard]] std::string origin_json(const GraphOrigin& origin);

// --- reading ---
// Adds one recording chunk to `log`; "" or what was wrong with it (the chunk is then skipped).
[[nodiscard]] std::string read_recording_chunk(std::string_view payload, RecordingLog& log);
// A graph chunk's "origin" value (JSON text of it); an origin of the wrong shape reads as none.
[[nodiscard]] GraphOrigin read_origin(std::string_view origin_json_text);

// --- the report ---
// What a process recorded, for the report's header: the policy, when the window opened and closed
// (seconds after the process started), launches recorded of those made, dumps, where the size limit
// stopped recording. Empty when the process recorded everything and reached no limit.
[[nodiscard]] std::vector<std::string> recording_lines(const ProcessFile& file);
// A graph's name for the report: where it was captured (the capture site, the NVTX ranges open),
// its node count, first and last kernel, and `fingerprint` (the same in two runs of one program).
[[nodiscard]] std::string graph_identity(const TracedGraph& graph, std::uint64_t fingerprint);
// The capture site alone ("server_like.py:41 capture"), or "" when none was recorded.
[[nodiscard]] std::string capture_site_text(const TracedGraph& graph);

// Bounds of what is kept of an origin (a hostile file, a deep Python stack).
inline constexpr std::size_t kMaxOriginFrames = 16;
inline constexpr std::size_t kMaxRecordingEvents = 100000;

}  // namespace tpgraph::tracefile
