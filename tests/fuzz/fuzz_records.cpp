// libFuzzer harness: a records.json's bytes through the records reader and, when it accepts them,
// through everything `tpgraph analyze` does with a run (the analysis and every output, rendered in
// memory). An accepted file must never make the analysis or a writer crash or allocate beyond the
// bound; a refused one must be an InputError.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/analysis/timeline.hpp"
#include "core/base/error.hpp"
#include "core/records/run_data.hpp"
#include "core/report/dot.hpp"
#include "core/report/report.hpp"
#include "core/report/svg.hpp"
#include "core/report/trace.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  tpgraph::RunData run;
  try {
    run = tpgraph::parse_run_data(text, "fuzz/records.json");
  } catch (const tpgraph::InputError&) {
    return 0;
  }
  try {
    const tpgraph::RunAnalysis analysis = tpgraph::analyze_run(run);
    std::size_t bytes = tpgraph::render_terminal_table(run, analysis).size();
    bytes += tpgraph::render_report_markdown(run, analysis).size();
    bytes += tpgraph::render_report_json(run, analysis).size();
    for (std::size_t i = 0; i < run.variants.size(); ++i) {
      bytes += tpgraph::render_chrome_trace(run, analysis, i).size();
      bytes += tpgraph::render_timeline_svg(run, analysis, i).size();
      bytes += tpgraph::layer_graph_dot(run.variants[i].graph, run.variants[i].scenario).size();
    }
    (void)bytes;
  } catch (const tpgraph::InputError&) {
    // The analysis refuses a graph with a cycle: a bad input, reported as such.
  }
  return 0;
}
