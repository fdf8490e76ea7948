// The PTX instructions tpgraph's kernels use, one wrapper each, with the architecture each needs.
// Shared-memory operands are 32-bit shared-window addresses (smem_address), so the hot loops add
// immediates to them instead of converting generic pointers again. The wgmma wrappers are
// generated (wgmma_ops.cuh, scripts/gen_wgmma.py) and come with this header.
#pragma once
#include <cstdint>

#include "kernels/wgmma_ops.cuh"

namespace tpgraph::kernels::detail {

// ---- registers (any architecture) ----------------------------------------------------------------

__device__ __forceinline__ std::uint32_t prmt(std::uint32_t a, std::uint32_t b, std::uint32_t selector) {
  std::uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(selector));
  return d;
}

// ---- global memory -------------------------------------------------------------------------------

// A 32-bit load through the read-only (non-coherent) path: the weights never change during a kernel.
__device__ __forceinline__ std::uint32_t load_word(const std::uint8_t* p) {
  std::uint32_t v;
  asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// out[0] = a and out[8] = b where `keep`; volatile, so the stores stay in program order and their
// addresses are not computed ahead (which would hold a register pair per store).
__device__ __forceinline__ void store_if(float* out, float a, float b, bool keep) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %3, 0;\n"
      "@p st.global.f32 [%0], %1;\n@p st.global.f32 [%0+32], %2;\n}\n" ::"l"(out),
      "f"(a), "f"(b), "r"(static_cast<int>(keep))
      : "memory");
}

// ---- shared memory -------------------------------------------------------------------------------

__device__ __forceinline__ std::uint32_t smem_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ uint4 lds128(std::uint32_t a) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(a));
  return v;
}
__device__ __forceinline__ uint2 lds64(std::uint32_t a) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0,%1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(a));
  return v;
}

__device__ __forceinline__ std::uint32_t lds32(std::uint32_t a) {
  std::uint32_t v;
  asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(a));
  return v;
}
__device__ __forceinline__ void sts32(std::uint32_t a, std::uint32_t v) {
  asm volatile("st.shared.u32 [%0], %1;" ::"r"(a), "r"(v) : "memory");
}

// ldmatrix (sm_75+) at a shared-memory address already converted.
__device__ __forceinline__ void ldmatrix_x4_at(std::uint32_t r[4], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x2_at(std::uint32_t r[2], std::uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(address));
}

// ---- cp.async (sm_80+): global -> shared, tracked by commit groups -------------------------------

// 16 bytes to a shared-memory address; `bytes_valid` 0 fills them with zeros.
__device__ __forceinline__ void cp_async16_at(std::uint32_t smem_address, const void* gmem, int bytes_valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_address), "l"(gmem), "r"(bytes_valid)
               : "memory");
}
// 4 bytes; zeros where bytes_valid is 0 (cp.async.ca: the 4-byte size has no .cg form).
__device__ __forceinline__ void cp_async4_at(std::uint32_t smem_address, const void* gmem, int bytes_valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_address), "l"(gmem), "r"(bytes_valid)
               : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int pending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(pending) : "memory");
}

// ---- mbarrier (sm_90: expect_tx and try_wait.parity) ---------------------------------------------

__device__ __forceinline__ void mbar_init(std::uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// Makes initialised barriers visible to the asynchronous proxy (the bulk copies that complete them).
__device__ __forceinline__ void fence_mbarrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_expect_tx(std::uint32_t bar, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Spins until the barrier's phase with parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(std::uint32_t bar, std::uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void mbar_inval(std::uint32_t bar) {
  asm volatile("mbarrier.inval.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

// A named barrier (bar.sync, any architecture): `threads` of the block, a multiple of 32, meet at
// barrier `id` wherever in the code each reaches it (barrier 0 is __syncthreads').
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ---- registers per warpgroup (sm_90a): setmaxnreg ------------------------------------------------

// Lowers (dec) or raises (inc) the registers of every thread of the executing warpgroup to kRegs,
// a multiple of 8 in 24..256; inc waits until the block's pool, refilled by dec, holds them.
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256);
  TPGRAPH_WGMMA_ASM("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  static_assert(kRegs % 8 == 0 && kRegs >= 24 && kRegs <= 256);
  TPGRAPH_WGMMA_ASM("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}

// ---- timers -------------------------------------------------------------------------------------

// The GPU's global timer in nanoseconds (shared by every SM; it ticks coarser than 1 ns).
__device__ __forceinline__ std::uint64_t global_timer_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// The SM this thread runs on.
__device__ __forceinline__ std::uint32_t sm_id() {
  std::uint32_t id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

// ---- programmatic dependent launch (sm_90) -------------------------------------------------------

// A kernel launched with the programmatic-serialization attribute (launch.cuh, kernels.hpp
// ProgrammaticLaunches) may start while the kernel before it in the stream still runs. Its threads
// wait here before they read what a kernel before them wrote or write what one of them reads;
// work that touches only data no kernel of the layer writes (weights, the plan, barriers in shared
// memory) may come first. Without the attribute the wait returns at once. Before sm_90 the
// attribute cannot be set and both are nothing.
__device__ __forceinline__ void wait_for_prerequisite_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// Lets the next kernel in the stream launch once every block of this one has said so (or exited):
// its blocks then take the SMs this kernel's last blocks leave free, and run their prologues while
// those finish. It orders nothing: the next kernel still waits for this one's completion. Said
// after this kernel's own wait, it also tells the next kernel that every kernel before this one is
// complete (the GEMMs do so, kernels.hpp GemmWait).
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---- proxies (sm_90) -------------------------------------------------------------------------------

// Orders this thread's ordinary shared-memory writes before later reads by the asynchronous proxy
// (wgmma's shared operands, bulk copies out of shared memory). Data the TMA wrote needs none.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// ---- bulk copies (sm_90, the Tensor Memory Accelerator), completing on an mbarrier ---------------

// `bytes` (a multiple of 16) from global memory to shared memory.
__device__ __forceinline__ void bulk_copy(std::uint32_t dst, const void* src, int bytes, std::uint32_t bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
// An L2 cache policy for a copy's cache hint (sm_80+): the lines it brings in are evicted first
// (data read once).
__device__ __forceinline__ std::uint64_t l2_evict_first_policy() {
  std::uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
// bulk_copy with an L2 cache policy.
__device__ __forceinline__ void bulk_copy_hinted(std::uint32_t dst, const void* src, int bytes, std::uint32_t bar,
                                                 std::uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(policy)
      : "memory");
}
// The box of a 2-D tensor map at (x, y), as the map's swizzle lays it out. `map` is the generic
// address of a CUtensorMap in parameter, constant or global memory.
__device__ __forceinline__ void tensor_copy_2d(std::uint32_t dst, std::uint64_t map, int x, int y, std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          dst),
      "l"(map), "r"(x), "r"(y), "r"(bar)
      : "memory");
}

__device__ __forceinline__ void tensor_copy_3d(std::uint32_t dst, std::uint64_t map, int x, int y, int z,
                                               std::uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::
          "r"(dst),
      "l"(map), "r"(x), "r"(y), "r"(z), "r"(bar)
      : "memory");
}

// ---- tensor cores --------------------------------------------------------------------------------

// mma.sync m16n8k16 (sm_80+), f32 += f16 x f16, accumulating in place.
__device__ __forceinline__ void mma_16816(float c[4], const std::uint32_t a[4], const std::uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// wgmma (sm_90a only): wgmma_fence, wgmma_commit, wgmma_wait<N> and Wgmma<N>::mma in wgmma_ops.cuh.
// Their B operand: the descriptor of a stage of N rows of 128 bytes (64 f16 of k), 16-byte pieces
// of row r swizzled by r % 8 (the 128-byte swizzle, as tensor copies write it), the stage
// 1024-byte aligned. wgmma reads it K-major: 8-row groups 1024 bytes apart (stride byte offset),
// the leading byte offset unused; k16 step kk starts 32 * kk bytes on.

// The descriptor's low word: the address >> 4 (a shared-window address is below 2^18, so it fits
// the 14-bit field) with the leading byte offset; k16 step kk adds 2 * kk to it.
__device__ __forceinline__ std::uint32_t smem_desc_sw128_lo_of(std::uint32_t address) {
  constexpr std::uint32_t kLeading = 1;
  return (address >> 4) | (kLeading << 16);
}
// The descriptor from its low word: the high word is the stride byte offset and the swizzle mode.
__device__ __forceinline__ std::uint64_t smem_desc_sw128_lo(std::uint32_t lo) {
  constexpr std::uint64_t kStride = 1024 >> 4;
  constexpr std::uint64_t kSwizzle128 = 1;
  return static_cast<std::uint64_t>(lo) | (kStride << 32) | (kSwizzle128 << 62);
}
__device__ __forceinline__ std::uint64_t smem_desc_sw128(std::uint32_t address) {
  return smem_desc_sw128_lo(smem_desc_sw128_lo_of(address));
}

// A K-major operand with no swizzle (the interleaved layout): 8 x 8 core matrices of 8 rows x 16
// bytes, each 128 contiguous bytes (row r of the core matrix at 16 * r); the core matrices of one
// 8-row group follow each other along k (the leading byte offset, 128) and the 8-row groups are
// 1024 bytes apart (the stride byte offset). k16 step kk starts 256 * kk bytes on.
__device__ __forceinline__ std::uint32_t smem_desc_interleave_lo_of(std::uint32_t address) {
  constexpr std::uint32_t kLeading = 128 >> 4;
  return (address >> 4) | (kLeading << 16);
}
__device__ __forceinline__ std::uint64_t smem_desc_interleave_lo(std::uint32_t lo) {
  constexpr std::uint64_t kStride = 1024 >> 4;
  return static_cast<std::uint64_t>(lo) | (kStride << 32);  // layout type 0: no swizzle
}

}  // namespace tpgraph::kernels::detail
