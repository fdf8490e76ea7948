#include "core/base/atomic_file.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/core.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "core/base/error.hpp"

namespace tpgraph {

namespace {

// Registered paths, read by the signal handler: fixed storage, no allocation, a flag per slot.
struct CleanupSlot {
  std::atomic<bool> used{false};
  std::atomic<bool> ready{false};
  std::array<char, PATH_MAX> path{};
};
std::array<CleanupSlot, 8> g_cleanup;

// Removes `name` under `dirfd`, and when it is a folder, what it holds down to `depth` levels.
// Only system calls the signal handler may make (unlinkat, openat, getdents64, close).
void remove_tree_at(int dirfd, const char* name, int depth) {
  if (::unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) return;
  if (depth > 0) {
    const int fd = ::openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    alignas(dirent64) std::array<char, 4096> buffer{};
    for (;;) {
      const ::ssize_t n = ::getdents64(fd, buffer.data(), buffer.size());
      if (n <= 0) break;
      for (::ssize_t offset = 0; offset < n;) {
        const auto* entry = reinterpret_cast<const dirent64*>(buffer.data() + offset);
        offset += entry->d_reclen;
        if (std::strcmp(entry->d_name, ".") == 0 || std::strcmp(entry->d_name, "..") == 0) continue;
        remove_tree_at(fd, entry->d_name, depth - 1);
      }
    }
    ::close(fd);
  }
  ::unlinkat(dirfd, name, AT_REMOVEDIR);
}

extern "C" void remove_registered_and_reraise(int signal_number) {
  const int saved_errno = errno;
  for (auto& slot : g_cleanup) {
    if (slot.ready.load()) remove_tree_at(AT_FDCWD, slot.path.data(), 4);
  }
  errno = saved_errno;
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

}  // namespace

RemoveOnSignal::RemoveOnSignal(const std::filesystem::path& path) {
  const std::string& text = path.native();
  if (text.empty() || text.size() >= PATH_MAX) return;
  for (std::size_t i = 0; i < g_cleanup.size(); ++i) {
    bool expected = false;
    if (!g_cleanup[i].used.compare_exchange_strong(expected, true)) continue;
    std::memcpy(g_cleanup[i].path.data(), text.c_str(), text.size() + 1);
    g_cleanup[i].ready.store(true);
    slot_ = static_cast<int>(i);
    return;
  }
}

RemoveOnSignal::~RemoveOnSignal() {
  if (slot_ < 0) return;
  auto& slot = g_cleanup[static_cast<std::size_t>(slot_)];
  slot.ready.store(false);
  slot.used.store(false);
}

void install_signal_cleanup() {
  for (const int s : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction action {};
    action.sa_handler = remove_registered_and_reraise;
    sigemptyset(&action.sa_mask);
    ::sigaction(s, &action, nullptr);
  }
}

FolderLock::FolderLock(const std::filesystem::path& dir)
    : fd_(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
  if (fd_ < 0) throw InputError(fmt::format("{}: cannot open the folder: {}", dir.string(), std::strerror(errno)));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    if (err == EWOULDBLOCK)
      throw InputError(fmt::format("{}: another tpgraph is writing this folder; wait for it to finish", dir.string()));
    throw InputError(fmt::format("{}: cannot lock the folder: {}", dir.string(), std::strerror(err)));
  }
}

FolderLock::~FolderLock() {
  if (fd_ >= 0) ::close(fd_);
}

bool FolderLock::covers(const std::filesystem::path& dir) const {
  struct stat held {};
  struct stat other {};
  return ::fstat(fd_, &held) == 0 && ::stat(dir.c_str(), &other) == 0 && held.st_dev == other.st_dev &&
         held.st_ino == other.st_ino;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view contents) {
  write_file_atomically(path, [&](const WriteSink& sink) { sink(contents); });
}

void write_file_atomically(const std::filesystem::path& path, const std::function<void(const WriteSink&)>& produce) {
  const std::filesystem::path parent = path.parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
    if (ec) throw InputError(fmt::format("{}: cannot create the folder: {}", parent.string(), ec.message()));
  }
  struct stat existing {};
  if (::lstat(path.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode)) {
    const char* what = S_ISLNK(existing.st_mode)   ? "a symbolic link"
                       : S_ISDIR(existing.st_mode) ? "a folder"
                                                   : "a device, FIFO or socket";
    throw InputError(
        fmt::format("{}: exists and is {}, which writing would replace; accepted: a new path or a "
                    "regular file",
                    path.string(), what));
  }
  // The pid keeps two writers of one folder from sharing a temporary name.
  std::filesystem::path temp = path;
  temp += fmt::format(".tmp-{}", static_cast<long>(getpid()));
  const RemoveOnSignal remove_if_interrupted(temp);
  std::FILE* file = std::fopen(temp.c_str(), "wb");
  if (file == nullptr) throw InputError(fmt::format("{}: cannot write: {}", path.string(), std::strerror(errno)));
  std::size_t written = 0;
  int write_errno = 0;
  bool failed = false;
  try {
    produce([&](std::string_view piece) {
      if (failed || piece.empty()) return;  // after a failed write the rest is dropped
      const std::size_t n = std::fwrite(piece.data(), 1, piece.size(), file);
      written += n;
      if (n != piece.size()) {
        failed = true;
        write_errno = errno;
      }
    });
  } catch (...) {
    std::fclose(file);
    std::remove(temp.c_str());
    throw;
  }
  const bool flushed = std::fflush(file) == 0;
  if (!flushed && !failed) write_errno = errno;
  const bool closed = std::fclose(file) == 0;
  if (!closed && !failed && flushed) write_errno = errno;
  if (failed || !flushed || !closed) {
    std::remove(temp.c_str());
    throw std::system_error(write_errno, std::generic_category(),
                            fmt::format("{}: write failed after {} bytes", path.string(), written));
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::remove(temp.c_str());
    throw std::system_error(ec, fmt::format("{}: cannot rename the finished file into place", path.string()));
  }
}

}  // namespace tpgraph
