// Timing a library call's candidate algorithms on the GPU (the cuDNN convolutions, the cuBLASLt
// products): two CUDA events, destroyed with the scope (also on an exception). CUDA flavour only.
#pragma once

#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace ortmlx::ops {

struct TimingEvents {
  cudaEvent_t start = nullptr, stop = nullptr;
  explicit TimingEvents(const char* who) {
    if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
      (void)cudaGetLastError();
      release();
      throw std::runtime_error(std::string(who) + ": cudaEventCreate failed");
    }
  }
  TimingEvents(const TimingEvents&) = delete;
  TimingEvents& operator=(const TimingEvents&) = delete;
  ~TimingEvents() { release(); }

  // Milliseconds taken by `runs` calls of `run` on `stream` (each a bool: launched), after one
  // untimed call; a negative value when a call or the timing failed (the CUDA error is cleared).
  template <typename Run>
  float time(cudaStream_t stream, int runs, Run&& run) {
    bool ok = run() && cudaEventRecord(start, stream) == cudaSuccess;
    for (int k = 0; ok && k < runs; ++k) ok = run();
    float ms = 0.0f;
    ok = ok && cudaEventRecord(stop, stream) == cudaSuccess &&
         cudaEventSynchronize(stop) == cudaSuccess &&
         cudaEventElapsedTime(&ms, start, stop) == cudaSuccess;
    (void)cudaGetLastError();
    return ok ? ms : -1.0f;
  }

 private:
  void release() {
    if (start != nullptr) (void)cudaEventDestroy(start);
    if (stop != nullptr) (void)cudaEventDestroy(stop);
    start = stop = nullptr;
  }
};

}  // namespace ortmlx::ops
