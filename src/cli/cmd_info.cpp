// `tpgraph info`: the GPUs a run can use, which of them reach each other (peer access), and the
// driver, runtime and CUPTI versions a report will name.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include <iterator>
#include <string>

#include "cli/commands.hpp"
#include "core/base/error.hpp"
#include "core/numerics/geometry.hpp"
#include "cuda/devices.hpp"
#include "cuda/owners.hpp"
#include "cuda_error/error.hpp"
#include "cupti/collector.hpp"

namespace tpgraph::cli {
namespace {

std::string cupti_version_text(std::uint32_t v) { return v == 0 ? "unreadable" : std::to_string(v); }

int print_info(bool as_json) {
  const cuda::CudaVersions versions = cuda::query_cuda_versions();
  const std::uint32_t cupti = cupti::Collector::cupti_version();
  const int count = cuda::visible_device_count();
  if (count == 0) {
    fmt::print("driver {}, runtime {}, CUPTI API {}\n", cuda::format_cuda_version(versions.driver),
               cuda::format_cuda_version(versions.runtime), cupti_version_text(cupti));
    cuda::require_device("tpgraph info lists GPUs and needs");
  }
  const auto devices = cuda::query_devices();
  const cuda::PeerMatrix peers = cuda::query_peer_matrix();

  if (as_json) {
    nlohmann::json j;
    j["driver_version"] = versions.driver;
    j["runtime_version"] = versions.runtime;
    j["cupti_version"] = cupti;
    j["devices"] = nlohmann::json::array();
    for (const auto& d : devices) {
      const cuda::MemoryInfo mem = cuda::memory_info(d.ordinal);
      j["devices"].push_back({{"ordinal", d.ordinal},
                              {"name", d.name},
                              {"sm_count", d.sm_count},
                              {"memory_bytes", d.memory_bytes},
                              {"free_bytes", mem.free},
                              {"pci_bus_id", d.pci_bus_id}});
    }
    j["peer_access"] = peers.can_access;
    fmt::print("{}\n", j.dump(2));
    return 0;
  }

  std::string out;
  auto put = std::back_inserter(out);
  fmt::format_to(put, "driver {} ({}), runtime {} ({}), CUPTI API {}\n", cuda::format_cuda_version(versions.driver),
                 versions.driver, cuda::format_cuda_version(versions.runtime), versions.runtime,
                 cupti_version_text(cupti));
  for (const auto& d : devices) {
    const cuda::MemoryInfo mem = cuda::memory_info(d.ordinal);
    fmt::format_to(put, "GPU {}: {}, {} SMs, {} ({} free), PCI {}\n", d.ordinal, d.name, d.sm_count,
                   format_bytes(d.memory_bytes), format_bytes(static_cast<std::int64_t>(mem.free)), d.pci_bus_id);
  }
  if (peers.size() == 1) {
    fmt::format_to(put, "peer access: one GPU; ranks share it, each on its own stream (--devices 0,0)\n");
  } else {
    fmt::format_to(put, "peer access (row reads column's memory directly):\n      ");
    for (int b = 0; b < peers.size(); ++b) fmt::format_to(put, " GPU{:<2}", b);
    fmt::format_to(put, "\n");
    for (int a = 0; a < peers.size(); ++a) {
      fmt::format_to(put, "GPU{:<2} ", a);
      for (int b = 0; b < peers.size(); ++b) {
        fmt::format_to(put, " {:<5}", a == b ? "-" : peers.can_access[a][b] ? "yes" : "no");
      }
      fmt::format_to(put, "\n");
    }
  }
  fmt::print("{}", out);
  return 0;
}

}  // namespace

Command add_info_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "GPUs (name, SMs, memory), peer-access matrix, driver/runtime/CUPTI versions");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "print the same as JSON");
  return {cmd, [json] { return print_info(*json); }};
}

}  // namespace tpgraph::cli
