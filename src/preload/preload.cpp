// libtpgraph_preload.so: preloaded by `tpgraph trace` (LD_PRELOAD) into the traced program to tell
// one thing the injection library cannot see from inside CUPTI: that the program's own profiler
// (torch.profiler's Kineto, say) asked CUPTI for a subscription and was refused because tpgraph
// holds the one CUPTI allows. It defines cuptiSubscribe, which the dynamic linker binds before
// libcupti's (the program's calls and the injection library's alike), forwards every call to the
// libcupti already loaded in the process, and counts the calls refused with
// CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED. The injection library reads the count at exit
// (tpgraph_preload_refused_subscribes) and writes it as a note. Without libcupti in the process it
// is never called; it links nothing but libc.
#include <dlfcn.h>

#include <atomic>

namespace {

// The CUPTI types, as far as this file needs them: it must not depend on CUPTI's headers' version.
using Result = int;
constexpr Result kNotInitialized = 15;       // CUPTI_ERROR_NOT_INITIALIZED
constexpr Result kMultipleSubscribers = 39;  // CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
using Subscribe = Result (*)(void** subscriber, void* callback, void* userdata);

std::atomic<unsigned> g_refused{0};

Subscribe real_subscribe() {
  static std::atomic<Subscribe> cached{nullptr};
  if (Subscribe f = cached.load()) return f;
  // libcupti is usually loaded into a local scope (a framework's extension module), where RTLD_NEXT
  // cannot see it: ask for the already-loaded copy by its soname instead.
  for (const char* soname : {"libcupti.so.13", "libcupti.so.12", "libcupti.so"}) {
    void* lib = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
    if (lib == nullptr) continue;
    auto* f = reinterpret_cast<Subscribe>(dlsym(lib, "cuptiSubscribe"));
    dlclose(lib);  // NOLOAD took a reference of its own; the library stays loaded
    if (f != nullptr) {
      cached.store(f);
      return f;
    }
  }
  auto* f = reinterpret_cast<Subscribe>(dlsym(RTLD_NEXT, "cuptiSubscribe"));
  if (f != nullptr) cached.store(f);
  return f;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) Result cuptiSubscribe(void** subscriber, void* callback,
                                                                        void* userdata) {
  const Subscribe real = real_subscribe();
  if (real == nullptr) return kNotInitialized;
  const Result result = real(subscriber, callback, userdata);
  if (result == kMultipleSubscribers) g_refused.fetch_add(1);
  return result;
}

extern "C" __attribute__((visibility("default"))) unsigned tpgraph_preload_refused_subscribes() {
  return g_refused.load();
}
