// Host emulation of the few CUDA features kernels.cu uses, so its kernels run on a CPU: every
// CUDA thread of a block is a std::thread; __syncthreads is a barrier; the warp shuffles (which
// kernels.cu calls uniformly from all threads of a block) exchange through a block-wide array.
// The tensor-core instructions too: cvt.rna.tf32.f32 bit-exactly (nearest, ties away from zero,
// 10 mantissa bits) and mma.sync m16n8k8 TF32 with the PTX ISA's fragment layout, the lanes of a
// warp exchanging their fragments through arrays behind a per-warp barrier; the products of the
// TF32 operands are exact and their sum is accumulated in fp32 (one rounding per instruction).
// Dynamic shared memory is one global buffer (blocks run one after another). Slow, exact enough
// to check the kernels' logic (indices, masks, tiles, NaN handling) against float64 without a
// GPU. Force-included before kernels.cu (g++ -include emu.h -x c++).
#pragma once
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstring>

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
#define __launch_bounds__(n)
#define __shared__
#define ORTMLX_AVJP_EMU 1

struct float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) {
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

// mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 d, a, b, d. A TF32 operand is the float
// of its register with the low 13 bits ignored, as the hardware reads it.
inline unsigned emu_mma_a[1024][4], emu_mma_b[1024][2];
inline void mma_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  const int tid = threadIdx.x, lane = tid % 32, base = tid - lane;
  std::memcpy(emu_mma_a[tid], a, sizeof a);
  std::memcpy(emu_mma_b[tid], b, sizeof b);
  emu_warp_barrier[tid / 32]->arrive_and_wait();
  auto tf32 = [](unsigned r) { return static_cast<double>(__uint_as_float(r & 0xffffe000u)); };
  const int g = lane / 4, t = lane % 4;
  for (int e = 0; e < 4; ++e) {
    const int row = g + 8 * (e >> 1), col = 2 * t + (e & 1);
    double sum = 0.0;
    for (int k = 0; k < 8; ++k) {
      const double av = tf32(emu_mma_a[base + (row % 8) * 4 + k % 4][(row >= 8) + 2 * (k >= 4)]);
      const double bv = tf32(emu_mma_b[base + col * 4 + k % 4][k >= 4]);
      sum += av * bv;
    }
    d[e] = static_cast<float>(sum + static_cast<double>(d[e]));
  }
  emu_warp_barrier[tid / 32]->arrive_and_wait();
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

using std::isfinite;
using std::isnan;
using std::min;
