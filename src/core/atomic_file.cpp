#include "core/atomic_file.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <system_error>

#include "core/error.hpp"

namespace tpgraph {

void write_file_atomically(const std::filesystem::path& path, std::string_view contents) {
  const std::filesystem::path parent = path.parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) throw InputError(fmt::format("{}: cannot create the folder: {}", parent.string(), ec.message()));
  }
  // The pid keeps two writers of one folder from sharing a temporary name.
  std::filesystem::path temp = path;
  temp += fmt::format(".tmp-{}", static_cast<long>(getpid()));
  std::FILE* file = std::fopen(temp.c_str(), "wb");
  if (file == nullptr)
    throw InputError(fmt::format("{}: cannot write: {}", path.string(), std::strerror(errno)));
  const std::size_t written = std::fwrite(contents.data(), 1, contents.size(), file);
  const int write_errno = errno;
  const bool flushed = std::fflush(file) == 0;
  const bool closed = std::fclose(file) == 0;
  if (written != contents.size() || !flushed || !closed) {
    std::remove(temp.c_str());
    throw std::runtime_error(fmt::format("{}: write failed after {} of {} bytes: {}", path.string(),
                                         written, contents.size(), std::strerror(write_errno)));
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::remove(temp.c_str());
    throw std::runtime_error(fmt::format("{}: cannot rename the finished file into place: {}",
                                         path.string(), ec.message()));
  }
}

}  // namespace tpgraph
