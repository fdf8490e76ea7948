// The program's NVTX ranges, taken from its NVTX calls themselves. `trace` sets
// NVTX_INJECTION64_PATH to the injection library; NVTX calls its InitializeInjectionNvtx2 on the
// program's first NVTX call, and install() puts the handlers below into NVTX's function tables
// (push/pop, start/end, their domain forms, registered strings). Every other NVTX call stays the
// no-op it is without a tool. No CUDA and no CUPTI here: a range is known on the thread that opened
// it from its first call, also before the program's first CUDA call.
#pragma once
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tpgraph::inject::nvtx {

// A range opened or closed on the calling thread.
struct RangeEvent {
  std::string_view name;  // a close carries the name its range opened with
  bool opened = false;
  bool push = true;  // push/pop (nested per thread and domain); false: start/end (may end on another thread)
  // The same number at a range's open and its close, unique in the process; 0 for a push past the
  // depth kept per thread (and its pop), which pairs with nothing.
  std::uint64_t id = 0;
  bool open_kept = false;  // at a close: what the listener answered at the range's open
};

// Told of every range opened and closed (the recorder's --nvtx-range window, the NVTX log); may be
// null. Its answer at an open (whether it kept the range) is handed back at the range's close.
using Listener = bool (*)(const RangeEvent& event);
void set_listener(Listener listener);

// Fills NVTX's tables from its export table: 1 where the core tables took the handlers, 0 where
// NVTX offered no callback table (NVTX then leaves the program's calls as no-ops).
int install(NvtxGetExportTableFunc_t get_export_table);

// This thread's open ranges, outermost first (push/pop ranges; start/end ranges have no thread).
[[nodiscard]] std::vector<std::string> open_here();

// NVTX calls the handlers have seen in this process (pushes, pops, starts, ends).
[[nodiscard]] std::uint64_t calls_seen();
// Whether install() succeeded in this process.
[[nodiscard]] bool installed();

}  // namespace tpgraph::inject::nvtx
