// CUPTI results through the one error type (cuda_error/error.hpp), for the calls whose failure stops a
// run (starting the collector). Failures during collection are warnings instead: a profiler must
// not kill the work it watches.
#pragma once
#include <cupti.h>

#include <source_location>
#include <string>

#include "cuda_error/error.hpp"

namespace tpgraph::cupti {

// CUPTI's name for `status` ("CUPTI_ERROR_INVALID_PARAMETER"), or "CUPTI status N".
[[nodiscard]] std::string result_name(CUptiResult status);

void check(CUptiResult status, const char* what, std::source_location where = std::source_location::current());

}  // namespace tpgraph::cupti
