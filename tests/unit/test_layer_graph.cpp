#include "catch.hpp"

#include <algorithm>
#include <iterator>
#include <string>

#include "core/model/layer_graph.hpp"

using namespace tpgraph;

namespace {

// Small geometry: the graph's shape does not depend on it, and the tests stay fast.
Scenario small(int ranks = 2) {
  Scenario s;
  s.geometry.tokens = 43;
  s.geometry.ranks = ranks;
  return s;
}

LayerGraph build(const Scenario& s, int visible = 2) {
  return build_layer_graph(s, build_routing(s.geometry), visible);
}

int count(const LayerGraph& g, int rank, CudaNodeType t) {
  const auto counts = g.cuda_node_counts();
  const auto it = counts.find({rank, t});
  return it == counts.end() ? 0 : it->second;
}

int count_kind(const LayerGraph& g, NodeKind k) {
  return static_cast<int>(std::count_if(g.nodes.begin(), g.nodes.end(), [&](const Node& n) { return n.kind == k; }));
}

int id_of(const LayerGraph& g, const std::string& label) {
  const Node* n = g.find(label);
  INFO(label);
  REQUIRE(n != nullptr);
  return n->id;
}

bool has_edge(const LayerGraph& g, const std::string& from, const std::string& to) {
  const int a = id_of(g, from), b = id_of(g, to);
  const auto preds = g.predecessors(b);
  return std::find(preds.begin(), preds.end(), a) != preds.end();
}

// Every edge goes forward in issue order, each stream's nodes are chained, and nothing else on a
// stream is linked (so the capture can issue nodes in id order).
void check_well_formed(const LayerGraph& g) {
  for (std::size_t i = 0; i < g.nodes.size(); ++i) REQUIRE(g.nodes[i].id == static_cast<int>(i));
  for (const auto& e : g.edges) {
    REQUIRE(e.from >= 0);
    REQUIRE(e.to < static_cast<int>(g.nodes.size()));
    CHECK(e.from < e.to);
  }
  for (int r = 0; r < g.ranks; ++r) {
    const auto ids = g.stream_nodes(r);
    for (std::size_t i = 1; i < ids.size(); ++i) {
      const auto preds = g.predecessors(ids[i]);
      CHECK(std::find(preds.begin(), preds.end(), ids[i - 1]) != preds.end());
      for (int p : preds) {
        if (g.nodes[static_cast<std::size_t>(p)].stream == r) CHECK(p == ids[i - 1]);
      }
    }
  }
  for (const auto& n : g.nodes) {
    CHECK(n.stream == n.rank);
    CHECK(g.find(n.label) == &n);  // labels are unique
  }
}

}  // namespace

TEST_CASE("baseline: each rank runs its chain between two span events", "[layer_graph]") {
  const auto g = build(small());
  for (int r = 0; r < 2; ++r) {
    CHECK(count(g, r, CudaNodeType::kernel) == 7);
    CHECK(count(g, r, CudaNodeType::event_record) == 2);
    CHECK(count(g, r, CudaNodeType::memcpy) == 0);
  }
  CHECK(g.nodes.size() == 18);
  const char* chain[] = {"begin", "quant_z", "gate", "up", "swiglu", "quant_a", "down", "combine", "end"};
  for (int r = 0; r < 2; ++r) {
    for (std::size_t i = 1; i < std::size(chain); ++i) {
      const auto p = "r" + std::to_string(r) + ".";
      CHECK(has_edge(g, p + chain[i - 1], p + chain[i]));
    }
  }
  // Nothing precedes the first layer's fork, so nothing crosses ranks; rank 1 rejoins at the end.
  CHECK(std::none_of(g.edges.begin(), g.edges.end(), [&](const Edge& e) { return g.cross_rank(e); }));
  REQUIRE(g.end_joins.size() == 1);
  CHECK(g.end_joins[0] == id_of(g, "r1.end"));
  check_well_formed(g);
}

TEST_CASE("nodes carry their role, kind, device and costs", "[layer_graph]") {
  auto s = small();
  s.devices = {0, 0};
  const auto routing = build_routing(s.geometry);
  const auto g = build_layer_graph(s, routing, 1);
  const Node& gate = g.nodes[static_cast<std::size_t>(id_of(g, "r1.gate"))];
  CHECK(gate.kind == NodeKind::gemm);
  CHECK(gate.role == Role::gate);
  CHECK(gate.rank == 1);
  CHECK(gate.device == 0);
  const double pairs = 344;
  CHECK(gate.flops == 2.0 * pairs * 4096 * 640);
  CHECK(gate.bytes > routing.n_active() * nvfp4_matrix_bytes(640, 4096));
  const Node& down = g.nodes[static_cast<std::size_t>(id_of(g, "r0.down"))];
  CHECK(down.flops == 2.0 * pairs * 640 * 4096);
  CHECK(g.find("r0.nothing") == nullptr);
}

TEST_CASE("ranks get their device from the scenario", "[layer_graph]") {
  const auto g = build(small(), 2);
  CHECK(g.find("r0.gate")->device == 0);
  CHECK(g.find("r1.gate")->device == 1);
}

TEST_CASE("peer copy per-rank adds one copy per non-root rank on that rank's stream", "[layer_graph]") {
  auto s = small(4);
  s.peer_copy = PeerCopy::per_rank;
  s.copy_rows = 32;
  const auto g = build(s);
  CHECK(count(g, 0, CudaNodeType::memcpy) == 0);
  for (int r = 1; r < 4; ++r) {
    CHECK(count(g, r, CudaNodeType::memcpy) == 1);
    const auto label = "r0->r" + std::to_string(r) + ".copy";
    const Node& c = g.nodes[static_cast<std::size_t>(id_of(g, label))];
    CHECK(c.role == Role::peer_copy);
    CHECK(c.peer == r);
    CHECK(c.rank == r);
    CHECK(c.bytes == 32 * 4096 * 4);
    CHECK(has_edge(g, "r" + std::to_string(r) + ".begin", label));
    CHECK(has_edge(g, label, "r" + std::to_string(r) + ".quant_z"));
  }
  check_well_formed(g);
}

TEST_CASE("peer copy first issues every copy before any compute", "[layer_graph]") {
  auto s = small(3);
  s.peer_copy = PeerCopy::first;
  s.root_busy = 2;
  const auto g = build(s);
  const int first_root = id_of(g, "r0.busy0");
  for (int r = 1; r < 3; ++r) {
    const auto label = "r0->r" + std::to_string(r) + ".copy";
    CHECK(id_of(g, label) < first_root);
    CHECK(g.predecessors(id_of(g, label)).empty());  // layer 0: nothing before it
    CHECK(has_edge(g, label, "r" + std::to_string(r) + ".begin"));
    // The copy forked the stream: the chain does not wait for the root's busy work.
    CHECK_FALSE(has_edge(g, "r0.busy1", "r" + std::to_string(r) + ".begin"));
  }
  CHECK(count_kind(g, NodeKind::copy) == 2);
  check_well_formed(g);
}

TEST_CASE("root busy adds K kernels on the root before the fork", "[layer_graph]") {
  auto s = small();
  s.root_busy = 4;
  const auto g = build(s);
  CHECK(count(g, 0, CudaNodeType::kernel) == 7 + 4);
  CHECK(count(g, 1, CudaNodeType::kernel) == 7);
  CHECK(count_kind(g, NodeKind::busy) == 4);
  CHECK(has_edge(g, "r0.busy3", "r0.begin"));
  CHECK(has_edge(g, "r0.busy3", "r1.begin"));  // the fork
  CHECK(g.find("r0.busy0")->role == Role::busy);
  check_well_formed(g);
}

TEST_CASE("join copy adds a copy per non-root rank on the root; reduce adds one kernel", "[layer_graph]") {
  auto s = small(3);
  s.join = JoinKind::copy;
  const auto copy = build(s);
  CHECK(count(copy, 0, CudaNodeType::memcpy) == 2);
  CHECK(count_kind(copy, NodeKind::reduce) == 0);
  for (int r = 1; r < 3; ++r) {
    const auto label = "r" + std::to_string(r) + "->r0.copy";
    const Node& c = copy.nodes[static_cast<std::size_t>(id_of(copy, label))];
    CHECK(c.role == Role::join_copy);
    CHECK(c.peer == r);
    CHECK(c.rank == 0);
    CHECK(c.bytes == 43 * 4096 * 4);
    CHECK(has_edge(copy, "r" + std::to_string(r) + ".end", label));
  }
  CHECK(has_edge(copy, "r0.end", "r1->r0.copy"));
  CHECK(copy.end_joins.empty());
  check_well_formed(copy);

  s.join = JoinKind::reduce;
  const auto reduce = build(s);
  CHECK(count(reduce, 0, CudaNodeType::kernel) == 7 + 1);
  CHECK(has_edge(reduce, "r2->r0.copy", "r0.reduce"));
  CHECK(reduce.find("r0.reduce")->role == Role::reduce);
  check_well_formed(reduce);
}

TEST_CASE("one rank has nothing to join", "[layer_graph]") {
  auto s = small(1);
  s.join = JoinKind::reduce;
  s.peer_copy = PeerCopy::per_rank;
  const auto g = build(s);
  CHECK(g.nodes.size() == 9);
  CHECK(count_kind(g, NodeKind::copy) == 0);
  CHECK(count_kind(g, NodeKind::reduce) == 0);
}

TEST_CASE("fresh alloc adds an alloc and a free around each rank's chain", "[layer_graph]") {
  auto s = small();
  s.alloc = AllocKind::fresh;
  s.layers = 2;
  const auto g = build(s);
  for (int r = 0; r < 2; ++r) {
    CHECK(count(g, r, CudaNodeType::mem_alloc) == 2);
    CHECK(count(g, r, CudaNodeType::mem_free) == 2);
  }
  CHECK(has_edge(g, "L1.r1.alloc", "L1.r1.quant_z"));
  CHECK(has_edge(g, "L1.r1.combine", "L1.r1.free"));
  CHECK(g.find("L0.r0.alloc")->bytes == working_set_bytes(s.geometry));
  check_well_formed(g);
}

TEST_CASE("layers multiply the chain and prefix the labels", "[layer_graph]") {
  auto s = small();
  s.join = JoinKind::reduce;
  const auto one = build(s);
  s.layers = 4;
  const auto four = build(s);
  CHECK(four.nodes.size() == 4 * one.nodes.size());
  CHECK(four.find("r1.gate") == nullptr);
  for (int l = 0; l < 4; ++l) CHECK(four.find("L" + std::to_string(l) + ".r1.gate") != nullptr);
  CHECK(four.find("L2.r1->r0.copy") != nullptr);
  // The next layer forks from this layer's join.
  CHECK(has_edge(four, "L0.r0.reduce", "L1.r0.begin"));
  CHECK(has_edge(four, "L0.r0.reduce", "L1.r1.begin"));
  CHECK(count(four, 1, CudaNodeType::kernel) == 4 * 7);
  check_well_formed(four);
}

TEST_CASE("with join none the next layer's root still waits for every rank", "[layer_graph]") {
  auto s = small(3);
  s.layers = 2;
  const auto g = build(s);
  CHECK(has_edge(g, "L0.r1.end", "L1.r0.begin"));
  CHECK(has_edge(g, "L0.r2.end", "L1.r0.begin"));
  CHECK(has_edge(g, "L0.r0.end", "L1.r1.begin"));
  REQUIRE(g.end_joins.size() == 2);
  CHECK(g.end_joins[0] == id_of(g, "L1.r1.end"));
  CHECK(g.end_joins[1] == id_of(g, "L1.r2.end"));
  check_well_formed(g);
}

TEST_CASE("copy first in a later layer waits for the previous layer's join", "[layer_graph]") {
  auto s = small();
  s.layers = 2;
  s.peer_copy = PeerCopy::first;
  s.join = JoinKind::reduce;
  const auto g = build(s);
  CHECK(has_edge(g, "L0.r0.reduce", "L1.r0->r1.copy"));
  CHECK(has_edge(g, "L0.r1.end", "L1.r0->r1.copy"));
  check_well_formed(g);
}

TEST_CASE("every combination of variants gives a well-formed graph", "[layer_graph]") {
  for (auto peer : {PeerCopy::none, PeerCopy::per_rank, PeerCopy::first}) {
    for (auto join : {JoinKind::none, JoinKind::copy, JoinKind::reduce}) {
      for (auto alloc : {AllocKind::resident, AllocKind::fresh}) {
        for (int busy : {0, 2}) {
          for (int layers : {1, 3}) {
            auto s = small(3);
            s.peer_copy = peer;
            s.join = join;
            s.alloc = alloc;
            s.root_busy = busy;
            s.layers = layers;
            const auto g = build(s);
            INFO(to_string(peer) << " " << to_string(join) << " " << to_string(alloc) << " busy " << busy << " layers "
                                 << layers);
            const int per_rank_chain = 9 + (alloc == AllocKind::fresh ? 2 : 0);
            const int copies = (peer == PeerCopy::none ? 0 : 2) + (join == JoinKind::none ? 0 : 2);
            const int expected = layers * (3 * per_rank_chain + busy + copies + (join == JoinKind::reduce ? 1 : 0));
            CHECK(static_cast<int>(g.nodes.size()) == expected);
            check_well_formed(g);
          }
        }
      }
    }
  }
}

TEST_CASE("eager issue walks the same graph", "[layer_graph]") {
  auto s = small();
  s.peer_copy = PeerCopy::per_rank;
  const auto graph = build(s);
  s.issue = IssueKind::eager;
  const auto eager = build(s);
  REQUIRE(graph.nodes.size() == eager.nodes.size());
  for (std::size_t i = 0; i < graph.nodes.size(); ++i) CHECK(graph.nodes[i].label == eager.nodes[i].label);
  CHECK(graph.edges.size() == eager.edges.size());
}

TEST_CASE("CUDA node types follow from node kinds", "[layer_graph]") {
  CHECK(cuda_node_type(NodeKind::gemm) == CudaNodeType::kernel);
  CHECK(cuda_node_type(NodeKind::busy) == CudaNodeType::kernel);
  CHECK(cuda_node_type(NodeKind::reduce) == CudaNodeType::kernel);
  CHECK(cuda_node_type(NodeKind::copy) == CudaNodeType::memcpy);
  CHECK(cuda_node_type(NodeKind::alloc) == CudaNodeType::mem_alloc);
  CHECK(cuda_node_type(NodeKind::free_mem) == CudaNodeType::mem_free);
  CHECK(cuda_node_type(NodeKind::event) == CudaNodeType::event_record);
  CHECK(to_string(CudaNodeType::event_record) == "event_record");
  CHECK(to_string(Role::quantize_z) == "quant_z");
}
