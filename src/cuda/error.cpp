#include "cuda/error.hpp"

#include <fmt/core.h>

#include <cstdio>

#include "core/error.hpp"

namespace tpgraph::cuda {

namespace {
std::string describe(cudaError_t status, const char* what, const std::source_location& where) {
  return fmt::format("{} failed: {} ({}) at {}:{}", what, cudaGetErrorString(status),
                     cudaGetErrorName(status), where.file_name(), where.line());
}
}  // namespace

CudaError::CudaError(cudaError_t status, const std::string& what, std::source_location where)
    : std::runtime_error(describe(status, what.c_str(), where)), status_(status) {}

void check(cudaError_t status, const char* what, std::source_location where) {
  if (status != cudaSuccess) throw CudaError(status, what, where);
}

void check_noexcept(cudaError_t status, const char* what, std::source_location where) noexcept {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "tpgraph: warning: %s\n", describe(status, what, where).c_str());
  }
}

void check_launch(const char* kernel, std::source_location where) {
  check(cudaGetLastError(), kernel, where);
}

int visible_device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return count;
}

void require_device(const std::string& what_needs_it) {
  if (visible_device_count() > 0) return;
  throw NoDeviceError(fmt::format(
      "{} a CUDA GPU, and none is visible (no device or no usable driver). Without a GPU: "
      "tpgraph plan, tpgraph dot, and tpgraph analyze tests/data/h200-run",
      what_needs_it));
}

}  // namespace tpgraph::cuda
