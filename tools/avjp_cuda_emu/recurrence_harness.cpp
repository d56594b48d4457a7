// Runs the LSTM/GRU recurrence kernel (src/ortmlx/ops/recurrent/cuda/kernels.cu) on the CPU
// emulation (emu.h) with the grid the host side (recurrence.cpp) launches: one block per batch
// row, `threads` threads. Called from tests/ops/test_recurrent_cuda_emu.py through ctypes.
alignas(16) float rnn_smem[16 * 1024];  // the kernel's dynamic shared memory

#include "../../src/ortmlx/ops/recurrent/cuda/kernels.cu"

extern "C" int rnn_emu(const float* xw, const float* rt, const float* h0, const float* c0,
                       const float* rbh, float* y, float* h_last, float* c_last, int steps,
                       int batch, int hidden, int gru, int reverse, int lbr, int has_rbh,
                       float bound, int nan_to_bound, int threads) {
  emu_launch({batch, 1, 1}, {threads, 1, 1}, [&] {
    ortmlx_recurrence_dev(xw, rt, h0, c0, rbh, y, h_last, c_last, steps, batch, hidden, gru,
                          reverse, lbr, has_rbh, bound, nan_to_bound);
  });
  return 0;
}
