// The merge of record files into one model (traced_run.hpp says what it does): each process's
// graphs indexed, every record placed, groups of processes made variants, in named steps.
#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include "core/base/error.hpp"
#include "core/base/stats.hpp"
#include "core/records/trace_folder.hpp"
#include "core/records/trace_recording.hpp"
#include "core/records/traced_merge.hpp"

namespace tpgraph {

using tracefile::ProcessFile;
using tracefile::TracedGraph;

namespace {

using namespace trace_merge;

// The merge in named steps over shared state; run() calls them in order.
class Merger {
 public:
  Merger(std::vector<ProcessFile> files, const TraceMergeOptions& options)
      : files_(std::move(files)), options_(options) {}

  TracedRun run() {
    for (auto& f : files_) {  // what CUPTI and the size limit leave for the merge to set right
      attribute_device_launched_records(f);
      drop_launches_after_limit(f);
    }
    trace_folder::set_aside_cyclic_graphs(files_, out_.notes);
    assign_ranks();
    time_base();
    // Devices in the order the processes name them, so the numbering follows the ranks.
    local_to_global_.resize(files_.size());
    for (std::size_t p = 0; p < files_.size(); ++p)
      for (const auto& d : files_[p].devices) (void)global_device(p, d.ordinal);
    group_graphs();
    place_records();
    align_clocks();
    for (std::size_t p = 0; p < files_.size(); ++p)
      nvtx_.push_back(process_nvtx(files_[p], static_cast<std::int64_t>(host_offset_ns_[host_of(p)])));
    trace_environment(files_, out_.run.env);
    build_variants();
    add_outside_work(out_.run.variants, processes_, pids_);
    trace_folder::check_merged(out_.run, out_.notes);
    completeness();
    return std::move(out_);
  }

 private:
  // Ranks: RANK where set, then host and pid; stable for a given set of files.
  void assign_ranks() {
    std::stable_sort(files_.begin(), files_.end(), [](const ProcessFile& a, const ProcessFile& b) {
      const int ra = a.rank.value_or(std::numeric_limits<int>::max());
      const int rb = b.rank.value_or(std::numeric_limits<int>::max());
      if (ra != rb) return ra < rb;
      if (a.host != b.host) return a.host < b.host;
      return a.pid < b.pid;
    });
  }

  void time_base() {
    for (const auto& f : files_)
      if (std::find(hosts_.begin(), hosts_.end(), host_key(f)) == hosts_.end()) hosts_.push_back(host_key(f));
    if (hosts_.size() > 1 && options_.clocks == ClockPolicy::same_host) {
      std::set<std::string> names;
      for (const auto& f : files_) names.insert(f.host.empty() ? std::string("?") : f.host);
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw InputError(fmt::format(
          "the record files come from {} hosts ({}) whose clocks differ; pass --assume-synced if their clocks are "
          "synchronised, or --align-collectives to align them on matched collective ends",
          hosts_.size(), list));
    }
    out_.clock_text =
        hosts_.size() <= 1 ? "one host: CUPTI timestamps of all processes share CLOCK_REALTIME"
        : options_.clocks == ClockPolicy::assume_synced
            ? fmt::format("{} hosts, clocks declared synchronised (--assume-synced): not checked", hosts_.size())
            : "";
    host_offset_ns_.assign(hosts_.size(), 0.0);
  }

  // Devices on one global numbering; key: host + UUID (or host + pid + ordinal without a UUID).
  int global_device(std::size_t p, int local) {
    if (local < 0) return -1;
    auto& map = local_to_global_[p];
    if (static_cast<std::size_t>(local) < map.size() && map[static_cast<std::size_t>(local)] >= 0)
      return map[static_cast<std::size_t>(local)];
    const ProcessFile& f = files_[p];
    std::string key;
    DeviceInfo info;
    for (const auto& d : f.devices)
      if (d.ordinal == local) {
        key = d.uuid.empty() ? "" : f.host + "/" + d.uuid;
        info.name = d.name;
        info.pci_bus_id = d.pci_bus_id;
      }
    if (key.empty()) key = fmt::format("{}/pid{}/dev{}", f.host, f.pid, local);
    auto [it, added] = device_index_.emplace(key, static_cast<int>(device_index_.size()));
    if (added) {
      info.ordinal = it->second;
      if (info.name.empty()) info.name = "GPU";
      if (hosts_.size() > 1) info.name += " @" + f.host;
      out_.run.env.devices.push_back(info);
    }
    if (map.size() <= static_cast<std::size_t>(local)) map.resize(static_cast<std::size_t>(local) + 1, -1);
    map[static_cast<std::size_t>(local)] = it->second;
    return it->second;
  }

  // The graph chunk a launch ran: its exec at its version, else the exec's latest earlier version.
  [[nodiscard]] int graph_of_launch(std::size_t p, const tracefile::WireLaunch& l) const {
    int best = -1;
    const auto& graphs = files_[p].graphs;
    for (std::size_t g = 0; g < graphs.size(); ++g)
      if (graphs[g].exec == l.exec && graphs[g].version <= l.version &&
          (best < 0 || graphs[g].version > graphs[static_cast<std::size_t>(best)].version))
        best = static_cast<int>(g);
    return best;
  }

  // Groups: a graph's copies in processes tied by a collective (or --ranks-together) are ranks of
  // one replay; any other process's graph is its own group, as is each graph without topology. Two
  // executables of one process are two groups even where their graphs have one shape (shape_ordinal).
  void group_graphs() {
    index_.reserve(files_.size());
    std::map<std::tuple<std::uint64_t, std::uint32_t, std::size_t, std::size_t>, int> group_of_key;
    group_of_graph_.resize(files_.size());
    bucket_.resize(files_.size());
    for (const auto& f : files_) index_.push_back(index_process(f));
    classify_shapes(files_, index_);
    for (std::size_t p = 0; p < files_.size(); ++p) {
      const auto& graphs = files_[p].graphs;
      for (std::size_t g = 0; g < graphs.size(); ++g) {
        const TracedGraph& graph = graphs[g];
        int gi = -1;
        if (!graph.topology_error.empty()) {
          gi = new_group(p, static_cast<int>(g), graph.version, graph.topology_error);
        } else {
          const bool tied = options_.ranks_together ||
                            std::any_of(graph.nodes.begin(), graph.nodes.end(),
                                        [](const auto& n) { return n.type == "kernel" && is_collective(n.name); });
          const auto key =
              std::make_tuple(index_[p].graph_fingerprint[g], graph.version,
                              tied ? std::numeric_limits<std::size_t>::max() : p, index_[p].shape_ordinal[g]);
          auto [it, added] = group_of_key.emplace(key, static_cast<int>(groups_.size()));
          if (added) new_group(p, static_cast<int>(g), graph.version, "");
          gi = it->second;
          auto& procs = groups_[static_cast<std::size_t>(gi)].processes;
          if (std::find(procs.begin(), procs.end(), p) == procs.end()) procs.push_back(p);
        }
        group_of_graph_[p].push_back(gi);
      }
      // Launched executables whose graph chunk never came: their records are kept per stream.
      for (const auto& l : files_[p].launches)
        if (l.exec != 0 && graph_of_launch(p, l) < 0 && !bucket_[p].count(l.exec))
          bucket_[p][l.exec] = new_group(p, -1, l.version, fmt::format("no graph chunk for executable {}", l.exec));
    }
  }

  int new_group(std::size_t p, int graph, std::uint32_t version, std::string reason) {
    Group grp;
    grp.processes = {p};
    grp.template_process = p;
    grp.template_graph = graph;
    grp.version = version;
    grp.topology = reason.empty();
    grp.reason = std::move(reason);
    groups_.push_back(std::move(grp));
    return static_cast<int>(groups_.size()) - 1;
  }

  // The group (variant) a launch belongs to; -1: none.
  [[nodiscard]] int group_of_launch(std::size_t p, const tracefile::WireLaunch& l) const {
    if (l.exec == 0) return -1;
    const int g = graph_of_launch(p, l);
    if (g >= 0) return group_of_graph_[p][static_cast<std::size_t>(g)];
    const auto it = bucket_[p].find(l.exec);
    return it == bucket_[p].end() ? -1 : it->second;
  }

  // Every record once: its group and node, or eager, or unmatched; the processes table.
  void place_records() {
    out_.processes.resize(files_.size());
    placement_.resize(files_.size());
    for (std::size_t p = 0; p < files_.size(); ++p) {
      const ProcessFile& f = files_[p];
      TracedProcess& tp = out_.processes[p];
      tp = process_row(f);
      std::unordered_map<std::uint32_t, int> launch_graph;  // correlation id -> graph chunk (-1: none)
      for (const auto& l : f.launches) launch_graph.emplace(l.correlation_id, l.exec != 0 ? graph_of_launch(p, l) : -1);
      std::unordered_map<std::uint32_t, int> launch_group;
      for (const auto& l : f.launches) launch_group.emplace(l.correlation_id, group_of_launch(p, l));
      Placement& at = placement_[p];
      at.group.assign(f.records.size(), -1);
      at.node.assign(f.records.size(), -1);
      for (std::size_t r = 0; r < f.records.size(); ++r) {
        const ActivityRecord& a = f.records[r];
        if (a.graph_node_id == 0) {
          ++tp.eager_records;
          if (a.end_ns > a.start_ns) tp.eager_busy_us += ns_us(a.end_ns, a.start_ns);
          continue;
        }
        ++tp.graph_records;
        const auto lg = launch_graph.find(a.correlation_id);
        const int s = index_[p].resolve(a.graph_node_id, lg == launch_graph.end() ? -1 : lg->second, f.graphs);
        if (s >= 0) {
          const Slot& slot = index_[p].slots[static_cast<std::size_t>(s)];
          at.group[r] = group_of_graph_[p][static_cast<std::size_t>(slot.graph)];
          if (groups_[static_cast<std::size_t>(at.group[r])].topology) at.node[r] = slot.node;
        } else if (const auto it = launch_group.find(a.correlation_id);
                   it != launch_group.end() && it->second >= 0 &&
                   !groups_[static_cast<std::size_t>(it->second)].topology) {
          at.group[r] = it->second;  // a graph without topology keeps every record of its launches
        } else {
          ++tp.unmatched;
          continue;
        }
        auto& grp = groups_[static_cast<std::size_t>(at.group[r])];
        if (a.start_ns != 0) grp.first_start = std::min(grp.first_start, a.start_ns);
      }
    }
  }

  // Hosts' clocks aligned on collective ends: per group with processes on the first host and on
  // host h, per collective node and launch ordinal, end on host h - end on the first host.
  void align_clocks() {
    if (hosts_.size() > 1 && options_.clocks == ClockPolicy::align_collectives) {
      std::vector<std::vector<double>> diffs(hosts_.size());
      for (std::size_t gi = 0; gi < groups_.size(); ++gi) {
        std::map<std::pair<int, int>, std::vector<std::pair<std::size_t, std::uint64_t>>> ends;
        for (const std::size_t p : groups_[gi].processes) {
          const auto ordinal = ordinals(gi, p, false);
          const auto& graphs = files_[p].graphs;
          for (std::size_t r = 0; r < files_[p].records.size(); ++r) {
            const int node = placement_[p].node[r];
            if (placement_[p].group[r] != static_cast<int>(gi) || node < 0) continue;
            const auto& info =
                graphs[static_cast<std::size_t>(groups_[gi].template_graph)].nodes[static_cast<std::size_t>(node)];
            if (info.type != "kernel" || !is_collective(info.name)) continue;
            const auto& a = files_[p].records[r];
            ends[{node, ordinal.at(a.correlation_id)}].emplace_back(p, a.end_ns);
          }
        }
        for (const auto& [key, list] : ends) {
          const auto first =
              std::find_if(list.begin(), list.end(), [&](const auto& e) { return host_of(e.first) == 0; });
          if (first == list.end()) continue;
          for (const auto& [p, end] : list)
            if (host_of(p) != 0)
              diffs[host_of(p)].push_back(static_cast<double>(static_cast<std::int64_t>(end - first->second)));
        }
      }
      std::string text = fmt::format("{} hosts aligned on collective ends:", hosts_.size());
      for (std::size_t h = 1; h < hosts_.size(); ++h) {
        if (diffs[h].empty())
          throw InputError(fmt::format(
              "--align-collectives: host {} shares no collective (nccl kernel in a matched graph) with host {}; "
              "pass --assume-synced instead",
              hosts_[h], hosts_[0]));
        const double offset = stats::median(diffs[h]);
        std::vector<double> residual;
        for (const double d : diffs[h]) residual.push_back(std::abs(d - offset));
        host_offset_ns_[h] = -offset;
        text += fmt::format(" host {} shifted by {:.1f} µs (residual {:.2f} µs over {} collective ends);", h,
                            -offset / 1000.0, stats::median(residual) / 1000.0, diffs[h].size());
      }
      out_.clock_text = text + " skews are then arrival skews relative to the collectives' ends";
    }
    for (std::size_t p = 0; p < files_.size(); ++p)
      out_.processes[p].clock_offset_us = host_offset_ns_[host_of(p)] / 1000.0;
  }

  [[nodiscard]] std::size_t host_of(std::size_t p) const {
    return static_cast<std::size_t>(std::find(hosts_.begin(), hosts_.end(), host_key(files_[p])) - hosts_.begin());
  }

  [[nodiscard]] std::uint64_t shift(std::size_t p, std::uint64_t t) const {
    const double off = host_offset_ns_[host_of(p)];
    if (t == 0 || off == 0) return t;
    const auto delta = static_cast<std::int64_t>(off);
    return delta >= 0 ? t + static_cast<std::uint64_t>(delta) : t - static_cast<std::uint64_t>(-delta);
  }

  [[nodiscard]] std::size_t launched(std::size_t gi) const {
    std::size_t n = 0;
    for (const std::size_t p : groups_[gi].processes)
      for (const auto& l : files_[p].launches) n += group_of_launch(p, l) == static_cast<int>(gi) ? 1 : 0;
    return n;
  }

  // Launch ordinals of process p in group gi: correlation ids grow with launch order. With
  // `launches`, launches whose records were all lost count too.
  [[nodiscard]] std::map<std::uint32_t, int> ordinals(std::size_t gi, std::size_t p, bool launches) const {
    std::map<std::uint32_t, int> ord;
    for (std::size_t r = 0; r < files_[p].records.size(); ++r)
      if (placement_[p].group[r] == static_cast<int>(gi)) ord.emplace(files_[p].records[r].correlation_id, 0);
    if (launches)
      for (const auto& l : files_[p].launches)
        if (group_of_launch(p, l) == static_cast<int>(gi)) ord.emplace(l.correlation_id, 0);
    int next = 0;
    for (auto& [corr, o] : ord) o = next++;
    return ord;
  }

  // One variant per group, in order of first record; graph-N, ".vK" for version K of an updated exec.
  void build_variants() {
    std::vector<std::size_t> order(groups_.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t a, std::size_t b) { return groups_[a].first_start < groups_[b].first_start; });
    int number = 0;
    for (const std::size_t gi : order) {
      const Group& grp = groups_[gi];
      if (!grp.topology && grp.first_start == std::numeric_limits<std::uint64_t>::max() && launched(gi) == 0) {
        const ProcessFile& f = files_[grp.template_process];  // nothing to show, but still unread
        completeness_.no_topology.push_back(fmt::format("pid {}: {} (never launched)", f.pid, grp.reason));
        continue;
      }
      VariantRun v;
      v.scenario.name = fmt::format("graph-{}{}", ++number, grp.version > 0 ? fmt::format(".v{}", grp.version) : "");
      v.scenario.warmup = 0;
      v.scenario.layers = 1;
      v.scenario.issue = IssueKind::graph;
      v.scenario.geometry.ranks = static_cast<int>(grp.processes.size());
      v.graph.ranks = static_cast<int>(grp.processes.size());
      v.graph.layers = 1;
      v.visible_devices = std::max<int>(1, static_cast<int>(out_.run.env.devices.size()));
      std::vector<std::map<std::uint32_t, int>> ord;
      for (const std::size_t p : grp.processes) ord.push_back(ordinals(gi, p, true));
      int replays = 0;
      for (const auto& o : ord) replays = std::max(replays, static_cast<int>(o.size()));
      v.scenario.replays = std::max(replays, 1);
      std::vector<std::string> rank_lines = grp.topology ? graph_nodes(gi, v) : stream_graph(gi, v, ord[0]);
      if (grp.topology) move_records(gi, v, ord);
      host_launch_times(grp, v, ord[0], replays);
      std::map<int, std::set<int>> ranks_of_device;  // ranks sharing a GPU: any device used by two ranks
      for (const auto& n : v.graph.nodes) ranks_of_device[n.device].insert(n.rank);
      for (const auto& [d, ranks] : ranks_of_device) v.ranks_share_gpu = v.ranks_share_gpu || ranks.size() > 1;
      v.scenario.description =
          fmt::format("traced graph: {} nodes per rank, {} rank(s), {} launches{}",
                      v.graph.nodes.size() / grp.processes.size(), grp.processes.size(), replays,
                      grp.version > 0 ? fmt::format(", graph version {} (after {} update{})", grp.version, grp.version,
                                                    grp.version > 1 ? "s" : "")
                                      : "");
      std::string ranks_text;
      for (const auto& l : rank_lines) ranks_text += (ranks_text.empty() ? "" : "; ") + l;
      v.notes.insert(v.notes.begin(), fmt::format("traced {}: {}", v.scenario.name, ranks_text));
      if (grp.template_graph >= 0) {
        const auto& g = files_[grp.template_process].graphs[static_cast<std::size_t>(grp.template_graph)];
        v.identity = tracefile::graph_identity(g, fingerprint(g));
        v.notes.insert(v.notes.begin() + 1, fmt::format("traced {} is {}", v.scenario.name, v.identity));
      }
      if (grp.topology && grp.processes.size() > 1)
        add_collectives(v, files_[grp.template_process].graphs[static_cast<std::size_t>(grp.template_graph)],
                        static_cast<int>(grp.processes.size()), replays, out_.collectives);
      attach_nvtx(grp, v, ord);
      std::vector<std::int64_t> pids;
      for (const std::size_t p : grp.processes) pids.push_back(files_[p].pid);
      pids_.push_back(std::move(pids));
      processes_.emplace_back(grp.processes.begin(), grp.processes.end());
      out_.run.variants.push_back(std::move(v));
    }
  }

  // The group's graph: each rank's copy of the template's nodes and edges (with its bodies' edges),
  // labelled r<rank>.<kernel>. Returns a line per rank saying which process it is.
  std::vector<std::string> graph_nodes(std::size_t gi, VariantRun& v) {
    const Group& grp = groups_[gi];
    const TracedGraph& tmpl = files_[grp.template_process].graphs[static_cast<std::size_t>(grp.template_graph)];
    const std::size_t n_nodes = tmpl.nodes.size();
    std::vector<std::string> base_label(n_nodes);  // short kernel names, numbered where a name repeats
    {
      std::map<std::string, int> seen, total;
      std::vector<std::string> raw(n_nodes);
      for (std::size_t i = 0; i < n_nodes; ++i) {
        const auto& n = tmpl.nodes[i];
        raw[i] = n.type == "kernel" ? short_kernel_name(n.name) : (n.name.empty() ? n.type : short_kernel_name(n.name));
        ++total[raw[i]];
      }
      for (std::size_t i = 0; i < n_nodes; ++i)
        base_label[i] = total[raw[i]] > 1 ? fmt::format("{}#{}", raw[i], ++seen[raw[i]]) : raw[i];
    }
    const BodyStructure bodies = body_structure(tmpl);
    LayerGraph& lg = v.graph;
    std::vector<std::string> rank_lines;
    for (std::size_t k = 0; k < grp.processes.size(); ++k) {
      const std::size_t p = grp.processes[k];
      std::vector<int> device_of_node(n_nodes, -1);  // a node runs where its records ran
      for (std::size_t r = 0; r < files_[p].records.size(); ++r) {
        const int node = placement_[p].node[r];
        if (placement_[p].group[r] != static_cast<int>(gi) || node < 0) continue;
        auto& d = device_of_node[static_cast<std::size_t>(node)];
        if (d < 0) d = global_device(p, files_[p].records[r].device);
      }
      int fallback = -1;
      for (const int d : device_of_node)
        if (d >= 0) {
          fallback = d;
          break;
        }
      if (fallback < 0 && !files_[p].devices.empty()) fallback = global_device(p, files_[p].devices.front().ordinal);
      fallback = std::max(fallback, 0);
      const int base = static_cast<int>(lg.nodes.size());
      for (std::size_t i = 0; i < n_nodes; ++i) {
        const auto& info = tmpl.nodes[i];
        Node n;
        n.id = base + static_cast<int>(i);
        n.rank = static_cast<int>(k);
        n.stream = static_cast<int>(k);
        int d = device_of_node[i];
        if (d < 0 && info.device >= 0) d = global_device(p, info.device);
        n.device = d >= 0 ? d : fallback;
        n.kind = kind_of_type(info.type);
        n.role = Role::traced;
        n.label = fmt::format("r{}.{}", k, base_label[i]);
        n.name = info.name.empty() ? info.type : info.name;
        n.bytes = info.bytes;
        lg.nodes.push_back(std::move(n));
      }
      for (std::size_t e = 0; e < tmpl.edges.size(); ++e)
        lg.edges.push_back(Edge{base + tmpl.edges[e].first, base + tmpl.edges[e].second,
                                e < tmpl.edge_data.size() ? tmpl.edge_data[e].type : std::uint8_t{0}});
      for (const auto& [a, b] : bodies.edges) lg.edges.push_back(Edge{base + a, base + b});
      for (NestedNode nn : bodies.nesting) {
        if (nn.parent >= 0) nn.parent += base;
        v.nesting.push_back(nn);
      }
      const ProcessFile& f = files_[p];
      rank_lines.push_back(fmt::format(
          "r{} = pid {}{}{}{}, GPU {}", k, f.pid, f.host.empty() ? "" : " on " + f.host,
          f.rank ? fmt::format(" (RANK {})", *f.rank) : "",
          f.cuda_visible_devices.empty() ? "" : fmt::format(" CUDA_VISIBLE_DEVICES={}", f.cuda_visible_devices),
          fallback));
      if (!f.complete)
        v.notes.push_back(
            fmt::format("r{}'s record file is truncated ({}): later replays may be missing", k, f.truncation));
    }
    return rank_lines;
  }

  // Records: node = the rank's copy; replay = the launch's ordinal. Each record belongs to one
  // graph, so it is moved, never copied (millions of them).
  void move_records(std::size_t gi, VariantRun& v, const std::vector<std::map<std::uint32_t, int>>& ord) {
    const Group& grp = groups_[gi];
    const std::size_t n_nodes = v.graph.nodes.size() / grp.processes.size();
    for (std::size_t k = 0; k < grp.processes.size(); ++k) {
      const std::size_t p = grp.processes[k];
      const auto& at = placement_[p];
      v.records.reserve(v.records.size() +
                        static_cast<std::size_t>(std::count(at.group.begin(), at.group.end(), static_cast<int>(gi))));
      for (std::size_t r = 0; r < files_[p].records.size(); ++r) {
        if (at.group[r] != static_cast<int>(gi)) continue;
        ActivityRecord a = std::move(files_[p].records[r]);
        a.start_ns = shift(p, a.start_ns);
        a.end_ns = shift(p, a.end_ns);
        a.device = static_cast<std::int16_t>(global_device(p, a.device));
        a.stream_id = static_cast<std::uint32_t>(k);
        a.node = static_cast<int>(k * n_nodes) + at.node[r];
        a.replay = ord[k].at(a.correlation_id);
        if (a.start_ns == 0 || a.end_ns == 0) ++v.health.no_timestamp;
        v.records.push_back(std::move(a));
      }
      v.health.dropped += files_[p].dropped;
    }
  }

  // A graph without topology: its records as a per-stream timeline, nodes made from what ran.
  std::vector<std::string> stream_graph(std::size_t gi, VariantRun& v, const std::map<std::uint32_t, int>& ord) {
    const Group& grp = groups_[gi];
    const std::size_t p = grp.template_process;
    const auto& at = placement_[p];
    int device = files_[p].devices.empty() ? 0 : global_device(p, files_[p].devices.front().ordinal);
    for (std::size_t r = 0; r < files_[p].records.size(); ++r) {
      if (at.group[r] != static_cast<int>(gi)) continue;
      ActivityRecord a = std::move(files_[p].records[r]);
      a.start_ns = shift(p, a.start_ns);
      a.end_ns = shift(p, a.end_ns);
      a.device = static_cast<std::int16_t>(global_device(p, a.device));
      device = a.device;
      a.replay = ord.at(a.correlation_id);
      if (a.start_ns == 0 || a.end_ns == 0) ++v.health.no_timestamp;
      v.records.push_back(std::move(a));
    }
    v.health.dropped += files_[p].dropped;
    stream_nodes(v.records, v.graph, v.nesting, std::max(device, 0));
    v.topology_error = grp.reason;
    const std::uint32_t exec =
        grp.template_graph >= 0 ? files_[p].graphs[static_cast<std::size_t>(grp.template_graph)].exec : 0;
    completeness_.no_topology.push_back(
        fmt::format("pid {}{}: {}", files_[p].pid, exec ? fmt::format(" exec {}", exec) : "", grp.reason));
    return {fmt::format("r0 = pid {}{}, no topology: {}", files_[p].pid,
                        files_[p].host.empty() ? "" : " on " + files_[p].host, grp.reason)};
  }

  // Host launch time of each replay, from the first rank's launch calls.
  void host_launch_times(const Group& grp, VariantRun& v, const std::map<std::uint32_t, int>& ord, int replays) {
    std::vector<double> per_replay(static_cast<std::size_t>(replays), -1.0);
    for (const auto& l : files_[grp.processes.front()].launches) {
      const auto it = ord.find(l.correlation_id);
      if (it == ord.end() || l.host_end_ns < l.host_start_ns || l.host_start_ns == 0) continue;
      per_replay[static_cast<std::size_t>(it->second)] = ns_us(l.host_end_ns, l.host_start_ns);
    }
    for (const double us : per_replay)
      if (us >= 0) v.host_launch_us.push_back(us);
  }

  // The NVTX ranges of the group's processes, and those open around its launches (nvtx_timeline.hpp).
  void attach_nvtx(const Group& grp, VariantRun& v, const std::vector<std::map<std::uint32_t, int>>& ord) const {
    std::vector<RankLaunches> ranks;
    for (std::size_t k = 0; k < grp.processes.size(); ++k) {
      const std::size_t p = grp.processes[k];
      RankLaunches& rank = ranks.emplace_back(RankLaunches{nvtx_[p], {}});
      for (const auto& l : files_[p].launches)  // ord holds the group's launches (and records) alone
        if (l.host_start_ns != 0 && ord[k].contains(l.correlation_id)) rank.starts.push_back(shift(p, l.host_start_ns));
      v.nvtx.push_back(nvtx_[p]);
    }
    if (std::all_of(v.nvtx.begin(), v.nvtx.end(), [](const auto& t) { return t == nullptr; })) return v.nvtx.clear();
    v.nvtx_launches = nvtx_launches(ranks);
  }

  // What the trace could not see, the rank rule, the whole-trace notes (every variant repeats them).
  void completeness() {
    TraceCompleteness& c = completeness_;
    std::size_t tied = 0, alone = 0;
    for (const auto& v : out_.run.variants) (v.graph.ranks > 1 ? tied : alone) += 1;
    c.rank_rule = options_.ranks_together
                      ? "ranks: --ranks-together: processes that launch the same graph are ranks of one replay, "
                        "launches matched by ordinal"
                      : fmt::format(
                            "ranks: processes are ranks of one replay only where their graphs hold a collective "
                            "(a kernel named nccl*), launches matched by ordinal; otherwise each process's "
                            "graph is analysed on its own, other work on its GPU is contention named by process "
                            "({} graph{} with several ranks, {} on {} own)",
                            tied, tied == 1 ? "" : "s", alone, alone == 1 ? "its" : "their");
    for (const auto& f : files_) {
      for (const auto& n : f.notes) {
        out_.notes.push_back(fmt::format("pid {}: {}", f.pid, n));
        if (n.starts_with("profiler:") || n.find("another tool holds CUPTI") != std::string::npos)
          c.profiler.push_back(fmt::format("pid {}: {}", f.pid, n));
        if (n.starts_with(tracefile::kYieldedNote)) ++c.yielded;
      }
      for (auto& line : tracefile::recording_lines(f)) c.recording.push_back(std::move(line));
      if (!f.complete) {
        out_.notes.push_back(fmt::format("pid {}: record file truncated ({})", f.pid, f.truncation));
        c.truncated.push_back(fmt::format("pid {}: {}", f.pid, f.truncation));
      }
      add_device_launched(f, c.unseen);
    }
    for (const auto& tp : out_.processes) {
      c.records += tp.graph_records;
      c.launches += tp.launches;
      c.eager_records += tp.eager_records;
      c.unmatched += tp.unmatched;
      if (tp.unmatched > 0)
        out_.notes.push_back(
            fmt::format("pid {}: {} graph records matched no node of a recorded graph", tp.pid, tp.unmatched));
    }
    if (files_.empty()) out_.notes.push_back("no process under the command initialised CUDA: no CUDA work was seen");
    else if (out_.run.variants.empty())
      out_.notes.push_back("no CUDA graph was launched: only eager work was seen (see the processes table)");
    trace_folder::copy_notes_into_graphs(out_);
    out_.run.trace = c;
  }

  std::vector<ProcessFile> files_;
  TraceMergeOptions options_;
  TracedRun out_;
  TraceCompleteness completeness_;
  std::vector<std::string> hosts_;
  std::vector<double> host_offset_ns_;  // [host]
  std::map<std::string, int> device_index_;
  std::vector<std::vector<int>> local_to_global_;
  std::vector<ProcessIndex> index_;
  std::vector<std::vector<int>> group_of_graph_;      // [process][graph chunk] -> group
  std::vector<std::map<std::uint32_t, int>> bucket_;  // [process] exec without a graph chunk -> group
  std::vector<Group> groups_;
  std::vector<Placement> placement_;                       // [process]
  std::vector<std::vector<std::int64_t>> pids_;            // [variant][rank]
  std::vector<std::vector<int>> processes_;                // [variant][rank]: index in files_
  std::vector<std::shared_ptr<const NvtxTimeline>> nvtx_;  // [process]: null where it recorded none
};

}  // namespace

TracedRun merge_traces(std::vector<ProcessFile> files, const TraceMergeOptions& options) {
  return Merger(std::move(files), options).run();
}

}  // namespace tpgraph
