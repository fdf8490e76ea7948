#include "inject/nvtx_ranges.hpp"

#include <atomic>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace tpgraph::inject::nvtx {

namespace {

constexpr std::size_t kMaxDepth = 64;        // ranges kept per thread (deeper ones are counted only)
constexpr std::size_t kMaxTable = 1u << 16;  // started ranges, registered strings: bounded

struct Open {
  nvtxDomainHandle_t domain;  // null: the default domain
  std::string name;
  std::uint64_t id = 0;  // RangeEvent::id
  bool kept = false;     // the listener's answer at the push
};
struct Started {
  std::string name;
  bool kept = false;
};
thread_local std::vector<Open> t_open;
thread_local std::size_t t_unkept = 0;  // pushes past kMaxDepth, popped first

std::atomic<Listener> g_listener{nullptr};
std::atomic<std::uint64_t> g_calls{0};
std::atomic<bool> g_installed{false};
std::atomic<nvtxRangeId_t> g_next_id{1};  // start/end ranges' ids and push/pop ranges' numbers

std::mutex g_mutex;                                    // guards the two tables below
std::unordered_map<nvtxRangeId_t, Started> g_started;  // nvtxRangeStart id -> its range
std::unordered_set<std::string> g_registered;          // registered strings: their handles point here

bool tell(const RangeEvent& event) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  const Listener l = g_listener.load(std::memory_order_acquire);
  return l != nullptr && l(event);
}

// A wide name as text: its ASCII characters kept, any other one as '?' (names are labels here).
std::string narrow(const wchar_t* text) {
  std::string out;
  if (text == nullptr) return out;
  for (; *text != L'\0' && out.size() < 4096; ++text)
    out.push_back(*text >= 0 && *text < 0x80 ? static_cast<char>(*text) : '?');
  return out;
}

std::string message_of(const nvtxEventAttributes_t* a) {
  if (a == nullptr) return {};
  if (a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii != nullptr) return a->message.ascii;
  if (a->messageType == NVTX_MESSAGE_TYPE_UNICODE) return narrow(a->message.unicode);
  if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED && a->message.registered != nullptr)
    return *reinterpret_cast<const std::string*>(a->message.registered);
  return {};
}

int push(nvtxDomainHandle_t domain, std::string name) {
  if (t_open.size() < kMaxDepth) {
    Open& o = t_open.emplace_back(Open{domain, std::move(name), g_next_id.fetch_add(1, std::memory_order_relaxed)});
    o.kept = tell({o.name, true, true, o.id, false});
  } else {
    ++t_unkept;
    (void)tell({name, true, true, 0, false});
  }
  return static_cast<int>(t_open.size() + t_unkept) - 1;
}

int pop(nvtxDomainHandle_t domain) {
  Open closed{domain, {}};
  if (t_unkept > 0) {
    --t_unkept;
  } else {
    // The innermost range of this domain (domains keep stacks of their own).
    auto it = t_open.rbegin();
    while (it != t_open.rend() && it->domain != domain) ++it;
    if (it == t_open.rend()) return -1;  // a pop whose push came before the library
    closed = std::move(*it);
    t_open.erase(std::next(it).base());
  }
  (void)tell({closed.name, false, true, closed.id, closed.kept});
  return static_cast<int>(t_open.size() + t_unkept);
}

nvtxRangeId_t start(std::string name) {
  const nvtxRangeId_t id = g_next_id.fetch_add(1, std::memory_order_relaxed);
  const bool kept = tell({name, true, false, id, false});  // the id is not the program's yet: no end can race
  const std::lock_guard guard(g_mutex);
  if (g_started.size() >= kMaxTable) g_started.clear();  // ranges never ended: forget, never grow
  g_started[id] = Started{std::move(name), kept};
  return id;
}

void end(nvtxRangeId_t id) {
  Started range;
  {
    const std::lock_guard guard(g_mutex);
    const auto it = g_started.find(id);
    if (it == g_started.end()) return;
    range = std::move(it->second);
    g_started.erase(it);
  }
  (void)tell({range.name, false, false, id, range.kept});
}

// The handlers NVTX calls in place of its no-ops.
int NVTX_API push_a(const char* message) { return push(nullptr, message != nullptr ? message : ""); }
// The wide forms too: a wide push left to NVTX's no-op would unpair the next pop.
int NVTX_API push_w(const wchar_t* message) { return push(nullptr, narrow(message)); }
nvtxRangeId_t NVTX_API start_w(const wchar_t* message) { return start(narrow(message)); }
int NVTX_API push_ex(const nvtxEventAttributes_t* a) { return push(nullptr, message_of(a)); }
int NVTX_API pop_default() { return pop(nullptr); }
nvtxRangeId_t NVTX_API start_a(const char* message) { return start(message != nullptr ? message : ""); }
nvtxRangeId_t NVTX_API start_ex(const nvtxEventAttributes_t* a) { return start(message_of(a)); }
void NVTX_API end_default(nvtxRangeId_t id) { end(id); }
int NVTX_API domain_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { return push(d, message_of(a)); }
int NVTX_API domain_pop(nvtxDomainHandle_t d) { return pop(d); }
nvtxRangeId_t NVTX_API domain_start_ex(nvtxDomainHandle_t, const nvtxEventAttributes_t* a) {
  return start(message_of(a));
}
void NVTX_API domain_end(nvtxDomainHandle_t, nvtxRangeId_t id) { end(id); }
nvtxStringHandle_t NVTX_API register_string_a(nvtxDomainHandle_t, const char* text) {
  if (text == nullptr) return nullptr;
  const std::lock_guard guard(g_mutex);
  if (g_registered.size() >= kMaxTable) return nullptr;        // its ranges are then unnamed
  const std::string& kept = *g_registered.insert(text).first;  // set nodes never move
  return reinterpret_cast<nvtxStringHandle_t>(const_cast<std::string*>(&kept));
}
nvtxStringHandle_t NVTX_API register_string_w(nvtxDomainHandle_t domain, const wchar_t* text) {
  if (text == nullptr) return nullptr;
  const std::string narrowed = narrow(text);
  return register_string_a(domain, narrowed.c_str());
}

template <class Fn>
bool put(NvtxFunctionTable table, unsigned int size, unsigned int slot, Fn fn) {
  if (table == nullptr || slot > size || table[slot] == nullptr) return false;
  *table[slot] = reinterpret_cast<NvtxFunctionPointer>(fn);
  return true;
}

}  // namespace

void set_listener(Listener listener) { g_listener.store(listener, std::memory_order_release); }

int install(NvtxGetExportTableFunc_t get_export_table) {
  if (get_export_table == nullptr) return 0;
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
      callbacks->GetModuleFunctionTable == nullptr)
    return 0;
  NvtxFunctionTable core = nullptr;
  unsigned int core_size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size) == 0) return 0;
  // Push and pop are what a window and an origin need; the rest are taken where the table has them.
  const bool ok = put(core, core_size, NVTX_CBID_CORE_RangePushA, &push_a) &&
                  put(core, core_size, NVTX_CBID_CORE_RangePop, &pop_default);
  (void)put(core, core_size, NVTX_CBID_CORE_RangePushEx, &push_ex);
  (void)put(core, core_size, NVTX_CBID_CORE_RangePushW, &push_w);
  (void)put(core, core_size, NVTX_CBID_CORE_RangeStartA, &start_a);
  (void)put(core, core_size, NVTX_CBID_CORE_RangeStartW, &start_w);
  (void)put(core, core_size, NVTX_CBID_CORE_RangeStartEx, &start_ex);
  (void)put(core, core_size, NVTX_CBID_CORE_RangeEnd, &end_default);
  NvtxFunctionTable core2 = nullptr;
  unsigned int core2_size = 0;
  // Domains (NVTX v2 and later): a library without them still gets the core ranges.
  if (ok && callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size) != 0) {
    (void)put(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, &domain_push_ex);
    (void)put(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, &domain_pop);
    (void)put(core2, core2_size, NVTX_CBID_CORE2_DomainRangeStartEx, &domain_start_ex);
    (void)put(core2, core2_size, NVTX_CBID_CORE2_DomainRangeEnd, &domain_end);
    (void)put(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, &register_string_a);
    (void)put(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringW, &register_string_w);
  }
  if (ok) g_installed.store(true);
  return ok ? 1 : 0;
}

std::vector<std::string> open_here() {
  std::vector<std::string> out;
  out.reserve(t_open.size());
  for (const Open& o : t_open) out.push_back(o.name);
  return out;
}

std::uint64_t calls_seen() { return g_calls.load(std::memory_order_relaxed); }
bool installed() { return g_installed.load(); }

}  // namespace tpgraph::inject::nvtx
