// Every output file is written under a temporary name beside its final one and renamed when
// complete: a run that fails midway (disk full, killed) never leaves a file that looks finished.
// The temporary names are removed on SIGINT, SIGTERM and SIGHUP too (install_signal_cleanup).
#pragma once
#include <filesystem>
#include <functional>
#include <string_view>

namespace tpgraph {

// Creates the parent folders. A folder or file that cannot be created or opened is an InputError
// naming it, and so is a `path` that exists as anything but a regular file: renaming over a
// symlink, a device node (/dev/stdout, /dev/full) or a FIFO would replace it with a regular file.
// A write or rename that fails midway removes the temporary file and throws std::system_error
// (its what() ends with the reason, such as "No space left on device").
void write_file_atomically(const std::filesystem::path& path, std::string_view contents);
// The same, for contents too large to hold: `produce` hands them to the sink piece by piece.
using WriteSink = std::function<void(std::string_view)>;
void write_file_atomically(const std::filesystem::path& path, const std::function<void(const WriteSink&)>& produce);

// While one of these lives, `path` (a file, or a folder and everything under it, a few levels
// deep) is removed if the process is stopped by SIGINT, SIGTERM or SIGHUP. A handful can be
// registered at once; past that, or for a path longer than PATH_MAX, nothing is registered.
class RemoveOnSignal {
 public:
  explicit RemoveOnSignal(const std::filesystem::path& path);
  RemoveOnSignal(const RemoveOnSignal&) = delete;
  RemoveOnSignal& operator=(const RemoveOnSignal&) = delete;
  ~RemoveOnSignal();

 private:
  int slot_ = -1;
};

// An exclusive advisory lock (flock) on a folder, held while the object lives: the one lock every
// writer of a run or trace folder takes, so a second writer is refused rather than interleaved,
// and whatever a writer left behind (a staging folder) belongs to a writer that is gone. The lock
// belongs to this process alone: the descriptor is close-on-exec, so a command run under it (trace's
// CMD) neither holds nor sees it. An InputError names the folder when it cannot be opened or
// another process holds the lock.
class FolderLock {
 public:
  explicit FolderLock(const std::filesystem::path& dir);
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  FolderLock(FolderLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FolderLock& operator=(FolderLock&&) = delete;
  ~FolderLock();

  // Whether this lock is on `dir` (the same folder, however named).
  [[nodiscard]] bool covers(const std::filesystem::path& dir) const;

 private:
  int fd_;
};

// Installs the handler that removes the registered paths and then lets the signal end the process
// as it would have (the exit status still says which signal). Called once, by main.
void install_signal_cleanup();

}  // namespace tpgraph
