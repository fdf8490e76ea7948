// Where the program was when it captured a graph, and the NVTX ranges it had open: taken in the
// capture-begin callback (or at instantiation for a graph built node by node) and written with the
// graph chunk as its origin. The ranges come from the program's NVTX calls (inject/nvtx_ranges.hpp).
#pragma once
#include <cuda.h>

#include <string>
#include <vector>

#include "core/records/trace_file.hpp"

namespace tpgraph::inject {

// The origin of a graph whose capture begins now on this thread (kept until its capture ends).
void on_capture_begin();
// The capture of this thread ended with `graph`: the origin taken at its begin is the graph's.
void on_capture_end(CUgraph graph);
// The origin of `graph`: the one of its capture, else taken now ("instantiation").
[[nodiscard]] tracefile::GraphOrigin origin_of(CUgraph graph);

}  // namespace tpgraph::inject
