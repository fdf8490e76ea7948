#include "cupti/error.hpp"

#include <fmt/core.h>

namespace tpgraph::cupti {

std::string result_name(CUptiResult status) {
  const char* text = nullptr;
  if (cuptiGetResultString(status, &text) != CUPTI_SUCCESS || text == nullptr) {
    return fmt::format("CUPTI status {}", static_cast<int>(status));
  }
  return text;
}

void check(CUptiResult status, const char* what, std::source_location where) {
  if (status == CUPTI_SUCCESS) return;
  throw cuda::CudaError(cuda::Api::cupti, static_cast<int>(status), result_name(status), {}, what, where);
}

}  // namespace tpgraph::cupti
