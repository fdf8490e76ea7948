// What every launch function does after its <<<>>>: turn a failed launch into the exception
// kernels.hpp promises, through the one CUDA error helper (cuda_error/error.hpp, a module below the
// kernels that includes only CUDA headers).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <mutex>
#include <set>
#include <source_location>
#include <string>
#include <utility>

#include "cuda_error/error.hpp"

namespace tpgraph::kernels::detail {

inline void check_launch(const char* kernel, std::source_location where = std::source_location::current()) {
  cuda::check_launch(kernel, where);
}

inline void check_call(cudaError_t status, const char* what,
                       std::source_location where = std::source_location::current()) {
  cuda::check(status, what, where);
}

// Whether the launches this thread enqueues now carry the programmatic-serialization attribute
// (kernels.hpp, ProgrammaticLaunches).
bool programmatic_launches() noexcept;

// kernel<<<grid, threads, smem, stream>>>(args...) and its check, with the
// programmatic-serialization attribute while programmatic_launches() says so. Only kernels whose
// every thread waits for its prerequisite grids (ptx.cuh, wait_for_prerequisite_grids) before it
// touches what they wrote, or before it exits where it touches only what was complete when the
// kernel before it let it launch (kernels.hpp, GemmWait::at_exit), are launched through this.
template <typename... Params, typename... Args>
void launch(const char* what, void (*kernel)(Params...), unsigned int grid, unsigned int threads, int smem,
            cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute programmatic{};
  programmatic.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  programmatic.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = static_cast<std::size_t>(smem);
  config.stream = stream;
  config.attrs = &programmatic;
  config.numAttrs = programmatic_launches() ? 1 : 0;
  const cudaError_t status = cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
  // Read the runtime's last error once, here: a launch that fails also leaves its error there, and
  // the next launch's check would otherwise report it under that kernel's name.
  const cudaError_t last = cudaGetLastError();
  if (status != cudaSuccess || last != cudaSuccess) {
    const std::string launch_of = std::string(what) + " launch";
    check_call(status != cudaSuccess ? status : last, launch_of.c_str());
  }
}

// Prepares `kernel` for `bytes` of dynamic shared memory on the current device: the largest
// shared-memory carveout (the blocks an SM holds are then limited by registers and the kernel's
// own shared memory, never by an L1-favouring split the driver might pick), and the opt-in beyond
// the default 48 KB where `bytes` needs it. The attributes belong to the kernel's instance in each
// device's context, so ranks on several GPUs each need them. Set once per (kernel, device); not a
// stream operation, so allowed while a stream is being captured.
inline void prepare_smem(const void* kernel, int bytes, const char* what) {
  int device = 0;
  check_call(cudaGetDevice(&device), "cudaGetDevice");
  static std::mutex mutex;
  static std::set<std::pair<const void*, int>> done;
  const std::lock_guard<std::mutex> lock(mutex);
  if (done.count({kernel, device}) != 0) return;
  check_call(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                  cudaSharedmemCarveoutMaxShared),
             what);
  if (bytes > 48 * 1024)
    check_call(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), what);
  done.insert({kernel, device});
}

// Enough blocks of `threads` to cover `work` items with `per_thread` each, capped so that
// grid-stride loops keep every launch shape-independent and small.
inline unsigned int grid_for(long long work, int threads, int per_thread) {
  const long long per_block = static_cast<long long>(threads) * per_thread;
  long long blocks = (work + per_block - 1) / per_block;
  if (blocks < 1) blocks = 1;
  if (blocks > 65535) blocks = 65535;
  return static_cast<unsigned int>(blocks);
}

}  // namespace tpgraph::kernels::detail
