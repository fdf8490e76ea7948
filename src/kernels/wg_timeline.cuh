// A probe of where the wgmma kernel's time goes, block by block (never a build to use: it adds a
// global atomic per block and static device memory). Built with -DTPGRAPH_WG_TIMELINE=R (R >= 1),
// the R-th launch of each grouped GEMM the process runs (launches told apart by their weights, at
// most kGemms of them) records, per block, from thread 0: its SM, routed rows, row blocks and
// chunks (K / 64) per row block, the global time at its start, once its prerequisite grids are
// complete and at its end, the SM's clock at those points and where its chunk loop ends, and
// thread 0's cycles in the loop's waits (WgTimeline::Waits). At exit the records are written as
// text to $TPGRAPH_WG_TIMELINE_OUT (default wg-timeline.txt); scripts/wg_timeline.py reads them.
// Without the define every call on WgTimeline compiles to nothing.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "kernels/ptx.cuh"

#ifndef TPGRAPH_WG_TIMELINE
#define TPGRAPH_WG_TIMELINE 0
#endif

namespace tpgraph::kernels::gemm {

// Thread 0's cycles in the loop's waits: the ring's full barrier, its weights (v2: the fragment's
// shared loads from the stage; v1: the gathers), and its turn to refill (the ring's empty barrier and
// the copies). Without the probe
// `timed` only runs its function and the counters go unused.
struct WgWaits {
  std::uint32_t full = 0, pipe = 0, empty = 0;
  template <typename F>
  __device__ __forceinline__ void timed(std::uint32_t& into, F&& f) {
    if (TPGRAPH_WG_TIMELINE == 0 || threadIdx.x != 0) {
      f();
      return;
    }
    const auto t0 = static_cast<std::uint32_t>(clock());
    f();
    into += static_cast<std::uint32_t>(clock()) - t0;
  }
};

#if TPGRAPH_WG_TIMELINE > 0
namespace timeline_probe {

constexpr int kGemms = 4;
constexpr int kMaxBlocks = 8192;

struct Record {
  std::uint64_t start_ns, ready_ns, end_ns;               // %globaltimer
  std::uint64_t start_clk, ready_clk, loop_clk, end_clk;  // the SM's clock64
  std::uint32_t sm, rows, items, chunks, grid;
  std::uint32_t wait_full, wait_pipe, wait_empty;  // thread 0's cycles in the loop's waits
};

__device__ Record g_records[kGemms][kMaxBlocks];
__device__ Record g_pending[kGemms][kMaxBlocks];  // the start, until the block knows its launch
__device__ unsigned long long g_keys[kGemms];     // the weights each slot's launches use
__device__ unsigned int g_done[kGemms];           // blocks of the current launch that have ended
__device__ unsigned int g_launches[kGemms];       // launches completed

}  // namespace timeline_probe

// Static calls: each finds its launch's slot from the weights again (at most kGemms atomic
// compare-and-swaps), so that only the three wait counters stay live across the kernel's loop.
struct WgTimeline {
  using Waits = WgWaits;

  __device__ __forceinline__ static int slot_of(const void* weights) {
    const auto key = static_cast<unsigned long long>(reinterpret_cast<std::uintptr_t>(weights));
    for (int i = 0; i < timeline_probe::kGemms; ++i) {
      const unsigned long long was = atomicCAS(&timeline_probe::g_keys[i], 0ull, key);
      if (was == 0ull || was == key) return blockIdx.x < timeline_probe::kMaxBlocks ? i : -1;
    }
    return -1;
  }
  // The block's record where this launch is the one recorded; read after the prerequisite grids
  // (the previous launch of the same GEMM has ended, so the count holds until this one ends).
  __device__ __forceinline__ static timeline_probe::Record* record_of(int slot) {
    if (slot < 0 || *static_cast<volatile unsigned int*>(&timeline_probe::g_launches[slot]) + 1 != TPGRAPH_WG_TIMELINE)
      return nullptr;
    return &timeline_probe::g_records[slot][blockIdx.x];
  }

  __device__ __forceinline__ static void start(const void* weights) {
    const int slot = threadIdx.x == 0 ? slot_of(weights) : -1;
    if (slot < 0) return;
    timeline_probe::Record& pending = timeline_probe::g_pending[slot][blockIdx.x];
    pending.start_ns = detail::global_timer_ns();
    pending.start_clk = clock64();
  }
  __device__ __forceinline__ static void ready(const void* weights, int rows, int items, int chunks) {
    if (threadIdx.x != 0) return;
    const std::uint64_t ready_ns = detail::global_timer_ns();
    const std::uint64_t ready_clk = clock64();
    const int slot = slot_of(weights);
    timeline_probe::Record* record = record_of(slot);
    if (record == nullptr) return;
    record->start_ns = timeline_probe::g_pending[slot][blockIdx.x].start_ns;
    record->start_clk = timeline_probe::g_pending[slot][blockIdx.x].start_clk;
    record->ready_ns = ready_ns;
    record->ready_clk = ready_clk;
    record->sm = detail::sm_id();
    record->rows = static_cast<std::uint32_t>(rows);
    record->items = static_cast<std::uint32_t>(items);
    record->chunks = static_cast<std::uint32_t>(chunks);
    record->grid = gridDim.x;
  }
  __device__ __forceinline__ static void loop_end(const void* weights, const Waits& waits) {
    if (threadIdx.x != 0) return;
    const std::uint64_t clk = clock64();
    timeline_probe::Record* record = record_of(slot_of(weights));
    if (record == nullptr) return;
    record->loop_clk = clk;
    record->wait_full = waits.full;
    record->wait_pipe = waits.pipe;
    record->wait_empty = waits.empty;
  }
  // After thread 0's last store: the record's end, then the launch's count (its last block closes it).
  __device__ __forceinline__ static void finish(const void* weights) {
    if (threadIdx.x != 0) return;
    const std::uint64_t clk = clock64();
    const std::uint64_t ns = detail::global_timer_ns();
    const int slot = slot_of(weights);
    if (slot < 0) return;
    timeline_probe::Record* record = record_of(slot);
    if (record != nullptr) {
      record->end_clk = clk;
      record->end_ns = ns;
    }
    __threadfence();
    if (atomicAdd(&timeline_probe::g_done[slot], 1u) + 1 == gridDim.x) {
      timeline_probe::g_done[slot] = 0;
      __threadfence();
      atomicAdd(&timeline_probe::g_launches[slot], 1u);
    }
  }
};

// At exit: the recorded blocks as text, one line each.
inline void write_timeline() {
  static timeline_probe::Record records[timeline_probe::kGemms][timeline_probe::kMaxBlocks];
  if (cudaMemcpyFromSymbol(records, timeline_probe::g_records, sizeof(records)) != cudaSuccess) return;
  const char* path = std::getenv("TPGRAPH_WG_TIMELINE_OUT");
  std::FILE* out = std::fopen(path != nullptr ? path : "wg-timeline.txt", "w");
  if (out == nullptr) return;
  std::fprintf(out,
               "gemm block sm rows items chunks grid start_ns ready_ns end_ns start_clk ready_clk loop_clk end_clk "
               "wait_full wait_pipe wait_empty\n");
  for (int g = 0; g < timeline_probe::kGemms; ++g) {
    for (int b = 0; b < timeline_probe::kMaxBlocks; ++b) {
      const timeline_probe::Record& r = records[g][b];
      if (r.end_ns == 0) continue;
      std::fprintf(out, "%d %d %u %u %u %u %u %llu %llu %llu %llu %llu %llu %llu %u %u %u\n", g, b, r.sm, r.rows,
                   r.items, r.chunks, r.grid, static_cast<unsigned long long>(r.start_ns),
                   static_cast<unsigned long long>(r.ready_ns), static_cast<unsigned long long>(r.end_ns),
                   static_cast<unsigned long long>(r.start_clk), static_cast<unsigned long long>(r.ready_clk),
                   static_cast<unsigned long long>(r.loop_clk), static_cast<unsigned long long>(r.end_clk), r.wait_full,
                   r.wait_pipe, r.wait_empty);
    }
  }
  std::fclose(out);
}

// Called before every launch of the kernel: the first call asks for write_timeline at exit.
inline void timeline_at_exit() {
  static const bool registered = std::atexit(write_timeline) == 0;
  (void)registered;
}

#else

inline void timeline_at_exit() {}

struct WgTimeline {
  using Waits = WgWaits;
  __device__ __forceinline__ static void start(const void*) {}
  __device__ __forceinline__ static void ready(const void*, int, int, int) {}
  __device__ __forceinline__ static void loop_end(const void*, const Waits&) {}
  __device__ __forceinline__ static void finish(const void*) {}
};

#endif

}  // namespace tpgraph::kernels::gemm
