// What the injection library records of a server that never exits, without a GPU: the window
// (delay, duration, the program's own profiler range and NVTX range, launch counts, sampling) fed
// fabricated clocks and launches, the flight recorder fed fabricated records and launches, the
// recording chunks and graph origins through the reader, and the choice of a capture site.
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "catch.hpp"
#include "core/records/capture_site.hpp"
#include "core/records/flight_recorder.hpp"
#include "core/records/recording_window.hpp"
#include "core/records/trace_file.hpp"
#include "core/records/trace_recording.hpp"
#include "core/records/traced_run.hpp"

using namespace tpgraph;
using namespace tpgraph::recording;
using tracefile::WireLaunch;
using tracefile::WireRecord;

namespace {

constexpr std::uint64_t kStart = 1'000'000'000'000;
constexpr std::uint64_t kSecond = 1'000'000'000;

std::uint64_t at(double seconds) { return kStart + static_cast<std::uint64_t>(seconds * 1e9); }

// Launches of graph `exec` at `times` (seconds after start); the ones recorded.
std::vector<double> recorded(Window& w, std::uint32_t exec, const std::vector<double>& times) {
  std::vector<double> out;
  for (const double t : times)
    if (w.launch(exec, at(t)).record) out.push_back(t);
  return out;
}

WireRecord graph_record(std::uint32_t correlation, std::uint64_t node) {
  WireRecord r;
  r.correlation_id = correlation;
  r.graph_node_id = node;
  r.start_ns = correlation * 100;
  r.end_ns = correlation * 100 + 10;
  return r;
}

WireLaunch launch_of(std::uint32_t exec, std::uint32_t correlation) {
  WireLaunch l;
  l.exec = exec;
  l.correlation_id = correlation;
  l.host_start_ns = correlation * 100 - 5;
  return l;
}

}  // namespace

TEST_CASE("with no options the window is open from the start and records every launch", "[recording]") {
  Window w(Options{}, kStart);
  CHECK(w.open());
  CHECK(Options{}.records_everything());
  CHECK(recorded(w, 1, {0.1, 0.2, 0.3}).size() == 3);
  CHECK(w.activity_between_launches());
  const auto events = w.take_events();
  REQUIRE(events.size() == 1);
  CHECK(events[0].open);
  CHECK(events[0].reason == Reason::start);
}

TEST_CASE("--delay and --duration open the window late and close it on time", "[recording]") {
  Options o;
  o.delay_ns = 20 * kSecond;
  o.duration_ns = 5 * kSecond;
  Window w(o, kStart);
  CHECK_FALSE(w.open());
  CHECK_FALSE(w.activity_between_launches());
  CHECK(recorded(w, 1, {1, 19.9, 20.0, 22, 24.9, 25.0, 40}) == std::vector<double>{20.0, 22, 24.9});
  const auto events = w.take_events();
  REQUIRE(events.size() == 2);
  CHECK((events[0].open && events[0].reason == Reason::delay_elapsed && events[0].at_ns == at(20)));
  CHECK((!events[1].open && events[1].reason == Reason::duration_elapsed && events[1].at_ns == at(25)));
  CHECK_FALSE(w.activity_between_launches());
  CHECK(w.counts().at(1).seen == 7);
  CHECK(w.counts().at(1).recorded == 3);
}

TEST_CASE("the clock alone opens and closes the window, without a launch", "[recording]") {
  Options o;
  o.delay_ns = 2 * kSecond;
  o.duration_ns = kSecond;
  Window w(o, kStart);
  w.tick(at(1.8));
  CHECK_FALSE(w.open());
  w.tick(at(2.2));
  CHECK(w.open());
  CHECK(w.activity_between_launches());
  w.tick(at(3.4));
  CHECK_FALSE(w.open());
  CHECK(w.take_events().size() == 2);
}

TEST_CASE("the program's cudaProfilerStart and Stop open and close the window, as often as it calls them",
          "[recording]") {
  Options o;
  o.range = RangeTrigger::profiler;
  Window w(o, kStart);
  CHECK_FALSE(w.open());
  CHECK_FALSE(w.launch(1, at(1)).record);
  w.profiler(true, at(2));
  CHECK(w.launch(1, at(2.5)).record);
  w.profiler(false, at(3));
  CHECK_FALSE(w.launch(1, at(3.5)).record);
  w.profiler(true, at(4));
  CHECK(w.launch(1, at(4.5)).record);
  const auto events = w.take_events();
  REQUIRE(events.size() == 3);
  CHECK(events[0].reason == Reason::profiler_start);
  CHECK(events[1].reason == Reason::profiler_stop);
  CHECK(events[2].open);
}

TEST_CASE("a delay and the profiler range are both gates: the window needs both open", "[recording]") {
  Options o;
  o.range = RangeTrigger::profiler;
  o.delay_ns = 10 * kSecond;
  Window w(o, kStart);
  w.profiler(true, at(1));
  CHECK_FALSE(w.open());
  w.tick(at(10));
  CHECK(w.open());
  const auto events = w.take_events();
  REQUIRE(events.size() == 1);
  CHECK(events[0].reason == Reason::delay_elapsed);
}

TEST_CASE("a named NVTX range opens the window while any thread has it open; other names do nothing", "[recording]") {
  Options o;
  o.range = RangeTrigger::nvtx;
  o.nvtx_range = "execute_model";
  Window w(o, kStart);
  w.nvtx("warmup", true, at(1));
  CHECK_FALSE(w.open());
  w.nvtx("execute_model", true, at(2));    // thread A
  w.nvtx("execute_model", true, at(2.1));  // thread B
  CHECK(w.open());
  w.nvtx("execute_model", false, at(2.5));
  CHECK(w.open());
  w.nvtx("execute_model", false, at(3));
  CHECK_FALSE(w.open());
  w.nvtx("execute_model", false, at(3.1));  // a close whose open came before the library: ignored
  CHECK_FALSE(w.open());
  w.nvtx("execute_model", true, at(4));
  CHECK(w.open());
  CHECK(w.take_events().size() == 3);
}

TEST_CASE("--launches N records the first N launches of each graph inside the window", "[recording]") {
  Options o;
  o.launches_per_graph = 2;
  Window w(o, kStart);
  // Activity only in the calls of launches that are recorded, never between launches: a graph
  // launched fewer than N times must not keep it on (and the program's eager work recorded).
  CHECK_FALSE(w.activity_between_launches());
  const LaunchDecision first = w.launch(1, at(0.5));
  CHECK(first.record);
  CHECK(first.activity);
  CHECK_FALSE(w.activity_between_launches());  // graph 1 has one more to go, activity off all the same
  CHECK(recorded(w, 1, {1, 2, 3}) == std::vector<double>{1});
  CHECK_FALSE(w.activity_between_launches());
  CHECK(w.launch(2, at(4)).record);
  CHECK_FALSE(w.activity_between_launches());
  CHECK(recorded(w, 2, {5, 6}) == std::vector<double>{5});
  const LaunchDecision old_graph = w.launch(1, at(7));
  CHECK_FALSE(old_graph.record);
  CHECK_FALSE(old_graph.activity);
  const LaunchDecision new_graph = w.launch(3, at(8));
  CHECK(new_graph.record);
  CHECK(new_graph.activity);
  CHECK_FALSE(w.activity_between_launches());
}

TEST_CASE("--sample N records one launch in N of each graph, the first of each N, with activity only in its call",
          "[recording]") {
  Options o;
  o.sample_every = 3;
  Window w(o, kStart);
  CHECK_FALSE(w.activity_between_launches());
  std::vector<bool> one, two;
  for (int i = 0; i < 7; ++i) {
    const LaunchDecision a = w.launch(1, at(i));
    CHECK(a.activity == a.record);
    one.push_back(a.record);
    if (i < 4) two.push_back(w.launch(2, at(i + 0.5)).record);
  }
  CHECK(one == std::vector<bool>{true, false, false, true, false, false, true});
  CHECK(two == std::vector<bool>{true, false, false, true});
  CHECK(w.counts().at(1).recorded == 3);
  CHECK(w.counts().at(1).in_window == 7);
}

TEST_CASE("sampling counts launches inside the window only", "[recording]") {
  Options o;
  o.sample_every = 2;
  o.delay_ns = 10 * kSecond;
  Window w(o, kStart);
  CHECK(recorded(w, 1, {1, 2, 3, 10, 11, 12, 13}) == std::vector<double>{10, 12});
}

TEST_CASE("the report's line says what was recorded", "[recording]") {
  Options o;
  o.delay_ns = 20 * kSecond;
  o.duration_ns = 5 * kSecond;
  o.sample_every = 100;
  CHECK(o.describe() == "window from 20 s after start for 5 s; sampled: 1 launch in 100 of each graph");
  Options k;
  k.keep_last = 200;
  k.dump_on = "SIGUSR1";
  CHECK(k.describe() == "flight recorder: the last 200 launches of each graph, written at exit, crash or SIGUSR1");
  CHECK_FALSE(k.records_everything());
  CHECK(Options{}.describe() == "everything");
}

TEST_CASE("recorded launches are remembered until a later id takes their slot, never mistaken", "[recording]") {
  RecordedLaunches r(3);  // rounded up to 4 slots
  for (std::uint32_t id : {10u, 11u, 12u}) r.add(id);
  CHECK(r.contains(10));
  CHECK(r.contains(12));
  CHECK_FALSE(r.contains(13));
  CHECK_FALSE(r.contains(14));  // 10's slot: a slot answers only for the id it holds
  r.add(14);
  CHECK_FALSE(r.contains(10));
  CHECK(r.contains(11));
  CHECK(r.contains(14));
  CHECK_FALSE(r.contains(99));
  CHECK_FALSE(r.contains(0));  // an empty slot holds 0, which is no correlation id
  RecordedLaunches wide;
  for (std::uint32_t id = 1; id <= 100000; id += 7) wide.add(id);
  CHECK(wide.contains(1));
  CHECK(wide.contains(99996));
  CHECK_FALSE(wide.contains(2));
}

TEST_CASE("the flight recorder keeps the last N launches of each graph with their records", "[recording]") {
  FlightRecorder f(2);
  for (std::uint32_t c = 1; c <= 5; ++c) {
    f.add_records({graph_record(c, 100), graph_record(c, 101)});  // records come before their launch
    f.add_launch(launch_of(1, c));
  }
  f.add_records({graph_record(50, 200)});
  f.add_launch(launch_of(2, 50));
  WireRecord eager;
  eager.correlation_id = 77;
  f.add_records({eager});
  CHECK(f.launches_held() == 3);
  CHECK(f.launches_evicted() == 3);
  CHECK(f.eager_dropped() == 1);
  const auto dump = f.take();
  REQUIRE(dump.launches.size() == 3);
  CHECK(dump.launches[0].correlation_id == 4);
  CHECK(dump.launches[1].correlation_id == 5);
  CHECK(dump.launches[2].correlation_id == 50);
  CHECK(dump.records.size() == 5);
  for (const auto& r : dump.records) CHECK((r.correlation_id == 4 || r.correlation_id == 5 || r.correlation_id == 50));
  // A later dump holds only what came since.
  CHECK(f.launches_held() == 0);
  f.add_launch(launch_of(1, 6));
  f.add_records({graph_record(6, 100)});  // a record after its launch joins it
  const auto second = f.take();
  REQUIRE(second.launches.size() == 1);
  CHECK(second.records.size() == 1);
}

TEST_CASE("records whose launch never comes are bounded", "[recording]") {
  FlightRecorder f(1);
  std::vector<WireRecord> many;
  for (std::uint32_t c = 0; c < FlightRecorder::kMaxWaitingRecords + 10; ++c) many.push_back(graph_record(c + 1, 1));
  f.add_records(many);
  CHECK(f.records_dropped() == 10);
  CHECK(f.take().records.empty());
}

TEST_CASE("recording chunks and a graph's origin read back; files without them read as before", "[recording][trace]") {
  using namespace tpgraph::tracefile;
  std::string file = file_header();
  file += chunk(ChunkType::meta, R"({"host":"h","pid":5})");
  file += recording_policy_chunk("sampled: 1 launch in 100 of each graph");
  file += recording_event_chunk("open", 123, "delay elapsed");
  file += recording_event_chunk("limit", 456, "--max-file-size 10 MiB");
  file += recording_event_chunk("sideways", 1, "x");  // unknown: skipped with a note
  GraphOrigin origin{"capture", {"serve", "capture_graphs"}, {"server_like.py:41 capture", "server_like.py:80 main"}};
  nlohmann::json graph{{"exec", 1}, {"nodes", nlohmann::json::array({{{"id", 1}, {"type", "kernel"}}})}};
  graph["origin"] = nlohmann::json::parse(origin_json(origin));
  file += chunk(ChunkType::graph, graph.dump());
  file += recording_counts_chunk({{1, 1000, 900, 9}}, 12, 0);
  file += chunk(ChunkType::footer, R"({"records":0})");
  const ProcessFile p = parse_process_file(file, "p.tpgt");
  CHECK(p.complete);
  CHECK(p.recording.policy == "sampled: 1 launch in 100 of each graph");
  REQUIRE(p.recording.events.size() == 2);
  CHECK(p.recording.events[0].event == "open");
  CHECK(p.recording.events[1].at_ns == 456);
  REQUIRE(p.recording.counts.size() == 1);
  CHECK(p.recording.counts[0].recorded == 9);
  CHECK(p.recording.filtered == 12);
  REQUIRE(p.graphs.size() == 1);
  CHECK(p.graphs[0].origin.at == "capture");
  CHECK(p.graphs[0].origin.nvtx == origin.nvtx);
  CHECK(p.graphs[0].origin.stack == origin.stack);
  CHECK(p.notes.size() == 1);

  GraphOrigin bad = read_origin(R"({"at":"elsewhere","stack":["a"]})");
  CHECK(bad.at.empty());
  CHECK(bad.stack.empty());
  CHECK(read_origin("[1,2]").at.empty());
}

TEST_CASE("the capture site is the first frames outside CUDA and the frameworks", "[recording]") {
  const std::vector<Frame> frames = {
      {"/usr/lib/x86_64-linux-gnu/libcuda.so.1", "cuStreamBeginCapture_v2", "", 0},
      {"/opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so", "at::cuda::CUDAGraph::capture_begin", "",
       0},
      {"", "__enter__", "/opt/venv/lib/python3.12/site-packages/torch/cuda/graphs.py", 183},
      {"", "__enter__", "/usr/lib/python3.12/contextlib.py", 137},
      {"", "capture", "/home/u/server_like.py", 41},
      {"", "main", "/home/u/server_like.py", 80},
      {"/usr/bin/python3.12", "_PyEval_EvalFrameDefault", "", 0},
  };
  CHECK(capture_site(frames, 3) ==
        std::vector<std::string>{"/home/u/server_like.py:41 capture", "/home/u/server_like.py:80 main"});
  CHECK(capture_site(frames, 1).size() == 1);
  const std::vector<Frame> native = {{"/usr/local/cuda/lib64/libcudart.so.13", "cudaStreamBeginCapture", "", 0},
                                     {"/work/build/tpgraph-example-graph", "capture_layer(Streams&)", "", 0}};
  CHECK(capture_site(native, 3) == std::vector<std::string>{"tpgraph-example-graph capture_layer(Streams&)"});
  CHECK(capture_site({{"", "f", "/x/site-packages/vllm/worker.py", 7}}, 2) ==
        std::vector<std::string>{"/x/site-packages/vllm/worker.py:7 f"});
}

TEST_CASE("the report names each graph by its capture and says what was recorded", "[recording][trace]") {
  using namespace tpgraph::tracefile;
  using nlohmann::json;
  constexpr std::uint64_t t0 = 1'700'000'000'000'000'000ull;
  std::string file = file_header();
  file += chunk(ChunkType::meta, json{{"host", "h"}, {"boot_id", "b"}, {"pid", 42}, {"started_ns", t0}}.dump());
  file += chunk(ChunkType::device, R"({"ordinal":0,"uuid":"GPU-1"})");
  file += recording_policy_chunk("window from 20 s after start for 5 s");
  file += name_chunk(1, "void first_kernel(float*)");
  file += name_chunk(2, "void last_kernel(float*)");
  json graph{{"exec", 1},
             {"nodes", json::array({{{"id", 1}, {"type", "kernel"}, {"name", "void first_kernel(float*)"}},
                                    {{"id", 2}, {"type", "kernel"}, {"name", "void last_kernel(float*)"}}})},
             {"edges", json::array({json::array({0, 1})})},
             {"clones", json::array({json::array({101, 0}), json::array({102, 1})})}};
  graph["origin"] = json::parse(origin_json({"capture", {"serve"}, {"server_like.py:41 capture"}}));
  file += chunk(ChunkType::graph, graph.dump());
  std::vector<WireRecord> records;
  std::vector<WireLaunch> launches;
  for (std::uint32_t i = 0; i < 2; ++i) {
    const std::uint64_t b = t0 + 20 * kSecond + i * 1'000'000;
    for (std::uint32_t n = 0; n < 2; ++n) {
      WireRecord r;
      r.start_ns = b + n * 20'000;
      r.end_ns = r.start_ns + 10'000;
      r.correlation_id = 10 + i;
      r.graph_node_id = 101 + n;
      r.name_id = 1 + n;
      records.push_back(r);
    }
    launches.push_back(WireLaunch{10 + i, 1, b - 5'000, b - 2'000, 0, 0});
  }
  file += records_chunk(records);
  file += launches_chunk(launches);
  file += recording_event_chunk("open", t0 + 20 * kSecond, "delay elapsed");
  file += recording_event_chunk("close", t0 + 25 * kSecond, "duration elapsed");
  file += recording_event_chunk("limit", t0 + 24 * kSecond, "--max-file-size");
  file += recording_counts_chunk({{1, 5000, 1000, 2}}, 3, 0);
  file += chunk(ChunkType::footer, R"({"records":4})");
  std::vector<ProcessFile> files;
  files.push_back(parse_process_file(file, "p.tpgt"));
  const TracedRun traced = merge_traces(std::move(files), {});
  REQUIRE(traced.run.trace);
  const auto& lines = traced.run.trace->recording;
  REQUIRE(lines.size() == 2);
  CHECK(lines[0] ==
        "pid 42: recorded window from 20 s after start for 5 s; on at 20.000 s (delay elapsed), off at 25.000 s "
        "(duration elapsed); 2 of 5000 graph launches recorded (exec 1 2/5000); 3 records of launches not "
        "recorded dropped");
  CHECK(lines[1].starts_with("pid 42: RECORDING STOPPED at 24.000 s"));
  REQUIRE(traced.run.variants.size() == 1);
  const auto& notes = traced.run.variants[0].notes;
  REQUIRE(notes.size() >= 2);
  CHECK(
      notes[1].starts_with("traced graph-1 is captured at server_like.py:41 capture; NVTX serve; 2 nodes, first "
                           "kernel void first_kernel(float*), last void last_kernel(float*); fingerprint "));
  CHECK(traced.run.trace->clean());
}

TEST_CASE("a window that opens and closes at every step writes its first transitions and counts the rest",
          "[recording][trace]") {
  using namespace tpgraph::tracefile;
  Options o;
  o.range = RangeTrigger::nvtx;
  o.nvtx_range = "step";
  Window w(o, kStart);
  for (int step = 0; step < 50; ++step) {
    w.nvtx("step", true, at(step));
    w.nvtx("step", false, at(step + 0.5));
  }
  const auto events = w.take_events();
  CHECK(events.size() == Window::kMaxTransitions);
  CHECK(w.transitions_left_out() == 100 - Window::kMaxTransitions);
  CHECK(events.front().open);
  CHECK_FALSE(events.back().open);

  // In the file: the events written, the rest counted at exit, said in the header; the size limit's
  // event is read even past the reader's bound on events.
  std::string file = file_header();
  file += chunk(ChunkType::meta, R"({"host":"h","pid":5,"start_ns":1000000000})");
  file += recording_policy_chunk(o.describe());
  for (std::size_t i = 0; i < kMaxRecordingEvents; ++i) file += recording_event_chunk("open", 2'000'000'000, "x");
  file += recording_event_chunk("limit", 3'000'000'000, "--max-file-size");
  file += recording_counts_chunk({{1, 100, 50, 50}}, 0, 0, w.transitions_left_out());
  file += chunk(ChunkType::footer, R"({"records":0})");
  const ProcessFile p = parse_process_file(file, "p.tpgt");
  CHECK(p.recording.transitions_left_out == 36);
  REQUIRE(p.recording.events.size() == kMaxRecordingEvents + 1);
  CHECK(p.recording.events.back().event == "limit");
  std::string lines;
  for (const auto& l : recording_lines(p)) lines += l + "\n";
  INFO(lines);
  CHECK(lines.find(", ..., and 36 more switches on or off") != std::string::npos);
  CHECK(lines.find("RECORDING STOPPED") != std::string::npos);
}
