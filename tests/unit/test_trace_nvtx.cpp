// NVTX ranges in a trace, without a GPU: the nvtx chunk written and read (and refused where it is
// malformed), the injection library's bounded log of opens and closes, the ranges the merge pairs
// and nests, the ranges open around each launch, and where they show: the Perfetto trace, the SVG
// and the report.
#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "catch.hpp"
#include "core/analysis/timeline.hpp"
#include "core/records/nvtx_timeline.hpp"
#include "core/records/trace_file.hpp"
#include "core/records/trace_nvtx.hpp"
#include "core/records/traced_run.hpp"
#include "core/report/report.hpp"
#include "core/report/svg.hpp"
#include "core/report/trace.hpp"
#include "crafted_trace.hpp"
#include "inject/nvtx_log.hpp"

using namespace tpgraph;
using namespace tpgraph::tracefile;
using namespace tpgraph::testing;
using nlohmann::json;

namespace {

constexpr std::uint64_t kT0 = 1'700'000'000'000'000'000ull;
std::uint64_t at_us(double us) { return kT0 + static_cast<std::uint64_t>(us * 1000.0); }

WireNvtx event(NvtxKind kind, std::uint64_t range, std::uint64_t at, std::uint32_t thread, std::uint32_t name = 0) {
  WireNvtx e;
  e.kind = static_cast<std::uint8_t>(kind);
  e.range = range;
  e.at_ns = at;
  e.thread = thread;
  e.name = name;
  return e;
}

using Names = std::vector<std::pair<std::uint32_t, std::string>>;

ProcessFile parsed(const Crafted& c, const std::string& name = "p.tpgt") { return parse_process_file(c.bytes(), name); }

bool has(const std::vector<std::string>& lines, std::string_view what) {
  return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.find(what) != l.npos; });
}

// A server-like process: a graph of two kernels launched four times. Thread 7 opens decode_step >
// execute_model around the first three launches; thread 8 holds "background" open over them too,
// opened earlier; the fourth launch comes after every range closed.
Crafted server(bool with_nvtx) {
  Crafted c;
  c.graphs.push_back(chain_graph(2, 1, 10));
  std::vector<WireNvtx> events;
  events.push_back(event(NvtxKind::push, 1, at_us(0), 8, 3));
  for (std::uint32_t i = 0; i < 4; ++i) {
    const double t = 100.0 * i;
    const std::uint32_t corr = 20 + i;
    if (i < 3) {
      events.push_back(event(NvtxKind::push, 10 + 2 * i, at_us(t + 10), 7, 1));
      events.push_back(event(NvtxKind::push, 11 + 2 * i, at_us(t + 20), 7, 2));
      events.push_back(event(NvtxKind::pop, 11 + 2 * i, at_us(t + 50), 7));
      events.push_back(event(NvtxKind::pop, 10 + 2 * i, at_us(t + 60), 7));
    }
    c.launches.push_back(WireLaunch{corr, 1, at_us(t + 30), at_us(t + 33), 0, 0});
    c.records.push_back(kernel_record(10, corr, at_us(t + 40), at_us(t + 45)));
    c.records.push_back(kernel_record(11, corr, at_us(t + 46), at_us(t + 48)));
  }
  events.push_back(event(NvtxKind::pop, 1, at_us(250), 8));
  if (with_nvtx) c.chunks.push_back(nvtx_chunk({{1, "decode_step"}, {2, "execute_model"}, {3, "background"}}, events));
  return c;
}

TracedRun merged(const Crafted& c) {
  std::vector<ProcessFile> files;
  files.push_back(parsed(c));
  return merge_traces(std::move(files), {});
}

}  // namespace

TEST_CASE("nvtx chunk: names and events read back; a file without one reads as before", "[trace][nvtx]") {
  Crafted c;
  const std::vector<WireNvtx> events = {event(NvtxKind::push, 5, 1'000, 42, 1), event(NvtxKind::start, 9, 1'100, 42, 2),
                                        event(NvtxKind::pop, 5, 1'200, 42), event(NvtxKind::end, 9, 1'300, 43)};
  c.chunks.push_back(nvtx_chunk({{1, "step"}, {2, "request 7"}}, {events.begin(), events.begin() + 2}));
  c.chunks.push_back(nvtx_chunk({}, {events.begin() + 2, events.end()}));
  const ProcessFile f = parsed(c);
  CHECK(f.notes.empty());
  CHECK(f.complete);
  REQUIRE(f.nvtx.events.size() == 4);
  CHECK(f.nvtx.names.at(1) == "step");
  CHECK(f.nvtx.names.at(2) == "request 7");
  for (std::size_t i = 0; i < events.size(); ++i) {
    CHECK(f.nvtx.events[i].kind == events[i].kind);
    CHECK(f.nvtx.events[i].range == events[i].range);
    CHECK(f.nvtx.events[i].at_ns == events[i].at_ns);
    CHECK(f.nvtx.events[i].thread == events[i].thread);
    CHECK(f.nvtx.events[i].name == events[i].name);
  }
  const ProcessFile plain = parsed(Crafted{});
  CHECK(plain.nvtx.events.empty());
  CHECK(plain.nvtx.names.empty());
  CHECK(process_nvtx(plain, 0) == nullptr);
}

TEST_CASE("nvtx chunk: malformed payloads are noted and bounded, never trusted", "[trace][nvtx][hostile]") {
  const auto notes_of = [](const std::string& payload) {
    Crafted c;
    c.chunks.push_back(chunk(ChunkType::nvtx, payload));
    const ProcessFile f = parsed(c);
    CHECK(f.complete);  // the chunks after it are still read
    return f.notes;
  };
  CHECK(has(notes_of("ab"), "shorter than its name count"));
  CHECK(has(notes_of(std::string("\xff\xff\xff\xff", 4)), "cut inside its names"));
  // One name claiming more bytes than the chunk holds.
  CHECK(has(notes_of(std::string("\x01\0\0\0\x01\0\0\0\xff\xff\0\0abc", 15)), "name longer than the chunk"));
  std::string zero_id = nvtx_chunk({{0, "x"}}, {}).substr(8);
  CHECK(has(notes_of(zero_id), "id 0"));
  std::string partial = nvtx_chunk({}, {event(NvtxKind::push, 1, 5, 1)}).substr(8);
  partial.pop_back();
  CHECK(has(notes_of(partial), "partial event"));
  CHECK(has(notes_of(nvtx_chunk({}, {event(static_cast<NvtxKind>(9), 1, 5, 1)}).substr(8)), "unknown kind"));

  // Cut inside the chunk: what came before is kept, and the file reads as truncated.
  Crafted c = server(true);
  std::string bytes = c.bytes();
  const std::string whole = c.chunks.front();
  const auto at = bytes.find(whole);
  REQUIRE(at != std::string::npos);
  const ProcessFile cut = parse_process_file(bytes.substr(0, at + whole.size() / 2), "cut.tpgt");
  CHECK(cut.truncation.find("nvtx") != std::string::npos);
  CHECK(cut.nvtx.events.empty());
  CHECK(cut.launches.size() == 4);
}

TEST_CASE("NVTX log: bounded opens, each name once, closes only of kept opens, a note once", "[nvtx]") {
  inject::NvtxLog log(/*max_opens=*/3, /*max_names=*/2);
  CHECK(log.open(NvtxKind::push, 1, "step", 100, 7));
  CHECK(log.open(NvtxKind::push, 2, "step", 110, 7));  // the same name: no second copy
  CHECK(log.open(NvtxKind::start, 3, "request", 120, 8));
  CHECK_FALSE(log.open(NvtxKind::push, 4, "late", 130, 7));  // past the bound
  log.close(NvtxKind::pop, 2, 140, 7);
  log.close(NvtxKind::end, 3, 150, 9);
  CHECK(log.left_out() == 1);
  const auto read = [](const std::string& chunks) {
    Crafted c;
    c.chunks.push_back(chunks);
    return parsed(c);
  };
  const ProcessFile first = read(log.take());
  REQUIRE(first.nvtx.events.size() == 5);
  CHECK(first.nvtx.names.size() == 2);
  CHECK(first.nvtx.events[0].name == first.nvtx.events[1].name);
  CHECK(first.nvtx.events[3].kind == static_cast<std::uint8_t>(NvtxKind::pop));
  CHECK(first.nvtx.events[4].thread == 9);
  CHECK(has(first.notes, "NVTX: ranges opened past the first 3"));
  CHECK(log.take().empty());  // nothing new, and the note is not repeated

  inject::NvtxLog names(/*max_opens=*/100, /*max_names=*/1);
  CHECK(names.open(NvtxKind::push, 1, "a", 100, 7));
  CHECK(names.open(NvtxKind::push, 2, "b", 100, 7));  // past the names: unnamed
  CHECK(names.open(NvtxKind::push, 3, std::string(10'000, 'x'), 100, 7));
  const ProcessFile unnamed = read(names.take());
  REQUIRE(unnamed.nvtx.events.size() == 3);
  CHECK(unnamed.nvtx.events[1].name == 0);
  CHECK(has(unnamed.notes, "recorded as unnamed"));
  CHECK(names.open(NvtxKind::push, 4, "a", 200, 7));
  const ProcessFile again = read(names.take());
  CHECK(again.nvtx.names.empty());  // "a" went out with the first chunk
  REQUIRE(again.nvtx.events.size() == 1);
  CHECK(again.nvtx.events[0].name == unnamed.nvtx.events[0].name);
}

TEST_CASE("NVTX log, deferred: only the ranges a recorded launch is made inside are written", "[nvtx]") {
  inject::NvtxLog log;
  const auto read = [](const std::string& chunks) {
    Crafted c;
    c.chunks.push_back(chunks);
    return parsed(c);
  };
  // A step with no recorded launch: held, then dropped at its close.
  CHECK(log.open_deferred(NvtxKind::push, 1, "step", 100, 7));
  log.close(NvtxKind::pop, 1, 110, 7);
  CHECK(log.take().empty());
  // A step with a recorded launch inside a nested range: both opens written at the launch (with the
  // times they opened at), both closes after it; a range opened after the launch and closed before
  // the next one is not.
  CHECK(log.open_deferred(NvtxKind::push, 2, "step", 200, 7));
  CHECK(log.open_deferred(NvtxKind::push, 3, "forward", 210, 7));
  log.commit_deferred();
  log.commit_deferred();  // a second recorded launch in the same ranges writes nothing twice
  CHECK(log.open_deferred(NvtxKind::push, 4, "sample", 230, 7));
  log.close(NvtxKind::pop, 4, 240, 7);
  log.close(NvtxKind::pop, 3, 250, 7);
  log.close(NvtxKind::pop, 2, 260, 7);
  const ProcessFile p = read(log.take());
  REQUIRE(p.nvtx.events.size() == 4);
  CHECK(p.nvtx.events[0].range == 2);
  CHECK(p.nvtx.events[0].at_ns == 200);
  CHECK(p.nvtx.events[1].range == 3);
  CHECK(p.nvtx.events[1].at_ns == 210);
  CHECK(p.nvtx.events[2].range == 3);
  CHECK(p.nvtx.events[2].kind == static_cast<std::uint8_t>(NvtxKind::pop));
  CHECK(p.nvtx.events[3].range == 2);
  CHECK(p.nvtx.names.size() == 2);
  // Bounded per thread: past kMaxDeferred open at once a range is not held.
  for (std::uint64_t r = 0; r < inject::NvtxLog::kMaxDeferred; ++r)
    CHECK(log.open_deferred(NvtxKind::push, 100 + r, "deep", 300, 7));
  CHECK_FALSE(log.open_deferred(NvtxKind::push, 999, "deeper", 300, 7));
  for (std::uint64_t r = inject::NvtxLog::kMaxDeferred; r-- > 0;) log.close(NvtxKind::pop, 100 + r, 400, 7);
  CHECK(log.take().empty());
}

TEST_CASE("NVTX log, the flight recorder's: only the last entries are held, past the bound on opens", "[nvtx]") {
  inject::NvtxLog log(/*max_opens=*/3);
  log.keep_last(4);
  for (std::uint64_t r = 1; r <= 10; ++r) {
    CHECK(log.open(NvtxKind::push, r, r % 2 ? "odd" : "even", 100 * r, 7));
    log.close(NvtxKind::pop, r, 100 * r + 50, 7);
  }
  Crafted c;
  c.chunks.push_back(log.take());
  const ProcessFile p = parsed(c);
  REQUIRE(p.nvtx.events.size() == 4);  // ranges 9 and 10, open and close
  CHECK(p.nvtx.events[0].range == 9);
  CHECK(p.nvtx.events[0].at_ns == 900);
  CHECK(p.nvtx.events[3].range == 10);
  CHECK(p.nvtx.events[3].kind == static_cast<std::uint8_t>(NvtxKind::pop));
  CHECK(p.nvtx.names.size() == 2);  // every name goes out, once
  CHECK(log.left_out() == 0);
  CHECK(log.take().empty());
}

TEST_CASE("NVTX ranges: opens pair with closes, nest per thread; unmatched closes are ignored, open ranges end last",
          "[trace][nvtx]") {
  Crafted c;
  c.launches.push_back(WireLaunch{1, 0, 300, 400, 0, 0});  // the file's last host time: 400
  c.chunks.push_back(nvtx_chunk({{1, "decode_step"}, {2, "execute_model"}, {3, "sample"}, {4, "request"}},
                                {event(NvtxKind::push, 1, 100, 7, 1), event(NvtxKind::start, 50, 105, 8, 4),
                                 event(NvtxKind::push, 2, 110, 7, 2), event(NvtxKind::pop, 2, 150, 7),
                                 event(NvtxKind::pop, 1, 200, 7), event(NvtxKind::pop, 99, 210, 7),
                                 event(NvtxKind::end, 1, 215, 7),  // a start/end number closes no push
                                 event(NvtxKind::push, 3, 220, 7, 3), event(NvtxKind::end, 50, 300, 9),
                                 event(NvtxKind::start, 60, 120, 9, 77)}));  // 77: a name never written
  const auto t = process_nvtx(parsed(c), 1'000);
  REQUIRE(t != nullptr);
  CHECK(t->unmatched_closes == 2);
  REQUIRE(t->ranges.size() == 5);
  const auto name = [&](std::size_t i) { return t->names[t->ranges[i].name]; };
  // By start, shifted by the offset.
  CHECK(name(0) == "decode_step");
  CHECK((t->ranges[0].start_ns == 1'100 && t->ranges[0].end_ns == 1'200 && t->ranges[0].depth == 0));
  CHECK(name(1) == "request");
  CHECK((!t->ranges[1].push && t->ranges[1].thread == 8 && t->ranges[1].end_ns == 1'300 && t->ranges[1].depth == 0));
  CHECK(name(2) == "execute_model");
  CHECK((t->ranges[2].depth == 1 && !t->ranges[2].open));
  CHECK(name(3) == "(unnamed)");
  CHECK((t->ranges[3].depth == 1 && t->ranges[3].open && t->ranges[3].end_ns == 1'400));  // a second lane
  CHECK(name(4) == "sample");
  CHECK((t->ranges[4].open && t->ranges[4].end_ns == 1'400 && t->ranges[4].depth == 0));
}

TEST_CASE("NVTX ranges: each launch is placed in the innermost ranges open on the thread that opened one last",
          "[trace][nvtx]") {
  const TracedRun t = merged(server(true));
  REQUIRE(t.run.variants.size() == 1);
  const VariantRun& v = t.run.variants[0];
  REQUIRE(v.nvtx.size() == 1);
  REQUIRE(v.nvtx[0] != nullptr);
  CHECK(v.nvtx_launches.launches == 4);
  REQUIRE(v.nvtx_launches.contexts.size() == 2);
  CHECK(v.nvtx_launches.contexts[0].ranges == std::vector<std::string>{"decode_step", "execute_model"});
  CHECK(v.nvtx_launches.contexts[0].launches == 3);
  CHECK(v.nvtx_launches.contexts[1].ranges.empty());
  const std::string line =
      "launched inside NVTX decode_step > execute_model (75% of 4 launches); outside any NVTX range (25%)";
  CHECK(nvtx_launches_text(v.nvtx_launches) == line);

  const RunAnalysis a = analyze_run(t.run);
  CHECK(render_report_markdown(t.run, a).find("- " + line + "\n") != std::string::npos);
  const json report = json::parse(render_report_json(t.run, a));
  const json& launches = report.at("variants").at(0).at("nvtx_launches");
  CHECK(launches.at("launches") == 4);
  CHECK(launches.at("contexts").at(0).at("ranges") == json::array({"decode_step", "execute_model"}));
  CHECK(launches.at("contexts").at(0).at("launches") == 3);
  CHECK(launches.at("text") == line);

  // Without NVTX chunks nothing of this appears.
  const TracedRun plain = merged(server(false));
  CHECK(plain.run.variants[0].nvtx.empty());
  const RunAnalysis pa = analyze_run(plain.run);
  CHECK(render_report_markdown(plain.run, pa).find("NVTX") == std::string::npos);
  CHECK_FALSE(json::parse(render_report_json(plain.run, pa)).at("variants").at(0).contains("nvtx_launches"));
}

TEST_CASE("NVTX ranges in the Perfetto trace: a track per thread of each rank's process, nested by depth",
          "[trace][nvtx]") {
  const TracedRun t = merged(server(true));
  const RunAnalysis a = analyze_run(t.run);
  const json doc = json::parse(render_chrome_trace(t.run, a, 0));
  std::map<std::string, int> tid_of_track;
  std::vector<json> ranges;
  for (const auto& e : doc.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name" && e.at("pid") == 1)
      tid_of_track[e.at("args").at("name").get<std::string>()] = e.at("tid").get<int>();
    if (e.at("ph") == "X" && e.at("cat") == "nvtx") ranges.push_back(e);
  }
  REQUIRE(tid_of_track.count("NVTX (thread 7)") == 1);
  REQUIRE(tid_of_track.count("NVTX (thread 8)") == 1);
  CHECK(tid_of_track.count("stream 0") == 1);
  CHECK(ranges.size() == 7);  // three steps of two ranges and the background
  for (const auto& r : ranges) {
    CHECK(r.at("pid") == 1);
    const bool background = r.at("name") == "background";
    CHECK(r.at("tid") == tid_of_track.at(background ? "NVTX (thread 8)" : "NVTX (thread 7)"));
    CHECK(r.at("args").at("depth") == (r.at("name") == "execute_model" ? 1 : 0));
  }
  // On the records' time base, the first record (40 µs): the second step's execute_model (120 to
  // 150 µs) at 80 µs; the first step's (20 to 50 µs) began before it and is drawn from it.
  std::vector<json> steps;
  for (const auto& r : ranges)
    if (r.at("name") == "execute_model") steps.push_back(r);
  REQUIRE(steps.size() == 3);
  std::sort(steps.begin(), steps.end(), [](const json& x, const json& y) { return x.at("ts") < y.at("ts"); });
  CHECK(steps[0].at("ts").get<double>() == Approx(0.0).margin(1e-9));
  CHECK(steps[0].at("dur").get<double>() == Approx(10.0));
  CHECK(steps[0].at("args").at("began_us_before_trace").get<double>() == Approx(20.0));
  CHECK(steps[1].at("ts").get<double>() == Approx(80.0));
  CHECK(steps[1].at("dur").get<double>() == Approx(30.0));
  CHECK(doc.at("otherData").at("nvtx_ranges_shown").get<std::string>().starts_with("7 of the 7"));

  const TracedRun plain = merged(server(false));
  const std::string text = render_chrome_trace(plain.run, analyze_run(plain.run), 0);
  CHECK(text.find("nvtx") == std::string::npos);
  CHECK(text.find("NVTX") == std::string::npos);
}

TEST_CASE("NVTX ranges in the SVG: a row above the lanes only where ranges overlap the replays shown",
          "[trace][nvtx]") {
  const TracedRun with = merged(server(true));
  const std::string svg = render_timeline_svg(with.run, analyze_run(with.run), 0);
  CHECK(svg.find("class=\"nvtx\"") != std::string::npos);
  CHECK(svg.find(">NVTX r0 thread 7<") != std::string::npos);
  CHECK(svg.find(">execute_model<") != std::string::npos);

  const TracedRun plain = merged(server(false));
  const std::string plain_svg = render_timeline_svg(plain.run, analyze_run(plain.run), 0);
  CHECK(plain_svg.find("NVTX") == std::string::npos);
  // Ranges far from the replays shown change nothing: the picture is the one without NVTX.
  Crafted later = server(false);
  later.chunks.push_back(nvtx_chunk({{1, "later"}}, {event(NvtxKind::push, 1, at_us(50'000), 7, 1),
                                                     event(NvtxKind::pop, 1, at_us(60'000), 7)}));
  const TracedRun far = merged(later);
  REQUIRE(far.run.variants[0].nvtx.size() == 1);
  CHECK(render_timeline_svg(far.run, analyze_run(far.run), 0) == plain_svg);
}

TEST_CASE("hostile trace: NVTX events in any order, numbers reused, closes before opens, are bounded",
          "[trace][nvtx][hostile]") {
  std::mt19937_64 random(7);
  Crafted c = server(false);
  std::vector<WireNvtx> events;
  for (int i = 0; i < 20'000; ++i)
    events.push_back(event(static_cast<NvtxKind>(1 + random() % 4), random() % 64,
                           at_us(static_cast<double>(random() % 500)), static_cast<std::uint32_t>(random() % 5),
                           static_cast<std::uint32_t>(random() % 4)));
  events.push_back(event(NvtxKind::push, 1, 1, 1, 1));  // a stray time: a range from the epoch's first ns
  c.chunks.push_back(nvtx_chunk({{1, "a"}, {2, "b\x1b[31m"}, {3, std::string(5'000, 'n')}}, events));
  c.footer = false;
  const TracedRun t = merged(c);
  REQUIRE(t.run.variants.size() == 1);
  const auto& timeline = *t.run.variants[0].nvtx.at(0);
  std::size_t opens = 0;
  for (const auto& e : events) opens += e.kind == 1 || e.kind == 3 ? 1 : 0;
  CHECK(timeline.ranges.size() <= opens);
  for (const auto& r : timeline.ranges) CHECK(r.end_ns >= r.start_ns);
  for (const auto& n : timeline.names) CHECK(n.find('\x1b') == std::string::npos);
  const RunAnalysis a = analyze_run(t.run);
  CHECK_NOTHROW(json::parse(render_chrome_trace(t.run, a, 0)));
  CHECK(render_timeline_svg(t.run, a, 0).find("class=\"nvtx\"") != std::string::npos);
  CHECK(render_report_markdown(t.run, a).find("launched ") != std::string::npos);
}

TEST_CASE("hostile trace: two million NVTX events and 100 000 launches are merged and drawn in under 20 s of CPU",
          "[trace][nvtx][hostile]") {
  Crafted c;
  c.graphs.push_back(chain_graph(1, 1, 10));
  std::vector<WireNvtx> events;
  std::uint64_t number = 1;
  // Four threads, each step a range around another; a launch inside each of the first 100 000 steps.
  for (std::uint32_t step = 0; step < 125'000; ++step) {
    const double t = 10.0 * step;
    for (std::uint32_t thread = 0; thread < 4; ++thread) {
      events.push_back(event(NvtxKind::push, number, at_us(t + thread * 0.1), thread, 1));
      events.push_back(event(NvtxKind::push, number + 1, at_us(t + 1 + thread * 0.1), thread, 2));
      events.push_back(event(NvtxKind::pop, number + 1, at_us(t + 5), thread));
      events.push_back(event(NvtxKind::pop, number, at_us(t + 6), thread));
      number += 2;
    }
    if (c.launches.size() < 100'000) {
      const auto corr = static_cast<std::uint32_t>(c.launches.size() + 1);
      c.launches.push_back(WireLaunch{corr, 1, at_us(t + 2), at_us(t + 3), 0, 0});
      c.records.push_back(kernel_record(10, corr, at_us(t + 3), at_us(t + 4)));
    }
  }
  c.chunks.push_back(nvtx_chunk({{1, "step"}, {2, "forward"}}, events));
  const double t0 = cpu_seconds();
  const TracedRun t = merged(c);
  const RunAnalysis a = analyze_run(t.run);
  const std::string trace = render_chrome_trace(t.run, a, 0);
  const std::string svg = render_timeline_svg(t.run, a, 0);
  const double seconds = seconds_since(t0);
  CHECK(seconds < 20.0);
  REQUIRE(t.run.variants.size() == 1);
  CHECK(t.run.variants[0].nvtx_launches.launches == 100'000);
  CHECK(nvtx_launches_text(t.run.variants[0].nvtx_launches).starts_with("launched inside NVTX step > forward (all"));
  // Six rows at most: two depths of threads 0, 1 and 2.
  CHECK(svg.find(">NVTX r0 thread 2<") != std::string::npos);
  CHECK(svg.find(">NVTX r0 thread 3<") == std::string::npos);
  CHECK(trace.size() < std::size_t{200} << 20);
}
