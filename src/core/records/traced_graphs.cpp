// The parts of a traced graph the merge builds beyond its nodes and edges: bodies of child-graph and
// conditional nodes, the per-stream nodes of a graph whose topology is unknown, collectives matched
// across ranks, other processes' work as outside work, and the completeness line.
#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/base/stats.hpp"
#include "core/records/traced_merge.hpp"

namespace tpgraph {

std::string TraceCompleteness::line() const {
  if (yielded > 0 && records == 0 && eager_records == 0)
    return fmt::format("NOTHING RECORDED: tpgraph left CUPTI to the program's own profiler in {} process{}", yielded,
                       yielded == 1 ? "" : "es");
  const std::string in_part = recording.empty() ? "" : " — RECORDED IN PART: see the recording lines";
  if (clean() && launches == 0)
    return fmt::format("NO GRAPHS: the program launched no CUDA graph; {} record{} of work outside graphs",
                       eager_records, eager_records == 1 ? "" : "s");
  if (clean())
    return fmt::format(
        "CLEAN: all {} graph records matched a node, every launched graph's topology was read, "
        "every process file is complete{}",
        records, in_part);
  std::string why;
  const auto add = [&](const std::string& part) { why += (why.empty() ? "" : "; ") + part; };
  if (records == 0 && launches > 0)
    add(fmt::format("{} graph launch{} and no record of their work{}", launches, launches == 1 ? "" : "es",
                    recording.empty() ? "" : " (what was recorded: see the recording lines)"));
  if (unmatched > 0) add(fmt::format("{} of {} graph records matched no node", unmatched, records));
  if (!no_topology.empty())
    add(fmt::format("{} graph{} without topology (records shown per stream)", no_topology.size(),
                    no_topology.size() == 1 ? "" : "s"));
  if (!truncated.empty())
    add(fmt::format("{} process file{} truncated", truncated.size(), truncated.size() == 1 ? "" : "s"));
  if (!unseen.empty())
    add(fmt::format("{} graph{} instantiated for launch from the device, whose device launches leave no record",
                    unseen.size(), unseen.size() == 1 ? "" : "s"));
  return "NOT CLEAN: " + why + in_part;
}

namespace trace_merge {

using tracefile::ProcessFile;
using tracefile::TracedGraph;

double ns_us(std::uint64_t later, std::uint64_t earlier) {
  return later >= earlier ? static_cast<double>(later - earlier) / 1000.0
                          : -static_cast<double>(earlier - later) / 1000.0;
}

void add_device_launched(const ProcessFile& p, std::vector<std::string>& out) {
  for (const auto& g : p.graphs)
    if (g.device_launch && g.version == 0)
      out.push_back(
          fmt::format("pid {} exec {} ({} node{})", p.pid, g.exec, g.nodes.size(), g.nodes.size() == 1 ? "" : "s"));
}

bool is_collective(std::string_view name) {
  std::string lower(name);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("nccl") != std::string::npos;
}

NodeKind kind_of_type(std::string_view type) {
  if (type == "kernel") return NodeKind::kernel;
  if (type == "memcpy") return NodeKind::copy;
  if (type == "memset") return NodeKind::memset;
  if (type == "mem_alloc") return NodeKind::alloc;
  if (type == "mem_free") return NodeKind::free_mem;
  return NodeKind::other;
}

std::string host_key(const ProcessFile& p) { return p.boot_id.empty() ? p.host : p.boot_id; }

std::uint64_t fingerprint(const TracedGraph& g) {
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&](std::string_view s) {
    for (const char c : s) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ull;
    }
    h ^= 0xff;
    h *= 1099511628211ull;
  };
  mix(std::to_string(g.nodes.size()));
  for (const auto& n : g.nodes) {
    mix(n.type);
    mix(n.name);
  }
  auto edges = g.edges;
  std::sort(edges.begin(), edges.end());
  for (const auto& [a, b] : edges) mix(fmt::format("{}>{}", a, b));
  return h;
}

namespace {

GraphHash graph_hash = &fingerprint;

// The shape the merge relies on when it lays one process's records onto another's graph: the node
// count, every node's type, name and nesting, and the edges with their data.
bool same_shape(const TracedGraph& a, const std::vector<std::size_t>& a_edges, const TracedGraph& b,
                const std::vector<std::size_t>& b_edges) {
  if (a.nodes.size() != b.nodes.size() || a_edges.size() != b_edges.size()) return false;
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    const auto& x = a.nodes[i];
    const auto& y = b.nodes[i];
    if (x.type != y.type || x.name != y.name || x.parent != y.parent || x.body != y.body ||
        x.conditional != y.conditional || x.bodies != y.bodies)
      return false;
  }
  for (std::size_t k = 0; k < a_edges.size(); ++k) {
    const std::size_t i = a_edges[k], j = b_edges[k];
    if (a.edges[i] != b.edges[j]) return false;
    const auto da = i < a.edge_data.size() ? a.edge_data[i] : tracefile::EdgeData{};
    const auto db = j < b.edge_data.size() ? b.edge_data[j] : tracefile::EdgeData{};
    if (!(da == db)) return false;
  }
  return true;
}

}  // namespace

void set_hash(GraphHash hash) { graph_hash = hash != nullptr ? hash : &fingerprint; }

void classify_shapes(const std::vector<ProcessFile>& files, std::vector<ProcessIndex>& index) {
  struct Shape {
    const TracedGraph* graph;
    std::vector<std::size_t> edges;  // edge indices in (from, to) order
  };
  std::vector<Shape> shapes;
  std::unordered_multimap<std::uint64_t, std::size_t> bucket;  // hash -> shapes
  for (std::size_t p = 0; p < files.size(); ++p)
    for (std::size_t g = 0; g < files[p].graphs.size(); ++g) {
      const TracedGraph& graph = files[p].graphs[g];
      std::vector<std::size_t> edges(graph.edges.size());
      for (std::size_t k = 0; k < edges.size(); ++k) edges[k] = k;
      std::sort(edges.begin(), edges.end(),
                [&](std::size_t a, std::size_t b) { return graph.edges[a] < graph.edges[b]; });
      const std::uint64_t h = graph_hash(graph);
      std::size_t cls = shapes.size();
      for (auto [it, end] = bucket.equal_range(h); it != end; ++it)
        if (same_shape(*shapes[it->second].graph, shapes[it->second].edges, graph, edges)) {
          cls = it->second;
          break;
        }
      if (cls == shapes.size()) {
        shapes.push_back(Shape{&graph, std::move(edges)});
        bucket.emplace(h, cls);
      }
      index[p].graph_fingerprint[g] = cls;
    }
  for (std::size_t p = 0; p < files.size(); ++p) {
    std::map<std::pair<std::uint64_t, std::uint32_t>, std::vector<std::uint32_t>> execs;  // (class, version)
    index[p].shape_ordinal.assign(files[p].graphs.size(), 0);
    for (std::size_t g = 0; g < files[p].graphs.size(); ++g) {
      auto& list = execs[{index[p].graph_fingerprint[g], files[p].graphs[g].version}];
      auto at = std::find(list.begin(), list.end(), files[p].graphs[g].exec);
      if (at == list.end()) at = list.insert(list.end(), files[p].graphs[g].exec);
      index[p].shape_ordinal[g] = static_cast<std::size_t>(at - list.begin());
    }
  }
}

// The ids records carry for the nodes inside child graphs and conditional bodies. CUPTI (CUDA 13.0,
// driver 580) numbers an executable's nodes (exec graph id << 32 | i), the top level first in the
// order the graph lists them, then the bodies' nodes in the order the reader flattens them, so i is
// the node's index here: the clone callbacks name the bodies' nodes by ids of their own graphs,
// which no record carries. Taken only where the top level's clones are exactly (G << 32 | index)
// for one G; otherwise the bodies' records stay unmatched and the report says so.
std::vector<std::pair<std::uint64_t, int>> body_node_ids(const TracedGraph& graph) {
  std::vector<std::pair<std::uint64_t, int>> out;
  std::optional<std::uint64_t> exec_graph;
  std::size_t top = 0, bodies = 0;
  for (const auto& [clone, node] : graph.clones) {
    if (node < 0 || static_cast<std::size_t>(node) >= graph.nodes.size()) return out;
    if (graph.nodes[static_cast<std::size_t>(node)].parent >= 0) continue;
    if ((clone & 0xffffffffULL) != static_cast<std::uint64_t>(node)) return out;
    if (exec_graph && *exec_graph != clone >> 32) return out;
    exec_graph = clone >> 32;
    ++top;
  }
  for (const auto& n : graph.nodes) bodies += n.parent >= 0 ? 1 : 0;
  if (!exec_graph || bodies == 0 || top + bodies != graph.nodes.size()) return out;
  for (std::size_t i = 0; i < graph.nodes.size(); ++i)
    if (graph.nodes[i].parent >= 0) out.emplace_back(*exec_graph << 32 | i, static_cast<int>(i));
  return out;
}

void attribute_device_launched_records(ProcessFile& p) {
  struct Launch {
    std::uint64_t first_ns = UINT64_MAX;  // its earliest graph record's start
    std::uint32_t graph = 0;              // CUPTI's graph id
  };
  std::unordered_map<std::uint32_t, Launch> launches;  // correlation id ->
  bool any = false;
  for (const auto& a : p.records) {
    if (a.graph_node_id == 0 || a.graph_id == 0) continue;
    if (a.correlation_id == 0) {
      any = true;
      continue;
    }
    Launch& l = launches[a.correlation_id];
    l.first_ns = std::min(l.first_ns, a.start_ns);
    l.graph = a.graph_id;
  }
  if (!any) return;
  std::unordered_map<std::uint32_t, std::vector<std::pair<std::uint64_t, std::uint32_t>>> starts;  // graph id
  for (const auto& [corr, l] : launches) starts[l.graph].emplace_back(l.first_ns, corr);
  for (auto& [graph, list] : starts) std::sort(list.begin(), list.end());
  for (auto& a : p.records) {
    if (a.graph_node_id == 0 || a.graph_id == 0 || a.correlation_id != 0) continue;
    const auto it = starts.find(a.graph_id);
    if (it == starts.end()) continue;
    const auto& list = it->second;
    const auto after = std::upper_bound(list.begin(), list.end(), std::make_pair(a.start_ns, UINT32_MAX));
    if (after != list.begin()) a.correlation_id = std::prev(after)->second;
  }
}

void drop_launches_after_limit(ProcessFile& p) {
  const bool limited = std::any_of(p.recording.events.begin(), p.recording.events.end(),
                                   [](const tracefile::RecordingEvent& e) { return e.event == "limit"; });
  if (!limited) return;
  std::unordered_set<std::uint32_t> recorded;
  for (const auto& a : p.records)
    if (a.graph_node_id != 0) recorded.insert(a.correlation_id);
  std::uint64_t last = 0;
  for (const auto& l : p.launches)
    if (recorded.contains(l.correlation_id)) last = std::max(last, l.host_start_ns);
  const auto before = p.launches.size();
  std::erase_if(p.launches, [&](const tracefile::WireLaunch& l) {
    return l.host_start_ns > last && !recorded.contains(l.correlation_id);
  });
  if (const auto dropped = before - p.launches.size(); dropped > 0)
    p.notes.push_back(
        fmt::format("{} graph launch{} after the last one with a record left out: recording stopped at "
                    "the size limit (--max-file-size)",
                    dropped, dropped == 1 ? "" : "es"));
}

ProcessIndex index_process(const ProcessFile& p) {
  ProcessIndex ix;
  ix.graph_fingerprint.reserve(p.graphs.size());
  for (std::size_t g = 0; g < p.graphs.size(); ++g) {
    const TracedGraph& graph = p.graphs[g];
    ix.graph_fingerprint.push_back(0);  // its shape class: set by classify_shapes
    const auto base = static_cast<int>(ix.slots.size());
    for (std::size_t i = 0; i < graph.nodes.size(); ++i)
      ix.slots.push_back(Slot{static_cast<int>(g), static_cast<int>(i)});
    // The captured ids first, then the instantiated ones: records carry the latter; the former only
    // serve a writer that could not see the clones.
    for (std::size_t i = 0; i < graph.nodes.size(); ++i)
      if (graph.nodes[i].id != 0) ix.resolver.map_node(graph.nodes[i].id, base + static_cast<int>(i));
    for (const auto& [clone, node] : graph.clones) ix.resolver.map_node(clone, base + node);
    for (const auto& [id, node] : body_node_ids(graph)) ix.resolver.map_node(id, base + node);
  }
  for (std::size_t g = 0; g < p.graphs.size(); ++g) {
    const auto updated = std::count_if(p.graphs.begin(), p.graphs.end(),
                                       [&](const TracedGraph& o) { return o.exec == p.graphs[g].exec; });
    if (updated < 2) continue;
    auto& own = ix.versioned[static_cast<int>(g)];
    const auto base = static_cast<int>(
        std::find_if(ix.slots.begin(), ix.slots.end(), [&](const Slot& s) { return s.graph == static_cast<int>(g); }) -
        ix.slots.begin());
    for (const auto& [clone, node] : p.graphs[g].clones) own[clone] = base + node;
    for (const auto& [id, node] : body_node_ids(p.graphs[g])) own[id] = base + node;
  }
  return ix;
}

BodyStructure body_structure(const TracedGraph& g) {
  BodyStructure out;
  const std::size_t n = g.nodes.size();
  const auto parent = [&](std::size_t i) {
    const int p = g.nodes[i].parent;
    return p >= 0 && static_cast<std::size_t>(p) < i ? p : -1;  // the reader keeps owners first
  };
  bool nested = false;
  for (std::size_t i = 0; i < n; ++i)
    nested = nested || parent(i) >= 0 || g.nodes[i].conditional != tracefile::ConditionalKind::none;
  if (!nested) return out;
  out.nesting.resize(n);
  std::vector<std::vector<int>> pred(n), succ(n), children(n);
  for (const auto& [a, b] : g.edges) {
    succ[static_cast<std::size_t>(a)].push_back(b);
    pred[static_cast<std::size_t>(b)].push_back(a);
  }
  for (std::size_t i = 0; i < n; ++i) {
    NestedNode& nn = out.nesting[i];
    const auto kind = g.nodes[i].conditional;
    nn.conditional = kind == tracefile::ConditionalKind::if_       ? NestedNode::Conditional::if_
                     : kind == tracefile::ConditionalKind::while_  ? NestedNode::Conditional::while_
                     : kind == tracefile::ConditionalKind::switch_ ? NestedNode::Conditional::switch_
                                                                   : NestedNode::Conditional::none;
    const int p = parent(i);
    if (p < 0) continue;
    const NestedNode& owner = out.nesting[static_cast<std::size_t>(p)];
    nn.parent = p;
    nn.body = g.nodes[i].body;
    nn.repeats = owner.repeats || owner.conditional == NestedNode::Conditional::while_;
    nn.optional = owner.optional || owner.conditional != NestedNode::Conditional::none;
    children[static_cast<std::size_t>(p)].push_back(static_cast<int>(i));
  }
  const auto same_body = [&](int a, int b) {
    return parent(static_cast<std::size_t>(a)) == parent(static_cast<std::size_t>(b)) &&
           g.nodes[static_cast<std::size_t>(a)].body == g.nodes[static_cast<std::size_t>(b)].body;
  };
  // Where a node's work is done: itself, or for an owner the exits of its bodies' leaves. Children
  // come after their owner, so walking backwards has every child's exits ready.
  std::vector<std::vector<int>> exits(n);
  for (std::size_t i = n; i-- > 0;) {
    if (children[i].empty()) {
      exits[i] = {static_cast<int>(i)};
      continue;
    }
    std::set<int> all;
    for (const int c : children[i]) {
      const bool leaf = std::none_of(succ[static_cast<std::size_t>(c)].begin(), succ[static_cast<std::size_t>(c)].end(),
                                     [&](int s) { return same_body(c, s); });
      const bool root = std::none_of(pred[static_cast<std::size_t>(c)].begin(), pred[static_cast<std::size_t>(c)].end(),
                                     [&](int q) { return same_body(c, q); });
      if (root) out.edges.emplace_back(static_cast<int>(i), c);
      if (leaf) all.insert(exits[static_cast<std::size_t>(c)].begin(), exits[static_cast<std::size_t>(c)].end());
    }
    exits[i].assign(all.begin(), all.end());
    for (const int s : succ[i])
      for (const int e : exits[i]) out.edges.emplace_back(e, s);
  }
  return out;
}

void stream_nodes(std::vector<ActivityRecord>& records, LayerGraph& graph, std::vector<NestedNode>& nesting,
                  int device) {
  // Launch order, then time within a launch: the k-th record of a name on a stream is one node.
  std::vector<std::size_t> order(records.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return std::tie(records[a].correlation_id, records[a].start_ns) <
           std::tie(records[b].correlation_id, records[b].start_ns);
  });
  std::map<std::tuple<std::uint32_t, std::string, int>, int> node_of;
  std::map<std::pair<std::uint32_t, std::string>, int> seen;  // occurrences in the current launch
  std::uint32_t launch = 0;
  for (std::size_t i = 0; i < order.size(); ++i) {
    ActivityRecord& a = records[order[i]];
    if (i == 0 || a.correlation_id != launch) seen.clear();
    launch = a.correlation_id;
    std::string name = a.name.empty() ? std::string(to_string(a.kind)) : a.name.str();
    const int k = ++seen[{a.stream_id, name}];
    auto [it, added] = node_of.emplace(std::make_tuple(a.stream_id, name, k), static_cast<int>(graph.nodes.size()));
    if (added) {
      Node n;
      n.id = it->second;
      n.device = device;
      n.kind = a.kind == ActivityKind::kernel   ? NodeKind::kernel
               : a.kind == ActivityKind::memset ? NodeKind::memset
                                                : NodeKind::copy;
      n.role = Role::traced;
      const std::string shown = a.kind == ActivityKind::kernel ? short_kernel_name(name) : name;
      n.label = fmt::format("r0.s{}.{}{}", a.stream_id, shown, k > 1 ? fmt::format("#{}", k) : "");
      n.name = name;
      n.bytes = a.bytes;
      graph.nodes.push_back(std::move(n));
      NestedNode nn;
      nn.stream = a.stream_id;
      nn.optional = true;  // a launch may take another path: absence is not a lost record
      nesting.push_back(nn);
    }
    a.node = it->second;
  }
}

std::vector<CollectiveSummary> summarize_collectives(const VariantRun& v, const TracedGraph& tmpl, int ranks,
                                                     int replays) {
  std::vector<CollectiveSummary> out;
  const std::size_t n_nodes = tmpl.nodes.size();
  const auto R = static_cast<std::size_t>(ranks);
  if (R < 2) return out;
  for (std::size_t i = 0; i < n_nodes; ++i) {
    const auto& info = tmpl.nodes[i];
    if (info.type != "kernel" || !is_collective(info.name)) continue;
    CollectiveSummary c;
    c.variant = v.scenario.name;
    c.name = info.name;
    c.node_index = static_cast<int>(i);
    std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> at(
        static_cast<std::size_t>(replays), std::vector<std::pair<std::uint64_t, std::uint64_t>>(R, {0, 0}));
    for (const auto& a : v.records) {
      const auto node = static_cast<std::size_t>(a.node);
      if (node % n_nodes != i || a.replay < 0 || a.replay >= replays) continue;
      at[static_cast<std::size_t>(a.replay)][node / n_nodes] = {a.start_ns, a.end_ns};
    }
    std::vector<std::vector<double>> skew(R);
    std::vector<double> transfer;
    for (const auto& rep : at) {
      if (std::any_of(rep.begin(), rep.end(), [](const auto& se) { return se.first == 0; })) continue;
      std::uint64_t latest = 0, earliest_end = std::numeric_limits<std::uint64_t>::max();
      for (const auto& [s, e] : rep) {
        latest = std::max(latest, s);
        earliest_end = std::min(earliest_end, e);
      }
      for (std::size_t k = 0; k < R; ++k) skew[k].push_back(ns_us(latest, rep[k].first));
      transfer.push_back(ns_us(earliest_end, latest));
    }
    for (auto& s : skew) c.arrival_skew_us.push_back(stats::median(std::move(s)));
    c.transfer_us = stats::median(transfer);
    out.push_back(std::move(c));
  }
  return out;
}

void add_collectives(VariantRun& v, const TracedGraph& tmpl, int ranks, int replays,
                     std::vector<CollectiveSummary>& out) {
  for (auto& c : summarize_collectives(v, tmpl, ranks, replays)) {
    std::string line = fmt::format("collective {} (node {}): arrival skew", short_kernel_name(c.name), c.node_index);
    for (std::size_t k = 0; k < c.arrival_skew_us.size(); ++k)
      line += fmt::format(" r{} {:.1f} µs", k, c.arrival_skew_us[k]);
    line += fmt::format(", transfer {:.1f} µs (medians over replays)", c.transfer_us);
    v.notes.push_back(line);
    out.push_back(std::move(c));
  }
}

TracedProcess process_row(const ProcessFile& f) {
  TracedProcess tp;
  tp.file = f.path;
  tp.host = f.host;
  tp.pid = f.pid;
  tp.rank = f.rank;
  tp.cuda_visible_devices = f.cuda_visible_devices;
  for (const auto& d : f.devices) tp.device_uuids.push_back(d.uuid);
  tp.complete = f.complete;
  tp.truncation = f.truncation;
  tp.records = f.records.size();
  tp.dropped = f.dropped;
  tp.graphs = static_cast<int>(f.graphs.size());
  tp.launches = f.launches.size();
  tp.self_cost = f.self_cost;
  return tp;
}

namespace {

std::string iso8601(std::uint64_t realtime_ns) {
  const auto secs = static_cast<std::time_t>(realtime_ns / 1000000000ull);
  std::tm tm{};
  if (gmtime_r(&secs, &tm) == nullptr) return "";
  char buf[32];
  if (std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) return "";
  return buf;
}

}  // namespace

void trace_environment(const std::vector<ProcessFile>& files, RunEnvironment& env) {
  std::uint64_t earliest = std::numeric_limits<std::uint64_t>::max();
  std::set<std::string> host_names;
  for (const auto& f : files) {
    if (f.started_ns != 0) earliest = std::min(earliest, f.started_ns);
    env.cupti_version = std::max(env.cupti_version, f.cupti_version);
    if (!f.host.empty()) host_names.insert(f.host);
  }
  for (const auto& h : host_names) env.hostname += (env.hostname.empty() ? "" : ", ") + h;
  env.started_at = earliest == std::numeric_limits<std::uint64_t>::max() ? "" : iso8601(earliest);
}

void add_outside_work(std::vector<VariantRun>& variants, const std::vector<std::vector<int>>& processes,
                      const std::vector<std::vector<std::int64_t>>& pids) {
  std::set<int> all;
  for (const auto& ps : processes) all.insert(ps.begin(), ps.end());
  for (std::size_t i = 0; i < variants.size(); ++i) variants[i].own_processes = processes[i];
  if (all.size() < 2) return;  // one process: nothing runs beside it that a trace saw
  auto outside = std::make_shared<std::vector<OutsideWork>>();
  std::vector<std::string> labels;
  std::map<std::string, int> label_of;
  for (std::size_t j = 0; j < variants.size(); ++j) {
    const VariantRun& w = variants[j];
    for (const auto& a : w.records) {
      if (a.start_ns == 0 || a.end_ns <= a.start_ns || a.node < 0) continue;
      const Node& n = w.graph.nodes[static_cast<std::size_t>(a.node)];
      const auto rank = static_cast<std::size_t>(n.rank);
      const std::string label =
          fmt::format("pid {}: {} ({})", rank < pids[j].size() ? pids[j][rank] : 0,
                      n.kind == NodeKind::kernel ? short_kernel_name(n.name) : n.name, w.scenario.name);
      auto [it, added] = label_of.emplace(label, static_cast<int>(labels.size()));
      if (added) labels.push_back(label);
      outside->push_back(OutsideWork{a.start_ns, a.end_ns, n.device, it->second,
                                     rank < processes[j].size() ? processes[j][rank] : -1});
    }
  }
  for (std::size_t i = 0; i < variants.size(); ++i) {
    variants[i].outside = outside;
    variants[i].graph.outside_labels = labels;
  }
}

}  // namespace trace_merge

void set_graph_hash_for_testing(GraphHash hash) { trace_merge::set_hash(hash); }

}  // namespace tpgraph
