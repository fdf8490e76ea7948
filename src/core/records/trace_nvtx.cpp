#include "core/records/trace_nvtx.hpp"

#include <cstring>

namespace tpgraph::tracefile {

std::string nvtx_chunk(const std::vector<std::pair<std::uint32_t, std::string>>& names,
                       const std::vector<WireNvtx>& events) {
  std::string payload;
  std::size_t bytes = 4 + events.size() * sizeof(WireNvtx);
  for (const auto& [id, text] : names) bytes += 8 + text.size();
  payload.reserve(bytes);
  put_u32(payload, static_cast<std::uint32_t>(names.size()));
  for (const auto& [id, text] : names) {
    put_u32(payload, id);
    put_u32(payload, static_cast<std::uint32_t>(text.size()));
    payload.append(text);
  }
  const std::size_t at = payload.size();
  payload.resize(at + events.size() * sizeof(WireNvtx));
  if (!events.empty()) std::memcpy(payload.data() + at, events.data(), events.size() * sizeof(WireNvtx));
  return chunk(ChunkType::nvtx, payload);
}

std::string read_nvtx_chunk(std::string_view payload, NvtxLog& log) {
  if (payload.size() < 4) return "an nvtx chunk shorter than its name count (skipped)";
  const std::uint32_t count = get_u32(payload, 0);
  std::size_t at = 4;
  std::string wrong;
  for (std::uint32_t i = 0; i < count; ++i) {
    if (payload.size() - at < 8) return "an nvtx chunk cut inside its names (skipped from there)";
    const std::uint32_t id = get_u32(payload, at);
    const std::uint32_t length = get_u32(payload, at + 4);
    at += 8;
    if (payload.size() - at < length) return "an nvtx chunk with a name longer than the chunk (skipped from there)";
    const std::string_view text = payload.substr(at, length);
    at += length;
    if (id == 0) {
      wrong = "nvtx names with id 0 (skipped)";
    } else if (log.names.size() >= kMaxNvtxNames && !log.names.contains(id)) {
      wrong = "nvtx names past the first 65536 of the file (skipped: their ranges are unnamed)";
    } else {
      log.names[id] = printable(text);
    }
  }
  const std::string_view rest = payload.substr(at);
  if (rest.size() % sizeof(WireNvtx) != 0) wrong = "an nvtx chunk with a partial event (its tail skipped)";
  const std::size_t n = rest.size() / sizeof(WireNvtx);
  for (std::size_t i = 0; i < n; ++i) {
    if (log.events.size() >= kMaxNvtxEvents) return "nvtx events past the first 4194304 of the file (skipped)";
    WireNvtx e;
    std::memcpy(&e, rest.data() + i * sizeof(WireNvtx), sizeof(WireNvtx));
    if (e.kind < static_cast<std::uint8_t>(NvtxKind::push) || e.kind > static_cast<std::uint8_t>(NvtxKind::end)) {
      wrong = "nvtx events of an unknown kind (skipped)";
      continue;
    }
    log.events.push_back(e);
  }
  return wrong;
}

}  // namespace tpgraph::tracefile
