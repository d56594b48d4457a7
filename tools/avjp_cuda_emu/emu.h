// Host emulation of the few CUDA features kernels.cu uses, so its kernels run on a CPU: every
// CUDA thread of a block is a std::thread; __syncthreads is a barrier; the warp shuffles (which
// kernels.cu calls uniformly from all threads of a block) exchange through a block-wide array.
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
inline float emu_exchange_f[1024];
inline int emu_exchange_i[1024];
alignas(16) inline float avjp_smem[64 * 1024];

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__

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
using std::isnan;
using std::min;
