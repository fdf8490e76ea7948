// The GPUs a run can use: what they are, which can reach which (peer access), the driver and
// runtime versions, and the checks a scenario must pass before anything is allocated: every rank's
// GPU exists, peer access works between the GPUs that exchange data, and the memory fits.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/model/scenario.hpp"
#include "core/records/run_data.hpp"

namespace tpgraph::cuda {

// Every visible GPU, in ordinal order. Empty with no device (never throws for that).
[[nodiscard]] std::vector<DeviceInfo> query_devices();

// can_access[a][b]: GPU a can read and write GPU b's memory directly (cudaDeviceCanAccessPeer).
// The diagonal is true.
struct PeerMatrix {
  std::vector<std::vector<bool>> can_access;
  [[nodiscard]] int size() const { return static_cast<int>(can_access.size()); }
};
[[nodiscard]] PeerMatrix query_peer_matrix();

struct CudaVersions {
  int driver = 0;   // cudaDriverGetVersion: 13000 for 13.0; 0 with no usable driver
  int runtime = 0;  // cudaRuntimeGetVersion
};
[[nodiscard]] CudaVersions query_cuda_versions() noexcept;
// 13000 -> "13.0", 12080 -> "12.8"; 0 -> "none".
[[nodiscard]] std::string format_cuda_version(int version);

// The GPU of every rank, in rank order. Throws NoDeviceError naming the rank and the device when a
// scenario maps a rank to a GPU that is not visible ("--devices 5" on a one-GPU machine).
[[nodiscard]] std::vector<int> rank_devices(const Scenario& s, int visible_devices);

// Distinct GPUs in `devices`, each pair enabled for peer access both ways. Throws InputError when
// a pair cannot reach each other (no P2P between them): the graph's copies and cross-device waits
// need it. A list of one GPU (ranks sharing it) needs nothing.
void enable_peer_access(const std::vector<int>& devices);

// Throws InputError, before anything is allocated, when a GPU has less free memory than is needed
// there ({device, bytes}, e.g. memory_per_device), saying how much is needed and how much is free.
void check_memory(const std::vector<std::pair<int, std::int64_t>>& needed_per_device);

}  // namespace tpgraph::cuda
