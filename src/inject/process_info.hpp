// What the injection library says about the process it runs in: the meta chunk (host, boot id,
// pid, executable, the launcher's rank variables), CUPTI's clock and error text, and who else may
// hold CUPTI when tpgraph cannot subscribe.
#pragma once
#include <cupti.h>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace tpgraph::inject {

std::string result_text(CUptiResult status);
// The host name as it may appear in a file name ('/' replaced).
std::string host_name();
// CUPTI's timestamp now (0 when CUPTI cannot tell). While CUPTI is detached from the process it is
// read from CLOCK_MONOTONIC, shifted by the difference measured at the detach: a CUPTI call then
// would attach CUPTI again.
std::uint64_t now_ns();
// Before cuptiFinalize: from now on now_ns() asks no CUPTI.
void clock_without_cupti() noexcept;
// Who else may hold CUPTI: hints from the environment and the loaded libraries.
std::string other_tool_hint();
// TPGRAPH_INJECT_VERBOSE is set: diagnostics on stderr.
bool verbose();
// The meta chunk's JSON.
nlohmann::json meta_json();

}  // namespace tpgraph::inject
