// Warpgroup MMAs (wgmma, sm_90a) for the TF32 products of the fused AttentionVJP kernels
// (wg_dkv.cuh; included by kernels.cu outside the emulator, which has no model of them).
//
// A warpgroup (4 warps, 128 threads) multiplies a 64-row A tile by a B tile of N columns, k = 8,
// asynchronously: issue, commit the group, then wait for it. B always comes from shared memory
// through a descriptor; A from shared memory too, or from registers. TF32 operands must be
// K-major in shared memory (no transposed forms), so every tile a product reads is stored in the
// core-matrix layout below with its reduction index as the column.
//
// Core-matrix layout (no swizzle) of an R x C tile (R rows of the M or N side, C columns of the
// K side, both multiples of 8): a core matrix is 8 rows x 4 columns (8 x 16 bytes, contiguous);
// the core matrices of a band of 8 rows follow each other along K, and the bands follow each
// other. Element (r, c) is at float index cm_index(r, c, C). A k-step of 8 columns covers two
// core matrices 128 bytes apart (the descriptor's K-direction offset); the next 8 rows are 32 C
// bytes further (its M/N-direction offset).
//
// Register fragments (per warp w of the warpgroup, g = lane / 4, t = lane % 4):
//   A (64 x 8):  a[0] = A(16w + g, t), a[1] = A(16w + g + 8, t), a[2] = A(16w + g, t + 4),
//                a[3] = A(16w + g + 8, t + 4);
//   D (64 x N):  d[j][e] = D(16w + g + 8 (e >> 1), 8 j + 2 t + (e & 1)), the mma.sync m16n8
//                accumulator layout repeated over the N / 8 column blocks.
// So an accumulator tile serves as the A operand of a next product with the k order permuted, as
// in the warp-row kernels: k-step j takes d[j][0], d[j][2], d[j][1], d[j][3], k = t standing for
// column 8 j + 2 t and k = t + 4 for 8 j + 2 t + 1; the B tile stores its K index in that order
// (perm_k).
#pragma once

#ifndef ORTMLX_WG_LBO_IS_K
#define ORTMLX_WG_LBO_IS_K 1  // which descriptor field carries the K-direction offset
#endif

namespace {

// The shared-memory address (state space offset) of a pointer into shared memory.
__device__ __forceinline__ unsigned smem_address(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ int cm_index(int r, int c, int cols) {
  return (r >> 3) * (8 * cols) + (c >> 2) * 32 + (r & 7) * 4 + (c & 3);
}

// Where column c of a k-step of 8 goes in a B tile read against an accumulator-born A operand:
// column 2 i at i, 2 i + 1 at 4 + i.
__device__ __forceinline__ int perm_k(int c) {
  return (c & ~7) | ((c & 1) << 2) | ((c & 7) >> 1);
}

// The matrix descriptor of a core-matrix tile at `p` (16-byte aligned shared memory) with C
// columns: start address, the K-direction offset (128 bytes: the next core matrix along K) in
// the leading-dimension field and the M/N-direction offset (the next band of 8 rows) in the
// stride field, no swizzle. Fields hold bytes / 16.
// wg_desc_strided: the same with other offsets (bytes, multiples of 16), for tiles whose core
// matrices are spaced apart.
__device__ __forceinline__ unsigned long long wg_desc_strided(const float* p, unsigned k_off,
                                                              unsigned mn_off) {
  const unsigned addr = smem_address(p);
  const unsigned long long lbo = ORTMLX_WG_LBO_IS_K ? k_off : mn_off;
  const unsigned long long sbo = ORTMLX_WG_LBO_IS_K ? mn_off : k_off;
  return static_cast<unsigned long long>((addr & 0x3ffffu) >> 4) | ((lbo >> 4) << 16) |
         ((sbo >> 4) << 32);
}
__device__ __forceinline__ unsigned long long wg_desc(const float* p, int cols) {
  return wg_desc_strided(p, 128u, 32u * static_cast<unsigned>(cols));
}

// The instructions themselves (the emulator, tools/avjp_cuda_emu/emu.h, brings its own model of
// each: products of the same fragments and descriptors, computed when issued).
#if !defined(ORTMLX_AVJP_EMU)
// *a += (x, y, z, w) as one 16-byte reduction (sm_90; a 16-byte aligned).
__device__ __forceinline__ void red_add4(float* a, float x, float y, float z, float w) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(a), "f"(x), "f"(y), "f"(z),
               "f"(w)
               : "memory");
}

__device__ __forceinline__ void wg_fence() {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wg_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void wg_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Makes this thread's ordinary shared-memory writes visible to the async proxy (wgmma operands):
// after the writes, before the barrier that precedes the products reading them.
__device__ __forceinline__ void fence_smem_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Bulk copies (the TMA unit, sm_90) completing on an mbarrier: the dK/dV pass's step images.
// One thread initialises a barrier for one arrival, then per phase arrives on it announcing the
// bytes to come (mbar_expect) and issues the copies, each of which completes its bytes on it; a
// phase is over when both have happened, and every waiter passes mbar_wait(bar, parity of the
// phase). Addresses and sizes are multiples of 16 bytes.
__device__ __forceinline__ void mbar_init(unsigned long long* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void mbar_expect(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_wait(unsigned long long* bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smem_address(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
__device__ __forceinline__ void bulk_copy(float* dst, const float* src, unsigned bytes,
                                          unsigned long long* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(smem_address(dst)),
      "l"(src), "r"(bytes), "r"(smem_address(bar))
      : "memory");
}
// Keeps the compiler from moving reads of accumulators above the wait that completes them.
template <int NB>
__device__ __forceinline__ void wg_pin(float (&d)[NB][4]) {
#pragma unroll
  for (int j = 0; j < NB; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) asm volatile("" : "+f"(d[j][e])::"memory");
}

// d (64 x N) += A B, k = 8: wg_ss with A by descriptor, wg_rs with A from registers (fragment
// layout above); B by descriptor. One overload per N (the accumulator's shape picks it), made by
// WG_PRODUCTS from N, the accumulator operands (ACC: N / 2 of them, %0 on) and the operand
// numbers after them (ss: A, B, scale; rs: A's four registers, B, scale). The scale operand is
// `accumulate`: 1, D = A B + D; 0, D = A B (a chain's first product: no zeroing of d, whose
// register writes between wg_fence and the product would make ptxas inject a wait).
#define WG_ACC(j) "+f"(d[j][0]), "+f"(d[j][1]), "+f"(d[j][2]), "+f"(d[j][3])
#define WG_ACC_32 WG_ACC(0), WG_ACC(1), WG_ACC(2), WG_ACC(3)
#define WG_ACC_64 WG_ACC_32, WG_ACC(4), WG_ACC(5), WG_ACC(6), WG_ACC(7)
#define WG_ACC_128                                                                             \
  WG_ACC_64, WG_ACC(8), WG_ACC(9), WG_ACC(10), WG_ACC(11), WG_ACC(12), WG_ACC(13), WG_ACC(14), \
      WG_ACC(15)
#define WG_REGS_16 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
#define WG_REGS_32 \
  WG_REGS_16 ", %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define WG_REGS_64                                                                \
  WG_REGS_32                                                                      \
  ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, " \
  "%47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, "   \
  "%62, %63"
#define WG_MMA(N, REGS, SCALE, OPERANDS)                                          \
  "{\n.reg .pred p;\nsetp.ne.b32 p, " SCALE                                       \
  ", 0;\n"                                                                        \
  "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 {" REGS "}, " OPERANDS \
  ", p, 1, 1;\n}\n"
#define WG_PRODUCTS(N, REGS, ACC, SS_A, SS_B, SS_SCALE, RS_A, RS_B, RS_SCALE)           \
  __device__ __forceinline__ void wg_ss(float(&d)[N / 8][4], unsigned long long da,     \
                                        unsigned long long db, int accumulate = 1) {    \
    asm volatile(WG_MMA(N, REGS, SS_SCALE, SS_A ", " SS_B)                              \
                 : ACC                                                                  \
                 : "l"(da), "l"(db), "r"(accumulate)                                    \
                 : "memory");                                                           \
  }                                                                                     \
  __device__ __forceinline__ void wg_rs(float(&d)[N / 8][4], const unsigned(&a)[4],     \
                                        unsigned long long db, int accumulate = 1) {    \
    asm volatile(WG_MMA(N, REGS, RS_SCALE, RS_A ", " RS_B)                              \
                 : ACC                                                                  \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate) \
                 : "memory");                                                           \
  }
WG_PRODUCTS(32, WG_REGS_16, WG_ACC_32, "%16", "%17", "%18", "{%16, %17, %18, %19}", "%20", "%21")
WG_PRODUCTS(64, WG_REGS_32, WG_ACC_64, "%32", "%33", "%34", "{%32, %33, %34, %35}", "%36", "%37")
WG_PRODUCTS(128, WG_REGS_64, WG_ACC_128, "%64", "%65", "%66", "{%64, %65, %66, %67}", "%68", "%69")
#undef WG_PRODUCTS
#undef WG_MMA
#undef WG_REGS_64
#undef WG_REGS_32
#undef WG_REGS_16
#undef WG_ACC_128
#undef WG_ACC_64
#undef WG_ACC_32
#undef WG_ACC
#endif  // !ORTMLX_AVJP_EMU

}  // namespace
