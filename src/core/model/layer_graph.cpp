#include "core/model/layer_graph.hpp"

#include <fmt/core.h>

#include <algorithm>

namespace tpgraph {
namespace {

constexpr std::int64_t kF32 = 4;
constexpr std::int64_t kU16 = 2;
constexpr std::int64_t kI32 = 4;

// Bytes each kernel reads and writes and the flops it does, counted from the geometry and the
// routing (the weights of active experts only: a grouped GEMM never reads an idle expert).
struct Costs {
  std::int64_t pairs, hidden, ff, tokens, active;

  [[nodiscard]] std::int64_t weights(std::int64_t rows, std::int64_t cols) const {
    return active * (nvfp4_matrix_bytes(rows, cols) + kF32);
  }
  [[nodiscard]] std::int64_t gate_bytes() const {  // gate and up: z16/zs in, g or u out
    return weights(ff, hidden) + pairs * (hidden * kU16 + kF32) + pairs * ff * kF32;
  }
  // In double: pairs * hidden * ff reaches 2^63 at the geometry's upper bounds.
  [[nodiscard]] double gate_flops() const {
    return 2.0 * static_cast<double>(pairs) * static_cast<double>(hidden) * static_cast<double>(ff);
  }
};

class Builder {
 public:
  Builder(const Scenario& s, std::int64_t n_pairs, int n_active, int visible_devices)
      : s_(s), visible_(visible_devices) {
    const auto& g = s.geometry;
    c_ = Costs{n_pairs, g.hidden, g.ff, g.tokens, n_active};
    tail_.assign(static_cast<std::size_t>(g.ranks), -1);
    graph_.ranks = g.ranks;
    graph_.layers = s.layers;
  }

  LayerGraph build() {
    for (int l = 0; l < s_.layers; ++l) layer(l);
    for (int r = 1; r < s_.geometry.ranks; ++r) {
      const int last = tail(r);
      if (last >= 0 && !has_successor(last)) graph_.end_joins.push_back(last);
    }
    return std::move(graph_);
  }

 private:
  int tail(int rank) const { return tail_[static_cast<std::size_t>(rank)]; }

  bool has_successor(int node) const {
    return std::any_of(graph_.edges.begin(), graph_.edges.end(), [&](const Edge& e) { return e.from == node; });
  }

  // Edges are added while their target is the newest node, so they stay sorted by `to` and a
  // duplicate can only sit at the back.
  void edge(int from, int to) {
    if (from < 0) return;
    for (auto it = graph_.edges.rbegin(); it != graph_.edges.rend() && it->to == to; ++it)
      if (it->from == from) return;
    graph_.edges.push_back({from, to});
  }

  // Appends a node on `rank`'s stream after that stream's last node; `cross` are its cross-stream
  // predecessors (ids < the new id, -1 ignored).
  int add(int layer, int rank, NodeKind kind, Role role, std::string_view name, std::int64_t bytes, double flops,
          std::initializer_list<int> cross = {}, int peer = -1) {
    Node n;
    n.id = static_cast<int>(graph_.nodes.size());
    n.layer = layer;
    n.rank = rank;
    n.stream = rank;
    n.device = s_.device_of(rank, visible_);
    n.kind = kind;
    n.role = role;
    n.peer = peer;
    n.label = s_.layers > 1 ? fmt::format("L{}.{}", layer, name) : std::string(name);
    n.bytes = bytes;
    n.flops = flops;
    graph_.nodes.push_back(std::move(n));
    const int id = graph_.nodes.back().id;
    edge(tail(rank), id);
    for (int from : cross) edge(from, id);
    // Layers joined with join none: the root's first node of a layer rejoins every other stream.
    if (rank == 0) {
      for (int from : pending_root_joins_) edge(from, id);
      pending_root_joins_.clear();
    }
    tail_[static_cast<std::size_t>(rank)] = id;
    return id;
  }

  void peer_copy(int layer, int r, std::initializer_list<int> cross) {
    add(layer, r, NodeKind::copy, Role::peer_copy, fmt::format("r0->r{}.copy", r),
        std::int64_t{s_.copy_row_count()} * c_.hidden * kF32, 0, cross, r);
  }

  void chain(int layer, int r, int fork_from) {
    const std::string p = fmt::format("r{}.", r);
    // With peer_copy first, the rank's copy already forked its stream at the layer start.
    const bool forked_by_copy = s_.peer_copy == PeerCopy::first;
    add(layer, r, NodeKind::event, Role::span_begin, p + "begin", 0, 0, {r > 0 && !forked_by_copy ? fork_from : -1});
    if (s_.peer_copy == PeerCopy::per_rank && r > 0) peer_copy(layer, r, {});
    const std::int64_t work = working_set_bytes(s_.geometry);
    if (s_.alloc == AllocKind::fresh) add(layer, r, NodeKind::alloc, Role::alloc, p + "alloc", work, 0);

    const auto P = c_.pairs, H = c_.hidden, F = c_.ff, T = c_.tokens;
    const auto pd = static_cast<double>(P);
    // gather+quantize: read the token row of every pair, write z16 and zs.
    add(layer, r, NodeKind::quantize, Role::quantize_z, p + "quant_z", P * H * kF32 + P * (H * kU16 + kF32) + P * kI32,
        pd * static_cast<double>(H));
    add(layer, r, NodeKind::gemm, Role::gate, p + "gate", c_.gate_bytes(), c_.gate_flops());
    add(layer, r, NodeKind::gemm, Role::up, p + "up", c_.gate_bytes(), c_.gate_flops());
    // silu(g) * u = g / (1 + exp(-g)) * u: exp, add, divide, multiply.
    add(layer, r, NodeKind::swiglu, Role::swiglu, p + "swiglu", 3 * P * F * kF32, 4.0 * pd * static_cast<double>(F));
    add(layer, r, NodeKind::quantize, Role::quantize_a, p + "quant_a", P * F * kF32 + P * (F * kU16 + kF32),
        pd * static_cast<double>(F));
    add(layer, r, NodeKind::gemm, Role::down, p + "down", c_.weights(H, F) + P * (F * kU16 + kF32) + P * H * kF32,
        c_.gate_flops());
    // combine: one fma per pair and element; reads y, the pair rows and weights, writes out.
    add(layer, r, NodeKind::combine, Role::combine, p + "combine", P * H * kF32 + P * 2 * kI32 + T * H * kF32,
        2.0 * pd * static_cast<double>(H));
    if (s_.alloc == AllocKind::fresh) add(layer, r, NodeKind::free_mem, Role::free_mem, p + "free", work, 0);
    add(layer, r, NodeKind::event, Role::span_end, p + "end", 0, 0);
  }

  void layer(int l) {
    const int ranks = s_.geometry.ranks;
    const int layer_start = tail(0);  // the previous layer's join on the root, if any
    if (s_.peer_copy == PeerCopy::first) {
      for (int r = 1; r < ranks; ++r) peer_copy(l, r, {layer_start});
    }
    for (int k = 0; k < s_.root_busy; ++k) {
      add(l, 0, NodeKind::busy, Role::busy, fmt::format("r0.busy{}", k), c_.gate_bytes(), c_.gate_flops());
    }
    const int fork_from = tail(0);  // the root's last node before r0.begin, if any
    std::vector<int> rank_end(static_cast<std::size_t>(ranks), -1);
    for (int r = 0; r < ranks; ++r) {
      chain(l, r, fork_from);
      rank_end[static_cast<std::size_t>(r)] = tail(r);
    }
    const auto T = c_.tokens, H = c_.hidden;
    if (s_.join != JoinKind::none) {
      for (int r = 1; r < ranks; ++r) {
        add(l, 0, NodeKind::copy, Role::join_copy, fmt::format("r{}->r0.copy", r), T * H * kF32, 0,
            {rank_end[static_cast<std::size_t>(r)]}, r);
      }
      if (s_.join == JoinKind::reduce && ranks > 1) {
        add(l, 0, NodeKind::reduce, Role::reduce, "r0.reduce", (ranks + 1) * T * H * kF32,
            static_cast<double>((ranks - 1) * T * H));
      }
    } else {
      for (int r = 1; r < ranks; ++r) pending_root_joins_.push_back(rank_end[static_cast<std::size_t>(r)]);
    }
  }

  const Scenario& s_;
  int visible_;
  Costs c_{};
  LayerGraph graph_;
  std::vector<int> tail_;
  std::vector<int> pending_root_joins_;
};

}  // namespace

std::string_view to_string(NodeKind k) {
  switch (k) {
    case NodeKind::busy: return "busy";
    case NodeKind::quantize: return "quantize";
    case NodeKind::gemm: return "gemm";
    case NodeKind::swiglu: return "swiglu";
    case NodeKind::combine: return "combine";
    case NodeKind::reduce: return "reduce";
    case NodeKind::copy: return "copy";
    case NodeKind::alloc: return "alloc";
    case NodeKind::free_mem: return "free";
    case NodeKind::event: return "event";
    case NodeKind::kernel: return "kernel";
    case NodeKind::memset: return "memset";
    case NodeKind::other: return "other";
  }
  return "?";
}

std::string_view to_string(Role r) {
  switch (r) {
    case Role::busy: return "busy";
    case Role::quantize_z: return "quant_z";
    case Role::gate: return "gate";
    case Role::up: return "up";
    case Role::swiglu: return "swiglu";
    case Role::quantize_a: return "quant_a";
    case Role::down: return "down";
    case Role::combine: return "combine";
    case Role::peer_copy: return "peer_copy";
    case Role::join_copy: return "join_copy";
    case Role::reduce: return "reduce";
    case Role::alloc: return "alloc";
    case Role::free_mem: return "free";
    case Role::span_begin: return "begin";
    case Role::span_end: return "end";
    case Role::traced: return "traced";
  }
  return "?";
}

CudaNodeType cuda_node_type(NodeKind k) {
  switch (k) {
    case NodeKind::copy: return CudaNodeType::memcpy;
    case NodeKind::alloc: return CudaNodeType::mem_alloc;
    case NodeKind::free_mem: return CudaNodeType::mem_free;
    case NodeKind::event: return CudaNodeType::event_record;
    case NodeKind::memset: return CudaNodeType::memset;
    case NodeKind::other: return CudaNodeType::other;
    default: return CudaNodeType::kernel;
  }
}

std::string_view to_string(CudaNodeType t) {
  switch (t) {
    case CudaNodeType::kernel: return "kernel";
    case CudaNodeType::memcpy: return "memcpy";
    case CudaNodeType::mem_alloc: return "mem_alloc";
    case CudaNodeType::mem_free: return "mem_free";
    case CudaNodeType::event_record: return "event_record";
    case CudaNodeType::memset: return "memset";
    case CudaNodeType::other: return "other";
  }
  return "?";
}

std::vector<int> LayerGraph::predecessors(int node) const {
  std::vector<int> out;
  for (const auto& e : edges)
    if (e.to == node) out.push_back(e.from);
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> LayerGraph::successors(int node) const {
  std::vector<int> out;
  for (const auto& e : edges)
    if (e.from == node) out.push_back(e.to);
  std::sort(out.begin(), out.end());
  return out;
}

std::map<std::pair<int, CudaNodeType>, int> LayerGraph::cuda_node_counts() const {
  std::map<std::pair<int, CudaNodeType>, int> counts;
  for (const auto& n : nodes) ++counts[{n.rank, cuda_node_type(n.kind)}];
  return counts;
}

const Node* LayerGraph::find(std::string_view label) const {
  for (const auto& n : nodes)
    if (n.label == label) return &n;
  return nullptr;
}

std::vector<int> LayerGraph::stream_nodes(int rank) const {
  std::vector<int> out;
  for (const auto& n : nodes)
    if (n.stream == rank) out.push_back(n.id);
  return out;
}

LayerGraph build_layer_graph(const Scenario& s, const Routing& routing, int visible_devices) {
  return Builder(s, routing.n_pairs(), routing.n_active(), visible_devices).build();
}

LayerGraph build_layer_graph(const Scenario& s, std::int64_t n_pairs, int n_active, int visible_devices) {
  return Builder(s, n_pairs, n_active, visible_devices).build();
}

}  // namespace tpgraph
