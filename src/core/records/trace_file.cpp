#include "core/records/trace_file.hpp"

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "core/base/error.hpp"
#include "core/base/json_input.hpp"
#include "core/model/scenario.hpp"  // kMaxDevice
#include "core/records/trace_nvtx.hpp"
#include "core/records/trace_recording.hpp"

namespace tpgraph::tracefile {

using nlohmann::json;

namespace {

template <class Wire>
std::string array_chunk(ChunkType type, const std::vector<Wire>& items) {
  std::string payload(items.size() * sizeof(Wire), '\0');
  if (!items.empty()) std::memcpy(payload.data(), items.data(), payload.size());
  return chunk(type, payload);
}

// JSON text of a chunk; a payload that is not a JSON object is reported by the caller.
std::optional<json> parse_object(std::string_view payload) {
  // Nesting deeper than any chunk we write is refused by a linear scan first, so a hostile file
  // cannot make a later walk of the value (a dump, its destruction) recurse without bound. No parser
  // callback: nlohmann's callback parser is quadratic in an array of objects (a graph's nodes).
  constexpr std::size_t kMaxDepth = 16;
  try {
    check_json_depth(payload, "chunk", kMaxDepth);
  } catch (const InputError&) {
    return std::nullopt;
  }
  json j = json::parse(payload.begin(), payload.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  return j;
}

std::string string_field(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::optional<std::int64_t> int_field(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return it->get<std::int64_t>();
}

std::uint64_t uint_field(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) return 0;
  return it->get<std::uint64_t>();
}

std::optional<int> small_int(const json& j, const char* key) {
  const auto v = int_field(j, key);
  if (!v || *v < 0 || *v > std::numeric_limits<int>::max()) return std::nullopt;
  return static_cast<int>(*v);
}

// A device ordinal: a GPU index 0 to kMaxDevice as records.json accepts, so no per-process table
// indexed by ordinal can be sized by a hostile value; nullopt when absent or out of range.
std::optional<int> device_ordinal(const json& j, const char* key) {
  const auto v = small_int(j, key);
  return v && *v <= kMaxDevice ? v : std::nullopt;
}

// RANK and friends arrive as strings from the environment.
std::optional<int> env_int(const json& env, const char* key) {
  const std::string text = string_field(env, key);
  if (text.empty() || text.size() > 9) return std::nullopt;
  int v = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// The length in bytes of the well-formed UTF-8 sequence at the start of `text` (RFC 3629: no
// overlong forms, no surrogates, nothing past U+10FFFF), or 0 where none starts there.
std::size_t utf8_sequence(std::string_view text) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char b0 = byte(0);
  if (b0 < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80;
  unsigned char hi = 0xbf;  // the range of the second byte
  if (b0 >= 0xc2 && b0 <= 0xdf) {
    n = 2;
  } else if (b0 >= 0xe0 && b0 <= 0xef) {
    n = 3;
    if (b0 == 0xe0) lo = 0xa0;  // overlong
    if (b0 == 0xed) hi = 0x9f;  // surrogates
  } else if (b0 >= 0xf0 && b0 <= 0xf4) {
    n = 4;
    if (b0 == 0xf0) lo = 0x90;  // overlong
    if (b0 == 0xf4) hi = 0x8f;  // past U+10FFFF
  } else {
    return 0;
  }
  if (text.size() < n || byte(1) < lo || byte(1) > hi) return 0;
  for (std::size_t i = 2; i < n; ++i)
    if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
  return n;
}

}  // namespace

std::string printable(std::string_view text) {
  constexpr std::size_t kMaxName = 4096;
  std::string out;
  out.reserve(std::min(text.size(), kMaxName));
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_sequence(text.substr(i));
    if (out.size() + std::max<std::size_t>(n, 1) > kMaxName) break;  // never half a character
    const auto b0 = static_cast<unsigned char>(text[i]);
    // C1 controls (U+0080..U+009F) are two bytes, 0xC2 then 0x80..0x9F.
    const bool control =
        n == 0 || b0 < 0x20 || b0 == 0x7f || (n == 2 && b0 == 0xc2 && static_cast<unsigned char>(text[i + 1]) < 0xa0);
    if (control) {
      out += '?';
    } else {
      out.append(text.substr(i, n));
    }
    i += std::max<std::size_t>(n, 1);
  }
  return out;
}

namespace {

bool known_node_type(std::string_view t) {
  for (const auto k : kNodeTypes)
    if (k == t) return true;
  return false;
}

ConditionalKind conditional_kind(std::string_view k) {
  if (k == "if") return ConditionalKind::if_;
  if (k == "while") return ConditionalKind::while_;
  if (k == "switch") return ConditionalKind::switch_;
  return ConditionalKind::none;
}

class FileReader {
 public:
  FileReader(std::string_view bytes, std::string_view origin) : bytes_(bytes), origin_(origin) {
    out_.path = std::string(origin);
  }

  ProcessFile read() {
    const std::size_t header = kMagic.size() + 4;
    if (bytes_.size() < kMagic.size() || bytes_.substr(0, kMagic.size()) != kMagic)
      throw InputError(fmt::format("{}: not a tpgraph trace record file (no TPGTRACE header)", origin_));
    if (bytes_.size() < header) {
      out_.truncation = "cut inside the file header";
      return std::move(out_);
    }
    if (const std::uint32_t v = get_u32(bytes_, kMagic.size()); v != kVersion)
      throw InputError(
          fmt::format("{}: trace record file version {} (this tpgraph reads version {})", origin_, v, kVersion));
    out_.records.reserve(records_in(header));
    std::size_t at = header;
    while (at < bytes_.size()) {
      if (out_.complete) {
        warn_once("data after the footer ignored");
        break;
      }
      if (bytes_.size() - at < 8) {
        out_.truncation = "cut inside a chunk header";
        break;
      }
      const std::uint32_t type = get_u32(bytes_, at);
      const std::uint32_t length = get_u32(bytes_, at + 4);
      if (length > kMaxChunkBytes) {
        out_.truncation = fmt::format("a chunk claims {} bytes (more than the {} accepted): the rest is unreadable",
                                      length, kMaxChunkBytes);
        break;
      }
      if (bytes_.size() - at - 8 < length) {
        out_.truncation = fmt::format("cut inside a {} chunk", type_name(type));
        break;
      }
      chunk(type, bytes_.substr(at + 8, length));
      at += 8 + std::size_t{length};
    }
    if (!out_.complete && out_.truncation.empty()) out_.truncation = "no footer (the process did not end cleanly)";
    return std::move(out_);
  }

 private:
  // Records in the whole chunks from `at` on, counted from the chunk headers alone: the record list
  // is allocated once (ten million records grown by doubling would take twice their size).
  [[nodiscard]] std::size_t records_in(std::size_t at) const {
    std::size_t count = 0;
    while (bytes_.size() - at >= 8) {
      const std::uint32_t type = get_u32(bytes_, at);
      const std::uint32_t length = get_u32(bytes_, at + 4);
      if (length > kMaxChunkBytes || bytes_.size() - at - 8 < length) break;
      if (static_cast<ChunkType>(type) == ChunkType::records) count += length / sizeof(WireRecord);
      at += 8 + std::size_t{length};
    }
    return count;
  }

  static std::string_view type_name(std::uint32_t type) {
    switch (static_cast<ChunkType>(type)) {
      case ChunkType::meta: return "meta";
      case ChunkType::device: return "device";
      case ChunkType::name: return "name";
      case ChunkType::graph: return "graph";
      case ChunkType::records: return "records";
      case ChunkType::launches: return "launches";
      case ChunkType::note: return "note";
      case ChunkType::footer: return "footer";
      case ChunkType::recording: return "recording";
      case ChunkType::nvtx: return "nvtx";
      case ChunkType::cost: return "cost";
    }
    return "unknown";
  }

  void warn_once(const std::string& text) {
    if (warned_.insert(text).second) out_.notes.push_back(fmt::format("{}: {}", origin_, text));
  }

  void chunk(std::uint32_t type, std::string_view payload) {
    switch (static_cast<ChunkType>(type)) {
      case ChunkType::meta: return meta(payload);
      case ChunkType::device: return device(payload);
      case ChunkType::name: return name(payload);
      case ChunkType::graph: return graph(payload);
      case ChunkType::records: return records(payload);
      case ChunkType::launches: return launches(payload);
      case ChunkType::note: out_.notes.push_back(printable(payload)); return;
      case ChunkType::footer: return footer(payload);
      case ChunkType::recording:
        if (const std::string wrong = read_recording_chunk(payload, out_.recording); !wrong.empty()) warn_once(wrong);
        return;
      case ChunkType::nvtx:
        if (const std::string wrong = read_nvtx_chunk(payload, out_.nvtx); !wrong.empty()) warn_once(wrong);
        return;
      case ChunkType::cost:
        if (const std::string wrong = read_self_cost_chunk(payload, out_.self_cost); !wrong.empty()) warn_once(wrong);
        return;
    }
    warn_once(fmt::format("chunks of unknown type {} skipped", type));
  }

  void meta(std::string_view payload) {
    const auto j = parse_object(payload);
    if (!j) return warn_once("a meta chunk is not a JSON object (skipped)");
    out_.has_meta = true;
    out_.host = printable(string_field(*j, "host"));
    out_.boot_id = printable(string_field(*j, "boot_id"));
    out_.pid = int_field(*j, "pid").value_or(0);
    out_.ppid = int_field(*j, "ppid").value_or(0);
    out_.exe = printable(string_field(*j, "exe"));
    out_.cupti_version = small_int(*j, "cupti_version").value_or(0);
    out_.started_ns = uint_field(*j, "started_ns");
    if (const auto env = j->find("env"); env != j->end() && env->is_object()) {
      out_.rank = env_int(*env, "RANK");
      out_.local_rank = env_int(*env, "LOCAL_RANK");
      out_.world_size = env_int(*env, "WORLD_SIZE");
      out_.cuda_visible_devices = printable(string_field(*env, "CUDA_VISIBLE_DEVICES"));
    }
  }

  void device(std::string_view payload) {
    const auto j = parse_object(payload);
    if (!j) return warn_once("a device chunk is not a JSON object (skipped)");
    TracedDevice d;
    const auto ordinal = device_ordinal(*j, "ordinal");
    if (!ordinal && j->contains("ordinal"))
      return warn_once(fmt::format("a device chunk with an ordinal outside 0 to {} (skipped)", kMaxDevice));
    d.ordinal = ordinal.value_or(0);
    d.name = printable(string_field(*j, "name"));
    d.uuid = printable(string_field(*j, "uuid"));
    d.pci_bus_id = printable(string_field(*j, "pci_bus_id"));
    for (auto& existing : out_.devices)
      if (existing.ordinal == d.ordinal) {
        existing = std::move(d);
        return;
      }
    out_.devices.push_back(std::move(d));
  }

  void name(std::string_view payload) {
    if (payload.size() < 4) return warn_once("a name chunk shorter than its id (skipped)");
    const std::uint32_t id = get_u32(payload, 0);
    if (id == 0) return warn_once("a name chunk with id 0 (skipped)");
    names_[id] = printable(payload.substr(4));
  }

  void graph(std::string_view payload) {
    const auto j = parse_object(payload);
    if (!j) return warn_once("a graph chunk is not a JSON object (skipped)");
    TracedGraph g;
    const auto exec = int_field(*j, "exec");
    if (!exec || *exec <= 0 || *exec > std::numeric_limits<std::uint32_t>::max())
      return warn_once("a graph chunk without a valid exec number (skipped)");
    g.exec = static_cast<std::uint32_t>(*exec);
    const auto version = int_field(*j, "version").value_or(0);
    if (version < 0 || version > std::numeric_limits<std::uint32_t>::max())
      return warn_once("a graph chunk with a version out of range (skipped)");
    g.version = static_cast<std::uint32_t>(version);
    g.graph_id = uint_field(*j, "graph_id");
    if (const auto error = j->find("topology_error"); error != j->end())
      g.topology_error = error->is_string() && !error->get_ref<const std::string&>().empty()
                             ? printable(error->get_ref<const std::string&>())
                             : std::string("the topology was marked unreadable");
    if (const auto origin = j->find("origin"); origin != j->end()) g.origin = read_origin(origin->dump());
    if (const auto device = j->find("device_launch"); device != j->end())
      g.device_launch = device->is_boolean() && device->get<bool>();
    const auto nodes = j->find("nodes");
    if (nodes == j->end() || !nodes->is_array()) return warn_once("a graph chunk without nodes (skipped)");
    g.nodes.reserve(nodes->size());
    for (const auto& n : *nodes) {
      if (!n.is_object()) return warn_once("a graph chunk with a node that is not an object (skipped)");
      GraphNodeInfo info;
      info.id = uint_field(n, "id");
      info.type = string_field(n, "type");
      if (!known_node_type(info.type)) info.type = "other";
      info.name = printable(string_field(n, "name"));
      info.bytes = std::max<std::int64_t>(int_field(n, "bytes").value_or(0), 0);
      info.device = device_ordinal(n, "device").value_or(-1);
      if (info.device < 0 && n.contains("device"))
        warn_once(fmt::format("node devices outside 0 to {} read as unknown", kMaxDevice));
      // A body node names its owner, which comes before it: bodies are listed after their node.
      if (const auto parent = int_field(n, "parent"); parent && *parent >= 0) {
        if (*parent >= static_cast<std::int64_t>(g.nodes.size()))
          return warn_once("a graph chunk with a body node whose owner does not come before it (skipped)");
        info.parent = static_cast<int>(*parent);
        const auto body = int_field(n, "body").value_or(0);
        const GraphNodeInfo& owner = g.nodes[static_cast<std::size_t>(info.parent)];
        const int owner_bodies = owner.type == "conditional" ? owner.bodies : owner.type == "graph" ? 1 : 0;
        if (body < 0 || body >= owner_bodies)
          return warn_once("a graph chunk with a body node outside its owner's bodies (skipped)");
        info.body = static_cast<int>(body);
      }
      if (info.type == "conditional") {
        const auto cond = n.find("cond");
        if (cond == n.end() || !cond->is_object())
          return warn_once("a graph chunk with a conditional node without its kind (skipped)");
        info.conditional = conditional_kind(string_field(*cond, "kind"));
        const auto bodies = int_field(*cond, "bodies").value_or(0);
        if (info.conditional == ConditionalKind::none || bodies < 1 || bodies > (1 << 16))
          return warn_once("a graph chunk with a conditional node of unknown kind or body count (skipped)");
        info.bodies = static_cast<int>(bodies);
      }
      g.nodes.push_back(std::move(info));
    }
    const auto count = static_cast<std::int64_t>(g.nodes.size());
    const auto index_ok = [&](const json& v) {
      return v.is_number_integer() && v.get<std::int64_t>() >= 0 && v.get<std::int64_t>() < count;
    };
    if (const auto edges = j->find("edges"); edges != j->end() && edges->is_array()) {
      g.edges.reserve(edges->size());
      g.edge_data.reserve(edges->size());
      const auto byte_ok = [](const json& v) {
        return v.is_number_integer() && v.get<std::int64_t>() >= 0 && v.get<std::int64_t>() <= 255;
      };
      for (const auto& e : *edges) {
        if (!e.is_array() || (e.size() != 2 && e.size() != 5) || !index_ok(e[0]) || !index_ok(e[1]) || e[0] == e[1]) {
          warn_once("graph edges that name no node (skipped)");
          continue;
        }
        EdgeData data;
        if (e.size() == 5) {
          if (!byte_ok(e[2]) || !byte_ok(e[3]) || !byte_ok(e[4]) || e[2].get<int>() > 2) {
            warn_once("graph edges with edge data out of range (skipped)");
            continue;
          }
          data = {e[2].get<std::uint8_t>(), e[3].get<std::uint8_t>(), e[4].get<std::uint8_t>()};
        }
        g.edges.emplace_back(e[0].get<int>(), e[1].get<int>());
        g.edge_data.push_back(data);
      }
    }
    if (const auto clones = j->find("clones"); clones != j->end() && clones->is_array()) {
      g.clones.reserve(clones->size());
      for (const auto& c : *clones) {
        if (!c.is_array() || c.size() != 2 || !c[0].is_number_unsigned() || !index_ok(c[1])) {
          warn_once("graph clone entries that name no node (skipped)");
          continue;
        }
        g.clones.emplace_back(c[0].get<std::uint64_t>(), c[1].get<int>());
      }
    }
    out_.graphs.push_back(std::move(g));
  }

  void records(std::string_view payload) {
    if (payload.size() % sizeof(WireRecord) != 0) warn_once("a records chunk with a partial record (its tail skipped)");
    const std::size_t n = payload.size() / sizeof(WireRecord);
    // Grow geometrically: reserving size + n per chunk would copy every record at every chunk.
    if (out_.records.capacity() < out_.records.size() + n)
      out_.records.reserve(std::max(out_.records.size() + n, 2 * out_.records.capacity()));
    for (std::size_t i = 0; i < n; ++i) {
      WireRecord w;
      std::memcpy(&w, payload.data() + i * sizeof(WireRecord), sizeof(WireRecord));
      if (w.kind > static_cast<std::uint8_t>(ActivityKind::memset)) {
        warn_once("records of an unknown kind skipped");
        continue;
      }
      ActivityRecord a;
      a.kind = static_cast<ActivityKind>(w.kind);
      a.start_ns = w.start_ns;
      a.end_ns = w.end_ns;
      a.device = static_cast<std::int16_t>(w.device);
      if (w.device > static_cast<std::uint32_t>(kMaxDevice)) {
        warn_once(fmt::format("record devices outside 0 to {} read as unknown", kMaxDevice));
        a.device = -1;
      }
      a.stream_id = w.stream_id;
      a.correlation_id = w.correlation_id;
      a.graph_id = w.graph_id;
      a.graph_node_id = w.graph_node_id;
      a.bytes = w.bytes > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())
                    ? std::numeric_limits<std::int64_t>::max()
                    : static_cast<std::int64_t>(w.bytes);
      // Graph records too: in a graph without topology the record's name is all that says what ran.
      if (w.name_id != 0) {
        if (const auto it = names_.find(w.name_id); it != names_.end()) a.name = it->second;
      }
      out_.records.push_back(std::move(a));
    }
  }

  void launches(std::string_view payload) {
    if (payload.size() % sizeof(WireLaunch) != 0) warn_once("a launches chunk with a partial entry (its tail skipped)");
    const std::size_t n = payload.size() / sizeof(WireLaunch);
    const std::size_t first = out_.launches.size();
    out_.launches.resize(first + n);
    if (n > 0) std::memcpy(out_.launches.data() + first, payload.data(), n * sizeof(WireLaunch));
  }

  void footer(std::string_view payload) {
    const auto j = parse_object(payload);
    if (!j) {
      warn_once("the footer is not a JSON object");
      return;
    }
    out_.complete = true;
    out_.footer_records = uint_field(*j, "records");
    out_.dropped = uint_field(*j, "dropped");
    out_.end_ns = uint_field(*j, "end_ns");
  }

  std::string_view bytes_;
  std::string_view origin_;
  ProcessFile out_;
  std::unordered_map<std::uint32_t, RecordName> names_;
  std::unordered_set<std::string> warned_;
};

}  // namespace

std::string file_header() {
  std::string out(kMagic);
  put_u32(out, kVersion);
  return out;
}

std::string uuid_text(const char (&bytes)[16]) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text = "GPU-";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    const auto b = static_cast<unsigned char>(bytes[i]);
    text += kHex[b >> 4];
    text += kHex[b & 0xf];
  }
  return text;
}

std::string chunk(ChunkType type, std::string_view payload) {
  std::string out;
  out.reserve(8 + payload.size());
  put_u32(out, static_cast<std::uint32_t>(type));
  put_u32(out, static_cast<std::uint32_t>(payload.size()));
  out.append(payload);
  return out;
}

std::string name_chunk(std::uint32_t id, std::string_view name) {
  std::string payload;
  put_u32(payload, id);
  payload.append(name);
  return chunk(ChunkType::name, payload);
}

std::string records_chunk(const std::vector<WireRecord>& records) { return array_chunk(ChunkType::records, records); }

std::string launches_chunk(const std::vector<WireLaunch>& launches) {
  return array_chunk(ChunkType::launches, launches);
}

ProcessFile parse_process_file(std::string_view bytes, std::string_view origin) {
  return FileReader(bytes, origin).read();
}

ProcessFile read_process_file(const std::string& path_bytes) {
  // The file's name as every message and output carries it: a name is the traced program's too.
  const std::string path = printable(path_bytes);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path_bytes, ec))
    throw InputError(fmt::format("{}: not a regular file (a trace record file is expected)", path));
  std::ifstream in(path_bytes, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot be opened", path));
  const auto size = std::filesystem::file_size(path_bytes, ec);
  if (ec) throw InputError(fmt::format("{}: its size cannot be read: {}", path, ec.message()));
  std::string bytes(static_cast<std::size_t>(size), '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  bytes.resize(static_cast<std::size_t>(in.gcount()));  // a file still being written may be shorter
  return parse_process_file(bytes, path);
}

}  // namespace tpgraph::tracefile
