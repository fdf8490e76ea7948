// The NVTX handlers of the injection library (src/inject/nvtx_ranges.cpp), driven through NVTX's own
// header-only implementation: NVTX finds them as a statically linked injection
// (InitializeInjectionNvtx2_fnptr), calls install() with its real export table on the first NVTX
// call, and every range call below then goes through the tables install() filled.
#include <cstdint>

// The statically linked injection's entry: declared for NVTX's implementation, defined below.
#define NVTX_STATIC_INJECTION_IMPL
extern "C" int (*InitializeInjectionNvtx2_fnptr)(const void* (*)(std::uint32_t));
#include <nvtx3/nvToolsExt.h>

#include <cstdlib>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "inject/nvtx_ranges.hpp"

extern "C" {
NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr = &tpgraph::inject::nvtx::install;
}

namespace nvtx = tpgraph::inject::nvtx;

namespace {

std::vector<std::pair<std::string, bool>> g_heard;
std::vector<nvtx::RangeEvent> g_events;  // names not kept: they point into the handlers' strings
bool listen(const nvtx::RangeEvent& e) {
  g_heard.emplace_back(std::string(e.name), e.opened);
  g_events.push_back(e);
  return e.name != "not kept";  // the answer at an open comes back at the close
}

nvtxEventAttributes_t ascii(const char* text) {
  nvtxEventAttributes_t a{};
  a.version = NVTX_VERSION;
  a.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  a.messageType = NVTX_MESSAGE_TYPE_ASCII;
  a.message.ascii = text;
  return a;
}

using Names = std::vector<std::string>;

}  // namespace

TEST_CASE("NVTX push and pop ranges reach the library through NVTX's own tables", "[nvtx]") {
  ::unsetenv("NVTX_INJECTION64_PATH");  // the static injection, not a library named by the environment
  CHECK(nvtxRangePushA("outer") == 0);
  CHECK(nvtx::installed());
  CHECK(nvtxRangePushA("inner") == 1);
  CHECK(nvtx::open_here() == Names{"outer", "inner"});
  CHECK(nvtxRangePop() == 1);
  CHECK(nvtx::open_here() == Names{"outer"});
  const nvtxEventAttributes_t step = ascii("step");
  CHECK(nvtxRangePushEx(&step) == 1);
  CHECK(nvtx::open_here() == Names{"outer", "step"});
  nvtxRangePop();
  nvtxRangePop();
  CHECK(nvtx::open_here().empty());
  CHECK(nvtxRangePop() < 0);  // a pop with nothing open (its push came before the library)
  CHECK(nvtx::calls_seen() >= 6);
}

TEST_CASE("NVTX wide-string ranges are kept too, so the next pop stays paired", "[nvtx]") {
  nvtxRangePushA("outer");
  CHECK(nvtxRangePushW(L"wide \u00e9tape") == 1);
  CHECK(nvtx::open_here() == Names{"outer", "wide ?tape"});
  nvtxEventAttributes_t unicode = ascii("");
  unicode.messageType = NVTX_MESSAGE_TYPE_UNICODE;
  unicode.message.unicode = L"layer";
  nvtxRangePushEx(&unicode);
  CHECK(nvtx::open_here() == Names{"outer", "wide ?tape", "layer"});
  const nvtxStringHandle_t handle = nvtxDomainRegisterStringW(nullptr, L"registered");
  REQUIRE(handle != nullptr);
  CHECK(handle == nvtxDomainRegisterStringA(nullptr, "registered"));
  nvtxRangePop();
  nvtxRangePop();
  CHECK(nvtx::open_here() == Names{"outer"});  // the wide push was the one popped
  nvtxRangePop();
  CHECK(nvtx::open_here().empty());
}

TEST_CASE("NVTX domain ranges keep a stack per domain; registered strings name them", "[nvtx]") {
  // Two domains told apart by their handles (the program's own nvtxDomainCreate stays NVTX's no-op).
  auto* const a = reinterpret_cast<nvtxDomainHandle_t>(std::uintptr_t{0x1000});
  auto* const b = reinterpret_cast<nvtxDomainHandle_t>(std::uintptr_t{0x2000});
  const nvtxStringHandle_t registered = nvtxDomainRegisterStringA(a, "decode step");
  REQUIRE(registered != nullptr);
  CHECK(nvtxDomainRegisterStringA(b, "decode step") == registered);  // one handle per text
  nvtxEventAttributes_t by_handle = ascii("");
  by_handle.messageType = NVTX_MESSAGE_TYPE_REGISTERED;
  by_handle.message.registered = registered;
  const nvtxEventAttributes_t layer = ascii("layer");
  nvtxDomainRangePushEx(a, &by_handle);
  nvtxDomainRangePushEx(b, &layer);
  nvtxRangePushA("default");
  CHECK(nvtx::open_here() == Names{"decode step", "layer", "default"});
  nvtxDomainRangePop(a);  // a's innermost, under b's and the default domain's
  CHECK(nvtx::open_here() == Names{"layer", "default"});
  nvtxRangePop();
  nvtxDomainRangePop(b);
  CHECK(nvtx::open_here().empty());
}

TEST_CASE("NVTX ranges: the listener hears push, pop, start and end; ranges are per thread", "[nvtx]") {
  g_heard.clear();
  nvtx::set_listener(&listen);
  nvtxRangePushA("step");
  const nvtxRangeId_t id = nvtxRangeStartA("request 7");
  CHECK(id != 0);
  const nvtxEventAttributes_t other = ascii("request 8");
  const nvtxRangeId_t id2 = nvtxRangeStartEx(&other);
  CHECK(id2 != id);
  Names elsewhere{"not read"};
  std::thread([&] { elsewhere = nvtx::open_here(); }).join();
  CHECK(elsewhere.empty());                   // the step is open on this thread only
  CHECK(nvtx::open_here() == Names{"step"});  // start/end ranges belong to no thread
  nvtxRangeEnd(id);
  nvtxRangeEnd(id);  // ended twice: the second is not heard
  nvtxRangeEnd(id2);
  nvtxRangePop();
  nvtx::set_listener(nullptr);
  nvtxRangePushA("unheard");
  nvtxRangePop();
  const std::vector<std::pair<std::string, bool>> expected = {{"step", true},       {"request 7", true},
                                                              {"request 8", true},  {"request 7", false},
                                                              {"request 8", false}, {"step", false}};
  CHECK(g_heard == expected);
}

TEST_CASE("NVTX ranges deeper than the library keeps are counted and popped in order", "[nvtx]") {
  for (int i = 0; i < 100; ++i) nvtxRangePushA(("level " + std::to_string(i)).c_str());
  const Names open = nvtx::open_here();
  REQUIRE(open.size() == 64);
  CHECK(open.front() == "level 0");
  CHECK(open.back() == "level 63");
  for (int i = 0; i < 36; ++i) nvtxRangePop();
  CHECK(nvtx::open_here().size() == 64);  // the 36 unkept went first
  nvtxRangePop();
  CHECK(nvtx::open_here().back() == "level 62");
  for (int i = 0; i < 63; ++i) nvtxRangePop();
  CHECK(nvtx::open_here().empty());
}

TEST_CASE("NVTX ranges: each open and its close carry one number, the kind, and the listener's answer", "[nvtx]") {
  g_heard.clear();
  g_events.clear();
  nvtx::set_listener(&listen);
  nvtxRangePushA("kept");
  nvtxRangePushA("not kept");
  const nvtxRangeId_t id = nvtxRangeStartA("request");
  nvtxRangePop();
  nvtxRangePop();
  nvtxRangeEnd(id);
  nvtx::set_listener(nullptr);
  REQUIRE(g_events.size() == 6);
  const auto& push_kept = g_events[0];
  const auto& push_not = g_events[1];
  const auto& start = g_events[2];
  CHECK((push_kept.opened && push_kept.push && push_kept.id != 0));
  CHECK((push_not.id != 0 && push_not.id != push_kept.id));
  CHECK((start.opened && !start.push && start.id == id));
  // Pops come innermost first, each with its push's number and the answer given at the push.
  CHECK((!g_events[3].opened && g_events[3].push && g_events[3].id == push_not.id && !g_events[3].open_kept));
  CHECK((!g_events[4].opened && g_events[4].id == push_kept.id && g_events[4].open_kept));
  CHECK((!g_events[5].opened && !g_events[5].push && g_events[5].id == id && g_events[5].open_kept));
  CHECK(g_heard[4].first == "kept");
}

TEST_CASE("NVTX ranges deeper than the library keeps pair with nothing", "[nvtx]") {
  for (int i = 0; i < 64; ++i) nvtxRangePushA("deep");
  g_events.clear();
  nvtx::set_listener(&listen);
  nvtxRangePushA("too deep");
  nvtxRangePop();
  nvtx::set_listener(nullptr);
  for (int i = 0; i < 64; ++i) nvtxRangePop();
  REQUIRE(g_events.size() == 2);
  CHECK(g_events[0].id == 0);
  CHECK(g_events[1].id == 0);
  CHECK(nvtx::open_here().empty());
}
