// How much host memory this process may still take: the kernel's MemAvailable, and where the
// process runs in a control group with a memory limit (a container, a batch job's slice), what is
// left under that limit. A check against MemAvailable alone lets a job in a 2 GB container be
// OOM-killed instead of refused.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string_view>

namespace tpgraph {

// The smaller of MemAvailable and the cgroup's headroom (bytes); -1 when neither can be read.
[[nodiscard]] std::int64_t available_host_memory();

// The parts, for tests. MemAvailable from the text of /proc/meminfo (-1: absent).
[[nodiscard]] std::int64_t mem_available_from(std::string_view meminfo);
// The least headroom (limit - usage, at least 0) of the memory-limited cgroups holding this process,
// from the text of /proc/self/cgroup and the cgroup file systems mounted at `root`
// (/sys/fs/cgroup): cgroup v2's memory.max - memory.current in the unified hierarchy, v1's
// memory.limit_in_bytes - memory.usage_in_bytes in the memory controller's; every level from the
// process's group up to the root is read (a limit set on a parent binds too), and a level that is
// not visible (another cgroup namespace) is passed over. -1: no limit found.
[[nodiscard]] std::int64_t cgroup_memory_headroom(std::string_view proc_self_cgroup, const std::filesystem::path& root);

}  // namespace tpgraph
