#include "core/analysis/diff_match.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace tpgraph::diff_detail {

std::vector<VariantPair> match_variants(const DiffRun& a, const DiffRun& b, std::vector<StructuralChange>& structure) {
  std::vector<VariantPair> pairs;
  std::vector<char> a_done(a.variants.size(), 0), b_done(b.variants.size(), 0);
  const auto pass = [&](std::string_view why, auto&& same) {
    for (std::size_t i = 0; i < a.variants.size(); ++i) {
      if (a_done[i]) continue;
      for (std::size_t j = 0; j < b.variants.size(); ++j) {
        if (b_done[j] || !same(a.variants[i], b.variants[j])) continue;
        pairs.push_back({static_cast<int>(i), static_cast<int>(j), std::string(why)});
        a_done[i] = b_done[j] = 1;
        break;
      }
    }
  };
  // A traced graph's capture site first: a server's graphs of one shape (one per batch size) keep
  // their pairs whatever order their first records came in, which is what numbers them.
  pass("capture site and graph", [](const DiffVariant& x, const DiffVariant& y) {
    return !x.identity.empty() && x.identity == y.identity && x.fingerprint == y.fingerprint;
  });
  pass("name and graph",
       [](const DiffVariant& x, const DiffVariant& y) { return x.name == y.name && x.fingerprint == y.fingerprint; });
  pass("graph fingerprint", [](const DiffVariant& x, const DiffVariant& y) { return x.fingerprint == y.fingerprint; });
  pass("name", [](const DiffVariant& x, const DiffVariant& y) { return x.name == y.name; });
  const auto left = [](const std::vector<char>& done) { return std::count(done.begin(), done.end(), 0); };
  if (left(a_done) == 1 && left(b_done) == 1)
    pass("the only variants left", [](const DiffVariant&, const DiffVariant&) { return true; });
  for (std::size_t i = 0; i < a.variants.size(); ++i)
    if (!a_done[i]) structure.push_back({StructureKind::variant_only_a, a.variants[i].name, a.variants[i].name});
  for (std::size_t j = 0; j < b.variants.size(); ++j)
    if (!b_done[j]) structure.push_back({StructureKind::variant_only_b, b.variants[j].name, b.variants[j].name});
  return pairs;
}

namespace {

// Unpaired nodes of one rank and one kernel, in depth order: the same kernel moved in the graph (an
// edge added or removed changes depths); the edges say what moved it.
void pair_moved(const DiffVariant& a, const DiffVariant& b, NodePairs& p) {
  std::map<std::pair<int, std::string>, std::vector<int>> b_free;
  std::vector<std::size_t> order(b.nodes.size());
  for (std::size_t j = 0; j < order.size(); ++j) order[j] = j;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t x, std::size_t y) { return b.nodes[x].depth < b.nodes[y].depth; });
  for (const std::size_t j : order)
    if (p.a_of_b[j] < 0) b_free[{b.nodes[j].rank, b.nodes[j].kernel}].push_back(static_cast<int>(j));
  std::vector<std::size_t> a_order(a.nodes.size());
  for (std::size_t i = 0; i < a_order.size(); ++i) a_order[i] = i;
  std::stable_sort(a_order.begin(), a_order.end(),
                   [&](std::size_t x, std::size_t y) { return a.nodes[x].depth < a.nodes[y].depth; });
  for (const std::size_t i : a_order) {
    if (p.b_of_a[i] >= 0 || !a.traced) continue;
    auto it = b_free.find({a.nodes[i].rank, a.nodes[i].kernel});
    if (it == b_free.end() || it->second.empty()) continue;
    const int j = it->second.front();
    it->second.erase(it->second.begin());
    p.b_of_a[i] = j;
    p.a_of_b[static_cast<std::size_t>(j)] = static_cast<int>(i);
  }
}

// Unpaired nodes of one kind at one place (rank, depth), in node order, pair up as a kernel renamed:
// a new version of a kernel keeps its place in the graph.
void pair_renamed(const DiffVariant& a, const DiffVariant& b, NodePairs& p, const std::string& variant,
                  std::vector<StructuralChange>& structure) {
  std::map<std::tuple<int, int, NodeKind>, std::vector<int>> b_free;
  for (std::size_t j = 0; j < b.nodes.size(); ++j)
    if (p.a_of_b[j] < 0) b_free[{b.nodes[j].rank, b.nodes[j].depth, b.nodes[j].kind}].push_back(static_cast<int>(j));
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    if (p.b_of_a[i] >= 0 || !a.traced) continue;
    auto it = b_free.find({a.nodes[i].rank, a.nodes[i].depth, a.nodes[i].kind});
    if (it == b_free.end() || it->second.empty()) continue;
    const int j = it->second.front();
    it->second.erase(it->second.begin());
    p.b_of_a[i] = j;
    p.a_of_b[static_cast<std::size_t>(j)] = static_cast<int>(i);
    structure.push_back({StructureKind::kernel_renamed, variant,
                         fmt::format("{} -> {}", a.nodes[i].label, b.nodes[static_cast<std::size_t>(j)].label)});
  }
}

void edge_changes(const DiffVariant& a, const DiffVariant& b, const NodePairs& p, const std::string& variant,
                  std::vector<StructuralChange>& structure) {
  // Edges as pairs of A's node ids (B's edges mapped through the pairing; an unpaired end stays B's).
  std::set<std::pair<int, int>> in_a, in_b;
  for (const auto& e : a.graph.edges) in_a.insert({e.from, e.to});
  const auto a_id = [&](int j) { return p.a_of_b[static_cast<std::size_t>(j)]; };
  for (const auto& e : b.graph.edges) {
    if (a_id(e.from) < 0 || a_id(e.to) < 0) {  // touches a node added in B: said with the node
      continue;
    }
    in_b.insert({a_id(e.from), a_id(e.to)});
  }
  for (const auto& [from, to] : in_a) {
    if (p.b_of_a[static_cast<std::size_t>(from)] < 0 || p.b_of_a[static_cast<std::size_t>(to)] < 0) continue;
    if (in_b.count({from, to}) == 0)
      structure.push_back({StructureKind::edge_removed, variant,
                           fmt::format("{} -> {}", a.nodes[static_cast<std::size_t>(from)].label,
                                       a.nodes[static_cast<std::size_t>(to)].label)});
  }
  for (const auto& [from, to] : in_b) {
    if (in_a.count({from, to}) > 0) continue;
    const auto bf = static_cast<std::size_t>(p.b_of_a[static_cast<std::size_t>(from)]);
    const auto bt = static_cast<std::size_t>(p.b_of_a[static_cast<std::size_t>(to)]);
    structure.push_back(
        {StructureKind::edge_added, variant, fmt::format("{} -> {}", b.nodes[bf].label, b.nodes[bt].label)});
  }
}

}  // namespace

NodePairs match_nodes(const DiffVariant& a, const DiffVariant& b, const std::string& variant,
                      std::vector<StructuralChange>& structure) {
  NodePairs p;
  p.b_of_a.assign(a.nodes.size(), -1);
  p.a_of_b.assign(b.nodes.size(), -1);
  std::map<std::string, int> b_by_key;
  for (std::size_t j = 0; j < b.nodes.size(); ++j) b_by_key.emplace(b.nodes[j].key, static_cast<int>(j));
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    const auto it = b_by_key.find(a.nodes[i].key);
    if (it == b_by_key.end() || p.a_of_b[static_cast<std::size_t>(it->second)] >= 0) continue;
    p.b_of_a[i] = it->second;
    p.a_of_b[static_cast<std::size_t>(it->second)] = static_cast<int>(i);
  }
  pair_moved(a, b, p);
  pair_renamed(a, b, p, variant, structure);
  for (std::size_t i = 0; i < a.nodes.size(); ++i)
    if (p.b_of_a[i] < 0) structure.push_back({StructureKind::node_removed, variant, a.nodes[i].label});
  for (std::size_t j = 0; j < b.nodes.size(); ++j)
    if (p.a_of_b[j] < 0) structure.push_back({StructureKind::node_added, variant, b.nodes[j].label});
  edge_changes(a, b, p, variant, structure);
  return p;
}

}  // namespace tpgraph::diff_detail
