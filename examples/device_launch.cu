// An ordinary CUDA program for `tpgraph trace` to watch (it knows nothing of tpgraph): a graph
// launched from the host whose middle kernel launches a second graph from the device.
//
//   host graph:    before --> launcher --> after
//                                |  cudaGraphLaunch(device graph) from the kernel
//   device graph:  d_first --> d_second
//
// The device graph is instantiated with cudaGraphInstantiateFlagDeviceLaunch and uploaded once;
// `launcher` launches it fire-and-forget (--mode fire: it may run beside `after`) or as a tail
// launch (--mode tail: it runs once the host graph's work is done). d_second counts its runs; the
// program checks the count equals the replays.
//
// It prints the mean wall time per replay. Flags: --replays N, --kernel-us T, --mode fire|tail.
#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

#define CHECK(call)                                                                                               \
  do {                                                                                                            \
    const cudaError_t status_ = (call);                                                                           \
    if (status_ != cudaSuccess) {                                                                                 \
      std::fprintf(stderr, "tpgraph-example-device-launch: %s failed: %s\n", #call, cudaGetErrorString(status_)); \
      std::exit(1);                                                                                               \
    }                                                                                                             \
  } while (0)

// The global timer runs in ns: a kernel that spins on it lasts as long as asked at any clock.
__device__ void spin_for(long long ns) {
  unsigned long long start = 0;
  unsigned long long now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (static_cast<long long>(now - start) < ns);
}

__global__ void before(long long ns) { spin_for(ns); }
__global__ void after(long long ns) { spin_for(ns); }
__global__ void d_first(long long ns) { spin_for(ns); }
__global__ void d_second(long long ns, unsigned int* runs) {
  spin_for(ns);
  atomicAdd(runs, 1u);
}
__global__ void launcher(long long ns, cudaGraphExec_t device_graph, bool tail, int* failures) {
  spin_for(ns);
  const cudaError_t s = cudaGraphLaunch(device_graph, tail ? cudaStreamGraphTailLaunch : cudaStreamGraphFireAndForget);
  if (s != cudaSuccess) atomicAdd(failures, 1);
}

struct Options {
  int replays = 200;
  long long kernel_us = 10;
  bool tail = false;
};

[[noreturn]] void usage(const char* problem) {
  std::fprintf(stderr,
               "tpgraph-example-device-launch: %s\n"
               "usage: tpgraph-example-device-launch [--replays N (>= 1)] [--kernel-us T (>= 0)] [--mode fire|tail]\n",
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
    if (i + 1 >= argc) usage(("no value after " + flag).c_str());
    const std::string value = argv[++i];
    if (flag == "--replays") {
      o.replays = static_cast<int>(parse_number("--replays", value.c_str(), 1, 1 << 30));
    } else if (flag == "--kernel-us") {
      o.kernel_us = parse_number("--kernel-us", value.c_str(), 0, 1000000);
    } else if (flag == "--mode") {
      if (value != "fire" && value != "tail") usage(("--mode takes fire or tail, not " + value).c_str());
      o.tail = value == "tail";
    } else {
      usage(("unknown flag " + flag).c_str());
    }
  }
  return o;
}

cudaGraphNode_t add_kernel(cudaGraph_t graph, const cudaGraphNode_t* dep, void* func, void** args) {
  cudaKernelNodeParams p{};
  p.func = func;
  p.gridDim = dim3(1);
  p.blockDim = dim3(1);
  p.kernelParams = args;
  cudaGraphNode_t node = nullptr;
  CHECK(cudaGraphAddKernelNode(&node, graph, dep, dep != nullptr ? 1 : 0, &p));
  return node;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  long long ns = o.kernel_us * 1000;
  unsigned int* runs = nullptr;
  int* failures = nullptr;
  CHECK(cudaMalloc(&runs, sizeof(unsigned int)));
  CHECK(cudaMalloc(&failures, sizeof(int)));
  CHECK(cudaMemset(runs, 0, sizeof(unsigned int)));
  CHECK(cudaMemset(failures, 0, sizeof(int)));
  cudaStream_t stream = nullptr;
  CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  cudaGraph_t device_graph = nullptr;
  CHECK(cudaGraphCreate(&device_graph, 0));
  void* first_args[] = {&ns};
  void* second_args[] = {&ns, &runs};
  const cudaGraphNode_t f = add_kernel(device_graph, nullptr, reinterpret_cast<void*>(d_first), first_args);
  add_kernel(device_graph, &f, reinterpret_cast<void*>(d_second), second_args);
  cudaGraphExec_t device_exec = nullptr;
  CHECK(cudaGraphInstantiate(&device_exec, device_graph, cudaGraphInstantiateFlagDeviceLaunch));
  CHECK(cudaGraphUpload(device_exec, stream));

  cudaGraph_t host_graph = nullptr;
  CHECK(cudaGraphCreate(&host_graph, 0));
  bool tail = o.tail;
  void* spin_args[] = {&ns};
  void* launcher_args[] = {&ns, &device_exec, &tail, &failures};
  const cudaGraphNode_t b = add_kernel(host_graph, nullptr, reinterpret_cast<void*>(before), spin_args);
  const cudaGraphNode_t l = add_kernel(host_graph, &b, reinterpret_cast<void*>(launcher), launcher_args);
  add_kernel(host_graph, &l, reinterpret_cast<void*>(after), spin_args);
  cudaGraphExec_t host_exec = nullptr;
  CHECK(cudaGraphInstantiate(&host_exec, host_graph, 0));
  CHECK(cudaGraphUpload(host_exec, stream));
  CHECK(cudaStreamSynchronize(stream));

  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < o.replays; ++r) CHECK(cudaGraphLaunch(host_exec, stream));
  CHECK(cudaDeviceSynchronize());  // the device-launched graphs too
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / o.replays;

  unsigned int host_runs = 0;
  int host_failures = 0;
  CHECK(cudaMemcpy(&host_runs, runs, sizeof(host_runs), cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(&host_failures, failures, sizeof(host_failures), cudaMemcpyDeviceToHost));
  if (host_runs != static_cast<unsigned int>(o.replays) || host_failures != 0) {
    std::fprintf(stderr,
                 "tpgraph-example-device-launch: the device graph ran %u times for %d replays (%d launches failed)\n",
                 host_runs, o.replays, host_failures);
    return 1;
  }
  std::printf(
      "tpgraph-example-device-launch: %d replays of before -> launcher -> after, the launcher launching "
      "d_first -> d_second from the device (%s): %.1f us per replay\n",
      o.replays, o.tail ? "tail launch" : "fire and forget", us);

  CHECK(cudaGraphExecDestroy(host_exec));
  CHECK(cudaGraphExecDestroy(device_exec));
  CHECK(cudaGraphDestroy(host_graph));
  CHECK(cudaGraphDestroy(device_graph));
  CHECK(cudaStreamDestroy(stream));
  CHECK(cudaFree(failures));
  CHECK(cudaFree(runs));
  return 0;
}
