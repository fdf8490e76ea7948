// An ordinary CUDA program for `tpgraph trace` to watch (it knows nothing of tpgraph): one graph
// built node by node with every shape a framework's graph may hold, as XLA's command buffers do.
//
//   prologue --> while { loop_body } --> if { if_body } else { else_body } --> child { child_a -> child_b }
//            --> pdl_a ==programmatic==> pdl_b
//
// - prologue (T us) sets the loop counter to --iterations and the if node's condition to the
//   launch's parity, from a launch counter on the device: the if body runs on even launches, the
//   else body on odd ones.
// - the while node's body (T us) runs until the counter reaches 0: --iterations times per launch.
// - the child graph node holds two kernels (T us each), one after the other.
// - pdl_b depends on pdl_a through a programmatic edge: pdl_a triggers its dependents halfway
//   through, pdl_b waits in cudaGridDependencySynchronize for pdl_a's memory to be visible.
// - halfway through the replays the executable is updated (cudaGraphExecUpdate) from a graph of the
//   same shape whose pdl_b spins 2T us: launches before and after the update are two versions.
//
// It prints the mean wall time per replay. Flags: --replays N, --iterations K, --kernel-us T,
// --no-update.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

#define CHECK(call)                                                                                        \
  do {                                                                                                     \
    const cudaError_t status_ = (call);                                                                    \
    if (status_ != cudaSuccess) {                                                                          \
      std::fprintf(stderr, "tpgraph-example-shapes: %s failed: %s\n", #call, cudaGetErrorString(status_)); \
      std::exit(1);                                                                                        \
    }                                                                                                      \
  } while (0)

// The global timer runs in ns on every GPU since Volta: a kernel that spins on it lasts as long
// as asked whatever the clock speed.
__device__ void spin_for(long long ns) {
  unsigned long long start = 0;
  unsigned long long now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (static_cast<long long>(now - start) < ns);
}

struct State {
  unsigned int counter;   // iterations left in the while loop
  unsigned int launches;  // graph launches so far
  float sink;
};

__global__ void prologue(long long ns, unsigned int iterations, State* s, cudaGraphConditionalHandle if_handle) {
  spin_for(ns);
  s->counter = iterations;
  cudaGraphSetConditional(if_handle, (s->launches++ & 1u) == 0 ? 1u : 0u);
}

__global__ void loop_body(long long ns, State* s, cudaGraphConditionalHandle while_handle) {
  spin_for(ns);
  const unsigned int left = s->counter > 0 ? s->counter - 1 : 0;
  s->counter = left;
  cudaGraphSetConditional(while_handle, left > 0 ? 1u : 0u);
}

__global__ void if_body(long long ns, State* s) {
  spin_for(ns);
  s->sink += 1.0f;
}
__global__ void else_body(long long ns, State* s) {
  spin_for(ns);
  s->sink -= 1.0f;
}
__global__ void child_a(long long ns, State* s) {
  spin_for(ns);
  s->sink += 2.0f;
}
__global__ void child_b(long long ns, State* s) {
  spin_for(ns);
  s->sink += 3.0f;
}

__global__ void pdl_a(long long ns, State* s) {
  spin_for(ns / 2);
  cudaTriggerProgrammaticLaunchCompletion();
  spin_for(ns - ns / 2);
  s->sink += 4.0f;
}
__global__ void pdl_b(long long ns, State* s) {
  cudaGridDependencySynchronize();
  spin_for(ns);
  s->sink += 5.0f;
}

struct Options {
  int replays = 200;
  unsigned int iterations = 3;
  long long kernel_us = 10;
  bool update = true;
};

[[noreturn]] void usage(const char* problem) {
  std::fprintf(stderr,
               "tpgraph-example-shapes: %s\n"
               "usage: tpgraph-example-shapes [--replays N (>= 2)] [--iterations K (1..1000)] [--kernel-us T (>= 0)] "
               "[--no-update]\n",
               problem);
  std::exit(2);
}

long long parse_number(const char* flag, const char* text, long long min, long long max) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v < min || v > max)
    usage((std::string(flag) + " takes an integer from " + std::to_string(min) + " to " + std::to_string(max)).c_str());
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--no-update") {
      o.update = false;
      continue;
    }
    if (i + 1 >= argc) usage(("no value after " + flag).c_str());
    const char* value = argv[++i];
    if (flag == "--replays") {
      o.replays = static_cast<int>(parse_number("--replays", value, 2, 1 << 30));
    } else if (flag == "--iterations") {
      o.iterations = static_cast<unsigned int>(parse_number("--iterations", value, 1, 1000));
    } else if (flag == "--kernel-us") {
      o.kernel_us = parse_number("--kernel-us", value, 0, 1000000);
    } else {
      usage(("unknown flag " + flag).c_str());
    }
  }
  return o;
}

cudaGraphNode_t add_kernel(cudaGraph_t graph, const cudaGraphNode_t* deps, const cudaGraphEdgeData* data,
                           std::size_t count, void* func, void** args) {
  cudaGraphNodeParams p{};
  p.type = cudaGraphNodeTypeKernel;
  p.kernel.func = func;
  p.kernel.gridDim = dim3(1);
  p.kernel.blockDim = dim3(32);
  p.kernel.kernelParams = args;
  cudaGraphNode_t node = nullptr;
  CHECK(cudaGraphAddNode(&node, graph, deps, data, count, &p));
  return node;
}

// A conditional node after `dep`; returns the node and its body graphs.
cudaGraphNode_t add_conditional(cudaGraph_t graph, cudaGraphNode_t dep, cudaGraphConditionalHandle handle,
                                cudaGraphConditionalNodeType type, unsigned int bodies, cudaGraph_t* body_out) {
  cudaGraphNodeParams p{};
  p.type = cudaGraphNodeTypeConditional;
  p.conditional.handle = handle;
  p.conditional.type = type;
  p.conditional.size = bodies;
  cudaGraphNode_t node = nullptr;
  CHECK(cudaGraphAddNode(&node, graph, &dep, nullptr, 1, &p));
  for (unsigned int i = 0; i < bodies; ++i) body_out[i] = p.conditional.phGraph_out[i];
  return node;
}

// The whole graph; pdl_b spins `pdl_b_ns`.
cudaGraph_t build(const Options& o, State* state, long long pdl_b_ns) {
  long long ns = o.kernel_us * 1000;
  unsigned int iterations = o.iterations;
  cudaGraph_t graph = nullptr;
  CHECK(cudaGraphCreate(&graph, 0));
  cudaGraphConditionalHandle while_handle = 0;
  cudaGraphConditionalHandle if_handle = 0;
  CHECK(cudaGraphConditionalHandleCreate(&while_handle, graph, 1, cudaGraphCondAssignDefault));
  CHECK(cudaGraphConditionalHandleCreate(&if_handle, graph, 0, cudaGraphCondAssignDefault));

  void* prologue_args[] = {&ns, &iterations, &state, &if_handle};
  const cudaGraphNode_t first =
      add_kernel(graph, nullptr, nullptr, 0, reinterpret_cast<void*>(prologue), prologue_args);

  cudaGraph_t loop = nullptr;
  const cudaGraphNode_t while_node = add_conditional(graph, first, while_handle, cudaGraphCondTypeWhile, 1, &loop);
  void* loop_args[] = {&ns, &state, &while_handle};
  add_kernel(loop, nullptr, nullptr, 0, reinterpret_cast<void*>(loop_body), loop_args);

  cudaGraph_t branches[2] = {nullptr, nullptr};
  const cudaGraphNode_t if_node = add_conditional(graph, while_node, if_handle, cudaGraphCondTypeIf, 2, branches);
  void* body_args[] = {&ns, &state};
  add_kernel(branches[0], nullptr, nullptr, 0, reinterpret_cast<void*>(if_body), body_args);
  add_kernel(branches[1], nullptr, nullptr, 0, reinterpret_cast<void*>(else_body), body_args);

  cudaGraph_t child = nullptr;
  CHECK(cudaGraphCreate(&child, 0));
  const cudaGraphNode_t a = add_kernel(child, nullptr, nullptr, 0, reinterpret_cast<void*>(child_a), body_args);
  add_kernel(child, &a, nullptr, 1, reinterpret_cast<void*>(child_b), body_args);
  cudaGraphNode_t child_node = nullptr;
  CHECK(cudaGraphAddChildGraphNode(&child_node, graph, &if_node, 1, child));
  CHECK(cudaGraphDestroy(child));  // the node holds its own copy

  const cudaGraphNode_t pa = add_kernel(graph, &child_node, nullptr, 1, reinterpret_cast<void*>(pdl_a), body_args);
  cudaGraphEdgeData programmatic{};
  programmatic.type = cudaGraphDependencyTypeProgrammatic;
  programmatic.from_port = cudaGraphKernelNodePortProgrammatic;
  long long b_ns = pdl_b_ns;
  void* pdl_b_args[] = {&b_ns, &state};
  add_kernel(graph, &pa, &programmatic, 1, reinterpret_cast<void*>(pdl_b), pdl_b_args);
  return graph;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const long long ns = o.kernel_us * 1000;

  State* state = nullptr;
  CHECK(cudaMalloc(&state, sizeof(State)));
  CHECK(cudaMemset(state, 0, sizeof(State)));
  cudaStream_t stream = nullptr;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  cudaGraph_t graph = build(o, state, ns);
  cudaGraphExec_t exec = nullptr;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphUpload(exec, stream));
  CHECK(cudaStreamSynchronize(stream));

  const int before_update = o.update ? o.replays / 2 : o.replays;
  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < before_update; ++r) CHECK(cudaGraphLaunch(exec, stream));
  cudaGraph_t updated = nullptr;
  if (o.update) {
    CHECK(cudaStreamSynchronize(stream));
    updated = build(o, state, 2 * ns);
    cudaGraphExecUpdateResultInfo info{};
    CHECK(cudaGraphExecUpdate(exec, updated, &info));
    for (int r = before_update; r < o.replays; ++r) CHECK(cudaGraphLaunch(exec, stream));
  }
  CHECK(cudaStreamSynchronize(stream));
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / o.replays;

  State host{};
  CHECK(cudaMemcpy(&host, state, sizeof(State), cudaMemcpyDeviceToHost));
  if (host.launches != static_cast<unsigned int>(o.replays) || host.counter != 0) {
    std::fprintf(stderr, "tpgraph-example-shapes: the device saw %u launches and %u iterations left (expected %d, 0)\n",
                 host.launches, host.counter, o.replays);
    return 1;
  }
  std::printf(
      "tpgraph-example-shapes: %d replays (%d before the update) of prologue, while x %u, if/else, child graph "
      "of 2, pdl pair: %.1f us per replay\n",
      o.replays, before_update, o.iterations, us);

  CHECK(cudaGraphExecDestroy(exec));
  if (updated != nullptr) CHECK(cudaGraphDestroy(updated));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaFree(state));
  return 0;
}
