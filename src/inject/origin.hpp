// Where the program was when it captured a graph, and the NVTX ranges it had open: taken in the
// capture-begin callback (or at instantiation for a graph built node by node) and written with the
// graph chunk as its origin. NVTX ranges reach the library as CUPTI callbacks when the program's
// NVTX is routed to CUPTI (`trace` sets NVTX_INJECTION64_PATH to this library, which hands NVTX's
// initialisation to the libcupti already loaded: one libcupti per process).
#pragma once
#include <cuda.h>
#include <cupti.h>

#include <string>
#include <vector>

#include "core/records/trace_file.hpp"

namespace tpgraph::inject {

class Recorder;

// An NVTX callback (CUPTI_CB_DOMAIN_NVTX): keeps this thread's open ranges; tells the recorder
// (may be null) of ranges opened and closed.
void on_nvtx(CUpti_CallbackId cbid, const CUpti_NvtxData& data, Recorder* recorder, std::uint64_t now_ns);
// This thread's open ranges, outermost first.
[[nodiscard]] std::vector<std::string> nvtx_open_here();

// The origin of a graph whose capture begins now on this thread (kept until its capture ends).
void on_capture_begin();
// The capture of this thread ended with `graph`: the origin taken at its begin is the graph's.
void on_capture_end(CUgraph graph);
// The origin of `graph`: the one of its capture, else taken now ("instantiation").
[[nodiscard]] tracefile::GraphOrigin origin_of(CUgraph graph);

}  // namespace tpgraph::inject
