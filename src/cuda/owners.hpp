// Move-only owners of CUDA handles, one per kind, each with get()/release(). An owner frees its
// handle on the device it was made on; destructors never throw (check_noexcept).
#pragma once
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "cuda_error/error.hpp"

namespace tpgraph::cuda {

// Makes `device` current for the scope and restores the previous device after.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

template <class Handle, class Deleter>
class UniqueHandle {
 public:
  UniqueHandle() = default;
  UniqueHandle(Handle h, int device) : handle_(h), device_(device) {}
  UniqueHandle(std::nullptr_t) = delete;
  ~UniqueHandle() { reset(); }
  UniqueHandle(UniqueHandle&& o) noexcept : handle_(std::exchange(o.handle_, Handle{})), device_(o.device_) {}
  UniqueHandle& operator=(UniqueHandle&& o) noexcept {
    if (this != &o) {
      reset();
      handle_ = std::exchange(o.handle_, Handle{});
      device_ = o.device_;
    }
    return *this;
  }
  UniqueHandle(const UniqueHandle&) = delete;
  UniqueHandle& operator=(const UniqueHandle&) = delete;

  [[nodiscard]] Handle get() const { return handle_; }
  [[nodiscard]] int device() const { return device_; }
  [[nodiscard]] explicit operator bool() const { return handle_ != Handle{}; }
  [[nodiscard]] Handle release() { return std::exchange(handle_, Handle{}); }
  void reset() noexcept {
    if (handle_ != Handle{}) Deleter{}(handle_, device_);
    handle_ = Handle{};
  }

 private:
  Handle handle_{};
  int device_ = 0;
};

struct StreamDeleter {
  void operator()(cudaStream_t s, int device) const noexcept;
};
struct EventDeleter {
  void operator()(cudaEvent_t e, int device) const noexcept;
};
struct GraphDeleter {
  void operator()(cudaGraph_t g, int device) const noexcept;
};
struct GraphExecDeleter {
  void operator()(cudaGraphExec_t g, int device) const noexcept;
};
struct DeviceMemoryDeleter {
  void operator()(void* p, int device) const noexcept;
};

using Stream = UniqueHandle<cudaStream_t, StreamDeleter>;
using Event = UniqueHandle<cudaEvent_t, EventDeleter>;
using Graph = UniqueHandle<cudaGraph_t, GraphDeleter>;
using GraphExec = UniqueHandle<cudaGraphExec_t, GraphExecDeleter>;

// A non-blocking stream on `device`.
[[nodiscard]] Stream make_stream(int device);
// An event on `device`; timing events unless `timing` is false.
[[nodiscard]] Event make_event(int device, bool timing = true);
// The only way to get a GraphExec.
[[nodiscard]] GraphExec instantiate(const Graph& graph, unsigned long long flags = 0);

// Untyped device memory (cudaMalloc on `device`); throws CudaError naming the size when it fails.
class DeviceMemory {
 public:
  DeviceMemory() = default;
  DeviceMemory(int device, std::size_t bytes);
  [[nodiscard]] void* get() const { return mem_.get(); }
  [[nodiscard]] std::size_t bytes() const { return bytes_; }
  [[nodiscard]] int device() const { return mem_.device(); }

 private:
  UniqueHandle<void*, DeviceMemoryDeleter> mem_;
  std::size_t bytes_ = 0;
};

// Typed device buffer of `count` elements of T.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, std::size_t count) : mem_(device, count * sizeof(T)), count_(count) {}
  [[nodiscard]] T* get() const { return static_cast<T*>(mem_.get()); }
  [[nodiscard]] std::size_t size() const { return count_; }
  [[nodiscard]] std::size_t bytes() const { return count_ * sizeof(T); }
  [[nodiscard]] int device() const { return mem_.device(); }

  void upload(std::span<const T> host) {
    DeviceScope scope(device());
    TPG_CUDA(cudaMemcpy(get(), host.data(), std::min(host.size(), count_) * sizeof(T), cudaMemcpyHostToDevice));
  }
  [[nodiscard]] std::vector<T> download() const {
    std::vector<T> host(count_);
    DeviceScope scope(device());
    TPG_CUDA(cudaMemcpy(host.data(), get(), bytes(), cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  DeviceMemory mem_;
  std::size_t count_ = 0;
};

template <class T>
[[nodiscard]] DeviceBuffer<T> to_device(int device, std::span<const T> host) {
  DeviceBuffer<T> buf(device, host.size());
  buf.upload(host);
  return buf;
}

// Free and total memory of `device` (cudaMemGetInfo).
struct MemoryInfo {
  std::size_t free = 0;
  std::size_t total = 0;
};
[[nodiscard]] MemoryInfo memory_info(int device);

}  // namespace tpgraph::cuda
