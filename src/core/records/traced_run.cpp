#include "core/records/traced_run.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cctype>
#include <ctime>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "core/base/error.hpp"
#include "core/base/stats.hpp"
#include "core/numerics/geometry.hpp"
#include "core/records/record_join.hpp"
#include "core/records/trace_folder.hpp"

namespace tpgraph {

namespace fs = std::filesystem;
using tracefile::ProcessFile;
using tracefile::TracedGraph;

namespace {

double ns_us(std::uint64_t later, std::uint64_t earlier) {
  return later >= earlier ? static_cast<double>(later - earlier) / 1000.0
                          : -static_cast<double>(earlier - later) / 1000.0;
}

double median_of(std::vector<double> v) { return stats::median(std::move(v)); }

NodeKind kind_of_type(std::string_view type) {
  if (type == "kernel") return NodeKind::kernel;
  if (type == "memcpy") return NodeKind::copy;
  if (type == "memset") return NodeKind::memset;
  if (type == "mem_alloc") return NodeKind::alloc;
  if (type == "mem_free") return NodeKind::free_mem;
  return NodeKind::other;
}

bool is_collective(std::string_view name) {
  std::string lower(name);
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("nccl") != std::string::npos;
}

// FNV-1a over the graph's shape: node types and names in node order, then the sorted edges. Only
// a bucket key: graphs are grouped on their full shape (same_shape).
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

GraphHash graph_hash = &fingerprint;

// The shape the merge relies on when it lays one process's records onto another's graph: the node
// count, every node's type and name, and the edges.
bool same_shape(const TracedGraph& a, const std::vector<std::pair<int, int>>& a_edges, const TracedGraph& b,
                const std::vector<std::pair<int, int>>& b_edges) {
  if (a.nodes.size() != b.nodes.size() || a_edges != b_edges) return false;
  for (std::size_t i = 0; i < a.nodes.size(); ++i)
    if (a.nodes[i].type != b.nodes[i].type || a.nodes[i].name != b.nodes[i].name) return false;
  return true;
}

std::string host_key(const ProcessFile& p) { return p.boot_id.empty() ? p.host : p.boot_id; }

// Where a graph record of one process goes: (graph index in the file, node index).
struct Slot {
  int graph = -1;
  int node = -1;
};

struct ProcessIndex {
  NodeResolver resolver;  // instantiated (or captured) node id -> slot index
  std::vector<Slot> slots;
  // [graph] its shape class: graphs of one class have the same shape (same_shape), so one's node
  // indices are valid in every other's. Named for the fingerprint, which only buckets the classes.
  std::vector<std::uint64_t> graph_fingerprint;
};

ProcessIndex index_process(const ProcessFile& p) {
  ProcessIndex ix;
  ix.graph_fingerprint.reserve(p.graphs.size());
  for (std::size_t g = 0; g < p.graphs.size(); ++g) {
    const TracedGraph& graph = p.graphs[g];
    ix.graph_fingerprint.push_back(0);  // set by classify_shapes
    const auto base = static_cast<int>(ix.slots.size());
    for (std::size_t i = 0; i < graph.nodes.size(); ++i)
      ix.slots.push_back(Slot{static_cast<int>(g), static_cast<int>(i)});
    // The captured ids first, then the instantiated ones: records carry the latter; the former only
    // serve a writer that could not see the clones.
    for (std::size_t i = 0; i < graph.nodes.size(); ++i)
      if (graph.nodes[i].id != 0) ix.resolver.map_node(graph.nodes[i].id, base + static_cast<int>(i));
    for (const auto& [clone, node] : graph.clones) ix.resolver.map_node(clone, base + node);
  }
  return ix;
}

// Gives every graph of every process its shape class: graphs whose hash collides but whose shapes
// differ get classes of their own, so a collision can never lay one graph's records on another.
void classify_shapes(const std::vector<ProcessFile>& files, std::vector<ProcessIndex>& index) {
  struct Shape {
    const TracedGraph* graph;
    std::vector<std::pair<int, int>> edges;  // sorted
  };
  std::vector<Shape> shapes;
  std::unordered_multimap<std::uint64_t, std::size_t> bucket;  // hash -> shapes
  for (std::size_t p = 0; p < files.size(); ++p)
    for (std::size_t g = 0; g < files[p].graphs.size(); ++g) {
      const TracedGraph& graph = files[p].graphs[g];
      auto edges = graph.edges;
      std::sort(edges.begin(), edges.end());
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
}

std::string iso8601(std::uint64_t realtime_ns) {
  const auto secs = static_cast<std::time_t>(realtime_ns / 1000000000ull);
  std::tm tm{};
  if (gmtime_r(&secs, &tm) == nullptr) return "";
  char buf[32];
  if (std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) return "";
  return buf;
}

}  // namespace

void set_graph_hash_for_testing(GraphHash hash) { graph_hash = hash != nullptr ? hash : &fingerprint; }

std::string short_kernel_name(std::string_view demangled) {
  std::string_view s = demangled;
  // Drop the parameter list: the parenthesis that closes at the end, matched backwards (a name may
  // hold other parentheses: "(anonymous namespace)::f").
  if (!s.empty() && s.back() == ')') {
    int depth = 0;
    for (std::size_t i = s.size(); i-- > 0;) {
      if (s[i] == ')') ++depth;
      if (s[i] == '(' && --depth == 0) {
        if (i > 0) s = s.substr(0, i);
        break;
      }
    }
  }
  // Drop template arguments.
  std::string out;
  int depth = 0;
  for (const char c : s) {
    if (c == '<') {
      ++depth;
      continue;
    }
    if (c == '>') {
      if (depth > 0) --depth;
      continue;
    }
    if (depth == 0) out.push_back(c);
  }
  if (const auto colon = out.rfind("::"); colon != std::string::npos) out = out.substr(colon + 2);
  if (const auto space = out.rfind(' '); space != std::string::npos) out = out.substr(space + 1);
  std::string clean;
  for (const char c : out)
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') clean.push_back(c);
  if (clean.size() > 48) clean.resize(48);
  return clean.empty() ? std::string("kernel") : clean;
}

TracedRun merge_traces(std::vector<ProcessFile> files, const TraceMergeOptions& options) {
  TracedRun out;
  RunData& run = out.run;
  trace_folder::set_aside_cyclic_graphs(files, out.notes);
  // Ranks: RANK where set, then host and pid; stable for a given set of files.
  std::stable_sort(files.begin(), files.end(), [](const ProcessFile& a, const ProcessFile& b) {
    const int ra = a.rank.value_or(std::numeric_limits<int>::max());
    const int rb = b.rank.value_or(std::numeric_limits<int>::max());
    if (ra != rb) return ra < rb;
    if (a.host != b.host) return a.host < b.host;
    return a.pid < b.pid;
  });

  // --- hosts and the time base ---------------------------------------------------------------
  std::vector<std::string> hosts;
  for (const auto& f : files)
    if (std::find(hosts.begin(), hosts.end(), host_key(f)) == hosts.end()) hosts.push_back(host_key(f));
  if (hosts.size() > 1 && options.clocks == ClockPolicy::same_host) {
    std::set<std::string> names;
    for (const auto& f : files) names.insert(f.host.empty() ? std::string("?") : f.host);
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    throw InputError(fmt::format(
        "the record files come from {} hosts ({}) whose clocks differ; pass --assume-synced if their clocks are "
        "synchronised, or --align-collectives to align them on matched collective ends",
        hosts.size(), list));
  }
  out.clock_text =
      hosts.size() <= 1 ? "one host: CUPTI timestamps of all processes share CLOCK_REALTIME"
      : options.clocks == ClockPolicy::assume_synced
          ? fmt::format("{} hosts, clocks declared synchronised (--assume-synced): not checked", hosts.size())
          : "";

  // --- devices, on one global numbering ------------------------------------------------------
  // key: host + UUID (or host + pid + ordinal when the UUID is unknown) -> global index.
  std::map<std::string, int> device_index;
  std::vector<std::vector<int>> local_to_global(files.size());
  const auto global_device = [&](std::size_t p, int local) -> int {
    if (local < 0) return -1;
    auto& map = local_to_global[p];
    if (static_cast<std::size_t>(local) < map.size() && map[static_cast<std::size_t>(local)] >= 0)
      return map[static_cast<std::size_t>(local)];
    const ProcessFile& f = files[p];
    std::string key;
    DeviceInfo info;
    for (const auto& d : f.devices)
      if (d.ordinal == local) {
        key = d.uuid.empty() ? "" : f.host + "/" + d.uuid;
        info.name = d.name;
        info.pci_bus_id = d.pci_bus_id;
      }
    if (key.empty()) key = fmt::format("{}/pid{}/dev{}", f.host, f.pid, local);
    auto [it, added] = device_index.emplace(key, static_cast<int>(device_index.size()));
    if (added) {
      info.ordinal = it->second;
      if (info.name.empty()) info.name = "GPU";
      if (hosts.size() > 1) info.name += " @" + f.host;
      run.env.devices.push_back(info);
    }
    if (map.size() <= static_cast<std::size_t>(local)) map.resize(static_cast<std::size_t>(local) + 1, -1);
    map[static_cast<std::size_t>(local)] = it->second;
    return it->second;
  };
  // Devices in the order the processes name them, so the numbering follows the ranks.
  for (std::size_t p = 0; p < files.size(); ++p)
    for (const auto& d : files[p].devices) (void)global_device(p, d.ordinal);

  // --- index every process's graphs ----------------------------------------------------------
  std::vector<ProcessIndex> index;
  index.reserve(files.size());
  for (const auto& f : files) index.push_back(index_process(f));
  classify_shapes(files, index);

  // Graph records per (process, graph): node slot, record index; correlation ids per (process, fp).
  struct Group {
    std::uint64_t fp = 0;
    std::vector<std::size_t> processes;  // in rank order
    std::uint64_t first_start = std::numeric_limits<std::uint64_t>::max();
  };
  std::vector<Group> groups;
  std::unordered_map<std::uint64_t, std::size_t> group_of_fp;
  for (std::size_t p = 0; p < files.size(); ++p) {
    for (std::size_t g = 0; g < files[p].graphs.size(); ++g) {
      const std::uint64_t fp = index[p].graph_fingerprint[g];
      auto [it, added] = group_of_fp.emplace(fp, groups.size());
      if (added) groups.push_back(Group{fp, {}, std::numeric_limits<std::uint64_t>::max()});
      auto& procs = groups[it->second].processes;
      if (std::find(procs.begin(), procs.end(), p) == procs.end()) procs.push_back(p);
    }
  }

  // Resolve every record once: (slot or -1).
  std::vector<std::vector<int>> slot_of_record(files.size());
  out.processes.resize(files.size());
  for (std::size_t p = 0; p < files.size(); ++p) {
    const ProcessFile& f = files[p];
    TracedProcess& tp = out.processes[p];
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
    auto& slots = slot_of_record[p];
    slots.assign(f.records.size(), -1);
    for (std::size_t r = 0; r < f.records.size(); ++r) {
      const ActivityRecord& a = f.records[r];
      if (a.graph_node_id == 0) {
        ++tp.eager_records;
        if (a.end_ns > a.start_ns) tp.eager_busy_us += ns_us(a.end_ns, a.start_ns);
        continue;
      }
      ++tp.graph_records;
      const int s = index[p].resolver.resolve(a.graph_node_id);
      if (s < 0) {
        ++tp.unmatched;
        continue;
      }
      slots[r] = s;
      const Slot& slot = index[p].slots[static_cast<std::size_t>(s)];
      auto& grp = groups[group_of_fp.at(index[p].graph_fingerprint[static_cast<std::size_t>(slot.graph)])];
      if (a.start_ns != 0) grp.first_start = std::min(grp.first_start, a.start_ns);
    }
  }

  // --- clock alignment across hosts on collective ends ----------------------------------------
  std::vector<double> offset_ns_of_host(hosts.size(), 0.0);
  if (hosts.size() > 1 && options.clocks == ClockPolicy::align_collectives) {
    // For every group with processes on the first host and on host h, every collective node and
    // launch ordinal: end on host h - end on the first host.
    std::vector<std::vector<double>> diffs(hosts.size());
    for (const Group& grp : groups) {
      // (process, node index, ordinal) -> end
      std::map<std::pair<int, std::size_t>, std::vector<std::pair<std::size_t, std::uint64_t>>> ends;
      for (const std::size_t p : grp.processes) {
        std::map<std::uint32_t, int> ordinal_of;
        for (std::size_t r = 0; r < files[p].records.size(); ++r) {
          const int s = slot_of_record[p][r];
          if (s < 0) continue;
          const Slot& slot = index[p].slots[static_cast<std::size_t>(s)];
          if (index[p].graph_fingerprint[static_cast<std::size_t>(slot.graph)] != grp.fp) continue;
          ordinal_of.emplace(files[p].records[r].correlation_id, 0);
        }
        int k = 0;
        for (auto& [corr, ord] : ordinal_of) ord = k++;
        for (std::size_t r = 0; r < files[p].records.size(); ++r) {
          const int s = slot_of_record[p][r];
          if (s < 0) continue;
          const Slot& slot = index[p].slots[static_cast<std::size_t>(s)];
          if (index[p].graph_fingerprint[static_cast<std::size_t>(slot.graph)] != grp.fp) continue;
          const auto& node =
              files[p].graphs[static_cast<std::size_t>(slot.graph)].nodes[static_cast<std::size_t>(slot.node)];
          if (node.type != "kernel" || !is_collective(node.name)) continue;
          ends[{slot.node, static_cast<std::size_t>(ordinal_of.at(files[p].records[r].correlation_id))}].emplace_back(
              p, files[p].records[r].end_ns);
        }
      }
      for (const auto& [key, list] : ends) {
        std::uint64_t base = 0;
        bool have_base = false;
        for (const auto& [p, end] : list)
          if (host_key(files[p]) == hosts[0]) {
            base = end;
            have_base = true;
            break;
          }
        if (!have_base) continue;
        for (const auto& [p, end] : list) {
          const auto h =
              static_cast<std::size_t>(std::find(hosts.begin(), hosts.end(), host_key(files[p])) - hosts.begin());
          if (h == 0) continue;
          diffs[h].push_back(static_cast<double>(static_cast<std::int64_t>(end - base)));
        }
      }
    }
    std::string text = fmt::format("{} hosts aligned on collective ends:", hosts.size());
    for (std::size_t h = 1; h < hosts.size(); ++h) {
      if (diffs[h].empty())
        throw InputError(fmt::format(
            "--align-collectives: host {} shares no collective (nccl kernel in a matched graph) with host {}; "
            "pass --assume-synced instead",
            hosts[h], hosts[0]));
      const double offset = median_of(diffs[h]);
      std::vector<double> residual;
      for (const double d : diffs[h]) residual.push_back(std::abs(d - offset));
      offset_ns_of_host[h] = -offset;
      text += fmt::format(" host {} shifted by {:.1f} µs (residual {:.2f} µs over {} collective ends);", h,
                          -offset / 1000.0, median_of(residual) / 1000.0, diffs[h].size());
    }
    out.clock_text = text + " skews are then arrival skews relative to the collectives' ends";
  }
  const auto shift = [&](std::size_t p, std::uint64_t t) -> std::uint64_t {
    if (t == 0) return 0;
    const auto h = static_cast<std::size_t>(std::find(hosts.begin(), hosts.end(), host_key(files[p])) - hosts.begin());
    const double off = offset_ns_of_host[h];
    if (off == 0) return t;
    const auto delta = static_cast<std::int64_t>(off);
    return delta >= 0 ? t + static_cast<std::uint64_t>(delta) : t - static_cast<std::uint64_t>(-delta);
  };
  for (std::size_t p = 0; p < files.size(); ++p) {
    const auto h = static_cast<std::size_t>(std::find(hosts.begin(), hosts.end(), host_key(files[p])) - hosts.begin());
    out.processes[p].clock_offset_us = offset_ns_of_host[h] / 1000.0;
  }

  // --- environment ---------------------------------------------------------------------------
  std::uint64_t earliest = std::numeric_limits<std::uint64_t>::max();
  std::set<std::string> host_names;
  for (const auto& f : files) {
    if (f.started_ns != 0) earliest = std::min(earliest, f.started_ns);
    run.env.cupti_version = std::max(run.env.cupti_version, f.cupti_version);
    if (!f.host.empty()) host_names.insert(f.host);
  }
  for (const auto& h : host_names) run.env.hostname += (run.env.hostname.empty() ? "" : ", ") + h;
  run.env.started_at = earliest == std::numeric_limits<std::uint64_t>::max() ? "" : iso8601(earliest);

  // --- one variant per graph fingerprint, in order of first launch -----------------------------
  std::vector<std::size_t> order(groups.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return groups[a].first_start < groups[b].first_start; });
  int graph_number = 0;
  for (const std::size_t gi : order) {
    const Group& grp = groups[gi];
    ++graph_number;
    VariantRun v;
    v.scenario.name = fmt::format("graph-{}", graph_number);
    v.scenario.warmup = 0;
    v.scenario.layers = 1;
    v.scenario.issue = IssueKind::graph;
    v.scenario.geometry.ranks = static_cast<int>(grp.processes.size());
    LayerGraph& lg = v.graph;
    lg.ranks = static_cast<int>(grp.processes.size());
    lg.layers = 1;
    v.visible_devices = std::max<int>(1, static_cast<int>(run.env.devices.size()));

    // The template: the first process's first graph of this fingerprint.
    const std::size_t p0 = grp.processes.front();
    const TracedGraph* tmpl = nullptr;
    for (std::size_t g = 0; g < files[p0].graphs.size(); ++g)
      if (index[p0].graph_fingerprint[g] == grp.fp) {
        tmpl = &files[p0].graphs[g];
        break;
      }
    const std::size_t n_nodes = tmpl->nodes.size();
    // Labels: short kernel names, numbered where a name repeats.
    std::vector<std::string> base_label(n_nodes);
    {
      std::map<std::string, int> seen, total;
      std::vector<std::string> raw(n_nodes);
      for (std::size_t i = 0; i < n_nodes; ++i) {
        const auto& n = tmpl->nodes[i];
        raw[i] = n.type == "kernel" ? short_kernel_name(n.name) : (n.name.empty() ? n.type : short_kernel_name(n.name));
        ++total[raw[i]];
      }
      for (std::size_t i = 0; i < n_nodes; ++i)
        base_label[i] = total[raw[i]] > 1 ? fmt::format("{}#{}", raw[i], ++seen[raw[i]]) : raw[i];
    }

    std::vector<std::string> rank_lines;
    std::vector<std::vector<int>> device_of_node(grp.processes.size(), std::vector<int>(n_nodes, -1));
    for (std::size_t k = 0; k < grp.processes.size(); ++k) {
      const std::size_t p = grp.processes[k];
      // Devices of nodes from their records (a node runs where its records ran).
      for (std::size_t r = 0; r < files[p].records.size(); ++r) {
        const int s = slot_of_record[p][r];
        if (s < 0) continue;
        const Slot& slot = index[p].slots[static_cast<std::size_t>(s)];
        if (index[p].graph_fingerprint[static_cast<std::size_t>(slot.graph)] != grp.fp) continue;
        auto& d = device_of_node[k][static_cast<std::size_t>(slot.node)];
        if (d < 0) d = global_device(p, files[p].records[r].device);
      }
      int fallback = -1;
      for (const int d : device_of_node[k])
        if (d >= 0) {
          fallback = d;
          break;
        }
      if (fallback < 0 && !files[p].devices.empty()) fallback = global_device(p, files[p].devices.front().ordinal);
      fallback = std::max(fallback, 0);
      const int base = static_cast<int>(lg.nodes.size());
      for (std::size_t i = 0; i < n_nodes; ++i) {
        const auto& info = tmpl->nodes[i];
        Node n;
        n.id = base + static_cast<int>(i);
        n.layer = 0;
        n.rank = static_cast<int>(k);
        n.stream = static_cast<int>(k);
        int d = device_of_node[k][i];
        if (d < 0 && info.device >= 0) d = global_device(p, info.device);
        n.device = d >= 0 ? d : fallback;
        n.kind = kind_of_type(info.type);
        n.role = Role::traced;
        n.label = fmt::format("r{}.{}", k, base_label[i]);
        n.name = info.name.empty() ? info.type : info.name;
        n.bytes = info.bytes;
        lg.nodes.push_back(std::move(n));
      }
      for (const auto& [a, b] : tmpl->edges) lg.edges.push_back(Edge{base + a, base + b});
      const ProcessFile& f = files[p];
      rank_lines.push_back(fmt::format(
          "r{} = pid {}{}{}{}, GPU {}", k, f.pid, f.host.empty() ? "" : " on " + f.host,
          f.rank ? fmt::format(" (RANK {})", *f.rank) : "",
          f.cuda_visible_devices.empty() ? "" : fmt::format(" CUDA_VISIBLE_DEVICES={}", f.cuda_visible_devices),
          fallback));
      if (!f.complete)
        v.notes.push_back(
            fmt::format("r{}'s record file is truncated ({}): later replays may be missing", k, f.truncation));
    }

    // Records: node = the rank's copy; replay = the launch's ordinal among this process's launches of
    // this graph (correlation ids grow with launch order).
    int replays = 0;
    std::vector<std::map<std::uint32_t, int>> ordinals(grp.processes.size());
    for (std::size_t k = 0; k < grp.processes.size(); ++k) {
      const std::size_t p = grp.processes[k];
      auto& ord = ordinals[k];
      for (std::size_t r = 0; r < files[p].records.size(); ++r) {
        const int s = slot_of_record[p][r];
        if (s < 0) continue;
        const Slot& slot = index[p].slots[static_cast<std::size_t>(s)];
        if (index[p].graph_fingerprint[static_cast<std::size_t>(slot.graph)] != grp.fp) continue;
        ord.emplace(files[p].records[r].correlation_id, 0);
      }
      // Launches whose records were all lost still count as replays of this graph.
      std::set<std::uint32_t> execs_of_graph;
      for (std::size_t g = 0; g < files[p].graphs.size(); ++g)
        if (index[p].graph_fingerprint[g] == grp.fp) execs_of_graph.insert(files[p].graphs[g].exec);
      for (const auto& l : files[p].launches)
        if (l.exec != 0 && execs_of_graph.count(l.exec) > 0) ord.emplace(l.correlation_id, 0);
      int next = 0;
      for (auto& [corr, o] : ord) o = next++;
      replays = std::max(replays, next);
      const int base = static_cast<int>(k * n_nodes);
      std::size_t moved = 0;
      for (std::size_t r = 0; r < files[p].records.size(); ++r) {
        const int s = slot_of_record[p][r];
        if (s < 0) continue;
        const Slot& slot = index[p].slots[static_cast<std::size_t>(s)];
        if (index[p].graph_fingerprint[static_cast<std::size_t>(slot.graph)] == grp.fp) ++moved;
      }
      v.records.reserve(v.records.size() + moved);  // once: millions of records grown by doubling take twice
      for (std::size_t r = 0; r < files[p].records.size(); ++r) {
        const int s = slot_of_record[p][r];
        if (s < 0) continue;
        const Slot& slot = index[p].slots[static_cast<std::size_t>(s)];
        if (index[p].graph_fingerprint[static_cast<std::size_t>(slot.graph)] != grp.fp) continue;
        // Each record belongs to one graph, so it is moved, never copied (millions of them).
        ActivityRecord a = std::move(files[p].records[r]);
        a.start_ns = shift(p, a.start_ns);
        a.end_ns = shift(p, a.end_ns);
        a.device = static_cast<std::int16_t>(global_device(p, a.device));
        a.stream_id = static_cast<std::uint32_t>(k);
        a.node = base + slot.node;
        a.replay = ord.at(a.correlation_id);
        if (a.start_ns == 0 || a.end_ns == 0) ++v.health.no_timestamp;
        v.records.push_back(std::move(a));
      }
      v.health.dropped += files[p].dropped;
    }
    v.scenario.replays = std::max(replays, 1);
    // Host launch time of each replay, from the first rank's launch calls.
    {
      const std::size_t p = grp.processes.front();
      std::vector<double> per_replay(static_cast<std::size_t>(replays), -1.0);
      for (const auto& l : files[p].launches) {
        const auto it = ordinals[0].find(l.correlation_id);
        if (it == ordinals[0].end() || l.host_end_ns < l.host_start_ns || l.host_start_ns == 0) continue;
        per_replay[static_cast<std::size_t>(it->second)] = ns_us(l.host_end_ns, l.host_start_ns);
      }
      for (const double us : per_replay)
        if (us >= 0) v.host_launch_us.push_back(us);
    }
    // Ranks sharing a GPU: any device used by two ranks.
    {
      std::map<int, std::set<int>> ranks_of_device;
      for (const auto& n : lg.nodes) ranks_of_device[n.device].insert(n.rank);
      for (const auto& [d, ranks] : ranks_of_device)
        if (ranks.size() > 1) v.ranks_share_gpu = true;
    }
    v.scenario.description =
        fmt::format("traced graph: {} nodes per rank, {} rank(s), {} launches", n_nodes, grp.processes.size(), replays);
    v.notes.insert(v.notes.begin(), fmt::format("traced graph-{}: {}", graph_number, [&] {
                     std::string s;
                     for (const auto& l : rank_lines) s += (s.empty() ? "" : "; ") + l;
                     return s;
                   }()));

    // Collectives: nccl kernels matched by node position across ranks.
    if (grp.processes.size() > 1) {
      for (std::size_t i = 0; i < n_nodes; ++i) {
        const auto& info = tmpl->nodes[i];
        if (info.type != "kernel" || !is_collective(info.name)) continue;
        CollectiveSummary c;
        c.variant = v.scenario.name;
        c.name = info.name;
        c.node_index = static_cast<int>(i);
        const std::size_t R = grp.processes.size();
        std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> at(
            static_cast<std::size_t>(replays), std::vector<std::pair<std::uint64_t, std::uint64_t>>(R, {0, 0}));
        for (const auto& a : v.records) {
          const auto node = static_cast<std::size_t>(a.node);
          if (node % n_nodes != i || a.replay < 0) continue;
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
        for (auto& s : skew) c.arrival_skew_us.push_back(median_of(s));
        c.transfer_us = median_of(transfer);
        std::string line = fmt::format("collective {} (node {}): arrival skew", short_kernel_name(c.name), i);
        for (std::size_t k = 0; k < R; ++k) line += fmt::format(" r{} {:.1f} µs", k, c.arrival_skew_us[k]);
        line += fmt::format(", transfer {:.1f} µs (medians over {} replays)", c.transfer_us, transfer.size());
        v.notes.push_back(line);
        out.collectives.push_back(std::move(c));
      }
    }
    run.variants.push_back(std::move(v));
  }

  trace_folder::check_merged(run, out.notes);
  // --- whole-trace notes ----------------------------------------------------------------------
  for (const auto& f : files) {
    for (const auto& n : f.notes) out.notes.push_back(fmt::format("pid {}: {}", f.pid, n));
    if (!f.complete) out.notes.push_back(fmt::format("pid {}: record file truncated ({})", f.pid, f.truncation));
  }
  for (const auto& tp : out.processes)
    if (tp.unmatched > 0)
      out.notes.push_back(
          fmt::format("pid {}: {} graph records matched no node of a recorded graph", tp.pid, tp.unmatched));
  if (files.empty()) out.notes.push_back("no process under the command initialised CUDA: no CUDA work was seen");
  else if (run.variants.empty())
    out.notes.push_back("no CUDA graph was launched: only eager work was seen (see the processes table)");
  trace_folder::copy_notes_into_graphs(out);
  return out;
}

}  // namespace tpgraph
