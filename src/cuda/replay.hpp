// Replaying a captured layer graph (or re-issuing it eagerly) and timing every replay: the host
// time of the launch call, the wall time to completion, and each rank's span from the event nodes.
#pragma once
#include <functional>
#include <vector>

#include "core/records/records.hpp"
#include "cuda/capture.hpp"
#include "cuda/owners.hpp"

namespace tpgraph::cuda {

struct ReplayTimes {
  std::vector<double> launch_us;  // [replay]: host time of the launch call (graph launch or eager walk)
  std::vector<double> wall_us;    // [replay]: from the launch call to the end of the replay on the GPUs
  std::vector<EventSpan> spans;   // per replay and rank: first span_begin to last span_end
};

// Runs `count` replays numbered first .. first+count-1. `launch(replay)` enqueues one replay on the
// issuer's streams; each replay is waited for before the next (so the events of the graph, which
// every replay re-records, are read before they are overwritten). Spans are read when `spans`.
[[nodiscard]] ReplayTimes run_replays(const GraphIssuer& issuer, const std::function<void(int replay)>& launch,
                                      int first, int count, bool spans);

// Each rank's span in one completed replay (ms), from its first span_begin to its last span_end
// event; every rank that has span nodes appears.
[[nodiscard]] std::vector<EventSpan> read_spans(const GraphIssuer& issuer, int replay);

// Waits for everything issued on every rank's stream.
void synchronize(const GraphIssuer& issuer);

}  // namespace tpgraph::cuda
