// The graph chunk of a trace record file, every shape the driver can hold: edges with their data
// (programmatic and launch-completion ports), nodes of child graphs and conditional bodies
// flattened after their owner, versions after an update, and a topology that could not be read.
#include <nlohmann/json.hpp>

#include <string>

#include "catch.hpp"
#include "core/records/trace_file.hpp"

using namespace tpgraph;
using namespace tpgraph::tracefile;
using nlohmann::json;

namespace {

std::string file_with_graph(const json& graph) {
  std::string out = file_header();
  out += chunk(ChunkType::meta, json{{"host", "h"}, {"pid", 1}}.dump());
  out += chunk(ChunkType::graph, graph.dump());
  out += chunk(ChunkType::footer, json{{"records", 0}, {"dropped", 0}, {"end_ns", 1}}.dump());
  return out;
}

// prologue -> while { body } -> if { then } else { otherwise } -> child { a -> b } -> pdl_a => pdl_b
json shapes_graph() {
  json nodes = json::array();
  nodes.push_back({{"id", 1}, {"type", "kernel"}, {"name", "prologue"}});
  nodes.push_back({{"id", 2}, {"type", "conditional"}, {"cond", {{"kind", "while"}, {"bodies", 1}}}});
  nodes.push_back({{"id", 3}, {"type", "conditional"}, {"cond", {{"kind", "if"}, {"bodies", 2}}}});
  nodes.push_back({{"id", 4}, {"type", "graph"}});
  nodes.push_back({{"id", 5}, {"type", "kernel"}, {"name", "pdl_a"}});
  nodes.push_back({{"id", 6}, {"type", "kernel"}, {"name", "pdl_b"}});
  nodes.push_back({{"id", 7}, {"type", "kernel"}, {"name", "loop_body"}, {"parent", 1}, {"body", 0}});
  nodes.push_back({{"id", 8}, {"type", "kernel"}, {"name", "if_body"}, {"parent", 2}, {"body", 0}});
  nodes.push_back({{"id", 9}, {"type", "kernel"}, {"name", "else_body"}, {"parent", 2}, {"body", 1}});
  nodes.push_back({{"id", 10}, {"type", "kernel"}, {"name", "child_a"}, {"parent", 3}, {"body", 0}});
  nodes.push_back({{"id", 11}, {"type", "kernel"}, {"name", "child_b"}, {"parent", 3}, {"body", 0}});
  json edges = json::array({json::array({0, 1}), json::array({1, 2}), json::array({2, 3}), json::array({3, 4}),
                            json::array({4, 5, 1, 1, 0}), json::array({9, 10})});
  return json{{"exec", 1},      {"version", 0},
              {"graph_id", 7},  {"nodes", nodes},
              {"edges", edges}, {"clones", json::array({json::array({107, 6}), json::array({110, 9})})}};
}

}  // namespace

TEST_CASE("graph chunk: bodies, conditionals and edge data read back", "[trace][graph]") {
  const ProcessFile p = parse_process_file(file_with_graph(shapes_graph()), "shapes.tpgt");
  REQUIRE(p.notes.empty());
  REQUIRE(p.graphs.size() == 1);
  const TracedGraph& g = p.graphs[0];
  CHECK(g.topology_error.empty());
  REQUIRE(g.nodes.size() == 11);
  CHECK(g.nodes[1].conditional == ConditionalKind::while_);
  CHECK(g.nodes[1].bodies == 1);
  CHECK(g.nodes[2].conditional == ConditionalKind::if_);
  CHECK(g.nodes[2].bodies == 2);
  CHECK(g.nodes[3].type == "graph");
  CHECK(g.nodes[6].parent == 1);
  CHECK(g.nodes[8].parent == 2);
  CHECK(g.nodes[8].body == 1);
  CHECK(g.nodes[10].parent == 3);
  CHECK(g.nodes[0].parent == -1);
  REQUIRE(g.edges.size() == 6);
  REQUIRE(g.edge_data.size() == g.edges.size());
  CHECK(g.edge_data[0] == EdgeData{});
  CHECK(g.edge_data[4] == EdgeData{1, 1, 0});
  CHECK(g.clones.size() == 2);
}

TEST_CASE("graph chunk: a version and an unreadable topology are kept", "[trace][graph]") {
  json graph = shapes_graph();
  graph["version"] = 2;
  graph["topology_error"] = "cuGraphGetEdges: CUDA_ERROR_LOSSY_QUERY";
  const ProcessFile p = parse_process_file(file_with_graph(graph), "v.tpgt");
  REQUIRE(p.graphs.size() == 1);
  CHECK(p.graphs[0].version == 2);
  CHECK(p.graphs[0].topology_error == "cuGraphGetEdges: CUDA_ERROR_LOSSY_QUERY");
  CHECK(p.graphs[0].nodes.size() == 11);  // the nodes stay: their records still resolve

  graph["topology_error"] = "";
  CHECK(parse_process_file(file_with_graph(graph), "v.tpgt").graphs[0].topology_error ==
        "the topology was marked unreadable");
}

TEST_CASE("graph chunk: new node types are read, unknown ones become other", "[trace][graph]") {
  json graph = {{"exec", 1}, {"nodes", json::array()}};
  for (const char* type : {"event_wait", "host", "empty", "graph", "batch_mem_op"})
    graph["nodes"].push_back({{"id", 1}, {"type", type}});
  const ProcessFile p = parse_process_file(file_with_graph(graph), "t.tpgt");
  REQUIRE(p.graphs.size() == 1);
  CHECK(p.graphs[0].nodes[0].type == "event_wait");
  CHECK(p.graphs[0].nodes[1].type == "host");
  CHECK(p.graphs[0].nodes[2].type == "empty");
  CHECK(p.graphs[0].nodes[3].type == "graph");
  CHECK(p.graphs[0].nodes[4].type == "other");
}

TEST_CASE("graph chunk: hostile bodies, conditionals and edge data are refused, not trusted", "[trace][graph]") {
  const auto refused = [](const json& graph) {
    const ProcessFile p = parse_process_file(file_with_graph(graph), "h.tpgt");
    return p.graphs.empty() && !p.notes.empty();
  };
  json g = shapes_graph();
  g["nodes"][6]["parent"] = 9;  // an owner that comes after the node
  CHECK(refused(g));
  g = shapes_graph();
  g["nodes"][8]["body"] = 2;  // the if node has two bodies
  CHECK(refused(g));
  g = shapes_graph();
  g["nodes"][6]["parent"] = 0;  // a kernel owns no body
  CHECK(refused(g));
  g = shapes_graph();
  g["nodes"][1]["cond"] = {{"kind", "until"}, {"bodies", 1}};
  CHECK(refused(g));
  g = shapes_graph();
  g["nodes"][1].erase("cond");
  CHECK(refused(g));
  g = shapes_graph();
  g["nodes"][2]["cond"]["bodies"] = 0;
  CHECK(refused(g));
  g = shapes_graph();
  g["version"] = -1;
  CHECK(refused(g));

  // Bad edge data drops the edge alone, with a note.
  g = shapes_graph();
  g["edges"].push_back(json::array({0, 5, 7, 0, 0}));    // no such dependency type
  g["edges"].push_back(json::array({0, 5, 1, 300, 0}));  // a port beyond a byte
  g["edges"].push_back(json::array({0, 5, 1, 1}));       // four fields
  const ProcessFile p = parse_process_file(file_with_graph(g), "e.tpgt");
  REQUIRE(p.graphs.size() == 1);
  CHECK(p.graphs[0].edges.size() == 6);
  CHECK(p.graphs[0].edge_data.size() == 6);
  CHECK_FALSE(p.notes.empty());
}

TEST_CASE("launch records carry the executable's version", "[trace][graph]") {
  std::string out = file_header();
  out += chunk(ChunkType::graph, shapes_graph().dump());
  WireLaunch l;
  l.correlation_id = 5;
  l.exec = 1;
  l.version = 3;
  l.host_start_ns = 10;
  l.host_end_ns = 20;
  out += launches_chunk({l});
  const ProcessFile p = parse_process_file(out, "l.tpgt");
  REQUIRE(p.launches.size() == 1);
  CHECK(p.launches[0].version == 3);
}
