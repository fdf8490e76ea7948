#include "cuda/owners.hpp"

#include <fmt/core.h>

#include "core/numerics/geometry.hpp"

namespace tpgraph::cuda {

DeviceScope::DeviceScope(int device) {
  TPG_CUDA(cudaGetDevice(&previous_));
  if (previous_ != device) {
    TPG_CUDA(cudaSetDevice(device));
    changed_ = true;
  }
}

DeviceScope::~DeviceScope() {
  if (changed_) check_noexcept(cudaSetDevice(previous_), "cudaSetDevice (restore)");
}

namespace {
// Deleters run on the handle's device; they must not throw, so they switch by hand.
template <class F>
void on_device(int device, F&& f) noexcept {
  int previous = 0;
  const bool got = cudaGetDevice(&previous) == cudaSuccess;
  const bool switch_device = got && previous != device;
  if (switch_device) check_noexcept(cudaSetDevice(device), "cudaSetDevice (cleanup)");
  f();
  if (switch_device) check_noexcept(cudaSetDevice(previous), "cudaSetDevice (restore)");
}
}  // namespace

void StreamDeleter::operator()(cudaStream_t s, int device) const noexcept {
  on_device(device, [&] { check_noexcept(cudaStreamDestroy(s), "cudaStreamDestroy"); });
}
void EventDeleter::operator()(cudaEvent_t e, int device) const noexcept {
  on_device(device, [&] { check_noexcept(cudaEventDestroy(e), "cudaEventDestroy"); });
}
void GraphDeleter::operator()(cudaGraph_t g, int device) const noexcept {
  on_device(device, [&] { check_noexcept(cudaGraphDestroy(g), "cudaGraphDestroy"); });
}
void GraphExecDeleter::operator()(cudaGraphExec_t g, int device) const noexcept {
  on_device(device, [&] { check_noexcept(cudaGraphExecDestroy(g), "cudaGraphExecDestroy"); });
}
void DeviceMemoryDeleter::operator()(void* p, int device) const noexcept {
  on_device(device, [&] { check_noexcept(cudaFree(p), "cudaFree"); });
}

Stream make_stream(int device) {
  DeviceScope scope(device);
  cudaStream_t s = nullptr;
  TPG_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  return Stream(s, device);
}

Event make_event(int device, bool timing) {
  DeviceScope scope(device);
  cudaEvent_t e = nullptr;
  TPG_CUDA(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
  return Event(e, device);
}

GraphExec instantiate(const Graph& graph, unsigned long long flags) {
  DeviceScope scope(graph.device());
  cudaGraphExec_t exec = nullptr;
  TPG_CUDA(cudaGraphInstantiateWithFlags(&exec, graph.get(), flags));
  return GraphExec(exec, graph.device());
}

DeviceMemory::DeviceMemory(int device, std::size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  DeviceScope scope(device);
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    std::size_t free = 0, total = 0;
    (void)cudaMemGetInfo(&free, &total);
    const std::string what =
        fmt::format("cudaMalloc of {} on GPU {} ({} free of {})", format_bytes(static_cast<std::int64_t>(bytes)),
                    device, format_bytes(static_cast<std::int64_t>(free)),
                    format_bytes(static_cast<std::int64_t>(total)));
    check(status, what.c_str());
  }
  mem_ = UniqueHandle<void*, DeviceMemoryDeleter>(p, device);
}

MemoryInfo memory_info(int device) {
  DeviceScope scope(device);
  MemoryInfo m;
  TPG_CUDA(cudaMemGetInfo(&m.free, &m.total));
  return m;
}

}  // namespace tpgraph::cuda
