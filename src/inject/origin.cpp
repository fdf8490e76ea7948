#include "inject/origin.hpp"

#include <dlfcn.h>
#include <execinfo.h>
#include <unistd.h>

#include <array>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <optional>
#include <type_traits>
#include <unordered_map>

#include "core/records/capture_site.hpp"
#include "inject/elf_symbols.hpp"
#include "inject/nvtx_ranges.hpp"
#include "inject/topology.hpp"  // demangle

namespace tpgraph::inject {

namespace {

constexpr std::size_t kSiteFrames = 4;  // frames of the program kept per graph
constexpr int kNativeFrames = 64;       // deep enough to get past a framework's own frames
constexpr int kPythonFrames = 48;
constexpr std::size_t kMaxTable = 1u << 16;  // graphs whose origin is kept: bounded

thread_local std::optional<tracefile::GraphOrigin> t_capture;

std::mutex g_mutex;                                            // guards the table below
std::unordered_map<CUgraph, tracefile::GraphOrigin> g_origin;  // captured graph -> its origin

// The Python interpreter's C API, where the process runs one: its frames say where a Python program
// captured, which the native stack (all interpreter frames) cannot. Frameworks release the GIL
// around their CUDA calls (PyTorch's capture_begin does): a thread that has a Python thread state
// but not the GIL takes it back for the time of the walk (PyGILState_Ensure restores that thread's
// own state, frames and all), as a C++ callback into Python would. Threads Python never saw are
// left alone.
struct PythonApi {
  int (*initialized)() = nullptr;
  int (*finalizing)() = nullptr;  // Py_IsFinalizing (3.13) or _Py_IsFinalizing
  int (*holds_gil)() = nullptr;
  void* (*thread_state)() = nullptr;                 // PyGILState_GetThisThreadState
  int (*ensure)() = nullptr;                         // PyGILState_Ensure
  void (*restore)(int) = nullptr;                    // PyGILState_Release
  void* (*frame)() = nullptr;                        // PyEval_GetFrame: borrowed
  void* (*code)(void*) = nullptr;                    // PyFrame_GetCode: new reference
  void* (*back)(void*) = nullptr;                    // PyFrame_GetBack: new reference
  int (*line)(void*) = nullptr;                      // PyFrame_GetLineNumber
  void* (*attribute)(void*, const char*) = nullptr;  // PyObject_GetAttrString: new reference
  const char* (*utf8)(void*) = nullptr;              // PyUnicode_AsUTF8
  void (*release)(void*) = nullptr;                  // Py_DecRef
  void (*clear_error)() = nullptr;                   // PyErr_Clear
  [[nodiscard]] bool present() const {
    return initialized && holds_gil && thread_state && ensure && restore && frame && code && back && line &&
           attribute && utf8 && release && clear_error;
  }
};

const PythonApi& python() {
  static const PythonApi api = [] {
    PythonApi a;
    const auto find = [](auto& fn, const char* name) {
      fn = reinterpret_cast<std::decay_t<decltype(fn)>>(dlsym(RTLD_DEFAULT, name));
    };
    find(a.initialized, "Py_IsInitialized");
    find(a.finalizing, "Py_IsFinalizing");
    if (a.finalizing == nullptr) find(a.finalizing, "_Py_IsFinalizing");
    find(a.holds_gil, "PyGILState_Check");
    find(a.thread_state, "PyGILState_GetThisThreadState");
    find(a.ensure, "PyGILState_Ensure");
    find(a.restore, "PyGILState_Release");
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

void walk_python_frames(const PythonApi& py, std::vector<recording::Frame>& out) {
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

void python_frames(std::vector<recording::Frame>& out) {
  const PythonApi& py = python();
  if (!py.present() || py.initialized() == 0 || (py.finalizing != nullptr && py.finalizing() != 0)) return;
  if (py.holds_gil() == 1) return walk_python_frames(py, out);
  if (py.thread_state() == nullptr) return;  // a thread of the frameworks' own: no Python frames
  const int held = py.ensure();
  walk_python_frames(py, out);
  py.restore(held);
}

// The path to open for an object dladdr named: the main program is named as it was started (a
// relative path, wrong once the program changed directory): /proc/self/exe is the same file.
std::string readable_path(const std::string& object) {
  if (::access(object.c_str(), R_OK) == 0) return object;
  static const std::string self = [] {
    std::array<char, 4096> link{};
    const ssize_t n = ::readlink("/proc/self/exe", link.data(), link.size() - 1);
    return n > 0 ? std::string(link.data(), static_cast<std::size_t>(n)) : std::string();
  }();
  const auto base = [](const std::string& p) { return p.substr(p.rfind('/') + 1); };
  return !self.empty() && base(self) == base(object) ? std::string("/proc/self/exe") : object;
}

void native_frames(std::vector<recording::Frame>& out) {
  std::array<void*, kNativeFrames> addresses{};
  const int n = backtrace(addresses.data(), kNativeFrames);
  for (int i = 0; i < n; ++i) {
    Dl_info info{};
    if (dladdr(addresses[static_cast<std::size_t>(i)], &info) == 0) continue;
    recording::Frame f;
    f.object = info.dli_fname != nullptr ? info.dli_fname : "";
    const auto address = reinterpret_cast<std::uintptr_t>(addresses[static_cast<std::size_t>(i)]);
    // A return address: the call lies just before it (the last call of a function would otherwise
    // name the next one).
    const std::string local =
        info.dli_sname == nullptr && info.dli_fbase != nullptr && !f.object.empty()
            ? function_name_at(readable_path(f.object), address - 1, reinterpret_cast<std::uintptr_t>(info.dli_fbase))
            : std::string();
    if (info.dli_sname != nullptr) {
      f.symbol = demangle(info.dli_sname);
    } else if (!local.empty()) {
      f.symbol = demangle(local.c_str());
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
  return {at, nvtx::open_here(), recording::capture_site(frames, kSiteFrames)};
}

}  // namespace

void on_capture_begin() { t_capture = origin_now("capture"); }

void on_capture_end(CUgraph graph) {
  if (!t_capture || graph == nullptr) return;
  const std::lock_guard guard(g_mutex);
  if (g_origin.size() >= kMaxTable) g_origin.clear();  // graphs never instantiated: forget, never grow
  g_origin[graph] = std::move(*t_capture);
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
