// report.md of a trace with many graphs: the ones that took the most GPU time in full, in that
// order, and the rest in one table; a trace of few graphs and a run of the layer keep every variant
// in full in their own order.
#include <fmt/core.h>

#include <string>
#include <vector>

#include "catch.hpp"
#include "core/analysis/timeline.hpp"
#include "core/records/traced_run.hpp"
#include "core/report/report.hpp"
#include "crafted_trace.hpp"

using namespace tpgraph;
using namespace tpgraph::testing;

namespace {

// `graphs` one-kernel graphs; graph g's kernel runs g µs in each of its 3 launches.
std::string report_of(std::uint32_t graphs) {
  Crafted c;
  for (std::uint32_t g = 1; g <= graphs; ++g) {
    c.graphs.push_back(chain_graph(1, g, 100 * g, fmt::format("g{}_", g)));
    for (std::uint32_t k = 0; k < 3; ++k) {
      const std::uint32_t corr = g * 10 + k;
      const std::uint64_t t = 1'000'000ull * g + 100'000ull * k;
      c.records.push_back(kernel_record(100 * g, corr, t, t + 1'000ull * g));
      c.launches.push_back(WireLaunch{corr, g, t - 2'000, t - 1'000, 0, 0});
    }
  }
  std::vector<tracefile::ProcessFile> files;
  files.push_back(tracefile::parse_process_file(c.bytes(), "many.tpgt"));
  const TracedRun t = merge_traces(std::move(files), {});
  return render_report_markdown(t.run, analyze_run(t.run));
}

std::size_t heading(const std::string& md, const std::string& name) { return md.find("\n## " + name + "\n"); }

}  // namespace

TEST_CASE("report.md shows the graphs that took the most GPU time in full and the rest in one table",
          "[report][trace]") {
  const std::string md = report_of(11);
  REQUIRE(md.find("## The other 3 graphs") != std::string::npos);
  // graph-11 took the most GPU time: first in full; graph-4 the least of the eight.
  const std::size_t first = heading(md, "graph-11");
  const std::size_t last = heading(md, "graph-4");
  REQUIRE(first != std::string::npos);
  REQUIRE(last != std::string::npos);
  CHECK(first < last);
  CHECK(first > md.find("## The other 3 graphs"));
  for (const char* rest : {"graph-1", "graph-2", "graph-3"}) {
    INFO(rest);
    CHECK(heading(md, rest) == std::string::npos);
    CHECK(md.find(fmt::format("| {} |", rest)) != std::string::npos);
  }
  // graph-3's 9 µs of 198 µs in all.
  CHECK(md.find("| graph-3 | 1 | 3 | 9.0 | 4.5% |") != std::string::npos);
}

TEST_CASE("report.md of a trace of eight graphs shows each in full, in launch order", "[report][trace]") {
  const std::string md = report_of(8);
  CHECK(md.find("## The other") == std::string::npos);
  CHECK(heading(md, "graph-1") < heading(md, "graph-8"));
  CHECK(heading(md, "graph-8") != std::string::npos);
}
