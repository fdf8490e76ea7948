#include "cuda/capture.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "core/base/error.hpp"

namespace tpgraph::cuda {
namespace {

bool is_span(const Node& n) { return n.role == Role::span_begin || n.role == Role::span_end; }

std::string_view node_type_name(cudaGraphNodeType t) {
  switch (t) {
    case cudaGraphNodeTypeKernel: return "kernel";
    case cudaGraphNodeTypeMemcpy: return "memcpy";
    case cudaGraphNodeTypeMemset: return "memset";
    case cudaGraphNodeTypeHost: return "host";
    case cudaGraphNodeTypeGraph: return "child_graph";
    case cudaGraphNodeTypeEmpty: return "empty";
    case cudaGraphNodeTypeWaitEvent: return "event_wait";
    case cudaGraphNodeTypeEventRecord: return "event_record";
    case cudaGraphNodeTypeMemAlloc: return "mem_alloc";
    case cudaGraphNodeTypeMemFree: return "mem_free";
    default: return "other";
  }
}

// The layer graph's names for CUDA node types are to_string(CudaNodeType), spelled like these.
cudaGraphNodeType driver_type(CudaNodeType t) {
  switch (t) {
    case CudaNodeType::kernel: return cudaGraphNodeTypeKernel;
    case CudaNodeType::memcpy: return cudaGraphNodeTypeMemcpy;
    case CudaNodeType::mem_alloc: return cudaGraphNodeTypeMemAlloc;
    case CudaNodeType::mem_free: return cudaGraphNodeTypeMemFree;
    case CudaNodeType::event_record: return cudaGraphNodeTypeEventRecord;
    case CudaNodeType::memset: return cudaGraphNodeTypeMemset;
    case CudaNodeType::other: return cudaGraphNodeTypeEmpty;
  }
  return cudaGraphNodeTypeEmpty;
}

// Ends a capture that an exception is leaving half done, so the stream is usable again and the
// partial graph is freed; the error in flight is the one reported.
class CaptureGuard {
 public:
  explicit CaptureGuard(cudaStream_t origin) : origin_(origin) {}
  ~CaptureGuard() {
    if (!active_) return;
    cudaGraph_t partial = nullptr;
    (void)cudaStreamEndCapture(origin_, &partial);
    if (partial != nullptr) (void)cudaGraphDestroy(partial);
    (void)cudaGetLastError();
  }
  CaptureGuard(const CaptureGuard&) = delete;
  CaptureGuard& operator=(const CaptureGuard&) = delete;
  void done() { active_ = false; }

 private:
  cudaStream_t origin_;
  bool active_ = true;
};

}  // namespace

Graph capture_graph(cudaStream_t stream, int device, const std::function<void()>& fn) {
  TPG_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  CaptureGuard guard(stream);
  fn();
  guard.done();
  cudaGraph_t g = nullptr;
  const cudaError_t status = cudaStreamEndCapture(stream, &g);
  if (status != cudaSuccess) {
    if (g != nullptr) (void)cudaGraphDestroy(g);
    check(status, "cudaStreamEndCapture");
  }
  return Graph(g, device);
}

GraphIssuer::GraphIssuer(const LayerGraph& graph) : graph_(graph) {
  if (graph.ranks < 1 || graph.nodes.empty()) throw std::logic_error("GraphIssuer: empty layer graph");
  std::vector<int> rank_device(static_cast<std::size_t>(graph.ranks), -1);
  for (const Node& n : graph.nodes) rank_device[static_cast<std::size_t>(n.rank)] = n.device;
  for (int r = 0; r < graph.ranks; ++r) {
    // A rank with no node of its own still gets a stream on the root's GPU, so indices line up.
    const int d = rank_device[static_cast<std::size_t>(r)];
    streams_.push_back(make_stream(d >= 0 ? d : rank_device[0]));
  }

  const std::size_t n = graph.nodes.size();
  cross_preds_.resize(n);
  order_events_.resize(n);
  span_events_.resize(n);
  std::vector<bool> needs_event(n, false);
  for (const Edge& e : graph.edges) {
    if (e.from >= e.to) {
      throw std::logic_error(fmt::format("layer graph edge {} -> {} goes against issue order", e.from, e.to));
    }
    if (graph.nodes[e.from].stream != graph.nodes[e.to].stream) {
      cross_preds_[e.to].push_back(e.from);
      needs_event[e.from] = true;
    }
  }
  for (const int j : graph.end_joins) needs_event[j] = true;
  for (std::size_t i = 0; i < n; ++i) {
    const Node& node = graph.nodes[i];
    if (needs_event[i]) order_events_[i] = make_event(node.device, /*timing=*/false);
    if (is_span(node)) span_events_[i] = make_event(node.device, /*timing=*/true);
  }
  capture_start_ = make_event(streams_[0].device(), /*timing=*/false);
}

void GraphIssuer::walk(const IssueNode& issue, bool capturing, std::vector<cudaGraphNode_t>* node_of) {
  for (const Node& node : graph_.nodes) {
    const cudaStream_t s = stream(node.stream);
    DeviceScope scope(node.device);
    for (const int from : cross_preds_[node.id]) {
      TPG_CUDA(cudaStreamWaitEvent(s, order_events_[from].get(), 0));
    }
    if (is_span(node)) {
      // A plain record during capture only orders streams and adds no node to the graph; the
      // external flag makes an event-record node whose timestamps cudaEventElapsedTime can read
      // after each replay.
      if (capturing) {
        TPG_CUDA(cudaEventRecordWithFlags(span_events_[node.id].get(), s, cudaEventRecordExternal));
      } else {
        TPG_CUDA(cudaEventRecord(span_events_[node.id].get(), s));
      }
    } else {
      issue(node, s);
    }
    if (capturing) {
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      const cudaGraphNode_t* deps = nullptr;
      std::size_t count = 0;
      TPG_CUDA(cudaStreamGetCaptureInfo(s, &status, nullptr, nullptr, &deps, nullptr, &count));
      if (status != cudaStreamCaptureStatusActive || count != 1) {
        throw std::runtime_error(fmt::format(
            "capturing '{}': after issuing it the stream {} ({} dependencies; one node expected)", node.label,
            status == cudaStreamCaptureStatusActive ? "is capturing" : "is not capturing", count));
      }
      (*node_of)[node.id] = deps[0];
    }
    if (order_events_[node.id]) TPG_CUDA(cudaEventRecord(order_events_[node.id].get(), s));
  }
  // Every forked stream rejoins the origin (capture cannot end otherwise; eager: one stream to sync).
  DeviceScope scope(streams_[0].device());
  for (const int j : graph_.end_joins) {
    TPG_CUDA(cudaStreamWaitEvent(root_stream(), order_events_[j].get(), 0));
  }
}

CapturedGraph GraphIssuer::capture(const IssueNode& issue, const NodeCaptured& captured) {
  CapturedGraph out;
  out.node_of.assign(graph_.nodes.size(), nullptr);
  const int root_device = streams_[0].device();
  {
    DeviceScope scope(root_device);
    out.graph = capture_graph(root_stream(), root_device, [&] {
      // Every stream joins the capture at its start with no dependency, so a rank's first node
      // depends on exactly what the layer graph says (on nothing, when it has no fork edge).
      TPG_CUDA(cudaEventRecord(capture_start_.get(), root_stream()));
      for (std::size_t r = 1; r < streams_.size(); ++r) {
        DeviceScope rank_scope(streams_[r].device());
        TPG_CUDA(cudaStreamWaitEvent(streams_[r].get(), capture_start_.get(), 0));
      }
      walk(issue, /*capturing=*/true, &out.node_of);
    });
  }
  if (captured) {
    for (std::size_t i = 0; i < out.node_of.size(); ++i) captured(out.node_of[i], static_cast<int>(i));
  }
  return out;
}

void GraphIssuer::issue_eager(const IssueNode& issue) { walk(issue, /*capturing=*/false, nullptr); }

namespace {

// Edges: the captured dependencies, read back as layer node ids, against the layer graph's. Adds
// each difference; returns the captured graph's edge count.
std::size_t compare_edges(cudaGraph_t g, const LayerGraph& layer,
                          const std::unordered_map<cudaGraphNode_t, int>& layer_of,
                          std::vector<std::string>& differences) {
  std::size_t edge_count = 0;
  TPG_CUDA(cudaGraphGetEdges(g, nullptr, nullptr, nullptr, &edge_count));
  std::vector<cudaGraphNode_t> from(edge_count), to(edge_count);
  TPG_CUDA(cudaGraphGetEdges(g, from.data(), to.data(), nullptr, &edge_count));
  std::set<std::pair<int, int>> got_edges, want_edges;
  for (std::size_t i = 0; i < edge_count; ++i) {
    const auto a = layer_of.find(from[i]);
    const auto b = layer_of.find(to[i]);
    if (a == layer_of.end() || b == layer_of.end()) {
      differences.push_back("a captured edge touches a node no layer node issued");
      continue;
    }
    got_edges.insert({a->second, b->second});
  }
  for (const Edge& e : layer.edges) want_edges.insert({e.from, e.to});
  for (const auto& [a, b] : want_edges) {
    if (!got_edges.contains({a, b})) {
      differences.push_back(fmt::format("edge {} -> {} missing", layer.nodes[a].label, layer.nodes[b].label));
    }
  }
  for (const auto& [a, b] : got_edges) {
    if (!want_edges.contains({a, b})) {
      differences.push_back(
          fmt::format("edge {} -> {} not in the layer graph", layer.nodes[a].label, layer.nodes[b].label));
    }
  }
  return edge_count;
}

}  // namespace

void check_captured_graph(const LayerGraph& layer, const CapturedGraph& captured) {
  cudaGraph_t g = captured.graph.get();
  std::size_t count = 0;
  TPG_CUDA(cudaGraphGetNodes(g, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  TPG_CUDA(cudaGraphGetNodes(g, nodes.data(), &count));
  nodes.resize(count);

  std::unordered_map<cudaGraphNode_t, cudaGraphNodeType> type_of;
  std::map<std::string, int> captured_total;  // by type name
  for (const cudaGraphNode_t n : nodes) {
    cudaGraphNodeType t{};
    TPG_CUDA(cudaGraphNodeGetType(n, &t));
    type_of[n] = t;
    ++captured_total[std::string(node_type_name(t))];
  }
  std::map<std::string, int> expected_total;
  for (const Node& n : layer.nodes) ++expected_total[std::string(node_type_name(driver_type(cuda_node_type(n.kind))))];

  std::vector<std::string> differences;
  std::set<std::string> types;
  for (const auto& [t, c] : captured_total) types.insert(t);
  for (const auto& [t, c] : expected_total) types.insert(t);
  for (const std::string& t : types) {
    const int got = captured_total.contains(t) ? captured_total.at(t) : 0;
    const int want = expected_total.contains(t) ? expected_total.at(t) : 0;
    if (got != want) differences.push_back(fmt::format("{} nodes: captured {}, layer graph {}", t, got, want));
  }

  // Per rank, through the issue map: each layer node's captured node must have the node's type.
  if (captured.node_of.size() != layer.nodes.size()) {
    differences.push_back(
        fmt::format("{} nodes were issued, the layer graph has {}", captured.node_of.size(), layer.nodes.size()));
  }
  const std::size_t mapped = std::min(captured.node_of.size(), layer.nodes.size());
  std::unordered_map<cudaGraphNode_t, int> layer_of;
  std::map<std::pair<int, std::string>, int> captured_rank;
  for (std::size_t i = 0; i < mapped; ++i) {
    const cudaGraphNode_t n = captured.node_of[i];
    const Node& node = layer.nodes[i];
    const auto it = type_of.find(n);
    if (n == nullptr || it == type_of.end()) {
      differences.push_back(fmt::format("{} has no node in the captured graph", node.label));
      continue;
    }
    if (!layer_of.emplace(n, static_cast<int>(i)).second) {
      differences.push_back(
          fmt::format("{} and {} map to one captured node", layer.nodes[layer_of[n]].label, node.label));
    }
    ++captured_rank[{node.rank, std::string(node_type_name(it->second))}];
  }
  for (const auto& [key, want] : layer.cuda_node_counts()) {
    const std::pair<int, std::string> k{key.first, std::string(node_type_name(driver_type(key.second)))};
    const int got = captured_rank.contains(k) ? captured_rank.at(k) : 0;
    if (got != want) {
      differences.push_back(fmt::format("rank {} {} nodes: captured {}, layer graph {}", k.first, k.second, got, want));
    }
    captured_rank.erase(k);
  }
  for (const auto& [k, got] : captured_rank) {
    differences.push_back(fmt::format("rank {} {} nodes: captured {}, layer graph 0", k.first, k.second, got));
  }

  const std::size_t edge_count = compare_edges(g, layer, layer_of, differences);

  if (differences.empty()) return;
  std::string message =
      fmt::format("the captured graph ({} nodes, {} edges) differs from the layer graph ({} nodes, {} edges): ", count,
                  edge_count, layer.nodes.size(), layer.edges.size());
  constexpr std::size_t kShown = 12;
  for (std::size_t i = 0; i < differences.size() && i < kShown; ++i) {
    message += (i == 0 ? "" : "; ") + differences[i];
  }
  if (differences.size() > kShown) message += fmt::format("; and {} more", differences.size() - kShown);
  throw std::runtime_error(message);
}

std::string driver_dot(const Graph& graph) {
  static std::atomic<int> counter{0};
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / fmt::format("tpgraph-{}-{}.dot", ::getpid(), counter++);
  TPG_CUDA(cudaGraphDebugDotPrint(graph.get(), path.c_str(), cudaGraphDebugDotFlagsVerbose));
  std::string text;
  {
    std::ifstream in(path, std::ios::binary);
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
  if (text.empty()) throw std::runtime_error("cudaGraphDebugDotPrint wrote an empty file");
  return text;
}

}  // namespace tpgraph::cuda
