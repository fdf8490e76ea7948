#include "core/run_data.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <ctime>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace tpgraph {

using nlohmann::json;

namespace {

constexpr std::array kNodeKinds = {NodeKind::busy,   NodeKind::quantize, NodeKind::gemm,
                                   NodeKind::swiglu, NodeKind::combine,  NodeKind::reduce,
                                   NodeKind::copy,   NodeKind::alloc,    NodeKind::free_mem,
                                   NodeKind::event,  NodeKind::kernel,   NodeKind::memset,
                                   NodeKind::other};
constexpr std::array kRoles = {Role::busy,      Role::quantize_z, Role::gate,     Role::up,
                               Role::swiglu,    Role::quantize_a, Role::down,     Role::combine,
                               Role::peer_copy, Role::join_copy,  Role::reduce,   Role::alloc,
                               Role::free_mem,  Role::span_begin, Role::span_end, Role::traced};
constexpr std::array kActivityKinds = {ActivityKind::kernel, ActivityKind::memcpy,
                                       ActivityKind::memcpy_peer, ActivityKind::memset};

// Records dominate the file (kernels x replays x variants), so they are stored as rows under one
// list of column names, and kernel names once in a table.
constexpr std::array<std::string_view, 12> kRecordColumns = {
    "replay", "node",  "kind",       "start_ns", "end_ns", "device",
    "stream", "correlation", "graph", "graph_node", "bytes", "name"};

// Reads one JSON document with the path of every value in hand, so a bad field is named exactly:
// "runs/x/records.json: variants[1].records.rows[17][3]: expected an unsigned integer".
class Reader {
 public:
  Reader(const json& value, std::string origin, std::string path)
      : value_(value), origin_(std::move(origin)), path_(std::move(path)) {}

  [[noreturn]] void fail(std::string_view problem) const {
    throw InputError(fmt::format("{}: {}: {}", origin_, path_.empty() ? "(top)" : path_, problem));
  }
  [[nodiscard]] const json& value() const { return value_; }
  [[nodiscard]] const std::string& origin() const { return origin_; }
  [[nodiscard]] const std::string& path() const { return path_; }

  [[nodiscard]] Reader at(std::string_view key) const {
    if (!value_.is_object()) fail("expected an object");
    const auto it = value_.find(key);
    if (it == value_.end()) fail(fmt::format("missing field '{}'", key));
    return Reader(*it, origin_, path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key));
  }
  [[nodiscard]] Reader at(std::size_t i) const {
    return Reader(value_[i], origin_, fmt::format("{}[{}]", path_, i));
  }
  [[nodiscard]] bool has(std::string_view key) const {
    return value_.is_object() && value_.contains(key);
  }
  [[nodiscard]] std::size_t size_of_array() const {
    if (!value_.is_array()) fail("expected an array");
    return value_.size();
  }
  [[nodiscard]] std::int64_t integer(std::int64_t lo = std::numeric_limits<std::int64_t>::min(),
                                     std::int64_t hi = std::numeric_limits<std::int64_t>::max()) const {
    if (!value_.is_number_integer()) fail("expected an integer");
    if (value_.is_number_unsigned() &&
        value_.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      fail("integer out of range");
    const auto v = value_.get<std::int64_t>();
    if (v < lo || v > hi) fail(fmt::format("{} is out of range [{}, {}]", v, lo, hi));
    return v;
  }
  [[nodiscard]] int int32(int lo = std::numeric_limits<int>::min(),
                          int hi = std::numeric_limits<int>::max()) const {
    return static_cast<int>(integer(lo, hi));
  }
  [[nodiscard]] std::uint64_t unsigned64() const {
    if (!value_.is_number_integer()) fail("expected an unsigned integer");
    if (value_.is_number_unsigned()) return value_.get<std::uint64_t>();
    const auto v = value_.get<std::int64_t>();
    if (v < 0) fail("expected an unsigned integer, got a negative one");
    return static_cast<std::uint64_t>(v);
  }
  [[nodiscard]] std::uint32_t unsigned32() const {
    const auto v = unsigned64();
    if (v > std::numeric_limits<std::uint32_t>::max()) fail("out of range for a 32-bit id");
    return static_cast<std::uint32_t>(v);
  }
  [[nodiscard]] double number() const {
    if (!value_.is_number()) fail("expected a number");
    return value_.get<double>();
  }
  [[nodiscard]] bool boolean() const {
    if (!value_.is_boolean()) fail("expected true or false");
    return value_.get<bool>();
  }
  [[nodiscard]] std::string string() const {
    if (!value_.is_string()) fail("expected a string");
    return value_.get<std::string>();
  }
  template <class Enum, std::size_t N>
  [[nodiscard]] Enum enumeration(const std::array<Enum, N>& all) const {
    const std::string text = string();
    std::string accepted;
    for (const Enum e : all) {
      if (to_string(e) == text) return e;
      accepted += accepted.empty() ? "" : ", ";
      accepted += to_string(e);
    }
    fail(fmt::format("unknown value '{}' (accepted: {})", text, accepted));
  }

 private:
  const json& value_;
  std::string origin_;
  std::string path_;
};

json device_to_json(const DeviceInfo& d) {
  return json{{"ordinal", d.ordinal},
              {"name", d.name},
              {"sm_count", d.sm_count},
              {"memory_bytes", d.memory_bytes},
              {"pci_bus_id", d.pci_bus_id}};
}

DeviceInfo device_from_json(const Reader& r) {
  DeviceInfo d;
  d.ordinal = r.at("ordinal").int32(0);
  d.name = r.at("name").string();
  d.sm_count = r.at("sm_count").int32(0);
  d.memory_bytes = r.at("memory_bytes").integer(0);
  d.pci_bus_id = r.at("pci_bus_id").string();
  return d;
}

json environment_to_json(const RunEnvironment& e) {
  json devices = json::array();
  for (const auto& d : e.devices) devices.push_back(device_to_json(d));
  return json{{"tool_version", e.tool_version},     {"git_revision", e.git_revision},
              {"driver_version", e.driver_version}, {"runtime_version", e.runtime_version},
              {"cupti_version", e.cupti_version},   {"devices", devices},
              {"hostname", e.hostname},             {"started_at", e.started_at}};
}

RunEnvironment environment_from_json(const Reader& r) {
  RunEnvironment e;
  e.tool_version = r.at("tool_version").string();
  e.git_revision = r.at("git_revision").string();
  e.driver_version = r.at("driver_version").int32(0);
  e.runtime_version = r.at("runtime_version").int32(0);
  e.cupti_version = r.at("cupti_version").int32(0);
  const Reader devices = r.at("devices");
  for (std::size_t i = 0; i < devices.size_of_array(); ++i)
    e.devices.push_back(device_from_json(devices.at(i)));
  e.hostname = r.at("hostname").string();
  e.started_at = r.at("started_at").string();
  return e;
}

json graph_to_json(const LayerGraph& g) {
  json nodes = json::array();
  for (const auto& n : g.nodes) {
    json node = json{{"id", n.id},
                         {"layer", n.layer},
                         {"rank", n.rank},
                         {"device", n.device},
                         {"stream", n.stream},
                         {"kind", std::string(to_string(n.kind))},
                         {"role", std::string(to_string(n.role))},
                         {"peer", n.peer},
                         {"label", n.label},
                         {"bytes", n.bytes},
                         {"flops", n.flops}};
    if (!n.name.empty()) node["name"] = n.name;  // traced graphs only
    nodes.push_back(std::move(node));
  }
  json edges = json::array();
  for (const auto& e : g.edges) edges.push_back(json::array({e.from, e.to}));
  return json{{"ranks", g.ranks}, {"layers", g.layers}, {"nodes", nodes}, {"edges", edges},
              {"end_joins", g.end_joins}};
}

LayerGraph graph_from_json(const Reader& r) {
  LayerGraph g;
  g.ranks = r.at("ranks").int32(1);
  g.layers = r.at("layers").int32(0);
  const Reader nodes = r.at("nodes");
  const std::size_t count = nodes.size_of_array();
  for (std::size_t i = 0; i < count; ++i) {
    const Reader n = nodes.at(i);
    Node node;
    node.id = n.at("id").int32(0);
    if (static_cast<std::size_t>(node.id) != i) n.at("id").fail(fmt::format("expected {} (ids are indices)", i));
    node.layer = n.at("layer").int32(0);
    node.rank = n.at("rank").int32(0, g.ranks - 1);
    node.device = n.at("device").int32(0);
    node.stream = n.at("stream").int32(0);
    node.kind = n.at("kind").enumeration(kNodeKinds);
    node.role = n.at("role").enumeration(kRoles);
    node.peer = n.at("peer").int32(-1, g.ranks - 1);
    node.label = n.at("label").string();
    node.bytes = n.at("bytes").integer(0);
    node.flops = n.at("flops").number();
    if (n.has("name")) node.name = n.at("name").string();
    g.nodes.push_back(std::move(node));
  }
  const Reader edges = r.at("edges");
  const int last = static_cast<int>(count) - 1;
  for (std::size_t i = 0; i < edges.size_of_array(); ++i) {
    const Reader e = edges.at(i);
    if (e.size_of_array() != 2) e.fail("expected [from, to]");
    g.edges.push_back(Edge{e.at(0).int32(0, last), e.at(1).int32(0, last)});
  }
  const Reader joins = r.at("end_joins");
  for (std::size_t i = 0; i < joins.size_of_array(); ++i) g.end_joins.push_back(joins.at(i).int32(0, last));
  return g;
}

json records_to_json(const std::vector<ActivityRecord>& records) {
  json names = json::array();
  std::map<std::string, int> name_index;
  json rows = json::array();
  for (const auto& a : records) {
    int name = -1;
    if (!a.name.empty()) {
      const auto [it, added] = name_index.emplace(a.name, static_cast<int>(names.size()));
      if (added) names.push_back(a.name);
      name = it->second;
    }
    rows.push_back(json::array({a.replay, a.node, std::string(to_string(a.kind)), a.start_ns, a.end_ns,
                                a.device, a.stream_id, a.correlation_id, a.graph_id, a.graph_node_id,
                                a.bytes, name}));
  }
  json columns = json::array();
  for (const auto c : kRecordColumns) columns.push_back(std::string(c));
  return json{{"columns", columns}, {"names", names}, {"rows", rows}};
}

std::vector<ActivityRecord> records_from_json(const Reader& r, int node_count) {
  const Reader columns = r.at("columns");
  if (columns.size_of_array() != kRecordColumns.size())
    columns.fail(fmt::format("expected {} columns", kRecordColumns.size()));
  for (std::size_t c = 0; c < kRecordColumns.size(); ++c) {
    if (columns.at(c).string() != kRecordColumns[c])
      columns.at(c).fail(fmt::format("expected column '{}'", kRecordColumns[c]));
  }
  std::vector<std::string> names;
  const Reader names_r = r.at("names");
  for (std::size_t i = 0; i < names_r.size_of_array(); ++i) names.push_back(names_r.at(i).string());
  const int last_name = static_cast<int>(names.size()) - 1;

  const Reader rows = r.at("rows");
  std::vector<ActivityRecord> records;
  records.reserve(rows.size_of_array());
  for (std::size_t i = 0; i < rows.size_of_array(); ++i) {
    const Reader row = rows.at(i);
    if (row.size_of_array() != kRecordColumns.size())
      row.fail(fmt::format("expected {} values, one per column", kRecordColumns.size()));
    ActivityRecord a;
    a.replay = row.at(0).int32(-1);
    a.node = row.at(1).int32(-1, node_count - 1);
    a.kind = row.at(2).enumeration(kActivityKinds);
    a.start_ns = row.at(3).unsigned64();
    a.end_ns = row.at(4).unsigned64();
    a.device = row.at(5).int32(0);
    a.stream_id = row.at(6).unsigned32();
    a.correlation_id = row.at(7).unsigned32();
    a.graph_id = row.at(8).unsigned32();
    a.graph_node_id = row.at(9).unsigned64();
    a.bytes = row.at(10).integer(0);
    const int name = row.at(11).int32(-1, last_name);
    if (name >= 0) a.name = names[static_cast<std::size_t>(name)];
    records.push_back(std::move(a));
  }
  return records;
}

json health_to_json(const CollectionHealth& h) {
  return json{{"dropped", h.dropped}, {"no_timestamp", h.no_timestamp}, {"unmatched", h.unmatched}};
}

CollectionHealth health_from_json(const Reader& r) {
  CollectionHealth h;
  h.dropped = r.at("dropped").unsigned64();
  h.no_timestamp = r.at("no_timestamp").unsigned64();
  h.unmatched = r.at("unmatched").unsigned64();
  return h;
}

json comparison_to_json(const Comparison& c) {
  return json{{"compared", c.compared},   {"mismatches", c.mismatches}, {"nonzero", c.nonzero},
              {"nan_count", c.nan_count}, {"absmax", c.absmax},         {"max_abs_err", c.max_abs_err},
              {"max_rel_err", c.max_rel_err}, {"tolerance", c.tolerance}};
}

Comparison comparison_from_json(const Reader& r) {
  Comparison c;
  c.compared = r.at("compared").integer(0);
  c.mismatches = r.at("mismatches").integer(0);
  c.nonzero = r.at("nonzero").integer(0);
  c.nan_count = r.at("nan_count").integer(0);
  c.absmax = r.at("absmax").number();
  c.max_abs_err = r.at("max_abs_err").number();
  c.max_rel_err = r.at("max_rel_err").number();
  c.tolerance = r.at("tolerance").number();
  return c;
}

json variant_to_json(const VariantRun& v) {
  json spans = json::array();
  for (const auto& s : v.event_spans) spans.push_back(json::array({s.replay, s.rank, s.span_ms}));
  json notes = json::array();
  for (const auto& n : v.notes) notes.push_back(n);
  return json{{"scenario", json::parse(scenario_to_json(v.scenario))},
              {"visible_devices", v.visible_devices},
              {"ranks_share_gpu", v.ranks_share_gpu},
              {"graph", graph_to_json(v.graph)},
              {"records", records_to_json(v.records)},
              {"event_spans", spans},
              {"host_launch_us", v.host_launch_us},
              {"replay_us_untraced", v.replay_us_untraced},
              {"replay_us_traced", v.replay_us_traced},
              {"host_costs", json{{"capture_ms", v.costs.capture_ms},
                                  {"instantiate_ms", v.costs.instantiate_ms},
                                  {"queued_launch_us", v.costs.queued_launch_us}}},
              {"health", health_to_json(v.health)},
              {"cuda_graph_dot", v.cuda_graph_dot},
              {"output_check", v.output_check ? comparison_to_json(*v.output_check) : json(nullptr)},
              {"notes", notes}};
}

VariantRun variant_from_json(const Reader& r) {
  VariantRun v;
  const Reader scenario = r.at("scenario");
  if (!scenario.value().is_object()) scenario.fail("expected an object");
  try {
    v.scenario = parse_scenario(scenario.value().dump(), fmt::format("{}: {}", r.origin(), scenario.path()));
  } catch (const InputError&) {
    throw;
  } catch (const std::exception& e) {
    scenario.fail(e.what());
  }
  v.visible_devices = r.at("visible_devices").int32(1);
  v.ranks_share_gpu = r.at("ranks_share_gpu").boolean();
  v.graph = graph_from_json(r.at("graph"));
  v.records = records_from_json(r.at("records"), static_cast<int>(v.graph.nodes.size()));
  const Reader spans = r.at("event_spans");
  for (std::size_t i = 0; i < spans.size_of_array(); ++i) {
    const Reader s = spans.at(i);
    if (s.size_of_array() != 3) s.fail("expected [replay, rank, span_ms]");
    v.event_spans.push_back(EventSpan{s.at(0).int32(0), s.at(1).int32(0, v.graph.ranks - 1), s.at(2).number()});
  }
  const Reader launches = r.at("host_launch_us");
  for (std::size_t i = 0; i < launches.size_of_array(); ++i)
    v.host_launch_us.push_back(launches.at(i).number());
  v.replay_us_untraced = r.at("replay_us_untraced").number();
  v.replay_us_traced = r.at("replay_us_traced").number();
  if (r.has("host_costs")) {  // absent from records written before the costs were measured
    const Reader costs = r.at("host_costs");
    v.costs.capture_ms = costs.at("capture_ms").number();
    v.costs.instantiate_ms = costs.at("instantiate_ms").number();
    const Reader queued = costs.at("queued_launch_us");
    for (std::size_t i = 0; i < queued.size_of_array(); ++i) v.costs.queued_launch_us.push_back(queued.at(i).number());
  }
  v.health = health_from_json(r.at("health"));
  v.cuda_graph_dot = r.at("cuda_graph_dot").string();
  const Reader check = r.at("output_check");
  if (!check.value().is_null()) v.output_check = comparison_from_json(check);
  const Reader notes = r.at("notes");
  for (std::size_t i = 0; i < notes.size_of_array(); ++i) v.notes.push_back(notes.at(i).string());
  return v;
}

}  // namespace

std::string utc_now_iso8601() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  std::array<char, 32> text{};
  const std::size_t n = std::strftime(text.data(), text.size(), "%Y-%m-%dT%H:%M:%SZ", &utc);
  return std::string(text.data(), n);
}

RunEnvironment host_environment() {
  RunEnvironment e;
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) == 0) e.hostname = name.data();
  e.started_at = utc_now_iso8601();
  return e;
}

std::string run_data_to_json(const RunData& run) {
  json variants = json::array();
  for (const auto& v : run.variants) variants.push_back(variant_to_json(v));
  const json doc{{"schema_version", run.schema_version},
                 {"kind", "tpgraph-records"},
                 {"environment", environment_to_json(run.env)},
                 {"variants", variants}};
  // One line: the file is data for `analyze`, read with jq rather than by eye.
  return doc.dump() + "\n";
}

RunData parse_run_data(std::string_view json_text, std::string_view origin) {
  json doc;
  try {
    doc = json::parse(json_text.begin(), json_text.end());
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("{}: not valid JSON (byte {}): a corrupt or truncated records file",
                                 origin, e.byte));
  }
  const Reader top(doc, std::string(origin), "");
  if (!doc.is_object()) top.fail("expected a JSON object (a tpgraph records.json)");
  if (!top.has("kind") || !doc["kind"].is_string() || doc["kind"] != "tpgraph-records")
    top.fail("not a tpgraph records file (field \"kind\" is not \"tpgraph-records\")");
  RunData run;
  run.schema_version = top.at("schema_version").int32();
  if (run.schema_version != kRunSchemaVersion)
    top.at("schema_version")
        .fail(fmt::format("schema version {} is not supported (this tpgraph reads version {})",
                          run.schema_version, kRunSchemaVersion));
  run.env = environment_from_json(top.at("environment"));
  const Reader variants = top.at("variants");
  for (std::size_t i = 0; i < variants.size_of_array(); ++i)
    run.variants.push_back(variant_from_json(variants.at(i)));
  return run;
}

void save_raw_records(const std::filesystem::path& path, const RunData& run) {
  write_file_atomically(path, run_data_to_json(run));
}

RunData load_raw_records(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(fmt::format("{}: cannot open the records file", path.string()));
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw InputError(fmt::format("{}: cannot read the records file", path.string()));
  return parse_run_data(text.str(), path.string());
}

}  // namespace tpgraph
