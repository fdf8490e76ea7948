#include "inject/origin.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <generated_nvtx_meta.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <type_traits>
#include <unordered_map>

#include "core/records/capture_site.hpp"
#include "inject/recorder.hpp"
#include "inject/topology.hpp"  // demangle

namespace tpgraph::inject {

namespace {

constexpr std::size_t kSiteFrames = 4;  // frames of the program kept per graph
constexpr int kNativeFrames = 64;       // deep enough to get past a framework's own frames
constexpr int kPythonFrames = 48;
constexpr std::size_t kMaxDepth = 64;        // NVTX ranges kept per thread (deeper ones are counted only)
constexpr std::size_t kMaxTable = 1u << 16;  // started ranges, registered strings, graphs: bounded

thread_local std::vector<std::string> t_ranges;
thread_local std::size_t t_depth = 0;  // ranges open on this thread, kept or not
thread_local std::optional<tracefile::GraphOrigin> t_capture;

std::mutex g_mutex;                                            // guards the tables below
std::unordered_map<std::uint64_t, std::string> g_started;      // nvtxRangeStart id -> name
std::unordered_map<const void*, std::string> g_registered;     // nvtxDomainRegisterString handle -> text
std::unordered_map<CUgraph, tracefile::GraphOrigin> g_origin;  // captured graph -> its origin

template <class Map>
void bounded_insert(Map& map, typename Map::key_type key, typename Map::mapped_type value) {
  if (map.size() >= kMaxTable) map.clear();  // a program that never ends its ranges: forget, never grow
  map[key] = std::move(value);
}

std::string message_of(const nvtxEventAttributes_t* a) {
  if (a == nullptr) return {};
  if (a->messageType == NVTX_MESSAGE_TYPE_ASCII && a->message.ascii != nullptr) return a->message.ascii;
  if (a->messageType == NVTX_MESSAGE_TYPE_REGISTERED) {
    const std::lock_guard guard(g_mutex);
    const auto it = g_registered.find(a->message.registered);
    return it != g_registered.end() ? it->second : std::string();
  }
  return {};  // wide strings are not read
}

void pushed(const std::string& name, Recorder* recorder, std::uint64_t now_ns) {
  if (t_depth++ < kMaxDepth) t_ranges.push_back(name);
  if (recorder != nullptr) recorder->nvtx(name, true, now_ns);
}

void popped(Recorder* recorder, std::uint64_t now_ns) {
  if (t_depth == 0) return;  // a pop whose push came before the library
  std::string name;
  if (t_depth-- <= kMaxDepth && !t_ranges.empty()) {
    name = std::move(t_ranges.back());
    t_ranges.pop_back();
  }
  if (recorder != nullptr) recorder->nvtx(name, false, now_ns);
}

// The Python interpreter's C API, where the process runs one: its frames say where a Python program
// captured, which the native stack (all interpreter frames) cannot.
struct PythonApi {
  int (*initialized)() = nullptr;
  int (*holds_gil)() = nullptr;
  void* (*frame)() = nullptr;                        // PyEval_GetFrame: borrowed
  void* (*code)(void*) = nullptr;                    // PyFrame_GetCode: new reference
  void* (*back)(void*) = nullptr;                    // PyFrame_GetBack: new reference
  int (*line)(void*) = nullptr;                      // PyFrame_GetLineNumber
  void* (*attribute)(void*, const char*) = nullptr;  // PyObject_GetAttrString: new reference
  const char* (*utf8)(void*) = nullptr;              // PyUnicode_AsUTF8
  void (*release)(void*) = nullptr;                  // Py_DecRef
  void (*clear_error)() = nullptr;                   // PyErr_Clear
  [[nodiscard]] bool usable() const {
    return initialized && holds_gil && frame && code && back && line && attribute && utf8 && release && clear_error &&
           initialized() != 0 && holds_gil() == 1;
  }
};

const PythonApi& python() {
  static const PythonApi api = [] {
    PythonApi a;
    const auto find = [](auto& fn, const char* name) {
      fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(RTLD_DEFAULT, name));
    };
    find(a.initialized, "Py_IsInitialized");
    find(a.holds_gil, "PyGILState_Check");
    find(a.frame, "PyEval_GetFrame");
    find(a.code, "PyFrame_GetCode");
    find(a.back, "PyFrame_GetBack");
    find(a.line, "PyFrame_GetLineNumber");
    find(a.attribute, "PyObject_GetAttrString");
    find(a.utf8, "PyUnicode_AsUTF8");
    find(a.release, "Py_DecRef");
    find(a.clear_error, "PyErr_Clear");
    return a;
  }();
  return api;
}

std::string python_text(const PythonApi& py, void* object, const char* name) {
  void* value = py.attribute(object, name);
  if (value == nullptr) {
    py.clear_error();
    return {};
  }
  const char* text = py.utf8(value);
  std::string out = text != nullptr ? text : "";
  if (text == nullptr) py.clear_error();
  py.release(value);
  return out;
}

void python_frames(std::vector<recording::Frame>& out) {
  const PythonApi& py = python();
  if (!py.usable()) return;
  void* frame = py.frame();
  void* owned = nullptr;  // the frame we hold a reference to (the first is borrowed)
  for (int i = 0; i < kPythonFrames && frame != nullptr; ++i) {
    if (void* code = py.code(frame); code != nullptr) {
      out.push_back({"", python_text(py, code, "co_name"), python_text(py, code, "co_filename"), py.line(frame)});
      py.release(code);
    }
    void* next = py.back(frame);
    if (owned != nullptr) py.release(owned);
    owned = frame = next;
  }
  if (owned != nullptr) py.release(owned);
}

void native_frames(std::vector<recording::Frame>& out) {
  std::array<void*, kNativeFrames> addresses{};
  const int n = backtrace(addresses.data(), kNativeFrames);
  for (int i = 0; i < n; ++i) {
    Dl_info info{};
    if (dladdr(addresses[static_cast<std::size_t>(i)], &info) == 0) continue;
    recording::Frame f;
    f.object = info.dli_fname != nullptr ? info.dli_fname : "";
    if (info.dli_sname != nullptr) {
      f.symbol = demangle(info.dli_sname);
    } else if (info.dli_fbase != nullptr) {
      char text[32];
      std::snprintf(text, sizeof text, "+0x%zx",
                    static_cast<std::size_t>(static_cast<const char*>(addresses[static_cast<std::size_t>(i)]) -
                                             static_cast<const char*>(info.dli_fbase)));
      f.symbol = text;
    }
    out.push_back(std::move(f));
  }
}

tracefile::GraphOrigin origin_now(const char* at) {
  std::vector<recording::Frame> frames;
  python_frames(frames);
  native_frames(frames);
  return {at, nvtx_open_here(), recording::capture_site(frames, kSiteFrames)};
}

}  // namespace

void on_nvtx(CUpti_CallbackId cbid, const CUpti_NvtxData& data, Recorder* recorder, std::uint64_t now_ns) {
  const void* p = data.functionParams;
  if (p == nullptr) return;
  switch (cbid) {
    case CUPTI_CBID_NVTX_nvtxRangePushA: {
      const char* m = static_cast<const nvtxRangePushA_params*>(p)->message;
      return pushed(m != nullptr ? m : "", recorder, now_ns);
    }
    case CUPTI_CBID_NVTX_nvtxRangePushEx:
      return pushed(message_of(static_cast<const nvtxRangePushEx_params*>(p)->eventAttrib), recorder, now_ns);
    case CUPTI_CBID_NVTX_nvtxDomainRangePushEx:
      return pushed(message_of(static_cast<const nvtxDomainRangePushEx_params*>(p)->core.eventAttrib), recorder,
                    now_ns);
    case CUPTI_CBID_NVTX_nvtxRangePop:
    case CUPTI_CBID_NVTX_nvtxDomainRangePop: return popped(recorder, now_ns);
    case CUPTI_CBID_NVTX_nvtxRangeStartA:
    case CUPTI_CBID_NVTX_nvtxRangeStartEx:
    case CUPTI_CBID_NVTX_nvtxDomainRangeStartEx: {
      if (data.functionReturnValue == nullptr) return;
      const auto id = *static_cast<const nvtxRangeId_t*>(data.functionReturnValue);
      std::string name;
      if (cbid == CUPTI_CBID_NVTX_nvtxRangeStartA) {
        const char* m = static_cast<const nvtxRangeStartA_params*>(p)->message;
        name = m != nullptr ? m : "";
      } else if (cbid == CUPTI_CBID_NVTX_nvtxRangeStartEx) {
        name = message_of(static_cast<const nvtxRangeStartEx_params*>(p)->eventAttrib);
      } else {
        name = message_of(static_cast<const nvtxDomainRangeStartEx_params*>(p)->core.eventAttrib);
      }
      {
        const std::lock_guard guard(g_mutex);
        bounded_insert(g_started, id, name);
      }
      if (recorder != nullptr) recorder->nvtx(name, true, now_ns);
      return;
    }
    case CUPTI_CBID_NVTX_nvtxRangeEnd:
    case CUPTI_CBID_NVTX_nvtxDomainRangeEnd: {
      const nvtxRangeId_t id = cbid == CUPTI_CBID_NVTX_nvtxRangeEnd
                                   ? static_cast<const nvtxRangeEnd_params*>(p)->id
                                   : static_cast<const nvtxDomainRangeEnd_params*>(p)->core.id;
      std::string name;
      {
        const std::lock_guard guard(g_mutex);
        const auto it = g_started.find(id);
        if (it == g_started.end()) return;
        name = std::move(it->second);
        g_started.erase(it);
      }
      if (recorder != nullptr) recorder->nvtx(name, false, now_ns);
      return;
    }
    case CUPTI_CBID_NVTX_nvtxDomainRegisterStringA: {
      const char* text = static_cast<const nvtxDomainRegisterStringA_params*>(p)->string;
      if (data.functionReturnValue == nullptr || text == nullptr) return;
      const void* handle = *static_cast<const nvtxStringHandle_t*>(data.functionReturnValue);
      const std::lock_guard guard(g_mutex);
      bounded_insert(g_registered, handle, std::string(text));
      return;
    }
    default: return;
  }
}

std::vector<std::string> nvtx_open_here() { return t_ranges; }

void on_capture_begin() { t_capture = origin_now("capture"); }

void on_capture_end(CUgraph graph) {
  if (!t_capture || graph == nullptr) return;
  const std::lock_guard guard(g_mutex);
  bounded_insert(g_origin, graph, std::move(*t_capture));
  t_capture.reset();
}

tracefile::GraphOrigin origin_of(CUgraph graph) {
  {
    const std::lock_guard guard(g_mutex);
    if (const auto it = g_origin.find(graph); it != g_origin.end()) return it->second;
  }
  return origin_now("instantiation");
}

}  // namespace tpgraph::inject
