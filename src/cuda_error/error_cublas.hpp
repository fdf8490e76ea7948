// cuBLAS results through the one error type (cuda_error/error.hpp): kept apart so only the code that
// calls cuBLAS includes its header.
#pragma once
#include <cublas_v2.h>

#include <source_location>

#include "cuda_error/error.hpp"

namespace tpgraph::cuda {

inline void check(cublasStatus_t status, const char* what,
                  std::source_location where = std::source_location::current()) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw CudaError(Api::cublas, static_cast<int>(status), cublasGetStatusName(status), cublasGetStatusString(status),
                  what, where);
}

}  // namespace tpgraph::cuda
