// Records into per-(replay, node) samples, and the summaries only traced graphs have: how often a
// conditional node's bodies ran, and the per-stream view of a graph whose topology is unknown.
#include "core/analysis/samples.hpp"

#include <algorithm>
#include <limits>
#include <map>

namespace tpgraph::timeline_detail {

namespace {

const NestedNode* nesting_of(const VariantRun& v, std::size_t node) {
  return node < v.nesting.size() ? &v.nesting[node] : nullptr;
}

}  // namespace

std::vector<Sample> place_records(const VariantRun& v, std::size_t replays, TimelineHealth& health) {
  const std::size_t node_count = v.graph.nodes.size();
  health.records = v.records.size();
  std::vector<Sample> samples(replays * node_count);
  for (const auto& a : v.records) {
    if (a.start_ns == 0 || a.end_ns == 0 || a.end_ns < a.start_ns) {
      ++health.no_timestamp_seen;
      continue;
    }
    if (a.node < 0 || static_cast<std::size_t>(a.node) >= node_count) {
      ++health.unmatched_seen;
      continue;
    }
    if (a.replay < 0 || static_cast<std::size_t>(a.replay) >= replays) {
      ++health.replay_out_of_range;
      continue;
    }
    const auto node = static_cast<std::size_t>(a.node);
    Sample& s = samples[static_cast<std::size_t>(a.replay) * node_count + node];
    if (s.recorded()) {
      // A node in a while body runs once per iteration; anywhere else a second record in one
      // launch is one too many.
      const NestedNode* nest = nesting_of(v, node);
      if (nest == nullptr || !nest->repeats) ++health.duplicate;
      s.start_ns = std::min(s.start_ns, a.start_ns);
      s.end_ns = std::max(s.end_ns, a.end_ns);
    } else {
      s.start_ns = a.start_ns;
      s.end_ns = a.end_ns;
    }
    ++s.count;
  }
  std::vector<char> expected(node_count, 0);  // a kernel or copy outside any conditional body
  for (std::size_t n = 0; n < node_count; ++n) {
    const NestedNode* nest = nesting_of(v, n);
    expected[n] = leaves_record(v.graph.nodes[n].kind) && (nest == nullptr || !nest->optional) ? 1 : 0;
  }
  for (std::size_t r = 0; r < replays; ++r)  // replay-major: the samples' own order
    for (std::size_t n = 0; n < node_count; ++n)
      if (expected[n] && !samples[r * node_count + n].recorded()) ++health.missing;
  return samples;
}

std::vector<ConditionalSummary> summarize_conditionals(const VariantRun& v, const std::vector<Sample>& samples,
                                                       const std::vector<ReplayTimeline>& replays) {
  std::vector<ConditionalSummary> out;
  const std::size_t node_count = v.graph.nodes.size();
  if (v.nesting.size() != node_count) return out;
  for (std::size_t c = 0; c < node_count; ++c) {
    const NestedNode& owner = v.nesting[c];
    if (owner.conditional == NestedNode::Conditional::none) continue;
    ConditionalSummary cs;
    cs.node = static_cast<int>(c);
    cs.kind = owner.conditional;
    // Each node inside c: the body of c it is in (through nested bodies), and whether it sits
    // directly in that body (a while loop's iterations are counted there).
    std::vector<std::pair<std::size_t, int>> inside;  // (node, body of c)
    std::vector<char> direct;
    for (std::size_t n = c + 1; n < node_count; ++n) {
      int up = static_cast<int>(n);
      while (up >= 0 && v.nesting[static_cast<std::size_t>(up)].parent != static_cast<int>(c))
        up = v.nesting[static_cast<std::size_t>(up)].parent;
      if (up < 0) continue;
      inside.emplace_back(n, v.nesting[static_cast<std::size_t>(up)].body);
      direct.push_back(up == static_cast<int>(n) ? 1 : 0);
    }
    std::vector<double> iterations;
    for (const auto& rt : replays) {
      if (!rt.present) continue;
      ++cs.launches;
      const auto r = static_cast<std::size_t>(rt.replay);
      std::uint32_t most = 0;
      std::vector<char> ran;
      for (std::size_t i = 0; i < inside.size(); ++i) {
        const Sample& s = samples[r * node_count + inside[i].first];
        if (!s.recorded()) continue;
        if (direct[i]) most = std::max(most, s.count);
        const auto body = static_cast<std::size_t>(std::max(inside[i].second, 0));
        if (ran.size() <= body) ran.resize(body + 1, 0);
        ran[body] = 1;
      }
      iterations.push_back(static_cast<double>(most));
      if (cs.ran_in.size() < ran.size()) cs.ran_in.resize(ran.size(), 0);
      for (std::size_t b = 0; b < ran.size(); ++b) cs.ran_in[b] += ran[b];
    }
    if (cs.kind == NestedNode::Conditional::while_) cs.iterations = summarize(iterations);
    out.push_back(std::move(cs));
  }
  return out;
}

std::vector<StreamNodeSummary> summarize_streams(const VariantRun& v, const std::vector<Sample>& samples,
                                                 std::size_t replays) {
  const std::size_t node_count = v.graph.nodes.size();
  std::vector<std::vector<double>> durations(node_count), gaps(node_count);
  std::map<std::uint32_t, std::vector<std::size_t>> by_stream;
  for (std::size_t n = 0; n < node_count; ++n) by_stream[n < v.nesting.size() ? v.nesting[n].stream : 0].push_back(n);
  for (std::size_t r = 0; r < replays; ++r) {
    for (auto& [stream, nodes] : by_stream) {
      std::vector<std::size_t> ran;
      for (const std::size_t n : nodes)
        if (samples[r * node_count + n].recorded()) ran.push_back(n);
      std::sort(ran.begin(), ran.end(), [&](std::size_t a, std::size_t b) {
        return samples[r * node_count + a].start_ns < samples[r * node_count + b].start_ns;
      });
      for (std::size_t i = 0; i < ran.size(); ++i) {
        const Sample& s = samples[r * node_count + ran[i]];
        durations[ran[i]].push_back(s.duration_us());
        if (i > 0) gaps[ran[i]].push_back(ns_to_us(s.start_ns, samples[r * node_count + ran[i - 1]].end_ns));
      }
    }
  }
  std::vector<StreamNodeSummary> out;
  for (const auto& [stream, nodes] : by_stream)
    for (const std::size_t n : nodes)
      out.push_back(StreamNodeSummary{static_cast<int>(n), stream, summarize(durations[n]), summarize(gaps[n])});
  return out;
}

std::vector<NodeSeries> node_series(const std::vector<Sample>& samples, std::size_t node_count,
                                    const std::vector<ReplayTimeline>& replays, const PathTimes& on_path) {
  constexpr float kNone = std::numeric_limits<float>::quiet_NaN();
  const std::size_t n_replays = replays.size();
  std::vector<NodeSeries> out(node_count);
  for (std::size_t n = 0; n < node_count; ++n) {
    NodeSeries& s = out[n];
    for (auto* v : {&s.duration_us, &s.wait_us, &s.contention_us, &s.idle_us, &s.arrival_us, &s.path_us, &s.start_us})
      v->assign(n_replays, kNone);
    for (std::size_t r = 0; r < n_replays; ++r) {
      const Sample& x = samples[r * node_count + n];
      if (replays[r].present) s.path_us[r] = 0;
      if (!x.recorded()) continue;
      s.duration_us[r] = static_cast<float>(x.duration_us());
      s.wait_us[r] = static_cast<float>(x.wait_us());
      s.contention_us[r] = static_cast<float>(x.contention_us());
      s.idle_us[r] = static_cast<float>(x.idle_us());
      s.arrival_us[r] = static_cast<float>(x.arrival_us);
      s.start_us[r] = static_cast<float>(ns_to_us(x.start_ns, replays[r].begin_ns));
    }
  }
  // on_path counts present replays only: the i-th present replay is the i-th entry.
  std::vector<std::size_t> present;
  for (std::size_t r = 0; r < n_replays; ++r)
    if (replays[r].present) present.push_back(r);
  for (const auto& [node, times] : on_path) {
    const auto& [ran, waited] = times;
    auto& path = out[static_cast<std::size_t>(node)].path_us;
    for (std::size_t i = 0; i < ran.size() && i < present.size(); ++i)
      path[present[i]] = static_cast<float>(ran[i] + (i < waited.size() ? waited[i] : 0.0));
  }
  return out;
}

}  // namespace tpgraph::timeline_detail
