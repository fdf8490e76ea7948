#include "catch.hpp"

#include <unistd.h>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/analysis/timeline.hpp"
#include "core/model/layer_graph.hpp"
#include "core/report/dot.hpp"

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
  CHECK(mentions(text,
                 "n" + std::to_string(fork) + " -> n" + std::to_string(begin) + " [color=\"#d62728\", penwidth=2.5,"));
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

TEST_CASE("DOT with a timeline carries each node's median duration and wait, filled by share of the span",
          "[dot][why]") {
  // Two ranks on one GPU taking turns: every node runs 10 µs of a 140 µs replay (7.1%) and waits
  // 10 µs while the other rank's node runs.
  Scenario s;
  s.name = "turns";
  s.geometry.tokens = 43;
  s.replays = 3;
  VariantRun run;
  run.scenario = s;
  run.graph = build_layer_graph(s, build_routing(s.geometry), 1);
  for (int replay = 0; replay < s.replays; ++replay) {
    std::uint64_t cursor[2] = {0, 10'000};
    for (const auto& n : run.graph.nodes) {
      if (cuda_node_type(n.kind) != CudaNodeType::kernel) continue;
      ActivityRecord a;
      a.start_ns = 1'000'000'000ULL + static_cast<std::uint64_t>(replay) * 1'000'000ULL + cursor[n.rank];
      a.end_ns = a.start_ns + 10'000;
      a.node = n.id;
      a.replay = replay;
      run.records.push_back(a);
      cursor[n.rank] += 20'000;
    }
  }
  const VariantTimeline timeline = analyze_variant(run);
  REQUIRE(timeline.span_us.median == Approx(140.0));
  const std::string text = layer_graph_dot(run.graph, s, &timeline);
  const int gate = run.graph.find("r1.gate")->id;
  const auto line_of = [&](int id) {
    const std::string head = "    n" + std::to_string(id) + " [";
    const auto at = text.find(head);
    REQUIRE(at != std::string::npos);
    return text.substr(at, text.find('\n', at) - at);
  };
  const std::string g = line_of(gate);
  CHECK(mentions(g, R"(10.0 µs (7.1%) · wait 10.0 µs)"));
  CHECK(mentions(g, "fillcolor=\"#feb24c\""));  // 5-10% of the span
  CHECK(mentions(g, "penwidth=3"));             // waited 7.1% of the span: marked
  CHECK(mentions(text, "median span 140.0 µs over 3 replays"));
  CHECK(mentions(text, "legend_heat5"));
  // Event nodes have no records: drawn as without a timeline.
  CHECK_FALSE(mentions(line_of(run.graph.find("r1.begin")->id), "wait"));
  // Without a timeline nothing of it appears.
  const std::string plain = layer_graph_dot(run.graph, s);
  CHECK_FALSE(mentions(plain, "µs"));
  CHECK_FALSE(mentions(plain, "legend_heat"));
  CHECK(mentions(plain, "legend_gemm"));
}

TEST_CASE("a DOT with timings renders through Graphviz", "[dot][graphviz][why]") {
  const std::string dot = TPGRAPH_DOT_EXECUTABLE;
  if (dot.empty() || dot.find("NOTFOUND") != std::string::npos) {
    WARN("Graphviz 'dot' was not found at configure time: the DOT file was NOT rendered (install graphviz)");
    return;
  }
  Scenario s;
  s.name = "timed";
  s.geometry.tokens = 43;
  s.replays = 2;
  VariantRun run;
  run.scenario = s;
  run.graph = build_layer_graph(s, build_routing(s.geometry), 1);
  for (int replay = 0; replay < s.replays; ++replay) {
    std::uint64_t cursor = 0;
    for (const auto& n : run.graph.nodes) {
      if (cuda_node_type(n.kind) != CudaNodeType::kernel) continue;
      ActivityRecord a;
      a.start_ns = 1'000'000'000ULL + static_cast<std::uint64_t>(replay) * 1'000'000ULL + cursor;
      const std::uint64_t duration = 5'000 + static_cast<std::uint64_t>(n.id) * 1'000;  // a range of shares
      a.end_ns = a.start_ns + duration;
      a.node = n.id;
      a.replay = replay;
      run.records.push_back(a);
      cursor += duration + 2'000;
    }
  }
  const VariantTimeline timeline = analyze_variant(run);
  const auto dir = std::filesystem::temp_directory_path() / ("tpgraph-dot-timed-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "timed.dot") << layer_graph_dot(run.graph, s, &timeline);
  const std::string command =
      "'" + dot + "' -Tsvg '" + (dir / "timed.dot").string() + "' -o '" + (dir / "timed.svg").string() + "' 2>&1";
  CHECK(std::system(command.c_str()) == 0);
  CHECK(std::filesystem::file_size(dir / "timed.svg") > 1000);
  std::filesystem::remove_all(dir);
}
