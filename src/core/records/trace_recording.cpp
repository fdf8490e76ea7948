#include "core/records/trace_recording.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <limits>
#include <optional>

#include "core/base/error.hpp"
#include "core/base/json_input.hpp"

namespace tpgraph::tracefile {

using nlohmann::json;

namespace {

std::optional<json> object_of(std::string_view text) {
  try {
    check_json_depth(text, "chunk", 8);
  } catch (const InputError&) {
    return std::nullopt;
  }
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

std::vector<std::string> strings_of(const json& j, const char* key) {
  std::vector<std::string> out;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return out;
  for (const auto& v : *it) {
    if (out.size() == kMaxOriginFrames) break;
    if (v.is_string()) out.push_back(printable(v.get_ref<const std::string&>()));
  }
  return out;
}

std::uint64_t unsigned_of(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

}  // namespace

std::string recording_policy_chunk(std::string_view policy) {
  return chunk(ChunkType::recording, json{{"policy", std::string(policy)}}.dump());
}

std::string recording_event_chunk(std::string_view event, std::uint64_t at_ns, std::string_view why) {
  return chunk(ChunkType::recording,
               json{{"event", std::string(event)}, {"at_ns", at_ns}, {"why", std::string(why)}}.dump());
}

std::string recording_counts_chunk(const std::vector<RecordingCount>& counts, std::uint64_t filtered,
                                   std::uint64_t evicted, std::uint64_t transitions_left_out) {
  json rows = json::array();
  for (const auto& c : counts) rows.push_back({c.exec, c.seen, c.in_window, c.recorded});
  json j{{"counts", rows}, {"filtered", filtered}, {"evicted", evicted}};
  if (transitions_left_out > 0) j["transitions_left_out"] = transitions_left_out;
  return chunk(ChunkType::recording, j.dump());
}

std::string origin_json(const GraphOrigin& origin) {
  return json{{"at", origin.at}, {"nvtx", origin.nvtx}, {"stack", origin.stack}}.dump();
}

std::string read_recording_chunk(std::string_view payload, RecordingLog& log) {
  const auto j = object_of(payload);
  if (!j) return "a recording chunk is not a JSON object (skipped)";
  if (const auto p = j->find("policy"); p != j->end()) {
    if (!p->is_string()) return "a recording chunk's policy is not text (skipped)";
    log.policy = printable(p->get_ref<const std::string&>());
    return {};
  }
  if (const auto e = j->find("event"); e != j->end()) {
    if (!e->is_string()) return "a recording event is not text (skipped)";
    const std::string& name = e->get_ref<const std::string&>();
    if (name != "open" && name != "close" && name != "dump" && name != "limit")
      return "a recording event of unknown kind (skipped)";
    // The size limit's event is kept past the bound: the header must say where recording stopped.
    if (log.events.size() >= kMaxRecordingEvents && name != "limit")
      return "recording events past the first 100000 (skipped)";
    const auto why = j->find("why");
    log.events.push_back({name, unsigned_of(*j, "at_ns"),
                          why != j->end() && why->is_string() ? printable(why->get_ref<const std::string&>()) : ""});
    return {};
  }
  if (const auto c = j->find("counts"); c != j->end()) {
    if (!c->is_array()) return "a recording chunk's counts are not a list (skipped)";
    std::vector<RecordingCount> counts;
    for (const auto& row : *c) {
      if (!row.is_array() || row.size() != 4) return "a recording count is not [exec, seen, in_window, recorded]";
      for (const auto& v : row)
        if (!v.is_number_unsigned()) return "a recording count is not [exec, seen, in_window, recorded]";
      const auto exec = row[0].get<std::uint64_t>();
      if (exec > std::numeric_limits<std::uint32_t>::max()) return "a recording count names an exec out of range";
      counts.push_back({static_cast<std::uint32_t>(exec), row[1].get<std::uint64_t>(), row[2].get<std::uint64_t>(),
                        row[3].get<std::uint64_t>()});
    }
    log.counts = std::move(counts);
    log.filtered = unsigned_of(*j, "filtered");
    log.evicted = unsigned_of(*j, "evicted");
    log.transitions_left_out = unsigned_of(*j, "transitions_left_out");
    return {};
  }
  return "a recording chunk of unknown content (skipped)";
}

GraphOrigin read_origin(std::string_view text) {
  GraphOrigin out;
  const auto j = object_of(text);
  if (!j) return out;
  const auto at = j->find("at");
  if (at == j->end() || !at->is_string()) return out;
  const std::string& where = at->get_ref<const std::string&>();
  if (where != "capture" && where != "instantiation") return out;
  out.at = where;
  out.nvtx = strings_of(*j, "nvtx");
  out.stack = strings_of(*j, "stack");
  return out;
}

namespace {

double seconds_after(std::uint64_t at_ns, std::uint64_t start_ns) {
  return at_ns > start_ns ? static_cast<double>(at_ns - start_ns) / 1e9 : 0.0;
}

std::string launches_text(const RecordingLog& log) {
  std::uint64_t seen = 0, recorded = 0;
  for (const auto& c : log.counts) {
    seen += c.seen;
    recorded += c.recorded;
  }
  std::string out = fmt::format("{} of {} graph launches recorded", recorded, seen);
  std::string per;
  for (const auto& c : log.counts)
    if (c.exec != 0 && per.size() < 400)
      per += fmt::format("{}exec {} {}/{}", per.empty() ? "" : ", ", c.exec, c.recorded, c.seen);
  if (!per.empty()) out += " (" + per + ")";
  if (log.filtered > 0) out += fmt::format("; {} records of launches not recorded dropped", log.filtered);
  if (log.evicted > 0) out += fmt::format("; {} older launches left the flight recorder", log.evicted);
  return out;
}

}  // namespace

std::vector<std::string> recording_lines(const ProcessFile& f) {
  std::vector<std::string> out;
  const RecordingLog& log = f.recording;
  if (!log.policy.empty()) {
    std::string windows;
    std::size_t shown = 0;
    for (const auto& e : log.events) {
      if (e.event != "open" && e.event != "close") continue;
      if (++shown > 20) {
        windows += ", ...";
        break;
      }
      windows += fmt::format("{}{} at {:.3f} s ({})", windows.empty() ? "" : ", ", e.event == "open" ? "on" : "off",
                             seconds_after(e.at_ns, f.started_ns), e.why);
    }
    if (log.transitions_left_out > 0)
      windows += fmt::format("{}{} more switches on or off", windows.empty() ? "" : ", and ", log.transitions_left_out);
    std::string line = fmt::format("pid {}: recorded {}", f.pid, log.policy);
    if (!windows.empty()) line += "; " + windows;
    if (!log.counts.empty()) line += "; " + launches_text(log);
    out.push_back(line);
  }
  for (const auto& e : log.events) {
    if (e.event == "dump")
      out.push_back(fmt::format("pid {}: flight recorder written at {:.3f} s ({})", f.pid,
                                seconds_after(e.at_ns, f.started_ns), e.why));
    if (e.event == "limit")
      out.push_back(
          fmt::format("pid {}: RECORDING STOPPED at {:.3f} s: the file reached --max-file-size; later work "
                      "is not in the trace",
                      f.pid, seconds_after(e.at_ns, f.started_ns)));
  }
  return out;
}

std::string capture_site_text(const TracedGraph& g) {
  if (g.origin.stack.empty()) return {};
  std::string out;
  for (std::size_t i = 0; i < g.origin.stack.size() && i < 2; ++i) out += (i ? " <- " : "") + g.origin.stack[i];
  return out;
}

std::string graph_identity(const TracedGraph& g, std::uint64_t fingerprint) {
  std::string out;
  if (!g.origin.at.empty()) {
    const std::string site = capture_site_text(g);
    out += fmt::format("{} at {}", g.origin.at == "capture" ? "captured" : "instantiated",
                       site.empty() ? "a site inside the frameworks only" : site);
    std::string ranges;
    for (const auto& r : g.origin.nvtx) ranges += (ranges.empty() ? "" : " > ") + r;
    if (!ranges.empty()) out += "; NVTX " + ranges;
    out += "; ";
  }
  const GraphNodeInfo* first = nullptr;
  const GraphNodeInfo* last = nullptr;
  for (const auto& n : g.nodes)
    if (n.type == "kernel") {
      if (first == nullptr) first = &n;
      last = &n;
    }
  out += fmt::format("{} nodes", g.nodes.size());
  if (first != nullptr) out += fmt::format(", first kernel {}, last {}", first->name, last->name);
  return out + fmt::format("; fingerprint {:016x}", fingerprint);
}

}  // namespace tpgraph::tracefile
