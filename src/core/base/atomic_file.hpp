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
// A write that fails midway removes the temporary file and throws std::runtime_error.
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

// Installs the handler that removes the registered paths and then lets the signal end the process
// as it would have (the exit status still says which signal). Called once, by main.
void install_signal_cleanup();

}  // namespace tpgraph
