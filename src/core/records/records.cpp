#include "core/records/records.hpp"

#include <algorithm>
#include <mutex>
#include <ostream>
#include <unordered_set>

namespace tpgraph {

namespace {

// Every distinct name text of the process. A node-based set: an element's address never changes,
// so a RecordName can hold it.
struct NamePool {
  std::mutex mutex;
  std::unordered_set<std::string> texts;
};

NamePool& pool() {
  static NamePool* const p = new NamePool;  // never destroyed: Names may outlive static destructors
  return *p;
}

const std::string& empty_text() {
  static const std::string* const empty = new std::string;
  return *empty;
}

}  // namespace

RecordName::RecordName(std::string_view text) {
  if (text.empty()) return;
  NamePool& p = pool();
  const std::lock_guard<std::mutex> lock(p.mutex);
  text_ = &*p.texts.emplace(text).first;
}

std::ostream& operator<<(std::ostream& out, const RecordName& name) { return out << name.str(); }

const std::string& RecordName::str() const { return text_ != nullptr ? *text_ : empty_text(); }

std::optional<StartWindow> body_of_records(std::vector<std::uint64_t> starts) {
  if (starts.empty()) return std::nullopt;
  std::sort(starts.begin(), starts.end());
  StartWindow best{starts[0], starts[0]};
  std::size_t best_count = 0;
  std::size_t from = 0;
  for (std::size_t i = 1; i <= starts.size(); ++i) {
    if (i < starts.size() && starts[i] - starts[i - 1] <= kStrayRecordNs) continue;
    if (i - from > best_count) {
      best_count = i - from;
      best = StartWindow{starts[from], starts[i - 1]};
    }
    from = i;
  }
  return best;
}

}  // namespace tpgraph
