// The program's NVTX ranges as the record file keeps them (the nvtx chunk,
// core/records/trace_nvtx.hpp). The program's own thread appends each open and close inside its
// NVTX call: one short lock, a 32-byte entry, and the name looked up among those already seen (a
// name's copy is made once per process). The flush thread takes the entries every 200 ms, and the
// tracer at exit, as one chunk: no file I/O on the program's thread.
//
// Bounded: at most `max_opens` opens per process (a close is kept when its open was, so at most twice
// as many entries), at most `max_names` distinct names and kMaxNamesBytes of them (later names are
// recorded unnamed), names cut at 4096 bytes. What was left out is said once in a note. The flight
// recorder's log holds only its last entries instead (keep_last).
#pragma once
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/records/trace_file.hpp"

namespace tpgraph::inject {

class NvtxLog {
 public:
  static constexpr std::uint64_t kMaxOpens = std::uint64_t{1} << 20;
  static constexpr std::size_t kMaxNames = std::size_t{1} << 16;
  static constexpr std::size_t kMaxNameBytes = 4096;
  static constexpr std::size_t kMaxNamesBytes = std::size_t{8} << 20;

  explicit NvtxLog(std::uint64_t max_opens = kMaxOpens, std::size_t max_names = kMaxNames)
      : max_opens_(max_opens), max_names_(max_names) {}

  // A range opened (push or start): true when it is kept, false past the bound (counted). Its close
  // is to be added only when its open was kept.
  bool open(tracefile::NvtxKind kind, std::uint64_t range, std::string_view name, std::uint64_t at_ns,
            std::uint32_t thread);
  // A range closed (pop or end). The close of a range opened deferred (below) is written only if
  // its open was.
  void close(tracefile::NvtxKind kind, std::uint64_t range, std::uint64_t at_ns, std::uint32_t thread);

  // Sampling and launch counts record a few launches among many: a range is then worth keeping only
  // if a recorded launch is made inside it. open_deferred holds a push range on the calling thread
  // (up to kMaxDeferred open at once; true when held) and commit_deferred, called on that thread at
  // a recorded launch, writes the opens of every range it holds that is still open. A held range
  // that closes before any recorded launch leaves nothing in the log.
  static constexpr std::size_t kMaxDeferred = 64;
  bool open_deferred(tracefile::NvtxKind kind, std::uint64_t range, std::string_view name, std::uint64_t at_ns,
                     std::uint32_t thread);
  void commit_deferred();

  // The entries since the last call as one nvtx chunk (with the names they use first), and once a
  // note chunk when opens or names were left out; "" when there is nothing new. `wait` false: the
  // lock is only tried (a signal handler's flush, which may have interrupted a thread holding it).
  [[nodiscard]] std::string take(bool wait = true);

  // Opens left out past the bound.
  [[nodiscard]] std::uint64_t left_out();

  // The flight recorder's log (`trace --keep-last`): only the last `entries` opens and closes are
  // held (older ones are forgotten as new ones come, without the bound on opens), and take() hands
  // out those. Set before the program's first range.
  void keep_last(std::size_t entries) {
    const std::lock_guard guard(mutex_);
    ring_ = entries;
  }

 private:
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  void add_locked(tracefile::NvtxKind kind, std::uint64_t range, std::uint32_t name, std::uint64_t at_ns,
                  std::uint32_t thread);

  const std::uint64_t max_opens_;
  const std::size_t max_names_;
  std::mutex mutex_;  // guards the members below; held for an append or a swap, never across I/O
  std::vector<tracefile::WireNvtx> events_;
  std::vector<tracefile::WireNvtx> spare_;  // the last batch's memory, reused by the next
  std::unordered_map<std::string, std::uint32_t, Hash, std::equal_to<>> ids_;
  std::vector<std::pair<std::uint32_t, std::string>> new_names_;  // not yet in a chunk
  std::size_t names_bytes_ = 0;
  std::uint64_t opens_ = 0;
  std::uint64_t left_out_ = 0;
  std::uint64_t unnamed_ = 0;  // opens whose name was past max_names_
  bool noted_ = false;
  std::size_t ring_ = 0;  // keep_last's entries; 0: every entry until take()
};

}  // namespace tpgraph::inject
