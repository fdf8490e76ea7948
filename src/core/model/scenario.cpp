#include "core/model/scenario.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <sstream>

#include "core/base/error.hpp"
#include "core/base/json_input.hpp"
#include "core/base/whole_number.hpp"

namespace tpgraph {
namespace {

using nlohmann::json;

// A scenario file is a few hundred bytes; this only keeps a wrong path from being read whole.
constexpr std::uint64_t kMaxScenarioFileBytes = 1 << 20;

// One table per enum: the spelling in files and flags, in the order messages list them.
template <typename E>
struct Spelling {
  E value;
  std::string_view name;
};
constexpr std::array kPeerCopyNames{Spelling<PeerCopy>{PeerCopy::none, "none"},
                                    Spelling<PeerCopy>{PeerCopy::per_rank, "per-rank"},
                                    Spelling<PeerCopy>{PeerCopy::first, "first"}};
constexpr std::array kJoinNames{Spelling<JoinKind>{JoinKind::none, "none"}, Spelling<JoinKind>{JoinKind::copy, "copy"},
                                Spelling<JoinKind>{JoinKind::reduce, "reduce"}};
constexpr std::array kAllocNames{Spelling<AllocKind>{AllocKind::resident, "resident"},
                                 Spelling<AllocKind>{AllocKind::fresh, "fresh"}};
constexpr std::array kIssueNames{Spelling<IssueKind>{IssueKind::graph, "graph"},
                                 Spelling<IssueKind>{IssueKind::eager, "eager"}};
constexpr std::array kLayoutNames{Spelling<Layout>{Layout::v1, "v1"}, Spelling<Layout>{Layout::v2, "v2"}};
constexpr std::array kWeightsNames{Spelling<WeightsKind>{WeightsKind::random, "random"},
                                   Spelling<WeightsKind>{WeightsKind::zeros, "zeros"}};

template <typename E, std::size_t N>
std::string_view name_of(const std::array<Spelling<E>, N>& table, E v) {
  for (const auto& s : table)
    if (s.value == v) return s.name;
  return "?";
}

template <typename E, std::size_t N>
E value_of(const std::array<Spelling<E>, N>& table, std::string_view text, std::string_view where) {
  for (const auto& s : table)
    if (s.name == text) return s.value;
  std::vector<std::string_view> accepted;
  for (const auto& s : table) accepted.push_back(s.name);
  throw InputError(
      fmt::format("{}: '{}' is not accepted; accepted: {}", where, escaped_excerpt(text), fmt::join(accepted, ", ")));
}

constexpr std::array<std::string_view, 16> kFields{"name",      "description", "geometry",  "devices",
                                                   "replays",   "warmup",      "layers",    "peer_copy",
                                                   "copy_rows", "join",        "root_busy", "alloc",
                                                   "issue",     "layout",      "weights",   "seed"};
constexpr std::array<std::string_view, 6> kGeometryFields{"experts", "top_k", "hidden", "ff", "tokens", "ranks"};

bool contains(std::span<const std::string_view> names, std::string_view key) {
  return std::find(names.begin(), names.end(), key) != names.end();
}

// Reads one JSON object's fields into a Scenario, naming the file and field in every message.
class FieldReader {
 public:
  explicit FieldReader(std::string_view origin) : origin_(origin) {}

  [[nodiscard]] std::string where(std::string_view field) const {
    return fmt::format("{}: field '{}'", origin_, field);
  }

  [[noreturn]] void fail(std::string_view field, const std::string& what) const {
    throw InputError(fmt::format("{} {}", where(field), what));
  }

  [[noreturn]] void wrong_type(std::string_view field, std::string_view expected, const json& v) const {
    fail(field, fmt::format("must be {}, got {}", expected, describe_json(v)));
  }

  std::string text(std::string_view field, const json& v) const {
    if (!v.is_string()) wrong_type(field, "a string", v);
    return v.get<std::string>();
  }

  std::int64_t integer(std::string_view field, const json& v, std::int64_t lo, std::int64_t hi) const {
    if (!v.is_number_integer()) wrong_type(field, "an integer", v);
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(hi))
      fail(field, fmt::format("= {} is out of range; accepted: {} to {}", v.get<std::uint64_t>(), lo, hi));
    const auto x = v.get<std::int64_t>();
    if (x < lo || x > hi) fail(field, fmt::format("= {} is out of range; accepted: {} to {}", x, lo, hi));
    return x;
  }

  int int32(std::string_view field, const json& v) const {
    // The range proper is validate()'s job; this only keeps the value representable.
    return static_cast<int>(integer(field, v, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
  }

  template <typename E, std::size_t N>
  E choice(std::string_view field, const json& v, const std::array<Spelling<E>, N>& table) const {
    std::vector<std::string_view> accepted;
    for (const auto& s : table) accepted.push_back(s.name);
    if (!v.is_string()) wrong_type(field, fmt::format("a string, one of {}", fmt::join(accepted, ", ")), v);
    return value_of(table, v.get<std::string>(), where(field));
  }

  [[noreturn]] void unknown(std::string_view field, std::span<const std::string_view> accepted,
                            std::string_view hint) const {
    throw InputError(fmt::format("{}: unknown field '{}'{}; accepted: {}", origin_, escaped_excerpt(field), hint,
                                 fmt::join(accepted, ", ")));
  }

 private:
  std::string origin_;
};

void read_geometry(const FieldReader& in, const json& obj, Geometry& g) {
  if (!obj.is_object()) in.wrong_type("geometry", "an object", obj);
  for (const auto& [key, v] : obj.items()) {
    const std::string field = "geometry." + key;
    if (key == "experts") g.experts = in.int32(field, v);
    else if (key == "top_k") g.top_k = in.int32(field, v);
    else if (key == "hidden") g.hidden = in.int32(field, v);
    else if (key == "ff") g.ff = in.int32(field, v);
    else if (key == "tokens") g.tokens = in.int32(field, v);
    else if (key == "ranks") g.ranks = in.int32(field, v);
    else in.unknown(field, kGeometryFields, "");
  }
}

void read_field(const FieldReader& in, const std::string& key, const json& v, Scenario& s) {
  if (key == "name") s.name = in.text(key, v);
  else if (key == "description") s.description = in.text(key, v);
  else if (key == "geometry") read_geometry(in, v, s.geometry);
  else if (key == "devices") {
    if (!v.is_array()) in.wrong_type(key, "an array of GPU indices", v);
    s.devices.clear();
    for (std::size_t i = 0; i < v.size(); ++i) s.devices.push_back(in.int32(fmt::format("devices[{}]", i), v[i]));
  } else if (key == "replays") s.replays = in.int32(key, v);
  else if (key == "warmup") {
    if (v.is_string() && v.get<std::string>() == "auto") s.warmup = kWarmupAuto;
    else if (v.is_string()) in.wrong_type(key, "\"auto\" or a whole number of replays", v);
    else s.warmup = in.int32(key, v);
  } else if (key == "layers") s.layers = in.int32(key, v);
  else if (key == "peer_copy") s.peer_copy = in.choice(key, v, kPeerCopyNames);
  else if (key == "copy_rows") {
    if (v.is_string()) {
      s.copy_rows = parse_copy_rows(v.get<std::string>(), in.where(key));
    } else if (v.is_number_integer()) {
      s.copy_rows = in.int32(key, v);
    } else {
      in.wrong_type(key, "a row count or \"all\"", v);
    }
  } else if (key == "join") s.join = in.choice(key, v, kJoinNames);
  else if (key == "root_busy") s.root_busy = in.int32(key, v);
  else if (key == "alloc") s.alloc = in.choice(key, v, kAllocNames);
  else if (key == "issue") s.issue = in.choice(key, v, kIssueNames);
  else if (key == "layout") s.layout = in.choice(key, v, kLayoutNames);
  else if (key == "weights") s.weights = in.choice(key, v, kWeightsNames);
  else if (key == "seed") {
    if (!v.is_number_integer() || (!v.is_number_unsigned() && v.get<std::int64_t>() < 0))
      in.wrong_type(key, "a non-negative integer", v);
    s.seed = v.get<std::uint64_t>();
  } else {
    const bool geometry_key = contains(kGeometryFields, key);
    in.unknown(key, kFields, geometry_key ? " (geometry fields go under \"geometry\")" : "");
  }
}

// nlohmann's byte offset (1-based, of the last character read) -> "line:column", both 1-based.
std::string line_column(std::string_view text, std::size_t byte) {
  const std::size_t idx = std::min(byte > 0 ? byte - 1 : 0, text.size());
  const auto before = text.substr(0, idx);
  const auto line = 1 + std::count(before.begin(), before.end(), '\n');
  const auto last_newline = before.rfind('\n');
  const auto column = last_newline == std::string_view::npos ? idx + 1 : idx - last_newline;
  return fmt::format("{}:{}", line, column);
}

// nlohmann's message without its own prefix and position ("syntax error while parsing ...").
std::string parse_reason(const std::string& what) {
  const auto column = what.find("column ");
  if (column != std::string::npos) {
    const auto colon = what.find(": ", column);
    if (colon != std::string::npos) return what.substr(colon + 2);
  }
  const auto bracket = what.find("] ");
  return bracket == std::string::npos ? what : what.substr(bracket + 2);
}

std::string default_name(std::string_view origin) {
  const std::filesystem::path p{std::string(origin)};
  return p.extension() == ".json" ? p.stem().string() : std::string{};
}

}  // namespace

std::string_view to_string(PeerCopy v) { return name_of(kPeerCopyNames, v); }
std::string_view to_string(JoinKind v) { return name_of(kJoinNames, v); }
std::string_view to_string(AllocKind v) { return name_of(kAllocNames, v); }
std::string_view to_string(IssueKind v) { return name_of(kIssueNames, v); }

PeerCopy parse_peer_copy(std::string_view v, std::string_view where) { return value_of(kPeerCopyNames, v, where); }
JoinKind parse_join(std::string_view v, std::string_view where) { return value_of(kJoinNames, v, where); }
AllocKind parse_alloc(std::string_view v, std::string_view where) { return value_of(kAllocNames, v, where); }
IssueKind parse_issue(std::string_view v, std::string_view where) { return value_of(kIssueNames, v, where); }
Layout parse_layout(std::string_view v, std::string_view where) { return value_of(kLayoutNames, v, where); }
WeightsKind parse_weights(std::string_view v, std::string_view where) { return value_of(kWeightsNames, v, where); }

std::optional<int> parse_copy_rows(std::string_view value, std::string_view where) {
  if (value == "all") return std::nullopt;
  const std::optional<int> rows = whole_number<int>(value);
  if (!rows || *rows < 1) {
    throw InputError(
        fmt::format("{}: '{}' is not accepted; accepted: a row count >= 1, or all", where, escaped_excerpt(value)));
  }
  return *rows;
}

int Scenario::copy_row_count() const { return copy_rows ? std::min(*copy_rows, geometry.tokens) : geometry.tokens; }

int Scenario::device_of(int rank, int visible_devices) const {
  if (!devices.empty()) return devices[static_cast<std::size_t>(rank) % devices.size()];
  return rank % std::max(visible_devices, 1);
}

void validate(const Scenario& s) {
  validate(s.geometry);
  auto require = [](bool ok, std::string_view field, std::int64_t value, std::string_view accepted) {
    if (!ok) throw InputError(fmt::format("invalid scenario: {} = {}; accepted: {}", field, value, accepted));
  };
  require(s.replays >= 1 && s.replays <= kMaxReplays, "replays", s.replays, fmt::format("1 to {}", kMaxReplays));
  require(s.warmup == kWarmupAuto || (s.warmup >= 0 && s.warmup <= kMaxWarmup), "warmup", s.warmup,
          fmt::format("\"auto\" or 0 to {}", kMaxWarmup));
  require(s.layers >= 1 && s.layers <= kMaxLayers, "layers", s.layers, fmt::format("1 to {}", kMaxLayers));
  require(s.root_busy >= 0 && s.root_busy <= kMaxRootBusy, "root_busy", s.root_busy,
          fmt::format("0 to {}", kMaxRootBusy));
  // The name is a folder name in a run folder and a column in tables; the description is printed.
  if (has_control_characters(s.name) || has_control_characters(s.description, /*allow_line_breaks=*/true)) {
    throw InputError(
        fmt::format("invalid scenario: {} {} holds a control character (newline, tab, escape...); "
                    "accepted: printable text",
                    has_control_characters(s.name) ? "name" : "description",
                    quoted_excerpt(has_control_characters(s.name) ? s.name : s.description)));
  }
  if (s.name.empty() || s.name.size() > kMaxNameBytes)
    throw InputError(fmt::format("invalid scenario: name {} is {} bytes; accepted: 1 to {}", quoted_excerpt(s.name),
                                 s.name.size(), kMaxNameBytes));
  for (const auto reserved : kRunFolderFiles) {
    if (s.name == reserved)
      throw InputError(
          fmt::format("invalid scenario: name \"{}\" is a file of every run folder; accepted: any "
                      "other name (not records.json, report.md, report.json)",
                      s.name));
  }
  if (s.copy_rows) require(*s.copy_rows >= 1, "copy_rows", *s.copy_rows, "a row count >= 1, or all");
  for (std::size_t i = 0; i < s.devices.size(); ++i) {
    require(s.devices[i] >= 0 && s.devices[i] <= kMaxDevice, fmt::format("devices[{}]", i), s.devices[i],
            fmt::format("GPU indices 0 to {}", kMaxDevice));
  }
}

Scenario parse_scenario(std::string_view json_text, std::string_view origin) {
  check_json_depth(json_text, origin);
  json doc;
  try {
    doc = json::parse(json_text.begin(), json_text.end(), nullptr, /*allow_exceptions=*/true,
                      /*ignore_comments=*/true);
  } catch (const json::parse_error& e) {
    throw InputError(
        fmt::format("{}:{}: invalid JSON: {}", origin, line_column(json_text, e.byte), parse_reason(e.what())));
  } catch (const json::exception& e) {
    // A number beyond a double (1e400) is out_of_range, not a parse error, and carries no position.
    throw InputError(fmt::format("{}: invalid JSON: {}", origin, parse_reason(e.what())));
  }
  if (!doc.is_object()) {
    throw InputError(fmt::format("{}: a scenario must be a JSON object {{...}}, got {}", origin, doc.type_name()));
  }
  Scenario s;
  s.name = default_name(origin);
  if (s.name.empty()) s.name = "scenario";
  s.description.clear();
  const FieldReader in{origin};
  for (const auto& [key, v] : doc.items()) read_field(in, key, v, s);
  try {
    validate(s);
  } catch (const InputError& e) {
    throw InputError(fmt::format("{}: {}", origin, e.what()));
  }
  return s;
}

Scenario load_scenario(const std::filesystem::path& path) {
  return parse_scenario(read_regular_file(path, "scenario file", kMaxScenarioFileBytes), path.string());
}

Scenario resolve_scenario(std::string_view name_or_path, const std::filesystem::path& graphs_dir) {
  const std::filesystem::path given{std::string(name_or_path)};
  const bool looks_like_path = name_or_path.find('/') != std::string_view::npos || given.extension() == ".json";
  if (looks_like_path) return load_scenario(given);
  const auto file = graphs_dir / (std::string(name_or_path) + ".json");
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    const auto names = builtin_scenario_names();
    throw InputError(
        fmt::format("unknown scenario '{}' (looked for {}); built-in: {}; or give a path "
                    "to a .json file",
                    name_or_path, file.string(), fmt::join(names, ", ")));
  }
  return load_scenario(file);
}

std::string scenario_to_json(const Scenario& s) {
  nlohmann::ordered_json j;
  j["name"] = s.name;
  j["description"] = s.description;
  j["geometry"] = {{"experts", s.geometry.experts}, {"top_k", s.geometry.top_k},   {"hidden", s.geometry.hidden},
                   {"ff", s.geometry.ff},           {"tokens", s.geometry.tokens}, {"ranks", s.geometry.ranks}};
  j["devices"] = s.devices;
  j["replays"] = s.replays;
  if (s.warmup == kWarmupAuto) j["warmup"] = "auto";
  else j["warmup"] = s.warmup;
  j["layers"] = s.layers;
  j["peer_copy"] = std::string(to_string(s.peer_copy));
  if (s.copy_rows) j["copy_rows"] = *s.copy_rows;
  else j["copy_rows"] = "all";
  j["join"] = std::string(to_string(s.join));
  j["root_busy"] = s.root_busy;
  j["alloc"] = std::string(to_string(s.alloc));
  j["issue"] = std::string(to_string(s.issue));
  j["layout"] = std::string(name_of(kLayoutNames, s.layout));
  j["weights"] = std::string(name_of(kWeightsNames, s.weights));
  j["seed"] = s.seed;
  return j.dump(2);
}

std::vector<std::string> builtin_scenario_names() {
  return {"baseline", "peer-copy", "copy-first", "join", "layers", "fresh-alloc", "root-busy", "eager", "server-shape"};
}

MemoryEstimate memory_of_rank(const Scenario& s, int rank) {
  const int staged = rank == 0 && s.join != JoinKind::none ? s.geometry.ranks - 1 : 0;
  return memory_per_rank(s.geometry, staged, s.alloc == AllocKind::fresh);
}

std::vector<std::pair<int, std::int64_t>> memory_per_device(const Scenario& s, int visible_devices) {
  std::map<int, std::int64_t> sum;
  for (int r = 0; r < s.geometry.ranks; ++r) sum[s.device_of(r, visible_devices)] += memory_of_rank(s, r).total();
  return {sum.begin(), sum.end()};
}

std::string warmup_text(int warmup) { return warmup == kWarmupAuto ? std::string("auto") : std::to_string(warmup); }

}  // namespace tpgraph
