// Runs the NCHW -> NHWC kernels (src/ortmlx/ops/conv/cuda/kernels.cu) on the CPU emulation
// (emu.h) with the grids the host side (channels_last.cpp) launches. Called from
// tests/ops/test_conv_cuda_emu.py through ctypes.
alignas(16) float conv_smem[32 * 33];  // the tiled kernel's dynamic shared memory

#include "../../src/ortmlx/ops/conv/cuda/kernels.cu"

// few: the per-pixel kernel with `threads` threads in all (a grid-stride loop beyond); else the
// tiled one.
extern "C" int nhwc_emu(const float* x, float* y, int b, int c, int hw, int few, int threads) {
  if (few) {
    emu_launch({(threads + 255) / 256, 1, 1}, {256, 1, 1},
               [&] { ortmlx_nchw_to_nhwc_few_dev(x, y, b, c, hw); });
  } else {
    emu_launch({(hw + 31) / 32, (c + 31) / 32, b}, {32, 8, 1},
               [&] { ortmlx_nchw_to_nhwc_tiled_dev(x, y, b, c, hw); });
  }
  return 0;
}
