#include "core/base/host_memory.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>

namespace tpgraph {

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A cgroup file's number; -1 for "max", a missing file or anything that is not a number.
std::int64_t read_number(const fs::path& path) {
  const std::string text = read_text(path);
  std::size_t i = 0;
  std::int64_t v = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (v > (std::numeric_limits<std::int64_t>::max() - 9) / 10) return -1;
    v = v * 10 + (text[i] - '0');
  }
  return i == 0 ? -1 : v;
}

// Walks from `group` (relative to `mount`) up to the mount's root, the least limit - usage of the
// levels that have a limit; v1 reports "no limit" as a number near 2^63, past any machine's memory.
std::int64_t least_headroom(const fs::path& mount, std::string_view group, const char* limit_file,
                            const char* usage_file) {
  constexpr std::int64_t kNoLimit = std::int64_t{1} << 60;
  std::int64_t least = -1;
  fs::path rel = fs::path(std::string(group)).relative_path();
  while (true) {
    const fs::path dir = mount / rel;
    const std::int64_t limit = read_number(dir / limit_file);
    if (limit >= 0 && limit < kNoLimit) {
      const std::int64_t usage = std::max<std::int64_t>(read_number(dir / usage_file), 0);
      const std::int64_t headroom = std::max<std::int64_t>(limit - usage, 0);
      least = least < 0 ? headroom : std::min(least, headroom);
    }
    if (rel.empty()) break;
    rel = rel.parent_path();
  }
  return least;
}

}  // namespace

std::int64_t mem_available_from(std::string_view meminfo) {
  std::istringstream in{std::string(meminfo)};
  std::string key;
  std::int64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return -1;
}

std::int64_t cgroup_memory_headroom(std::string_view proc_self_cgroup, const fs::path& root) {
  // Lines "id:controllers:path": "0::/path" is the unified (v2) hierarchy, "4:memory:/path" v1's.
  std::int64_t least = -1;
  const auto take = [&](std::int64_t headroom) {
    if (headroom >= 0) least = least < 0 ? headroom : std::min(least, headroom);
  };
  std::istringstream in{std::string(proc_self_cgroup)};
  std::string line;
  while (std::getline(in, line)) {
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? std::string::npos : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string id = line.substr(0, first);
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string_view group = std::string_view(line).substr(second + 1);
    if (id == "0" && controllers.empty()) {
      // v2 alone is mounted at the root; beside v1 it sits in "unified".
      take(least_headroom(fs::exists(root / "cgroup.controllers") ? root : root / "unified", group, "memory.max",
                          "memory.current"));
      continue;
    }
    std::istringstream list(controllers);
    std::string c;
    while (std::getline(list, c, ','))
      if (c == "memory") take(least_headroom(root / "memory", group, "memory.limit_in_bytes", "memory.usage_in_bytes"));
  }
  return least;
}

std::int64_t available_host_memory() {
  const std::int64_t mem = mem_available_from(read_text("/proc/meminfo"));
  const std::int64_t cgroup = cgroup_memory_headroom(read_text("/proc/self/cgroup"), "/sys/fs/cgroup");
  if (mem < 0) return cgroup;
  return cgroup < 0 ? mem : std::min(mem, cgroup);
}

}  // namespace tpgraph
