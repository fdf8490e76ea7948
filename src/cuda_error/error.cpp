#include "cuda_error/error.hpp"

#include <fmt/core.h>

#include <cstdio>

#include "core/base/error.hpp"

namespace tpgraph::cuda {

namespace {

std::string describe(std::string_view name, std::string_view description, std::string_view what,
                     const std::source_location& where) {
  if (description.empty() || description == name) {
    return fmt::format("{} failed: {} at {}:{}", what, name, where.file_name(), where.line());
  }
  return fmt::format("{} failed: {} ({}) at {}:{}", what, description, name, where.file_name(), where.line());
}

CudaError runtime_error_of(cudaError_t status, std::string_view what, const std::source_location& where) {
  return CudaError(Api::runtime, static_cast<int>(status), cudaGetErrorName(status), cudaGetErrorString(status), what,
                   where);
}

// cuGetErrorName / cuGetErrorString through the entry-point query; null where the driver lacks them.
using DriverErrorText = CUresult (*)(CUresult, const char**);

std::string_view driver_text(const char* function, CUresult status) noexcept {
  const auto fn = reinterpret_cast<DriverErrorText>(find_driver_entry_point(function));
  const char* text = nullptr;
  if (fn == nullptr || fn(status, &text) != CUDA_SUCCESS || text == nullptr) return {};
  return text;
}

}  // namespace

std::string_view to_string(Api api) {
  switch (api) {
    case Api::runtime: return "CUDA runtime";
    case Api::driver: return "CUDA driver";
    case Api::cublas: return "cuBLAS";
    case Api::cupti: return "CUPTI";
  }
  return "?";
}

namespace {
std::string name_or_code(Api api, int status, std::string_view name) {
  return name.empty() ? fmt::format("{} status {}", to_string(api), status) : std::string(name);
}
}  // namespace

CudaError::CudaError(Api api, int status, std::string_view name, std::string_view description, std::string_view what,
                     std::source_location where)
    : std::runtime_error(describe(name_or_code(api, status, name), description, what, where)),
      api_(api),
      status_(status) {}

void check(cudaError_t status, const char* what, std::source_location where) {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();
  throw runtime_error_of(status, what, where);
}

void check(CUresult status, const char* what, std::source_location where) {
  if (status == CUDA_SUCCESS) return;
  throw CudaError(Api::driver, static_cast<int>(status), driver_text("cuGetErrorName", status),
                  driver_text("cuGetErrorString", status), what, where);
}

void check_noexcept(cudaError_t status, const char* what, std::source_location where) noexcept {
  if (status == cudaSuccess) return;
  (void)cudaGetLastError();
  try {
    std::fprintf(stderr, "tpgraph: warning: %s\n", runtime_error_of(status, what, where).what());
  } catch (...) {
    std::fprintf(stderr, "tpgraph: warning: %s failed (%d)\n", what, static_cast<int>(status));
  }
}

void check_launch(const char* kernel, std::source_location where) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) throw runtime_error_of(status, fmt::format("{} launch", kernel), where);
}

namespace {

cudaError_t query_entry_point(const char* name, int version, void** fn,
                              cudaDriverEntryPointQueryResult* found) noexcept {
  *fn = nullptr;
  *found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t status =
      cudaGetDriverEntryPointByVersion(name, fn, static_cast<unsigned int>(version), cudaEnableDefault, found);
  if (status != cudaSuccess) (void)cudaGetLastError();
  return status;
}

}  // namespace

void* driver_entry_point(const char* name, int version) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  const std::string what = fmt::format("cudaGetDriverEntryPointByVersion({}, {})", name, version);
  check(query_entry_point(name, version, &fn, &found), what.c_str());
  if (found != cudaDriverEntryPointSuccess || fn == nullptr) {
    const bool too_old = found == cudaDriverEntryPointVersionNotSufficent;
    throw CudaError(Api::runtime, static_cast<int>(cudaErrorSymbolNotFound),
                    too_old ? "cudaDriverEntryPointVersionNotSufficent" : "cudaDriverEntryPointSymbolNotFound",
                    too_old ? "the driver is older than the version asked for" : "the driver has no such function",
                    what, std::source_location::current());
  }
  return fn;
}

void* find_driver_entry_point(const char* name, int version) noexcept {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (query_entry_point(name, version, &fn, &found) != cudaSuccess || found != cudaDriverEntryPointSuccess) {
    return nullptr;
  }
  return fn;
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
  throw NoDeviceError(
      fmt::format("{} a CUDA GPU, and none is visible (no device or no usable driver). Without a GPU: "
                  "tpgraph plan, tpgraph dot, and tpgraph analyze tests/data/h200-run",
                  what_needs_it));
}

}  // namespace tpgraph::cuda
