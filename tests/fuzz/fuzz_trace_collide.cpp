// libFuzzer harness: the merge with every graph's fingerprint forced equal (the test hook
// set_graph_hash_for_testing), so graphs of different shapes always share a hash bucket. The
// record file is merged as one process and as two processes of one host (the second with its
// graph list reversed), then analysed; grouping must rest on the full shape, never on the hash, so
// no record may be laid on another graph's nodes (ASan stops the run if one is).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "core/analysis/timeline.hpp"
#include "core/base/error.hpp"
#include "core/records/trace_file.hpp"
#include "core/records/traced_run.hpp"

namespace {

// Few buckets, so colliding and non-colliding graphs both occur: the node count's parity.
std::uint64_t weak_hash(const tpgraph::tracefile::TracedGraph& g) { return g.nodes.size() % 2; }

void check_model(const tpgraph::TracedRun& traced) {
  for (const auto& v : traced.run.variants)
    for (const auto& a : v.records)
      if (a.node >= 0 && static_cast<std::size_t>(a.node) >= v.graph.nodes.size()) __builtin_trap();
  (void)tpgraph::analyze_run(traced.run);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  tpgraph::set_graph_hash_for_testing(
      size % 2 == 0 ? &weak_hash : [](const tpgraph::tracefile::TracedGraph&) { return std::uint64_t{7}; });
  try {
    auto file = tpgraph::tracefile::parse_process_file(bytes, "fuzz.tpgt");
    std::vector<tpgraph::tracefile::ProcessFile> one;
    one.push_back(file);
    check_model(tpgraph::merge_traces(std::move(one), {}));
    std::vector<tpgraph::tracefile::ProcessFile> two;
    two.push_back(file);
    file.pid ^= 1;
    std::reverse(file.graphs.begin(), file.graphs.end());
    two.push_back(std::move(file));
    check_model(tpgraph::merge_traces(std::move(two), {}));
  } catch (const tpgraph::InputError&) {
  }
  return 0;
}
