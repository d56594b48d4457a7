// Runs the one-kernel Softmax (src/ortmlx/ops/norm/cuda/kernels.cu) on the CPU emulation (emu.h)
// with the grids the host side (softmax.cpp) launches. Called from tests/ops/test_norm_cuda_emu.py
// through ctypes.
alignas(16) float norm_smem[32];  // the kernel's dynamic shared memory: a partial per warp

#include "../../src/ortmlx/ops/norm/cuda/kernels.cu"

// per_lane 0: the block-per-row kernel (a block of the row's width in whole warps, at most 256
// threads); 4, 8, 16, 32: the warp kernel for that many columns a lane (8 rows a block).
extern "C" int softmax_emu(const float* x, const float* mask, float* y, int rows, int cols,
                           int flags, int d1, int d2, int m0, int m1, int m2, int mj, float c,
                           int per_lane) {
  if (per_lane == 0) {
    const int threads = std::clamp((cols + 31) / 32 * 32, 32, 256);
    emu_launch({rows, 1, 1}, {threads, 1, 1}, [&] {
      ortmlx_softmax_dev(x, mask, y, rows, cols, flags, d1, d2, m0, m1, m2, mj, c);
    });
    return 0;
  }
  auto warp_kernel = per_lane == 4    ? ortmlx_softmax_w4_dev
                     : per_lane == 8  ? ortmlx_softmax_w8_dev
                     : per_lane == 16 ? ortmlx_softmax_w16_dev
                                      : ortmlx_softmax_w32_dev;
  emu_launch({(rows + 7) / 8, 1, 1}, {256, 1, 1},
             [&] { warp_kernel(x, mask, y, rows, cols, flags, d1, d2, m0, m1, m2, mj, c); });
  return 0;
}
