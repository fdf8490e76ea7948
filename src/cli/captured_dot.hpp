// `tpgraph dot --captured`: capture the scenario's graph on the GPU and write the driver's own
// verbose dump of it (cudaGraphDebugDotPrint) to `path`.
#pragma once
#include <filesystem>

#include "core/model/scenario.hpp"

namespace tpgraph::cli {

void write_captured_dot(const Scenario& s, const std::filesystem::path& path);

}  // namespace tpgraph::cli
