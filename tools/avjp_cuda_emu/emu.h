// Host emulation of the few CUDA features kernels.cu uses, so its kernels run on a CPU: every
// CUDA thread of a block is a std::thread; __syncthreads is a barrier; the warp shuffles (which
// kernels.cu calls uniformly from all threads of a block) exchange through a block-wide array.
// The tensor-core instructions too: cvt.rna.tf32.f32 bit-exactly (nearest, ties away from zero,
// 10 mantissa bits) and mma.sync m16n8k8 TF32 with the PTX ISA's fragment layout, the lanes of a
// warp exchanging their fragments through arrays behind a per-warp barrier. The products of the
// TF32 operands are exact (11 x 11 significand bits) in both accumulation models:
//
// - exact (kEmuMmaExact): the 8 products and the accumulator are summed exactly and rounded once
//   to nearest fp32. Kinder than the hardware.
// - truncating (kEmuMmaTrunc, the default): the measured behaviour of NVIDIA tensor cores. Fasi,
//   Higham, Mikaitis and Pranesh, "Numerical behavior of NVIDIA tensor cores" (PeerJ Computer
//   Science 7:e330, 2021) found on V100, T4 and A100 that an mma is a chain of fused multi-term
//   additions: each sums a block of exact products together with the running accumulator, aligns
//   every addend's significand to the largest exponent of that set and drops (truncates) the bits
//   below fp32's 24-bit significand, with no guard bits, and normalises the sum with round toward
//   zero (their A100 TF32 probes use blocks of 4 products; k = 8 is then two chained blocks).
//   Later probes of Hopper (H100, sm_90; fp16 inputs) report the same truncation with one more
//   bit kept (25-bit aligned significands); Hopper's TF32 block size is not published. The
//   model: blocks of `terms` products (default 4), addends truncated
//   toward zero to multiples of 2^(e - 23 - guard) where 2^e is the leading bit of the largest
//   addend (default guard = 1, the Hopper figure; 0 is the A100's), the exact sum of those
//   rounded toward zero to fp32. Non-finite addends sum as IEEE does. Subnormal results are not
//   flushed (the kernels' data never reach them). The bias matters: every instruction rounds
//   the accumulator toward zero, so a long chain of mma instructions into one accumulator drifts
//   by about 2^-24 of its magnitude per instruction, where round to nearest would random-walk.
//   With the kernels' per-k-step adds their errors barely depend on guard (0..3) and terms
//   (4, 8): check.py --mma trunc:guard:terms.
//
// emu_mma_set_model picks the model (harness.cpp exports it; check.py --mma); the environment
// variable AVJP_EMU_MMA=exact|trunc[:guard[:terms]] sets the initial one.
// Hopper's warpgroup MMAs (wgmma) the same way, per warpgroup of 128 threads (below).
// Dynamic shared memory is one global buffer (blocks run one after another). Slow, exact enough
// to check the kernels' logic (indices, masks, tiles, NaN handling) and their rounding against
// float64 without a GPU. Force-included before kernels.cu (g++ -include emu.h -x c++).
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

struct EmuDim3 {
  int x = 0, y = 0, z = 0;
};
inline thread_local EmuDim3 threadIdx, blockIdx;
inline EmuDim3 blockDim, gridDim;
inline std::barrier<>* emu_barrier = nullptr;
inline std::barrier<>* emu_warp_barrier[32] = {};  // one per warp of the block
inline float emu_exchange_f[1024];
inline int emu_exchange_i[1024];
alignas(16) inline float avjp_smem[64 * 1024];

#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __shared__
#define ORTMLX_AVJP_EMU 1

struct float2 {
  float x, y;
};
struct float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) {
  return {x, y, z, w};
}
struct uint4 {
  unsigned x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return {x, y, z, w};
}

inline void __syncthreads() {
  emu_barrier->arrive_and_wait();
}
inline float __shfl_xor_sync(unsigned, float v, int off) {
  emu_exchange_f[threadIdx.x] = v;
  __syncthreads();
  const float r = emu_exchange_f[threadIdx.x ^ off];
  __syncthreads();
  return r;
}
inline int __shfl_xor_sync(unsigned, int v, int off) {
  emu_exchange_i[threadIdx.x] = v;
  __syncthreads();
  const int r = emu_exchange_i[threadIdx.x ^ off];
  __syncthreads();
  return r;
}
// Round-to-nearest products, sums and quotients that nvcc never contracts into an FMA (the host
// compiler here does not contract across these calls either).
inline float __fmul_rn(float a, float b) {
  return a * b;
}
inline float __fadd_rn(float a, float b) {
  return a + b;
}
inline float __fdiv_rn(float a, float b) {
  return a / b;
}
inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, sizeof f);
  return f;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline unsigned emu_bits(float f) {
  unsigned u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// cvt.rna.tf32.f32: round the magnitude at bit 13 half away from zero (a carry may reach the
// exponent: the largest floats round to Inf); NaN stays NaN, Inf stays Inf.
inline unsigned cvt_tf32(float x) {
  const unsigned u = emu_bits(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return (u & 0x007fffffu) ? 0x7fffffffu : u;
  return (u + 0x1000u) & 0xffffe000u;
}

// The accumulation model of mma_tf32 (see the top of this file).
enum EmuMmaKind { kEmuMmaExact = 0, kEmuMmaTrunc = 1 };
struct EmuMmaModel {
  int kind = kEmuMmaTrunc;
  int guard = 1;  // bits kept below the 24-bit significand of the largest addend
  int terms = 4;  // products per fused addition (a divisor of 8)
};
inline EmuMmaModel emu_mma_model_from_env() {
  EmuMmaModel m;
  const char* env = std::getenv("AVJP_EMU_MMA");
  if (env == nullptr) return m;
  const std::string s(env);
  if (s.rfind("exact", 0) == 0) {
    m.kind = kEmuMmaExact;
  } else if (s.rfind("trunc", 0) == 0) {
    int guard = m.guard, terms = m.terms;
    if (std::sscanf(s.c_str(), "trunc:%d:%d", &guard, &terms) >= 1) m.guard = guard;
    if (terms >= 1 && 8 % terms == 0) m.terms = terms;
  }
  return m;
}
inline EmuMmaModel emu_mma_model = emu_mma_model_from_env();
inline void emu_mma_set_model(int kind, int guard, int terms) {
  emu_mma_model = {kind, guard, terms};
}

// One fused addition of the truncating model: the n exact products p and the accumulator c.
inline float emu_fused_sum_trunc(const double* p, int n, float c, int guard) {
  double addend[9];
  int count = 0;
  for (int i = 0; i < n; ++i) addend[count++] = p[i];
  addend[count++] = static_cast<double>(c);
  double plain = 0.0;
  int emax = INT_MIN;
  for (int i = 0; i < count; ++i) {
    plain += addend[i];
    if (addend[i] != 0.0 && std::isfinite(addend[i])) emax = std::max(emax, std::ilogb(addend[i]));
  }
  if (!std::isfinite(plain) || emax == INT_MIN) return static_cast<float>(plain);
  // Alignment: every addend truncated toward zero to a multiple of `unit`; the quotients are
  // integers below 2^(25 + guard), so the sum below is exact in double.
  const double unit = std::ldexp(1.0, emax - 23 - guard);
  double sum = 0.0;
  for (int i = 0; i < count; ++i) sum += std::trunc(addend[i] / unit) * unit;
  // Normalisation with round toward zero.
  float r = static_cast<float>(sum);
  if (std::isinf(r)) return std::copysign(FLT_MAX, static_cast<float>(sum));
  if (std::fabs(static_cast<double>(r)) > std::fabs(sum)) r = std::nextafter(r, 0.0f);
  return r;
}

// One accumulator element += the exact products of one k-step of 8 (prod), as the model says.
inline void emu_mma_accumulate(float& d, const double (&prod)[8]) {
  const EmuMmaModel model = emu_mma_model;
  if (model.kind == kEmuMmaExact) {
    double sum = 0.0;
    for (int k = 0; k < 8; ++k) sum += prod[k];
    d = static_cast<float>(sum + static_cast<double>(d));
  } else {
    for (int k0 = 0; k0 < 8; k0 += model.terms)
      d = emu_fused_sum_trunc(prod + k0, model.terms, d, model.guard);
  }
}
// A TF32 operand is the float of its register with the low 13 bits ignored, as the hardware
// reads it.
inline double emu_tf32(unsigned r) {
  return static_cast<double>(__uint_as_float(r & 0xffffe000u));
}

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 d, a, b, d.
inline unsigned emu_mma_a[1024][4], emu_mma_b[1024][2];
inline void mma_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  const int tid = threadIdx.x, lane = tid % 32, base = tid - lane;
  std::memcpy(emu_mma_a[tid], a, sizeof a);
  std::memcpy(emu_mma_b[tid], b, sizeof b);
  emu_warp_barrier[tid / 32]->arrive_and_wait();
  const int g = lane / 4, t = lane % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
    double prod[8];
    for (int k = 0; k < 8; ++k) {
      const double av =
          emu_tf32(emu_mma_a[base + (row % 8) * 4 + k % 4][(row >= 8) + 2 * (k >= 4)]);
      const double bv = emu_tf32(emu_mma_b[base + col * 4 + k % 4][k >= 4]);
      prod[k] = av * bv;
    }
    emu_mma_accumulate(d[e], prod);
  }
  emu_warp_barrier[tid / 32]->arrive_and_wait();
}

// atomicAdd on a float in global memory (the threads of a block are std::threads).
inline float atomicAdd(float* address, float value) {
  return std::atomic_ref<float>(*address).fetch_add(value);
}

// cp.async as a plain copy (the kernels wait for it before a __syncthreads anyway).
inline void cp_async16(float* dst, const float* src, bool valid) {
  if (valid)
    std::memcpy(dst, src, 16);
  else
    std::memset(dst, 0, 16);
}
inline void cp_async_commit() {}
template <int N>
inline void cp_async_wait() {}

// Warpgroup MMAs (src/ortmlx/ops/attention_vjp/cuda/wgmma.cuh), m64nNk8 TF32: the 128 threads of
// a warpgroup meet at a barrier of their own, each leaves its A fragment there (register form),
// and each computes its own accumulator elements (the layout wgmma.cuh describes) from the
// fragments or from shared memory through the descriptors: no-swizzle core matrices of 8 rows x
// 16 bytes, the K-direction offset in the leading-dimension field and the M/N-direction one in
// the stride field (what tools/wgmma_probe found on an H100: the swapped assignment gives wrong
// products). Accumulation as mma_tf32's model, per k-step of 8. An instruction completes when
// issued, so fence, commit and wait are no-ops here (a kernel reading an accumulator before its
// wait would pass here and fail on a GPU: the GPU tests cover that).
inline std::barrier<>* emu_wg_barrier[8] = {};  // one per warpgroup of the block
inline unsigned emu_wg_a[1024][4];
inline unsigned long long __cvta_generic_to_shared(const void* p) {
  return static_cast<unsigned long long>(static_cast<const char*>(p) -
                                         reinterpret_cast<const char*>(avjp_smem));
}
inline double emu_wg_operand(unsigned long long desc, int r, int k) {
  const unsigned long long start = (desc & 0x3fffu) << 4, lead = ((desc >> 16) & 0x3fffu) << 4,
                           stride = ((desc >> 32) & 0x3fffu) << 4;
  const unsigned long long byte = start + static_cast<unsigned long long>(r / 8) * stride +
                                  static_cast<unsigned long long>(k / 4) * lead + (r % 8) * 16 +
                                  (k % 4) * 4;
  unsigned u;
  std::memcpy(&u, reinterpret_cast<const char*>(avjp_smem) + byte, sizeof u);
  return emu_tf32(u);
}
template <int NB>
inline void emu_wgmma(float (&d)[NB][4], const unsigned* a, unsigned long long da,
                      unsigned long long db, int accumulate) {
  const int tid = threadIdx.x, wg = tid / 128, w = tid % 128 / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  if (a != nullptr) std::memcpy(emu_wg_a[tid], a, 4 * sizeof(unsigned));
  emu_wg_barrier[wg]->arrive_and_wait();
  for (int j = 0; j < NB; ++j)
    for (int e = 0; e < 4; ++e) {
      const int row = 16 * w + g + 8 * (e >> 1), col = 8 * j + 2 * t + (e & 1);
      double prod[8];
      for (int k = 0; k < 8; ++k) {
        const double av = a != nullptr ? emu_tf32(emu_wg_a[128 * wg + row / 16 * 32 + row % 8 * 4 +
                                                           k % 4][(row % 16 >= 8) + 2 * (k >= 4)])
                                       : emu_wg_operand(da, row, k);
        prod[k] = av * emu_wg_operand(db, col, k);
      }
      if (!accumulate) d[j][e] = 0.f;  // scale-d 0: D = A B
      emu_mma_accumulate(d[j][e], prod);
    }
  emu_wg_barrier[wg]->arrive_and_wait();
}
template <int NB>
inline void wg_ss(float (&d)[NB][4], unsigned long long da, unsigned long long db,
                  int accumulate = 1) {
  emu_wgmma(d, nullptr, da, db, accumulate);
}
template <int NB>
inline void wg_rs(float (&d)[NB][4], const unsigned (&a)[4], unsigned long long db,
                  int accumulate = 1) {
  emu_wgmma(d, a, 0, db, accumulate);
}
inline void wg_fence() {}
inline void wg_commit() {}
template <int N>
inline void wg_wait() {}
inline void fence_smem_async() {}
template <int NB>
inline void wg_pin(float (&)[NB][4]) {}
// Bulk copies on mbarriers (wgmma.cuh): a copy is a plain copy when issued; the barrier is one
// 64-bit word, the bytes still to come above the count of completed phases, so that a waiter
// really waits for the copies of its phase (a wrong parity hangs here as on a GPU).
inline void mbar_init(unsigned long long* bar) {
  std::atomic_ref<unsigned long long>(*bar).store(0);
}
inline void mbar_expect(unsigned long long* bar, unsigned bytes) {
  std::atomic_ref<unsigned long long>(*bar).fetch_add(static_cast<unsigned long long>(bytes) << 32);
}
inline void mbar_wait(unsigned long long* bar, unsigned parity) {
  while ((std::atomic_ref<unsigned long long>(*bar).load() & 1u) == parity)
    std::this_thread::yield();
}
inline void bulk_copy(float* dst, const float* src, unsigned bytes, unsigned long long* bar) {
  std::memcpy(dst, src, bytes);
  std::atomic_ref<unsigned long long> word(*bar);
  const unsigned long long left = word.fetch_sub(static_cast<unsigned long long>(bytes) << 32) -
                                  (static_cast<unsigned long long>(bytes) << 32);
  if ((left >> 32) == 0) word.fetch_add(1);
}
// red.global.add.v4.f32 as four atomic adds.
inline void red_add4(float* a, float x, float y, float z, float w) {
  atomicAdd(a, x);
  atomicAdd(a + 1, y);
  atomicAdd(a + 2, z);
  atomicAdd(a + 3, w);
}
// ex2.approx-based __expf as the exact exponential (its error is far below TF32's).
inline float __expf(float x) {
  return std::exp(x);
}

using std::isfinite;
using std::isnan;
using std::min;

// Runs `body` (a kernel call) as every thread of every block of `grid`, one block after another,
// each block's threads as std::threads sharing __syncthreads' barrier and, per warp of 32, a
// warp barrier (threads numbered x fastest, as CUDA numbers lanes).
inline void emu_launch(EmuDim3 grid, EmuDim3 block, const std::function<void()>& body) {
  const int threads = block.x * block.y * block.z;
  std::barrier<> bar(threads);
  emu_barrier = &bar;
  std::vector<std::unique_ptr<std::barrier<>>> warps;
  for (int w = 0; w * 32 < threads; ++w) {
    warps.push_back(std::make_unique<std::barrier<>>(std::min(32, threads - 32 * w)));
    emu_warp_barrier[w] = warps.back().get();
  }
  std::vector<std::unique_ptr<std::barrier<>>> warpgroups;
  for (int w = 0; w * 128 < threads; ++w) {
    warpgroups.push_back(std::make_unique<std::barrier<>>(std::min(128, threads - 128 * w)));
    emu_wg_barrier[w] = warpgroups.back().get();
  }
  blockDim = block;
  gridDim = grid;
  for (int bz = 0; bz < grid.z; ++bz)
    for (int by = 0; by < grid.y; ++by)
      for (int bx = 0; bx < grid.x; ++bx) {
        std::vector<std::thread> ts;
        for (int t = 0; t < threads; ++t)
          ts.emplace_back([&, t] {
            threadIdx = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
            blockIdx = {bx, by, bz};
            body();
          });
        for (auto& th : ts) th.join();
      }
}
