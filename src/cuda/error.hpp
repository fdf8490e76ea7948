// The one error type of the CUDA layer. A failed call throws CudaError (keeps the status and where
// it happened); destructors never throw: they report and carry on (check_noexcept).
#pragma once
#include <cuda_runtime_api.h>

#include <source_location>
#include <stdexcept>
#include <string>

namespace tpgraph::cuda {

class CudaError : public std::runtime_error {
 public:
  CudaError(cudaError_t status, const std::string& what, std::source_location where);
  [[nodiscard]] cudaError_t status() const { return status_; }

 private:
  cudaError_t status_;
};

// Throws CudaError naming the call (`what`) and the source location.
void check(cudaError_t status, const char* what,
           std::source_location where = std::source_location::current());
// For destructors and cleanup paths: prints to stderr instead of throwing.
void check_noexcept(cudaError_t status, const char* what,
                    std::source_location where = std::source_location::current()) noexcept;
// After a kernel launch: cudaGetLastError.
void check_launch(const char* kernel, std::source_location where = std::source_location::current());

// Number of visible CUDA devices; 0 when there is no device or no usable driver (never throws).
[[nodiscard]] int visible_device_count() noexcept;
// Throws tpgraph::NoDeviceError with `what_needs_it` ("tpgraph run needs a CUDA GPU") and what works
// without one, if no device is visible.
void require_device(const std::string& what_needs_it);

}  // namespace tpgraph::cuda

#define TPG_CUDA(call) ::tpgraph::cuda::check((call), #call)
