// Host helpers of the standalone timing tools (dkv_timing.cu, stats_timing.cu): device arrays of
// uniform random floats in [-1, 1] and copies back to the host.
#pragma once

#include <cuda_runtime.h>

#include <cstdlib>
#include <vector>

inline float* device_random(size_t n, unsigned seed) {
  std::vector<float> h(n);
  srand(seed);
  for (auto& x : h) x = static_cast<float>(rand()) / RAND_MAX * 2.f - 1.f;
  float* d;
  cudaMalloc(&d, n * 4);
  cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice);
  return d;
}

inline std::vector<float> host(const float* d, size_t n) {
  std::vector<float> h(n);
  cudaMemcpy(h.data(), d, n * 4, cudaMemcpyDeviceToHost);
  return h;
}
