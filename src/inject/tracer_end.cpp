// The ends of recording: the flush thread's tick (window transitions, the flight recorder's dump,
// the NVTX log), the footer at exit and the flush at a fatal signal. The rest of the tracer's work
// is in tracer.cpp.
#include <dlfcn.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "inject/nvtx_ranges.hpp"
#include "inject/process_info.hpp"
#include "inject/tracer.hpp"

namespace tpgraph::inject {

void Tracer::finish() noexcept {
  if (finishing_.exchange(true) || !writer.ours()) return;
  // A detach not yet begun is called off; one under way on another thread is waited for.
  auto requested = Attachment::detach_requested;
  (void)attachment.compare_exchange_strong(requested, Attachment::attached);
  while (attachment.load() == Attachment::detaching) std::this_thread::yield();
  try {
    // A forced flush also returns records of work still running (without an end): synchronize first.
    const std::vector<CUcontext> contexts = detached() ? std::vector<CUcontext>{} : synchronize_contexts();
    if (const CUptiResult s = detached() ? CUPTI_SUCCESS : cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        s != CUPTI_SUCCESS)
      note("the final flush of CUPTI's buffers failed (" + result_text(s) + "): the last records may be missing");
    std::size_t dropped = 0;
    if (detached() || cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped) != CUPTI_SUCCESS) dropped = 0;
    for (CUcontext c : contexts) {
      std::size_t more = 0;
      if (cuptiActivityGetNumDroppedRecords(c, 0, &more) == CUPTI_SUCCESS) dropped += more;
    }
    if (!detached() && subscriber != nullptr) {
      std::uint32_t enabled = 0;
      if (cuptiGetCallbackState(&enabled, subscriber, CUPTI_CB_DOMAIN_RESOURCE,
                                CUPTI_CBID_RESOURCE_GRAPHEXEC_CREATED) != CUPTI_SUCCESS ||
          enabled == 0)
        note("tpgraph's CUPTI callbacks were disabled by someone else during the run: graphs may be missing");
    }
    {
      // Under the state lock, so no buffer being written lands after the footer.
      const std::lock_guard state(state_mutex_);
      write_launches_locked({}, true);
      write_nvtx_locked(true);
      if (recorder != nullptr && recorder->options().range == recording::RangeTrigger::nvtx && nvtx::calls_seen() == 0)
        note(nvtx::installed()
                 ? "--nvtx-range: the program opened no NVTX range, so the window never opened"
                 : "--nvtx-range: the program's NVTX never reached tpgraph (no NVTX call, or NVTX_INJECTION64_PATH "
                   "names another tool), so the window never opened");
      if (recorder != nullptr) {
        dump_flight_locked("exit");
        (void)writer.write(recorder->take_event_chunks());
        (void)writer.write(recorder->counts_chunk());
      }
      if (buffers_refused_ > 0)
        note(std::to_string(buffers_refused_) + " record buffers could not be allocated: their records were dropped");
      if (launches_recorded_ > 0 && graph_records_ == 0)
        note(std::to_string(launches_recorded_) +
             " graph launches were recorded but no graph record came back: another tool may have taken CUPTI's "
             "activity buffers");
      else if (!contexts.empty() && records_written_ == 0 && !quiet.load())
        note("CUDA contexts were created but no activity record came back");
      // The preload shim `trace` installs counts the subscriptions CUPTI refused in this process:
      // the program's own profiler, shut out because tpgraph holds the one CUPTI allows.
      using RefusedCount = unsigned (*)();
      if (const auto refused =
              reinterpret_cast<RefusedCount>(dlsym(RTLD_DEFAULT, "tpgraph_preload_refused_subscribes"));
          refused != nullptr && refused() > 0)
        note("profiler: the program's own profiler asked CUPTI for a subscription " + std::to_string(refused()) +
             " time(s) and was refused because tpgraph holds it: its trace has no GPU activity (tpgraph trace "
             "--yield-to-profiler lets it win and records nothing)");
      for (const auto& [exec, e] : execs_)
        if (e.parameter_updates > 0)
          note("graph exec " + std::to_string(e.number) + ": " + std::to_string(e.parameter_updates) +
               " kernel parameter updates kept its version (the same kernels ran)");
      if (verbose_)
        std::fprintf(stderr,
                     "tpgraph inject: %llu records, %llu graph launches (%llu through the runtime: %llu with a driver "
                     "call of the same correlation id, %llu of another id)\n",
                     static_cast<unsigned long long>(records_written_), static_cast<unsigned long long>(launches_seen_),
                     static_cast<unsigned long long>(runtime_launches_),
                     static_cast<unsigned long long>(nested_same_id_),
                     static_cast<unsigned long long>(nested_other_id_));
      (void)writer.write(tracefile::self_cost_chunk(cost.totals(launches_seen_)));
      if (const std::uint64_t refused = writer.refused(); refused > 0)
        (void)writer.write_end(tracefile::chunk(
            ChunkType::note, "limit: " + std::to_string(refused) +
                                 " chunks were left out at the file's limit (--max-file-size): launches, NVTX "
                                 "ranges or notes written after the records stopped"));
      json footer;
      footer["records"] = records_written_;
      footer["dropped"] = static_cast<std::uint64_t>(dropped);
      footer["end_ns"] = now_ns();
      (void)writer.write_end(tracefile::chunk(ChunkType::footer, footer.dump()));
      finished_.store(true);
    }
  } catch (...) {
    // Nothing more can be written: the reader reports the file as cut short.
  }
}

void Tracer::flush_at_signal(int signal) noexcept {
  if (finishing_.load() || finished_.load() || !writer.ours()) return;
  t_signal_flush = true;
  try {
    if (attachment.load() == Attachment::attached) (void)cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    std::unique_lock state(state_mutex_, std::try_to_lock);
    if (state.owns_lock()) {
      write_launches_locked({}, true);
      dump_flight_locked("signal " + std::to_string(signal));
      write_nvtx_locked(false);
      (void)writer.write(tracefile::self_cost_chunk(cost.totals(launches_seen_)));
    }
    note("the process received signal " + std::to_string(signal) +
         ": CUPTI's buffers were handed back then (records of work still running have no end)");
  } catch (...) {
  }
  t_signal_flush = false;
}

void Tracer::write_nvtx_locked(bool wait) {
  const std::string chunks = nvtx_log.take(wait);
  if (!chunks.empty() && !discard_records && !finished_.load()) (void)writer.write(chunks);
}

void Tracer::on_tick() noexcept {
  if (quiet.load() || finishing_.load() || finished_.load() || !writer.ours()) return;
  try {
    if (recorder == nullptr || !recorder->keeps_last()) {  // the flight recorder's ranges wait for a dump
      const std::lock_guard state(state_mutex_);
      write_nvtx_locked(true);
    }
    if (recorder == nullptr) return;
    recorder->tick(now_ns());
    if (const std::string events = recorder->take_event_chunks(); !events.empty()) (void)writer.write(events);
    if (!recorder->dump_requested.exchange(false)) return;
    // The records of launches that have completed (none to ask for once CUPTI is being let go).
    if (attachment.load() == Attachment::attached) (void)cuptiActivityFlushAll(0);
    const std::lock_guard state(state_mutex_);
    write_launches_locked({}, false);
    dump_flight_locked(recorder->options().dump_on);
    write_nvtx_locked(true);
  } catch (...) {
  }
}

}  // namespace tpgraph::inject
