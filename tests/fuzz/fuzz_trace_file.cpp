// libFuzzer harness: a traced process's record file (.tpgt) through everything `analyze DIR` does
// with it: the reader, the merge (as one process, and as two processes of one host), the timeline
// analysis and every output, rendered in memory. A file cut short is read up to the cut; a wrong
// magic or version, or graphs the analysis refuses (a cycle), are an InputError; nothing else may
// escape. Every chunk type is read, the nvtx chunk's ranges too (paired, placed around launches and
// drawn in the trace, the SVG and the report: corpus nvtx*.tpgt), and the cost chunk (each process's
// figures and every graph's estimate in the report, against a fixed calibration: corpus cost*.tpgt).
// The same bytes are also read as a trace folder's cost.json, which must never throw.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "core/analysis/timeline.hpp"
#include "core/base/error.hpp"
#include "core/records/trace_cost.hpp"
#include "core/records/trace_file.hpp"
#include "core/records/traced_run.hpp"
#include "core/report/dot.hpp"
#include "core/report/report.hpp"
#include "core/report/svg.hpp"
#include "core/report/trace.hpp"

namespace {

// What a calibration on an H200 gives, so every process's cost chunk reaches the report's lines.
tpgraph::CostCalibration calibration() {
  tpgraph::CostCalibration c;
  c.measured = true;
  c.gpu = "fuzz GPU";
  c.nodes = 32;
  c.kernel_us = 1.5;
  c.replays = 234;
  c.off_us = 61.2;
  c.on_us = 75.6;
  c.per_node_us = 0.45;
  return c;
}

std::size_t render_everything(tpgraph::TracedRun traced) {
  tpgraph::attach_tracing_cost(traced, calibration());
  const tpgraph::RunData& run = traced.run;
  const tpgraph::RunAnalysis analysis = tpgraph::analyze_run(run);
  std::size_t bytes = tpgraph::render_trace_summary(traced).size();
  bytes += tpgraph::render_terminal_table(run, analysis).size();
  bytes += tpgraph::render_report_markdown(run, analysis).size();
  bytes += tpgraph::render_report_json(run, analysis).size();
  for (std::size_t i = 0; i < run.variants.size(); ++i) {
    bytes += tpgraph::render_chrome_trace(run, analysis, i).size();
    bytes += tpgraph::render_timeline_svg(run, analysis, i).size();
    bytes += tpgraph::layer_graph_dot(run.variants[i].graph, run.variants[i].scenario, &analysis.variants[i]).size();
  }
  return bytes;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)tpgraph::parse_cost_file(bytes, "cost.json");
  try {
    auto file = tpgraph::tracefile::parse_process_file(bytes, "fuzz.tpgt");
    std::vector<tpgraph::tracefile::ProcessFile> one;
    one.push_back(file);
    (void)render_everything(tpgraph::merge_traces(std::move(one), {}));
    // The same file again as another process of the host: its graphs matched across processes.
    std::vector<tpgraph::tracefile::ProcessFile> two;
    two.push_back(file);
    file.pid ^= 1;
    two.push_back(std::move(file));
    (void)render_everything(tpgraph::merge_traces(std::move(two), {}));
  } catch (const tpgraph::InputError&) {
  }
  return 0;
}
