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
// CUPTI's timestamp now (0 when CUPTI cannot tell).
std::uint64_t now_ns();
// Who else may hold CUPTI: hints from the environment and the loaded libraries.
std::string other_tool_hint();
// TPGRAPH_INJECT_VERBOSE is set: diagnostics on stderr.
bool verbose();
// The meta chunk's JSON.
nlohmann::json meta_json();

}  // namespace tpgraph::inject
