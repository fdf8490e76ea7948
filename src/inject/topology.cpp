#include "inject/topology.hpp"

#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <utility>

namespace tpgraph::inject {

using nlohmann::json;

namespace {

// Nested bodies deeper than this, or more nodes in all, are not followed: the chunk says so.
constexpr int kMaxDepth = 16;
constexpr std::size_t kMaxNodes = std::size_t{1} << 22;
// Conditional nodes remembered at once; past it the oldest are forgotten (their graphs' bodies then
// read as unknown) rather than growing without bound in a program that builds graphs forever.
constexpr std::size_t kMaxConditionals = std::size_t{1} << 16;

std::string node_type(CUgraphNodeType type) {
  switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: return "kernel";
    case CU_GRAPH_NODE_TYPE_MEMCPY: return "memcpy";
    case CU_GRAPH_NODE_TYPE_MEMSET: return "memset";
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return "mem_alloc";
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return "mem_free";
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD: return "event_record";
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return "event_wait";
    case CU_GRAPH_NODE_TYPE_HOST: return "host";
    case CU_GRAPH_NODE_TYPE_EMPTY: return "empty";
    case CU_GRAPH_NODE_TYPE_GRAPH: return "graph";
    case CU_GRAPH_NODE_TYPE_CONDITIONAL: return "conditional";
    default: return "other";
  }
}

const char* conditional_kind(CUgraphConditionalNodeType type) {
  switch (type) {
    case CU_GRAPH_COND_TYPE_IF: return "if";
    case CU_GRAPH_COND_TYPE_WHILE: return "while";
    case CU_GRAPH_COND_TYPE_SWITCH: return "switch";
    default: return nullptr;
  }
}

const char* memory_label(CUmemorytype type) {
  switch (type) {
    case CU_MEMORYTYPE_HOST: return "H";
    case CU_MEMORYTYPE_DEVICE:
    case CU_MEMORYTYPE_ARRAY: return "D";
    default: return nullptr;  // unified: the direction is only known when it runs
  }
}

// The type-specific fields of one node: name, bytes, and a kernel's own device.
void describe_params(CUgraphNode node, CUgraphNodeType type, json& j, int& device, std::string& problem) {
  std::int64_t bytes = 0;
  std::string name;
  switch (type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
      CUDA_KERNEL_NODE_PARAMS p{};
      if (const CUresult s = cuGraphKernelNodeGetParams(node, &p); s != CUDA_SUCCESS) {
        problem = "cuGraphKernelNodeGetParams: " + driver_text(s);
        break;
      }
      const char* mangled = nullptr;
      if (p.func != nullptr) {
        (void)cuFuncGetName(&mangled, p.func);
      } else if (p.kern != nullptr) {
        (void)cuKernelGetName(&mangled, p.kern);
        CUdevice d = 0;
        if (p.ctx != nullptr && cuCtxGetDevice_v2(&d, p.ctx) == CUDA_SUCCESS) device = d;
      }
      name = demangle(mangled);
      break;
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY: {
      CUDA_MEMCPY3D p{};
      if (cuGraphMemcpyNodeGetParams(node, &p) == CUDA_SUCCESS) {
        bytes = static_cast<std::int64_t>(p.WidthInBytes * std::max<std::size_t>(p.Height, 1) *
                                          std::max<std::size_t>(p.Depth, 1));
        const char* from = memory_label(p.srcMemoryType);
        const char* to = memory_label(p.dstMemoryType);
        name = from != nullptr && to != nullptr ? std::string("memcpy ") + from + "to" + to : "memcpy";
      }
      break;
    }
    case CU_GRAPH_NODE_TYPE_MEMSET: {
      CUDA_MEMSET_NODE_PARAMS p{};
      if (cuGraphMemsetNodeGetParams(node, &p) == CUDA_SUCCESS)
        bytes = static_cast<std::int64_t>(p.width * std::max<std::size_t>(p.height, 1) * p.elementSize);
      name = "memset";
      break;
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: {
      CUDA_MEM_ALLOC_NODE_PARAMS p{};
      if (cuGraphMemAllocNodeGetParams(node, &p) == CUDA_SUCCESS) bytes = static_cast<std::int64_t>(p.bytesize);
      break;
    }
    default: break;
  }
  j["name"] = name;
  j["bytes"] = bytes;
}

class Reader {
 public:
  Reader(int device, const ConditionalNodes& conditionals, Topology& out)
      : device_(device), conditionals_(conditionals), out_(out) {}

  // Appends `graph`'s nodes (owned by node `parent`'s body `body`, or the top level when parent is
  // -1), its edges, then the bodies of its child graph and conditional nodes.
  void read(CUgraph graph, int parent, int body, int depth) {
    if (depth > kMaxDepth) return fail("bodies nested deeper than " + std::to_string(kMaxDepth) + " levels");
    std::size_t count = 0;
    if (const CUresult s = cuGraphGetNodes(graph, nullptr, &count); s != CUDA_SUCCESS)
      return fail("cuGraphGetNodes: " + driver_text(s));
    std::vector<CUgraphNode> nodes(count);
    if (count > 0) {
      if (const CUresult s = cuGraphGetNodes(graph, nodes.data(), &count); s != CUDA_SUCCESS)
        return fail("cuGraphGetNodes: " + driver_text(s));
      nodes.resize(count);
    }
    if (out_.nodes.size() + nodes.size() > kMaxNodes) return fail("more than 4194304 nodes");
    std::unordered_map<CUgraphNode, int> index_of_handle;
    std::vector<std::pair<CUgraphNode, CUgraphNodeType>> owners;  // nodes whose bodies follow
    for (CUgraphNode node : nodes) {
      const int index = static_cast<int>(out_.nodes.size());
      index_of_handle[node] = index;
      CUgraphNodeType type = CU_GRAPH_NODE_TYPE_EMPTY;
      out_.nodes.push_back(describe(node, parent, body, type));
      if (type == CU_GRAPH_NODE_TYPE_GRAPH || type == CU_GRAPH_NODE_TYPE_CONDITIONAL) owners.emplace_back(node, type);
    }
    read_edges(graph, index_of_handle);
    for (const auto& [node, type] : owners) {
      const int index = index_of_handle[node];
      if (type == CU_GRAPH_NODE_TYPE_GRAPH) {
        CUgraph child = nullptr;
        if (const CUresult s = cuGraphChildGraphNodeGetGraph(node, &child); s != CUDA_SUCCESS)
          return fail("cuGraphChildGraphNodeGetGraph: " + driver_text(s));
        read(child, index, 0, depth + 1);
        continue;
      }
      ConditionalNodes::Info info;
      if (!conditionals_.find(node, info)) {
        fail("a conditional node made before tpgraph could watch it: its bodies are unknown");
        continue;
      }
      for (std::size_t b = 0; b < info.bodies.size(); ++b) read(info.bodies[b], index, static_cast<int>(b), depth + 1);
    }
  }

 private:
  void fail(std::string what) {
    if (out_.error.empty()) out_.error = std::move(what);
  }

  json describe(CUgraphNode node, int parent, int body, CUgraphNodeType& type) {
    json j;
    std::uint64_t id = 0;
    if (cuptiGetGraphNodeId(node, &id) != CUPTI_SUCCESS) fail("cuptiGetGraphNodeId failed for a node");
    j["id"] = id;
    if (const CUresult s = cuGraphNodeGetType(node, &type); s != CUDA_SUCCESS)
      fail("cuGraphNodeGetType: " + driver_text(s));
    j["type"] = node_type(type);
    int device = device_;
    std::string problem;
    describe_params(node, type, j, device, problem);
    if (!problem.empty()) fail(problem);
    if (device >= 0) j["device"] = device;
    if (parent >= 0) {
      j["parent"] = parent;
      j["body"] = body;
    }
    if (type == CU_GRAPH_NODE_TYPE_CONDITIONAL) {
      ConditionalNodes::Info info;
      const char* kind = conditionals_.find(node, info) ? conditional_kind(info.type) : nullptr;
      if (kind != nullptr && !info.bodies.empty()) {
        j["cond"] = {{"kind", kind}, {"bodies", info.bodies.size()}};
      } else {
        j["type"] = "other";  // the reader needs a kind; the error below says why it has none
        fail("a conditional node whose kind and bodies are unknown");
      }
    }
    if (id != 0) out_.index_of_id[id] = static_cast<int>(out_.nodes.size());
    return j;
  }

  void read_edges(CUgraph graph, const std::unordered_map<CUgraphNode, int>& index_of_handle) {
    // With edge data: an edge that carries data (a programmatic port, say) cannot be returned
    // without it (CUDA_ERROR_LOSSY_QUERY).
    std::size_t count = 0;
    if (const CUresult s = cuGraphGetEdges(graph, nullptr, nullptr, nullptr, &count); s != CUDA_SUCCESS)
      return fail("cuGraphGetEdges: " + driver_text(s));
    if (count == 0) return;
    std::vector<CUgraphNode> from(count);
    std::vector<CUgraphNode> to(count);
    std::vector<CUgraphEdgeData> data(count);
    if (const CUresult s = cuGraphGetEdges(graph, from.data(), to.data(), data.data(), &count); s != CUDA_SUCCESS)
      return fail("cuGraphGetEdges: " + driver_text(s));
    for (std::size_t i = 0; i < count; ++i) {
      const auto a = index_of_handle.find(from[i]);
      const auto b = index_of_handle.find(to[i]);
      if (a == index_of_handle.end() || b == index_of_handle.end()) {
        fail("an edge to a node the graph does not list");
        continue;
      }
      const CUgraphEdgeData& d = data[i];
      if (d.type == CU_GRAPH_DEPENDENCY_TYPE_DEFAULT && d.from_port == 0 && d.to_port == 0)
        out_.edges.push_back({a->second, b->second});
      else out_.edges.push_back({a->second, b->second, d.type, d.from_port, d.to_port});
    }
  }

  int device_;
  const ConditionalNodes& conditionals_;
  Topology& out_;
};

}  // namespace

void ConditionalNodes::on_node_added(CUgraphNode node, const CUgraphNodeParams* params) {
  if (node == nullptr || params == nullptr || params->type != CU_GRAPH_NODE_TYPE_CONDITIONAL) return;
  const CUDA_CONDITIONAL_NODE_PARAMS& c = params->conditional;
  Info info;
  info.type = c.type;
  if (c.phGraph_out != nullptr) info.bodies.assign(c.phGraph_out, c.phGraph_out + c.size);
  const std::lock_guard guard(mutex_);
  if (nodes_.size() >= kMaxConditionals) nodes_.erase(nodes_.begin());
  nodes_[node] = std::move(info);
}

bool ConditionalNodes::find(CUgraphNode node, Info& out) const {
  const std::lock_guard guard(mutex_);
  const auto it = nodes_.find(node);
  if (it == nodes_.end()) return false;
  out = it->second;
  return true;
}

std::string driver_text(CUresult status) {
  const char* name = nullptr;
  if (cuGetErrorName(status, &name) != CUDA_SUCCESS || name == nullptr)
    return "CUDA error " + std::to_string(static_cast<int>(status));
  return name;
}

std::string demangle(const char* name) {
  if (name == nullptr) return {};
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> out(abi::__cxa_demangle(name, nullptr, nullptr, &status), &std::free);
  return status == 0 && out ? std::string(out.get()) : std::string(name);
}

Topology read_topology(CUgraph graph, int device, const ConditionalNodes& conditionals) {
  Topology out;
  Reader(device, conditionals, out).read(graph, -1, 0, 0);
  return out;
}

}  // namespace tpgraph::inject
