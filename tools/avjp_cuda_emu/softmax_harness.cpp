// Runs the one-kernel Softmax (src/ortmlx/ops/norm/cuda/kernels.cu) on the CPU emulation (emu.h)
// with the grid the host side (softmax.cpp) launches: a block per row, the row's width in whole
// warps, at most 256 threads. Called from tests/ops/test_norm_cuda_emu.py through ctypes.
alignas(16) float norm_smem[32];  // the kernel's dynamic shared memory: a partial per warp

#include "../../src/ortmlx/ops/norm/cuda/kernels.cu"

extern "C" int softmax_emu(const float* x, const float* mask, float* y, int rows, int cols,
                           int flags, int d1, int d2, int m0, int m1, int m2, int mj, float c) {
  const int threads = std::clamp((cols + 31) / 32 * 32, 32, 256);
  emu_launch({rows, 1, 1}, {threads, 1, 1},
             [&] { ortmlx_softmax_dev(x, mask, y, rows, cols, flags, d1, d2, m0, m1, m2, mj, c); });
  return 0;
}
