#include "inject/nvtx_log.hpp"

#include <iterator>

#include "core/records/trace_nvtx.hpp"

namespace tpgraph::inject {

using tracefile::NvtxKind;
using tracefile::WireNvtx;

namespace {

// The calling thread's ranges opened deferred, outermost first (one NvtxLog per process).
struct Deferred {
  NvtxKind kind;
  std::uint64_t range;
  std::string name;
  std::uint64_t at_ns;
  std::uint32_t thread;
  bool written;
};
thread_local std::vector<Deferred> t_deferred;

}  // namespace

void NvtxLog::add_locked(NvtxKind kind, std::uint64_t range, std::uint32_t name, std::uint64_t at_ns,
                         std::uint32_t thread) {
  WireNvtx e;
  e.at_ns = at_ns;
  e.range = range;
  e.thread = thread;
  e.name = name;
  e.kind = static_cast<std::uint8_t>(kind);
  events_.push_back(e);
  // A ring: the oldest entries leave in batches, so an append stays O(1) amortised.
  if (ring_ > 0 && events_.size() >= 2 * ring_)
    events_.erase(events_.begin(), events_.end() - static_cast<std::ptrdiff_t>(ring_));
}

bool NvtxLog::open(NvtxKind kind, std::uint64_t range, std::string_view name, std::uint64_t at_ns,
                   std::uint32_t thread) {
  if (name.size() > kMaxNameBytes) name = name.substr(0, kMaxNameBytes);
  const std::lock_guard guard(mutex_);
  if (ring_ == 0 && opens_ >= max_opens_) {
    ++left_out_;
    return false;
  }
  ++opens_;
  std::uint32_t id = 0;  // 0: unnamed
  if (!name.empty()) {
    if (const auto it = ids_.find(name); it != ids_.end()) {
      id = it->second;
    } else if (ids_.size() < max_names_ && names_bytes_ + name.size() <= kMaxNamesBytes) {
      names_bytes_ += name.size();
      id = static_cast<std::uint32_t>(ids_.size() + 1);
      ids_.emplace(std::string(name), id);
      new_names_.emplace_back(id, std::string(name));
    } else {
      ++unnamed_;
    }
  }
  add_locked(kind, range, id, at_ns, thread);
  return true;
}

void NvtxLog::close(NvtxKind kind, std::uint64_t range, std::uint64_t at_ns, std::uint32_t thread) {
  for (auto it = t_deferred.rbegin(); it != t_deferred.rend(); ++it) {
    if (it->range != range) continue;
    const bool written = it->written;
    t_deferred.erase(std::next(it).base());
    if (!written) return;
    break;
  }
  const std::lock_guard guard(mutex_);
  add_locked(kind, range, 0, at_ns, thread);
}

bool NvtxLog::open_deferred(NvtxKind kind, std::uint64_t range, std::string_view name, std::uint64_t at_ns,
                            std::uint32_t thread) {
  if (t_deferred.size() >= kMaxDeferred) return false;
  t_deferred.push_back({kind, range, std::string(name.substr(0, kMaxNameBytes)), at_ns, thread, false});
  return true;
}

void NvtxLog::commit_deferred() {
  for (Deferred& d : t_deferred)
    if (!d.written) d.written = open(d.kind, d.range, d.name, d.at_ns, d.thread);
}

std::string NvtxLog::take(bool wait) {
  std::unique_lock lock(mutex_, std::defer_lock);
  if (wait) lock.lock();
  else if (!lock.try_lock()) return {};
  std::vector<WireNvtx> batch;
  if (ring_ > 0 && events_.size() > ring_)
    events_.erase(events_.begin(), events_.end() - static_cast<std::ptrdiff_t>(ring_));
  batch.swap(events_);
  events_.swap(spare_);  // appends after this one reuse the previous batch's memory
  std::vector<std::pair<std::uint32_t, std::string>> names;
  names.swap(new_names_);
  std::string note;
  if (!noted_ && (left_out_ > 0 || unnamed_ > 0)) {
    noted_ = true;
    note = left_out_ > 0 ? "NVTX: ranges opened past the first " + std::to_string(max_opens_) +
                               " of this process are not recorded (their closes neither)"
                         : "NVTX: names past the first " + std::to_string(max_names_) +
                               " distinct ones (or 8 MiB of them) of this process are recorded as unnamed ranges";
  }
  lock.unlock();
  std::string out;
  if (!batch.empty() || !names.empty()) out = tracefile::nvtx_chunk(names, batch);
  if (!note.empty()) out += tracefile::chunk(tracefile::ChunkType::note, note);
  batch.clear();
  if (lock.try_lock()) {
    if (spare_.capacity() < batch.capacity()) spare_.swap(batch);
  }
  return out;
}

std::uint64_t NvtxLog::left_out() {
  const std::lock_guard guard(mutex_);
  return left_out_;
}

}  // namespace tpgraph::inject
