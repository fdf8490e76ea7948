#include "core/records/records.hpp"

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

}  // namespace tpgraph
