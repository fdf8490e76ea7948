// The traced process's record file: one owner of the descriptor, one write() per chunk under one
// mutex, and nothing written by a process other than the one that opened it (a fork's child
// inherits the descriptor and the atexit handler, and must leave the parent's file alone).
#pragma once
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

namespace tpgraph::inject {

// A process image's record files per pid: a program that execs itself more often than this in one
// traced process writes no file for the images past it.
inline constexpr int kMaxImagesPerPid = 1000;

// Creates <procs_dir>/<host>.<pid>.<n>.tpgt for the lowest n not taken (O_CREAT | O_EXCL: a file that
// exists is never opened, let alone truncated). An image that a traced program execs keeps its pid,
// and its file is the next n. Returns the descriptor (write-only, append, close-on-exec) and sets
// `path`, or -1 with `error` set.
int open_new_record_file(const std::string& procs_dir, const std::string& host, pid_t pid, std::string* path,
                         std::string* error);

class RecordWriter {
 public:
  RecordWriter() = default;
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  // Creates <dir>/procs/ if missing and creates a new <dir>/procs/<host>.<pid>.<n>.tpgt
  // (open_new_record_file), then writes the file header. False, with `error` set, when the file
  // cannot be written.
  bool open(const std::string& trace_dir, const std::string& host, std::string* error);

  // Writes one ready chunk (tracefile::chunk and friends). False once the file is closed, not
  // ours (a forked child) or a write failed; the first failure closes the file. False also, with the
  // file left open and nothing written, for a chunk that would take the file past its limit.
  bool write(std::string_view chunk);
  // The footer: written past the limit (a few dozen bytes), so a bounded file still reads as complete.
  bool write_end(std::string_view chunk);

  // The most bytes the file may hold (`trace --max-file-size`); no limit until set.
  void set_limit(std::uint64_t bytes) noexcept { limit_.store(bytes); }
  [[nodiscard]] std::uint64_t limit() const noexcept { return limit_.load(); }
  // Bytes in the file: the header and every chunk written.
  [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_.load(); }
  // Chunks refused at the limit.
  [[nodiscard]] std::uint64_t refused() const noexcept { return refused_.load(); }

  // For a caller that writes several chunks that must stay in order (a name before the records
  // that use it): hold this lock across the writes through write_locked.
  // Check ours() first: in a fork's child the mutex may be held by a thread that no longer exists.
  [[nodiscard]] std::unique_lock<std::mutex> lock() { return std::unique_lock(mutex_); }
  // The same, without waiting (a signal handler's flush: this thread may hold it already).
  [[nodiscard]] std::unique_lock<std::mutex> try_lock() { return std::unique_lock(mutex_, std::try_to_lock); }
  bool write_locked(std::string_view chunk, bool past_limit = false);

  // The file is open and this is the process that opened it.
  [[nodiscard]] bool ours() const noexcept { return fd_.load() >= 0 && owner_.load() == ::getpid(); }

  // Called in a fork's child: forget the descriptor without touching the mutex (another thread may
  // have held it at fork time) and never write again.
  void abandon_in_child() noexcept;

  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::mutex mutex_;
  std::atomic<int> fd_{-1};
  std::atomic<pid_t> owner_{0};
  std::string path_;
  std::atomic<std::uint64_t> limit_{~std::uint64_t{0}};
  std::atomic<std::uint64_t> bytes_{0};
  std::atomic<std::uint64_t> refused_{0};
};

}  // namespace tpgraph::inject
