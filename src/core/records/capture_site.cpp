#include "core/records/capture_site.hpp"

#include <fmt/core.h>

#include <array>
#include <string_view>

#include "core/records/trace_file.hpp"  // printable

namespace tpgraph::recording {

namespace {

std::string_view base_name(std::string_view path) {
  const auto slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool starts_with_any(std::string_view name, const auto& prefixes) {
  for (const std::string_view p : prefixes)
    if (name.starts_with(p)) return true;
  return false;
}

bool contains_any(std::string_view text, const auto& parts) {
  for (const std::string_view p : parts)
    if (text.find(p) != std::string_view::npos) return true;
  return false;
}

}  // namespace

bool framework_frame(const Frame& frame) {
  if (!frame.file.empty()) {
    // Python: the framework's packages and the interpreter's own library (lib/python3.X/*.py,
    // outside site-packages: contextlib, functools, threading).
    static constexpr std::array kPackages = {"/torch/", "/triton/", "/jax/",  "/jaxlib/",
                                             "/cupy/",  "/cupyx/",  "/nvtx/", "<frozen "};
    if (contains_any(frame.file, kPackages)) return true;
    const auto lib = frame.file.find("/lib/python3");
    return lib != std::string::npos && frame.file.find("-packages/", lib) == std::string::npos;
  }
  static constexpr std::array kLibraries = {
      "libcuda.",  "libcudart.", "libcupti.",   "libtpgraph_", "libtorch",  "libc10",    "libpython", "python3",
      "libc.so",   "libstdc++.", "ld-linux",    "libcublas",   "libcudnn",  "libnccl",   "libnvrtc",  "libnvJit",
      "xla_",      "libjax",     "cupy_",       "libpthread",  "libgcc_s",  "libm.so",   "libffi",    "_C.cpython",
      "libtriton", "libnvidia-", "libcusparse", "libcufft",    "libcurand", "libcusolv", "libdl.so"};
  const std::string_view name = base_name(frame.object);
  return name.empty() || starts_with_any(name, kLibraries);
}

std::string frame_text(const Frame& frame) {
  if (!frame.file.empty()) return tracefile::printable(fmt::format("{}:{} {}", frame.file, frame.line, frame.symbol));
  const std::string_view object = base_name(frame.object);
  return tracefile::printable(frame.symbol.empty() ? std::string(object) : fmt::format("{} {}", object, frame.symbol));
}

std::vector<std::string> capture_site(const std::vector<Frame>& frames, std::size_t keep) {
  std::vector<std::string> out;
  for (const Frame& f : frames) {
    if (out.size() >= keep) break;
    if (!framework_frame(f)) out.push_back(frame_text(f));
  }
  return out;
}

}  // namespace tpgraph::recording
