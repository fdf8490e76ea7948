#include "cuda/devices.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <set>

#include "core/base/error.hpp"
#include "cuda/owners.hpp"
#include "cuda_error/error.hpp"

namespace tpgraph::cuda {

std::vector<DeviceInfo> query_devices() {
  std::vector<DeviceInfo> devices;
  const int count = visible_device_count();
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    TPG_CUDA(cudaGetDeviceProperties(&prop, d));
    DeviceInfo info;
    info.ordinal = d;
    info.name = prop.name;
    info.sm_count = prop.multiProcessorCount;
    info.memory_bytes = static_cast<std::int64_t>(prop.totalGlobalMem);
    std::array<char, 32> bus{};
    TPG_CUDA(cudaDeviceGetPCIBusId(bus.data(), static_cast<int>(bus.size()), d));
    info.pci_bus_id = bus.data();
    devices.push_back(std::move(info));
  }
  return devices;
}

PeerMatrix query_peer_matrix() {
  const int count = visible_device_count();
  PeerMatrix m;
  m.can_access.assign(count, std::vector<bool>(count, true));
  for (int a = 0; a < count; ++a) {
    for (int b = 0; b < count; ++b) {
      if (a == b) continue;
      int can = 0;
      TPG_CUDA(cudaDeviceCanAccessPeer(&can, a, b));
      m.can_access[a][b] = can != 0;
    }
  }
  return m;
}

CudaVersions query_cuda_versions() noexcept {
  CudaVersions v;
  if (cudaDriverGetVersion(&v.driver) != cudaSuccess) v.driver = 0;
  if (cudaRuntimeGetVersion(&v.runtime) != cudaSuccess) v.runtime = 0;
  (void)cudaGetLastError();
  return v;
}

std::string format_cuda_version(int version) {
  if (version <= 0) return "none";
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

std::vector<int> rank_devices(const Scenario& s, int visible_devices) {
  std::vector<int> devices;
  for (int r = 0; r < s.geometry.ranks; ++r) {
    const int d = s.device_of(r, visible_devices);
    if (d < 0 || d >= visible_devices) {
      throw NoDeviceError(
          fmt::format("scenario '{}' puts rank {} on GPU {}, but {} GPU{} visible (ordinals 0..{}); choose "
                      "--devices from those (ranks may share a GPU: --devices 0,0)",
                      s.name, r, d, visible_devices, visible_devices == 1 ? " is" : "s are", visible_devices - 1));
    }
    devices.push_back(d);
  }
  return devices;
}

void enable_peer_access(const std::vector<int>& devices) {
  const std::set<int> distinct(devices.begin(), devices.end());
  for (const int a : distinct) {
    for (const int b : distinct) {
      if (a == b) continue;
      int can = 0;
      TPG_CUDA(cudaDeviceCanAccessPeer(&can, a, b));
      if (can == 0) {
        throw InputError(
            fmt::format("GPU {} cannot access GPU {}'s memory (no peer access between them; see tpgraph info), "
                        "so the graph's copies and cross-device waits between their ranks are impossible; "
                        "choose --devices whose GPUs are peers, or put the ranks on one GPU (--devices 0,0)",
                        a, b));
      }
      DeviceScope scope(a);
      const cudaError_t status = cudaDeviceEnablePeerAccess(b, 0);
      if (status == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();  // enabled by an earlier variant of this run: fine
      } else {
        check(status, "cudaDeviceEnablePeerAccess");
      }
    }
  }
}

void check_memory(const std::vector<std::pair<int, std::int64_t>>& needed_per_device) {
  for (const auto& [device, needed] : needed_per_device) {
    const MemoryInfo info = memory_info(device);
    check_memory_fits(needed, static_cast<std::int64_t>(info.free), device);
  }
}

}  // namespace tpgraph::cuda
