#include "inject/process_info.hpp"

#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <unordered_set>
#include <vector>

#include "inject/self_cost.hpp"

namespace tpgraph::inject {

using nlohmann::json;

namespace {

std::string read_first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string self_exe() {
  std::array<char, 4096> buffer{};
  const ssize_t n = ::readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  return n > 0 ? std::string(buffer.data(), static_cast<std::size_t>(n)) : std::string();
}

}  // namespace

std::string result_text(CUptiResult status) {
  const char* text = nullptr;
  if (cuptiGetResultString(status, &text) != CUPTI_SUCCESS || text == nullptr)
    return "CUPTI error " + std::to_string(static_cast<int>(status));
  return text;
}

std::string host_name() {
  std::array<char, 256> buffer{};
  if (::gethostname(buffer.data(), buffer.size() - 1) != 0) return "unknown-host";
  std::string host(buffer.data());
  // The host becomes part of a file name.
  for (char& c : host)
    if (c == '/' || c == '\0') c = '_';
  return host.empty() ? "unknown-host" : host;
}

namespace {
std::atomic<bool> g_clock_without_cupti{false};
std::atomic<std::int64_t> g_cupti_minus_monotonic{0};
}  // namespace

std::uint64_t now_ns() {
  if (g_clock_without_cupti.load(std::memory_order_acquire))
    return static_cast<std::uint64_t>(static_cast<std::int64_t>(monotonic_ns()) +
                                      g_cupti_minus_monotonic.load(std::memory_order_relaxed));
  std::uint64_t t = 0;
  return cuptiGetTimestamp(&t) == CUPTI_SUCCESS ? t : 0;
}

void clock_without_cupti() noexcept {
  std::uint64_t t = 0;
  const std::uint64_t mono = monotonic_ns();
  if (cuptiGetTimestamp(&t) == CUPTI_SUCCESS)
    g_cupti_minus_monotonic.store(static_cast<std::int64_t>(t) - static_cast<std::int64_t>(mono),
                                  std::memory_order_relaxed);
  g_clock_without_cupti.store(true, std::memory_order_release);
}

// Who else may hold CUPTI: the error and the hints the environment and the loaded libraries give.
std::string other_tool_hint() {
  std::vector<std::string> hints;
  for (const char* var : {"NSYS_PROFILING_SESSION_ID", "NSYS_TARGET_STD_REDIRECT_ACTIVE", "NSIGHT_SYSTEMS"})
    if (std::getenv(var) != nullptr) hints.push_back(std::string("Nsight Systems (") + var + " is set)");
  if (const char* preload = std::getenv("LD_PRELOAD"); preload != nullptr) {
    const std::string p(preload);
    if (p.find("sanitizer") != std::string::npos) hints.push_back("compute-sanitizer (LD_PRELOAD names it)");
    if (p.find("nsys") != std::string::npos || p.find("Nsight") != std::string::npos)
      hints.push_back("Nsight (LD_PRELOAD names it)");
  }
  std::ifstream maps("/proc/self/maps");
  std::string line;
  std::unordered_set<std::string> seen;
  while (std::getline(maps, line)) {
    for (const char* lib : {"libToolsInjection", "libsanitizer", "libnvperf", "libkineto", "libcupti"}) {
      const auto at = line.find(lib);
      if (at == std::string::npos) continue;
      const auto slash = line.find('/');
      const std::string path = slash == std::string::npos ? line.substr(at) : line.substr(slash);
      if (seen.insert(path).second && std::string_view(lib) != "libcupti") hints.push_back("loaded: " + path);
    }
  }
  std::string out;
  for (const auto& h : hints) out += (out.empty() ? "" : "; ") + h;
  return out.empty() ? "no other tool could be named" : out;
}

bool verbose() {
  const char* v = std::getenv("TPGRAPH_INJECT_VERBOSE");
  return v != nullptr && v[0] != '\0' && v[0] != '0';
}

json meta_json() {
  json j;
  j["host"] = host_name();
  j["boot_id"] = read_first_line("/proc/sys/kernel/random/boot_id");
  j["pid"] = static_cast<std::int64_t>(::getpid());
  j["ppid"] = static_cast<std::int64_t>(::getppid());
  j["exe"] = self_exe();
  json env = json::object();
  for (const char* var : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "CUDA_VISIBLE_DEVICES"})
    if (const char* value = std::getenv(var); value != nullptr) env[var] = value;
  j["env"] = env;
  std::uint32_t version = 0;
  j["cupti_version"] = cuptiGetVersion(&version) == CUPTI_SUCCESS ? version : 0;
  j["started_ns"] = now_ns();
  return j;
}

}  // namespace tpgraph::inject
