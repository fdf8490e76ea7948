#include "inject/record_writer.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/records/trace_file.hpp"

namespace tpgraph::inject {

namespace {

bool make_dir(const std::string& path, std::string* error) {
  if (::mkdir(path.c_str(), 0777) == 0 || errno == EEXIST) return true;
  *error = path + ": cannot be created: " + std::strerror(errno);
  return false;
}

// write() may return short on a full disk or a signal; a chunk is either all there or the file
// stops (the reader then reports the cut).
bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

RecordWriter::~RecordWriter() {
  if (ours()) ::close(fd_.exchange(-1));
}

int open_new_record_file(const std::string& procs_dir, const std::string& host, pid_t pid, std::string* path,
                         std::string* error) {
  const std::string stem = procs_dir + "/" + host + "." + std::to_string(pid) + ".";
  for (int n = 0; n < kMaxImagesPerPid; ++n) {
    *path = stem + std::to_string(n) + std::string(tracefile::kSuffix);
    const int fd = ::open(path->c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) return fd;
    if (errno != EEXIST) {
      *error = *path + ": cannot be opened for writing: " + std::strerror(errno);
      return -1;
    }
  }
  *error = stem + "N" + std::string(tracefile::kSuffix) + ": every N below " + std::to_string(kMaxImagesPerPid) +
           " is taken";
  return -1;
}

bool RecordWriter::open(const std::string& trace_dir, const std::string& host, std::string* error) {
  const std::string procs = trace_dir + "/" + std::string(tracefile::kProcsFolder);
  if (!make_dir(trace_dir, error) || !make_dir(procs, error)) return false;
  const pid_t pid = ::getpid();
  const int fd = open_new_record_file(procs, host, pid, &path_, error);
  if (fd < 0) return false;
  const std::lock_guard guard(mutex_);
  fd_ = fd;
  owner_ = pid;
  if (!write_all(fd_, tracefile::file_header())) {
    *error = path_ + ": the header could not be written";
    ::close(fd_.exchange(-1));
    return false;
  }
  bytes_ = tracefile::file_header().size();
  return true;
}

bool RecordWriter::write(std::string_view chunk) {
  if (!ours()) return false;
  const std::lock_guard guard(mutex_);
  return write_locked(chunk);
}

bool RecordWriter::write_end(std::string_view chunk) {
  if (!ours()) return false;
  const std::lock_guard guard(mutex_);
  return write_locked(chunk, true);
}

bool RecordWriter::write_locked(std::string_view chunk, bool past_limit) {
  if (!ours()) return false;
  if (!past_limit && bytes_.load() + chunk.size() > limit_.load()) {
    refused_.fetch_add(1);
    return false;
  }
  if (write_all(fd_, chunk)) {
    bytes_.fetch_add(chunk.size());
    return true;
  }
  ::close(fd_.exchange(-1));
  return false;
}

void RecordWriter::abandon_in_child() noexcept {
  const int fd = fd_.exchange(-1);
  if (fd >= 0) ::close(fd);
}

}  // namespace tpgraph::inject
