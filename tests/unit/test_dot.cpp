#include "catch.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include "core/dot.hpp"
#include "core/layer_graph.hpp"

using namespace tpgraph;

namespace {

const std::filesystem::path kGraphs = std::filesystem::path(TPGRAPH_SOURCE_DIR) / "graphs";

std::string dot_of(const Scenario& s, int visible = 2) {
  return layer_graph_dot(build_layer_graph(s, build_routing(s.geometry), visible), s);
}

bool mentions(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

int count_of(const std::string& text, const std::string& part) {
  int n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

}  // namespace

TEST_CASE("DOT escapes quotes, backslashes and line breaks", "[dot]") {
  CHECK(dot_escape(R"(a "b" \c)") == R"(a \"b\" \\c)");
  CHECK(dot_escape("one\ntwo") == R"(one\ntwo)");
  CHECK(dot_escape("r0->r1.copy") == "r0->r1.copy");
}

TEST_CASE("DOT has a cluster per rank labelled with its GPU", "[dot]") {
  Scenario s;
  s.geometry.tokens = 43;
  s.geometry.ranks = 3;
  s.devices = {0, 0, 1};
  const auto text = dot_of(s);
  CHECK(text.rfind("digraph tpgraph {", 0) == 0);
  CHECK(mentions(text, "subgraph cluster_rank0"));
  CHECK(mentions(text, "subgraph cluster_rank2"));
  CHECK(mentions(text, "rank 0 (root) on GPU 0"));
  CHECK(mentions(text, "rank 1 on GPU 0"));
  CHECK(mentions(text, "rank 2 on GPU 1"));
  CHECK(mentions(text, "subgraph cluster_legend"));
  CHECK(count_of(text, "{") == count_of(text, "}"));
}

TEST_CASE("DOT draws cross-rank edges apart from stream edges", "[dot]") {
  Scenario s;
  s.geometry.tokens = 43;
  s.root_busy = 1;
  s.join = JoinKind::reduce;
  const auto graph = build_layer_graph(s, build_routing(s.geometry), 2);
  const auto text = layer_graph_dot(graph, s);
  const int fork = graph.find("r0.busy0")->id, begin = graph.find("r1.begin")->id;
  const int end = graph.find("r1.end")->id, join = graph.find("r1->r0.copy")->id;
  CHECK(mentions(text, "n" + std::to_string(fork) + " -> n" + std::to_string(begin) + " [color=\"#d62728\", penwidth=2.5,"));
  CHECK(mentions(text, "n" + std::to_string(end) + " -> n" + std::to_string(join) +
                           " [color=\"#d62728\", penwidth=2.5, style=dashed"));
  const int gate = graph.find("r1.gate")->id, up = graph.find("r1.up")->id;
  CHECK(mentions(text, "n" + std::to_string(gate) + " -> n" + std::to_string(up) + ";"));
}

TEST_CASE("DOT shapes nodes by CUDA node type and labels them", "[dot]") {
  Scenario s;
  s.geometry.tokens = 43;
  s.peer_copy = PeerCopy::per_rank;
  s.alloc = AllocKind::fresh;
  const auto text = dot_of(s);
  CHECK(mentions(text, "label=\"r0->r1.copy\\n"));
  CHECK(mentions(text, "shape=parallelogram"));
  CHECK(mentions(text, "shape=invtrapezium"));
  CHECK(mentions(text, "shape=trapezium"));
  CHECK(mentions(text, "shape=ellipse"));
  CHECK(mentions(text, "label=\"r1.gate\\n"));
}

TEST_CASE("DOT quotes a scenario description with quotes in it", "[dot]") {
  Scenario s;
  s.geometry.tokens = 43;
  s.description = "say \"hi\" \\ bye";
  const auto text = dot_of(s);
  CHECK(mentions(text, R"(say \"hi\" \\ bye)"));
}

TEST_CASE("every scenario in graphs/ renders through Graphviz", "[dot][graphviz]") {
  const std::string dot = TPGRAPH_DOT_EXECUTABLE;
  if (dot.empty() || dot.find("NOTFOUND") != std::string::npos) {
    WARN("Graphviz 'dot' was not found at configure time: the DOT files were NOT rendered (install graphviz)");
    return;
  }
  const auto dir = std::filesystem::temp_directory_path() / ("tpgraph-dot-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  int rendered = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kGraphs)) {
    if (entry.path().extension() != ".json") continue;
    INFO(entry.path().string());
    const auto s = load_scenario(entry.path());
    const auto file = dir / (entry.path().stem().string() + ".dot");
    std::ofstream(file) << dot_of(s);
    const auto svg = dir / (entry.path().stem().string() + ".svg");
    const std::string command = "'" + dot + "' -Tsvg '" + file.string() + "' -o '" + svg.string() + "' 2>&1";
    CHECK(std::system(command.c_str()) == 0);
    CHECK(std::filesystem::file_size(svg) > 1000);
    ++rendered;
  }
  CHECK(rendered >= 8);
  std::filesystem::remove_all(dir);
}
