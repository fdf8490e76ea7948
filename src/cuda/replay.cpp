#include "cuda/replay.hpp"

#include <chrono>

namespace tpgraph::cuda {
namespace {

using Clock = std::chrono::steady_clock;

double micros(Clock::duration d) { return std::chrono::duration<double, std::micro>(d).count(); }

}  // namespace

void synchronize(const GraphIssuer& issuer) {
  for (int r = 0; r < issuer.graph().ranks; ++r) {
    DeviceScope scope(issuer.device(r));
    TPG_CUDA(cudaStreamSynchronize(issuer.stream(r)));
  }
}

std::vector<EventSpan> read_spans(const GraphIssuer& issuer, int replay) {
  const LayerGraph& g = issuer.graph();
  std::vector<int> first_begin(static_cast<std::size_t>(g.ranks), -1);
  std::vector<int> last_end(static_cast<std::size_t>(g.ranks), -1);
  for (const Node& n : g.nodes) {
    auto& begin = first_begin[static_cast<std::size_t>(n.rank)];
    if (n.role == Role::span_begin && begin < 0) begin = n.id;
    if (n.role == Role::span_end) last_end[static_cast<std::size_t>(n.rank)] = n.id;
  }
  std::vector<EventSpan> spans;
  for (int r = 0; r < g.ranks; ++r) {
    const int b = first_begin[static_cast<std::size_t>(r)];
    const int e = last_end[static_cast<std::size_t>(r)];
    if (b < 0 || e < 0) continue;
    float ms = 0;
    DeviceScope scope(issuer.device(r));
    TPG_CUDA(cudaEventElapsedTime(&ms, issuer.span_event(b), issuer.span_event(e)));
    spans.push_back({replay, r, static_cast<double>(ms)});
  }
  return spans;
}

ReplayTimes run_replays(const GraphIssuer& issuer, const std::function<void(int replay)>& launch, int first, int count,
                        bool spans) {
  ReplayTimes t;
  t.launch_us.reserve(static_cast<std::size_t>(count));
  t.wall_us.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    const int replay = first + i;
    const auto t0 = Clock::now();
    launch(replay);
    const auto t1 = Clock::now();
    synchronize(issuer);
    const auto t2 = Clock::now();
    t.launch_us.push_back(micros(t1 - t0));
    t.wall_us.push_back(micros(t2 - t0));
    if (spans) {
      for (const EventSpan& s : read_spans(issuer, replay)) t.spans.push_back(s);
    }
  }
  return t;
}

}  // namespace tpgraph::cuda
