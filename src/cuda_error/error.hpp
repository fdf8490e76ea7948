// The one error type and checking helper for every GPU API tpgraph calls: the CUDA runtime and
// driver here, cuBLAS (cuda_error/error_cublas.hpp) and CUPTI (cupti/error.hpp) beside it, all throwing
// CudaError with one message format:
//   "<call> failed: <the API's description> (<its status name>) at <file>:<line>"
// A failed call throws (the status and where it happened are kept); destructors and cleanup paths
// never throw: they report and carry on (check_noexcept). This module sits below every other GPU
// module (the kernels' host launchers use it too) and includes only CUDA headers and core/error.
#pragma once
#include <cuda.h>
#include <cuda_runtime_api.h>

#include <source_location>
#include <stdexcept>
#include <string>
#include <string_view>

namespace tpgraph::cuda {

// Which API a status belongs to: the same number means different things in each.
enum class Api { runtime, driver, cublas, cupti };
[[nodiscard]] std::string_view to_string(Api api);

class CudaError : public std::runtime_error {
 public:
  // `what` names the call; `name` and `description` are the API's own words for `status`
  // (description may be empty).
  CudaError(Api api, int status, std::string_view name, std::string_view description, std::string_view what,
            std::source_location where);
  [[nodiscard]] Api api() const { return api_; }
  // The API's own code: a cudaError_t, CUresult, cublasStatus_t or CUptiResult as an int.
  [[nodiscard]] int status() const { return status_; }

 private:
  Api api_;
  int status_;
};

// A failed runtime call: clears the runtime's last error (sticky errors stay; nothing can clear
// them), so the next launch check does not report this failure a second time, and throws.
void check(cudaError_t status, const char* what, std::source_location where = std::source_location::current());
// A failed driver call (found through driver_entry_point) throws.
void check(CUresult status, const char* what, std::source_location where = std::source_location::current());
// For destructors and cleanup paths: prints the same message to stderr instead of throwing.
void check_noexcept(cudaError_t status, const char* what,
                    std::source_location where = std::source_location::current()) noexcept;
// After a kernel launch: cudaGetLastError, reported as "<kernel> launch failed: ...".
void check_launch(const char* kernel, std::source_location where = std::source_location::current());

// The driver API function `name` at the ABI of CUDA `version` (12000: 12.0), through the
// runtime's entry-point query. tpgraph does not link libcuda: a binary linked to libcuda.so.1 would
// not start on a machine without a GPU driver, where plan, dot and analyze must still work.
// Throws CudaError when the runtime or the driver has no such function.
[[nodiscard]] void* driver_entry_point(const char* name, int version = 12000);
// The same lookup for paths that must not throw: null when it is not found.
[[nodiscard]] void* find_driver_entry_point(const char* name, int version = 12000) noexcept;
template <class Function>
[[nodiscard]] Function driver_function(const char* name, int version = 12000) {
  return reinterpret_cast<Function>(driver_entry_point(name, version));
}

// Number of visible CUDA devices; 0 when there is no device or no usable driver (never throws).
[[nodiscard]] int visible_device_count() noexcept;
// Throws tpgraph::NoDeviceError with `what_needs_it` ("tpgraph run needs a CUDA GPU") and what works
// without one, if no device is visible.
void require_device(const std::string& what_needs_it);

}  // namespace tpgraph::cuda

#define TPG_CUDA(call) ::tpgraph::cuda::check((call), #call)
