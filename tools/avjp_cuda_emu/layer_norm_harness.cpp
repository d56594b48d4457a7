// Runs the one-kernel LayerNorm (src/ortmlx/ops/norm/cuda/kernels.cu) on the CPU emulation
// (emu.h) with the grid the host side (layer_norm.cpp) launches: a block per row, the row's width
// in whole warps, at most 256 threads. Called from tests/ops/test_norm_cuda_emu.py through ctypes.
alignas(16) float norm_smem[32];  // the kernel's dynamic shared memory: a partial sum per warp

#include "../../src/ortmlx/ops/norm/cuda/kernels.cu"

extern "C" int layer_norm_emu(const float* m, const float* r, const float* bias, const float* gamma,
                              const float* beta, float* y, float* sum, int rows, int cols,
                              int flags, float eps) {
  const int threads = std::clamp((cols + 31) / 32 * 32, 32, 256);
  emu_launch({rows, 1, 1}, {threads, 1, 1}, [&] {
    ortmlx_layer_norm_dev(m, r, bias, gamma, beta, y, sum, rows, cols, flags, eps);
  });
  return 0;
}
