// An ordinary CUDA program for `tpgraph trace` to watch: it knows nothing of tpgraph. It captures
// one graph in which a second stream is forked and joined, with kernels of known duration, a
// memcpy and a memset, and replays it N times:
//
//   s0: memset a -> fork ------> spin_a (T us) -> spin_b (T us) ----------> join -> spin_d (T us)
//   s1:            memcpy a->b (bytes) -> spin_c (2T us) ------------------> join
//
// Edges of the captured graph: memset->spin_a, memset->memcpy, spin_a->spin_b, memcpy->spin_c,
// spin_b->spin_d, spin_c->spin_d. It prints the mean wall time per replay. --slower K=P makes
// kernel spin_K (a, b, c or d) P percent longer than asked (tpgraph diff's detection test: one node
// slower by a known amount, the rest unchanged). With --fork it forks
// once the replays are done, and the child exits at once through exit() (a fork after CUDA
// initialisation, as some servers do).
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace {

#define CHECK(call)                                                                                       \
  do {                                                                                                    \
    const cudaError_t status_ = (call);                                                                   \
    if (status_ != cudaSuccess) {                                                                         \
      std::fprintf(stderr, "tpgraph-example-graph: %s failed: %s\n", #call, cudaGetErrorString(status_)); \
      std::exit(1);                                                                                       \
    }                                                                                                     \
  } while (0)

// The global timer runs in ns on every GPU since Volta: a kernel that spins on it lasts as long
// as asked whatever the clock speed.
__device__ void spin_for(long long ns, float* sink) {
  unsigned long long start = 0;
  unsigned long long now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (static_cast<long long>(now - start) < ns);
  if (threadIdx.x == 0 && blockIdx.x == 0) sink[0] += 1.0f;
}

__global__ void spin_a(long long ns, float* sink) { spin_for(ns, sink); }
__global__ void spin_b(long long ns, float* sink) { spin_for(ns, sink); }
__global__ void spin_c(long long ns, float* sink) { spin_for(ns, sink); }
__global__ void spin_d(long long ns, float* sink) { spin_for(ns, sink); }

struct Options {
  int replays = 100;
  std::size_t bytes = std::size_t{1} << 24;
  long long kernel_us = 20;
  bool fork_child = false;
  char slower_kernel = 0;  // 'a'..'d': that kernel runs slower_percent longer
  double slower_percent = 0;
};

[[noreturn]] void usage(const char* problem) {
  std::fprintf(
      stderr,
      "tpgraph-example-graph: %s\n"
      "usage: tpgraph-example-graph [--replays N (>= 1)] [--bytes B (>= 4)] [--kernel-us T (>= 0)] [--slower K=P (K a-d, P percent >= 0)] [--fork]\n",
      problem);
  std::exit(2);
}

long long parse_number(const char* flag, const char* text, long long min) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v < min)
    usage((std::string(flag) + " takes an integer >= " + std::to_string(min)).c_str());
  return v;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--fork") {
      o.fork_child = true;
      continue;
    }
    if (i + 1 >= argc) usage(("no value after " + flag).c_str());
    const char* value = argv[++i];
    if (flag == "--replays") {
      o.replays = static_cast<int>(parse_number("--replays", value, 1));
    } else if (flag == "--bytes") {
      o.bytes = static_cast<std::size_t>(parse_number("--bytes", value, 4));
    } else if (flag == "--kernel-us") {
      o.kernel_us = parse_number("--kernel-us", value, 0);
    } else if (flag == "--slower") {
      char* end = nullptr;
      const bool named = value[0] >= 'a' && value[0] <= 'd' && value[1] == '=';
      const double percent = named ? std::strtod(value + 2, &end) : -1;
      if (!named || end == value + 2 || *end != '\0' || !(percent >= 0))
        usage("--slower takes K=P: a kernel a, b, c or d and a percentage >= 0, as b=3");
      o.slower_kernel = value[0];
      o.slower_percent = percent;
    } else {
      usage(("unknown flag " + flag).c_str());
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  const long long ns = o.kernel_us * 1000;
  const auto ns_of = [&](char kernel, long long base) {
    return kernel == o.slower_kernel ? static_cast<long long>(static_cast<double>(base) * (1 + o.slower_percent / 100))
                                     : base;
  };

  char* a = nullptr;
  char* b = nullptr;
  float* sink = nullptr;
  CHECK(cudaMalloc(&a, o.bytes));
  CHECK(cudaMalloc(&b, o.bytes));
  CHECK(cudaMalloc(&sink, sizeof(float)));
  cudaStream_t s0 = nullptr;
  cudaStream_t s1 = nullptr;
  CHECK(cudaStreamCreateWithFlags(&s0, cudaStreamNonBlocking));
  CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
  cudaEvent_t fork_event = nullptr;
  cudaEvent_t join_event = nullptr;
  CHECK(cudaEventCreateWithFlags(&fork_event, cudaEventDisableTiming));
  CHECK(cudaEventCreateWithFlags(&join_event, cudaEventDisableTiming));

  cudaGraph_t graph = nullptr;
  CHECK(cudaStreamBeginCapture(s0, cudaStreamCaptureModeThreadLocal));
  CHECK(cudaMemsetAsync(a, 1, o.bytes, s0));
  CHECK(cudaEventRecord(fork_event, s0));
  CHECK(cudaStreamWaitEvent(s1, fork_event, 0));
  spin_a<<<1, 32, 0, s0>>>(ns_of('a', ns), sink);
  spin_b<<<1, 32, 0, s0>>>(ns_of('b', ns), sink);
  CHECK(cudaMemcpyAsync(b, a, o.bytes, cudaMemcpyDeviceToDevice, s1));
  spin_c<<<1, 32, 0, s1>>>(ns_of('c', 2 * ns), sink);
  CHECK(cudaEventRecord(join_event, s1));
  CHECK(cudaStreamWaitEvent(s0, join_event, 0));
  spin_d<<<1, 32, 0, s0>>>(ns_of('d', ns), sink);
  CHECK(cudaGetLastError());
  CHECK(cudaStreamEndCapture(s0, &graph));
  cudaGraphExec_t exec = nullptr;
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphUpload(exec, s0));
  CHECK(cudaStreamSynchronize(s0));

  const auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < o.replays; ++r) CHECK(cudaGraphLaunch(exec, s0));
  CHECK(cudaStreamSynchronize(s0));
  const double us =
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / o.replays;
  std::printf(
      "tpgraph-example-graph: %d replays of 6 nodes (4 kernels, 1 memcpy of %zu bytes, 1 memset), "
      "%.1f us per replay\n",
      o.replays, o.bytes, us);
  std::fflush(stdout);

  if (o.fork_child) {
    const pid_t child = fork();
    if (child < 0) {
      std::perror("tpgraph-example-graph: fork");
      return 1;
    }
    if (child == 0) std::exit(0);  // runs the atexit handlers the parent installed
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "tpgraph-example-graph: the forked child did not exit cleanly\n");
      return 1;
    }
    CHECK(cudaGraphLaunch(exec, s0));  // the parent goes on using CUDA after the fork
    CHECK(cudaStreamSynchronize(s0));
  }

  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaEventDestroy(join_event));
  CHECK(cudaEventDestroy(fork_event));
  CHECK(cudaStreamDestroy(s1));
  CHECK(cudaStreamDestroy(s0));
  CHECK(cudaFree(sink));
  CHECK(cudaFree(b));
  CHECK(cudaFree(a));
  return 0;
}
