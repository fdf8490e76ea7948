#include "core/records/run_data.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <ctime>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "core/base/atomic_file.hpp"
#include "core/base/error.hpp"
#include "core/base/host_memory.hpp"
#include "core/base/json_input.hpp"
#include "core/base/json_reader.hpp"
#include "core/records/analysis_memory.hpp"

namespace tpgraph {

using nlohmann::json;

namespace {

constexpr std::array kNodeKinds = {NodeKind::busy,     NodeKind::quantize, NodeKind::gemm,   NodeKind::swiglu,
                                   NodeKind::combine,  NodeKind::reduce,   NodeKind::copy,   NodeKind::alloc,
                                   NodeKind::free_mem, NodeKind::event,    NodeKind::kernel, NodeKind::memset,
                                   NodeKind::other};
constexpr std::array kRoles = {Role::busy,      Role::quantize_z, Role::gate,     Role::up,
                               Role::swiglu,    Role::quantize_a, Role::down,     Role::combine,
                               Role::peer_copy, Role::join_copy,  Role::reduce,   Role::alloc,
                               Role::free_mem,  Role::span_begin, Role::span_end, Role::traced};
constexpr std::array kActivityKinds = {ActivityKind::kernel, ActivityKind::memcpy, ActivityKind::memcpy_peer,
                                       ActivityKind::memset};

// Records dominate the file (kernels x replays x variants), so they are stored as rows under one
// list of column names, and kernel names once in a table.
constexpr std::array<std::string_view, 12> kRecordColumns = {"replay", "node",       "kind",   "start_ns",
                                                             "end_ns", "device",     "stream", "correlation",
                                                             "graph",  "graph_node", "bytes",  "name"};

// Bytes of one node or one copy: a tebibyte, far above any GPU's memory, far enough below 2^63
// that the writers' sums over nodes stay in range.
constexpr std::int64_t kMaxBytes = std::int64_t{1} << 40;
// Every file tpgraph writes is far below this; the bound keeps a wrong path from being read whole.
constexpr std::uint64_t kMaxRecordsFileBytes = 16ULL << 30;

using Reader = JsonReader;

json device_to_json(const DeviceInfo& d) {
  return json{{"ordinal", d.ordinal},
              {"name", d.name},
              {"sm_count", d.sm_count},
              {"memory_bytes", d.memory_bytes},
              {"pci_bus_id", d.pci_bus_id}};
}

DeviceInfo device_from_json(const Reader& r) {
  DeviceInfo d;
  d.ordinal = r.at("ordinal").int32(0, kMaxDevice);
  d.name = r.at("name").string();
  d.sm_count = r.at("sm_count").int32(0);
  d.memory_bytes = r.at("memory_bytes").integer(0);
  d.pci_bus_id = r.at("pci_bus_id").string();
  return d;
}

json environment_to_json(const RunEnvironment& e) {
  json devices = json::array();
  for (const auto& d : e.devices) devices.push_back(device_to_json(d));
  return json{{"tool_version", e.tool_version},
              {"git_revision", e.git_revision},
              {"driver_version", e.driver_version},
              {"runtime_version", e.runtime_version},
              {"cupti_version", e.cupti_version},
              {"devices", devices},
              {"hostname", e.hostname},
              {"started_at", e.started_at}};
}

RunEnvironment environment_from_json(const Reader& r) {
  RunEnvironment e;
  e.tool_version = r.at("tool_version").string();
  e.git_revision = r.at("git_revision").string();
  e.driver_version = r.at("driver_version").int32(0);
  e.runtime_version = r.at("runtime_version").int32(0);
  e.cupti_version = r.at("cupti_version").int32(0);
  const Reader devices = r.at("devices");
  for (std::size_t i = 0; i < devices.size_of_array(); ++i) e.devices.push_back(device_from_json(devices.at(i)));
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
  return json{{"ranks", g.ranks}, {"layers", g.layers}, {"nodes", nodes}, {"edges", edges}, {"end_joins", g.end_joins}};
}

// Every index the analysis and the writers use is checked here: ranks and layers within the
// scenario's bounds (and equal to the scenario's), a node's layer, rank, stream and peer within
// them, its device a GPU index, edges and joins naming nodes.
LayerGraph graph_from_json(const Reader& r, const Scenario& scenario) {
  LayerGraph g;
  g.ranks = r.at("ranks").int32(1, kMaxRanks);
  if (g.ranks != scenario.geometry.ranks)
    r.at("ranks").fail(fmt::format("{} ranks, but the variant's scenario has {}", g.ranks, scenario.geometry.ranks));
  g.layers = r.at("layers").int32(1, kMaxLayers);
  if (g.layers != scenario.layers)
    r.at("layers").fail(fmt::format("{} layers, but the variant's scenario has {}", g.layers, scenario.layers));
  const Reader nodes = r.at("nodes");
  const std::size_t count = nodes.size_of_array();
  for (std::size_t i = 0; i < count; ++i) {
    const Reader n = nodes.at(i);
    Node node;
    node.id = n.at("id").int32(0);
    if (static_cast<std::size_t>(node.id) != i) n.at("id").fail(fmt::format("expected {} (ids are indices)", i));
    node.layer = n.at("layer").int32(0, g.layers - 1);
    node.rank = n.at("rank").int32(0, g.ranks - 1);
    node.device = n.at("device").int32(0, kMaxDevice);
    node.stream = n.at("stream").int32(0, g.ranks - 1);
    node.kind = n.at("kind").enumeration(kNodeKinds);
    node.role = n.at("role").enumeration(kRoles);
    node.peer = n.at("peer").int32(-1, g.ranks - 1);
    node.label = n.at("label").string();
    node.bytes = n.at("bytes").integer(0, kMaxBytes);
    node.flops = n.at("flops").number(0, 1e30);
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
  std::map<const std::string*, int> name_index;  // a Name's text is interned: its address is its identity
  json rows = json::array();
  for (const auto& a : records) {
    int name = -1;
    if (!a.name.empty()) {
      const auto [it, added] = name_index.emplace(&a.name.str(), static_cast<int>(names.size()));
      if (added) names.push_back(a.name.str());
      name = it->second;
    }
    rows.push_back(json::array({a.replay, a.node, std::string(to_string(a.kind)), a.start_ns, a.end_ns, a.device,
                                a.stream_id, a.correlation_id, a.graph_id, a.graph_node_id, a.bytes, name}));
  }
  json columns = json::array();
  for (const auto c : kRecordColumns) columns.push_back(std::string(c));
  return json{{"columns", columns}, {"names", names}, {"rows", rows}};
}

// A records row as read, before the graph and the name table (which may come later in the file)
// are known: node and name are checked against them afterwards.
struct StreamedRecord {
  ActivityRecord record;
  int name = -1;  // index into records.names; -1: none
};

// Every variant's records rows, taken out of the document while it is parsed: held as JSON, the
// rows of a large run take five times the file (a value per cell), as records a fifth of that.
class RowStream {
 public:
  explicit RowStream(std::string origin) : origin_(std::move(origin)) {}

  // parse_json_streaming's callback: `false` drops the value just parsed from the document.
  bool operator()(int /*depth*/, JsonEvent event, json& parsed) {
    switch (event) {
      case JsonEvent::object_start:
      case JsonEvent::array_start: stack_.push_back(Frame{event == JsonEvent::array_start, {}, 0}); return true;
      case JsonEvent::key: stack_.back().key = parsed.get<std::string>(); return true;
      case JsonEvent::object_end:
      case JsonEvent::array_end: {
        stack_.pop_back();
        bool keep = true;
        if (in_rows()) {
          if (event == JsonEvent::object_end) fail_not_a_row();
          take_row(parsed);
          keep = false;
        }
        next_element();
        return keep;
      }
      case JsonEvent::value:
        if (in_rows()) fail_not_a_row();
        next_element();
        return true;
    }
    return true;
  }

  // The rows of variant `i`, moved out (empty when the variant had none or no rows array).
  [[nodiscard]] std::vector<StreamedRecord> take(std::size_t i) {
    if (i >= rows_.size()) return {};
    return std::move(rows_[i]);
  }
  [[nodiscard]] bool saw_rows(std::size_t i) const { return i < seen_.size() && seen_[i]; }

 private:
  struct Frame {
    bool array = false;
    std::string key;        // objects: the member being read
    std::size_t index = 0;  // arrays: the element being read
  };

  // Inside variants[i].records.rows, directly: the element just completed is a row.
  [[nodiscard]] bool in_rows() const {
    return stack_.size() == 5 && !stack_[0].array && stack_[0].key == "variants" && stack_[1].array &&
           !stack_[2].array && stack_[2].key == "records" && !stack_[3].array && stack_[3].key == "rows" &&
           stack_[4].array;
  }
  void next_element() {
    if (!stack_.empty() && stack_.back().array) ++stack_.back().index;
  }
  [[nodiscard]] std::string row_path() const {
    return fmt::format("variants[{}].records.rows[{}]", stack_[1].index, stack_[4].index);
  }
  [[noreturn]] void fail_not_a_row() const {
    throw InputError(
        fmt::format("{}: {}: expected [{} values], one per column", origin_, row_path(), kRecordColumns.size()));
  }

  void take_row(const json& value) {
    const Reader row(value, origin_, row_path());
    if (row.size_of_array() != kRecordColumns.size())
      row.fail(fmt::format("expected {} values, one per column", kRecordColumns.size()));
    StreamedRecord s;
    ActivityRecord& a = s.record;
    a.replay = row.at(0).int32(-1);
    a.node = row.at(1).int32(-1);
    a.kind = row.at(2).enumeration(kActivityKinds);
    a.start_ns = row.at(3).unsigned64();
    a.end_ns = row.at(4).unsigned64();
    a.device = static_cast<std::int16_t>(row.at(5).int32(0, kMaxDevice));
    a.stream_id = row.at(6).unsigned32();
    a.correlation_id = row.at(7).unsigned32();
    a.graph_id = row.at(8).unsigned32();
    a.graph_node_id = row.at(9).unsigned64();
    a.bytes = row.at(10).integer(0, kMaxBytes);
    s.name = row.at(11).int32(-1);
    const std::size_t variant = stack_[1].index;
    if (rows_.size() <= variant) {
      rows_.resize(variant + 1);
      seen_.resize(variant + 1, false);
    }
    rows_[variant].push_back(std::move(s));
    seen_[variant] = true;
  }

  std::string origin_;
  std::vector<Frame> stack_;
  std::vector<std::vector<StreamedRecord>> rows_;  // [variant]
  std::vector<bool> seen_;                         // [variant]: a row was streamed
};

// The records of one variant: the streamed rows, checked against the graph's node count and the
// name table now that both are known.
std::vector<ActivityRecord> records_from_json(const Reader& r, int node_count, std::vector<StreamedRecord> rows) {
  const Reader columns = r.at("columns");
  if (columns.size_of_array() != kRecordColumns.size())
    columns.fail(fmt::format("expected {} columns", kRecordColumns.size()));
  for (std::size_t c = 0; c < kRecordColumns.size(); ++c) {
    if (columns.at(c).string() != kRecordColumns[c])
      columns.at(c).fail(fmt::format("expected column '{}'", kRecordColumns[c]));
  }
  std::vector<RecordName> names;
  const Reader names_r = r.at("names");
  for (std::size_t i = 0; i < names_r.size_of_array(); ++i) names.emplace_back(names_r.at(i).string());

  const Reader rows_r = r.at("rows");
  (void)rows_r.size_of_array();  // an array (its elements were streamed out)
  std::vector<ActivityRecord> records;
  records.reserve(rows.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    StreamedRecord& s = rows[i];
    if (s.record.node >= node_count)
      rows_r.fail_at(fmt::format("[{}][1]", i),
                     fmt::format("{} is out of range [-1, {}]", s.record.node, node_count - 1));
    if (s.name >= static_cast<int>(names.size()))
      rows_r.fail_at(fmt::format("[{}][11]", i),
                     fmt::format("{} is out of range [-1, {}]", s.name, static_cast<int>(names.size()) - 1));
    if (s.name >= 0) s.record.name = names[static_cast<std::size_t>(s.name)];
    records.push_back(std::move(s.record));
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
  return json{{"compared", c.compared},       {"mismatches", c.mismatches}, {"nonzero", c.nonzero},
              {"nan_count", c.nan_count},     {"absmax", c.absmax},         {"max_abs_err", c.max_abs_err},
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
  if (c.mismatches > c.compared || c.nonzero > c.compared || c.nan_count > c.compared)
    r.fail("mismatches, nonzero and nan_count cannot exceed compared");
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

VariantRun variant_from_json(const Reader& r, RowStream& stream, std::size_t index) {
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
  v.visible_devices = r.at("visible_devices").int32(1, kMaxDevice + 1);
  v.ranks_share_gpu = r.at("ranks_share_gpu").boolean();
  v.graph = graph_from_json(r.at("graph"), v.scenario);
  const Reader records = r.at("records");
  v.records = records_from_json(records, static_cast<int>(v.graph.nodes.size()), stream.take(index));
  // The analysis holds a slot per (replay, node): bound them by what the file holds.
  const std::uint64_t slots = static_cast<std::uint64_t>(v.scenario.replays) * v.graph.nodes.size();
  if (slots > kSlotsPerRecord * v.records.size() + kSlotsPerNode * v.graph.nodes.size() + kSlotFloor)
    scenario.fail(
        fmt::format("replays = {} for {} graph nodes, but the file holds only {} records (a run records about one per "
                    "kernel or copy node per replay); accepted: a replay count the records can fill",
                    v.scenario.replays, v.graph.nodes.size(), v.records.size()));
  const Reader spans = r.at("event_spans");
  for (std::size_t i = 0; i < spans.size_of_array(); ++i) {
    const Reader s = spans.at(i);
    if (s.size_of_array() != 3) s.fail("expected [replay, rank, span_ms]");
    // Event spans of replays the run did not have would never be looked up; refuse them.
    // 0 or at least a picosecond: the CUPTI / event span ratio stays finite.
    const Reader span = s.at(2);
    const double span_ms = span.number(0, 1e7);
    if (span_ms != 0 && span_ms < 1e-9) span.fail(fmt::format("{} is out of range: 0, or 1e-09 to 1e+07 ms", span_ms));
    v.event_spans.push_back(
        EventSpan{s.at(0).int32(0, v.scenario.replays - 1), s.at(1).int32(0, v.graph.ranks - 1), span_ms});
  }
  const Reader launches = r.at("host_launch_us");
  if (launches.size_of_array() > static_cast<std::size_t>(v.scenario.replays))
    launches.fail(fmt::format("{} launch times for {} replays", launches.size_of_array(), v.scenario.replays));
  for (std::size_t i = 0; i < launches.size_of_array(); ++i) v.host_launch_us.push_back(launches.at(i).number(0, 1e12));
  // Their ratio is the tracing cost: 0 (not measured) or a time a ratio of two stays finite with.
  const auto replay_time = [](const Reader& t) {
    const double us = t.number(0, 1e12);
    if (us != 0 && us < 1e-6) t.fail(fmt::format("{} is out of range: 0 (not measured) or 1e-06 to 1e+12", us));
    return us;
  };
  v.replay_us_untraced = replay_time(r.at("replay_us_untraced"));
  v.replay_us_traced = replay_time(r.at("replay_us_traced"));
  if (r.has("host_costs")) {  // absent from records written before the costs were measured
    const Reader costs = r.at("host_costs");
    v.costs.capture_ms = costs.at("capture_ms").number(0, 1e9);
    v.costs.instantiate_ms = costs.at("instantiate_ms").number(0, 1e9);
    const Reader queued = costs.at("queued_launch_us");
    for (std::size_t i = 0; i < queued.size_of_array(); ++i)
      v.costs.queued_launch_us.push_back(queued.at(i).number(0, 1e12));
  }
  v.health = health_from_json(r.at("health"));
  v.cuda_graph_dot = r.at("cuda_graph_dot").raw_string();
  const Reader check = r.at("output_check");
  if (!check.value().is_null()) v.output_check = comparison_from_json(check);
  const Reader notes = r.at("notes");
  for (std::size_t i = 0; i < notes.size_of_array(); ++i) v.notes.push_back(notes.at(i).string());
  return v;
}

bool timestamped(const ActivityRecord& a) { return a.start_ns != 0 && a.end_ns >= a.start_ns; }

// The trace's time base is the run's earliest record: one from far outside the replays would move
// it. Refuses a timestamped record more than kStrayRecordNs outside the body of the replays'
// records (those with a replay index in range and a node; body_of_records), so a stray record
// given a replay and a node cannot widen the window it is judged by.
void check_stray_records(const RunData& run, const Reader& variants) {
  std::vector<std::uint64_t> starts;
  for (const auto& v : run.variants) {
    for (const auto& a : v.records) {
      if (!timestamped(a) || a.node < 0 || a.replay < 0 || a.replay >= v.scenario.replays) continue;
      starts.push_back(a.start_ns);
    }
  }
  const auto body = body_of_records(std::move(starts));
  if (!body) return;  // no record in a replay: nothing to be far from
  const std::uint64_t lo = body->first;
  const std::uint64_t hi = body->last;
  for (std::size_t i = 0; i < run.variants.size(); ++i) {
    const auto& records = run.variants[i].records;
    for (std::size_t k = 0; k < records.size(); ++k) {
      const ActivityRecord& a = records[k];
      if (!timestamped(a)) continue;
      const bool before = a.start_ns < lo;
      if (body->stray(a.start_ns))
        variants.at(i).at("records").at("rows").fail_at(
            fmt::format("[{}]", k),
            fmt::format(
                "starts at {} ns, more than an hour {} the replays' records ({} to {} ns): not a record of this run",
                a.start_ns, before ? "before" : "after", lo, hi));
    }
  }
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
  check_json_depth(json_text, origin);
  json doc;
  RowStream stream{std::string(origin)};
  try {
    doc = parse_json_streaming(json_text, std::ref(stream));
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("{}: not valid JSON (byte {}): a corrupt or truncated records file", origin, e.byte));
  } catch (const json::exception& e) {
    // A number beyond a double (1e400) is out_of_range, not a parse error.
    const std::string what = e.what();
    const auto bracket = what.find("] ");
    throw InputError(
        fmt::format("{}: not valid JSON: {}", origin, bracket == std::string::npos ? what : what.substr(bracket + 2)));
  }
  const Reader top(doc, std::string(origin), "");
  if (!doc.is_object()) top.fail("expected a JSON object (a tpgraph records.json)");
  if (!top.has("kind") || !doc["kind"].is_string() || doc["kind"] != "tpgraph-records")
    top.fail("not a tpgraph records file (field \"kind\" is not \"tpgraph-records\")");
  RunData run;
  run.schema_version = top.at("schema_version").int32();
  if (run.schema_version != kRunSchemaVersion)
    top.at("schema_version")
        .fail(fmt::format("schema version {} is not supported (this tpgraph reads version {})", run.schema_version,
                          kRunSchemaVersion));
  run.env = environment_from_json(top.at("environment"));
  const Reader variants = top.at("variants");
  for (std::size_t i = 0; i < variants.size_of_array(); ++i)
    run.variants.push_back(variant_from_json(variants.at(i), stream, i));
  check_stray_records(run, variants);
  check_analysis_slots(run, origin);
  return run;
}

void save_raw_records(const std::filesystem::path& path, const RunData& run) {
  write_file_atomically(path, run_data_to_json(run));
}

RunData load_raw_records(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec)))
    throw InputError(fmt::format("{}: cannot open the records file: no such file", path.string()));
  check_run_analysis_fits(path, available_host_memory());
  RunData run = parse_run_data(read_regular_file(path, "records file", kMaxRecordsFileBytes), path.string());
  check_run_analysis_fits(path, available_host_memory(), unrecorded_slots(run));
  return run;
}

}  // namespace tpgraph
