// Runs the one-pass GELU kernel (src/ortmlx/ops/elementwise/cuda/kernels.cu) on the CPU emulation
// (emu.h) with the grid the host side (gelu.cpp) launches. Called from
// tests/ops/test_elementwise_cuda_emu.py through ctypes.
#include "../../src/ortmlx/ops/elementwise/cuda/kernels.cu"

// cols > 0: bias[cols] folded in; threads: the grid's threads (0: as gelu.cpp sizes it).
extern "C" int gelu_emu(const float* m, const float* bias, float* y, int n, int cols, int tanh_form,
                        int divide, int tail, float c, float alpha, float k, float half,
                        int threads) {
  if (threads == 0) {
    const long long want = ((n + 3LL) / 4 + 255) / 256 * 256;
    threads = static_cast<int>(std::min<long long>(want, 256LL * 2048));
  }
  emu_launch({(threads + 255) / 256, 1, 1}, {256, 1, 1}, [&] {
    ortmlx_gelu_dev(m, bias, y, n, cols, tanh_form, divide, tail, c, alpha, k, half);
  });
  return 0;
}
