// Host helpers of the standalone timing tools (dkv_timing.cu, stats_timing.cu): their command
// line (B HQ HK S D causal), device arrays of uniform random floats in [-1, 1], copies back to
// the host and the median time of a launch.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
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

// The problem on the command line; false (after a message) when it is missing or its head size
// is not of the bucket `dmax` the binary was built for.
struct ToolProblem {
  int b, hq, hk, s, d, causal;
};
inline bool read_problem(int argc, char** argv, int dmax, int (*dmax_of)(int), ToolProblem& p) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s B HQ HK S D causal\n", argv[0]);
    return false;
  }
  p = {atoi(argv[1]), atoi(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), atoi(argv[6])};
  if (dmax_of(p.d) != dmax) {
    std::fprintf(stderr, "this binary runs head sizes of bucket %d\n", dmax);
    return false;
  }
  return true;
}

// The median of `runs` timed calls of `launch` (CUDA events around each), after one untimed.
template <typename Launch>
double median_ms(int runs, Launch&& launch) {
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  launch();
  std::vector<float> times;
  for (int r = 0; r < runs; ++r) {
    cudaEventRecord(t0);
    launch();
    cudaEventRecord(t1);
    cudaEventSynchronize(t1);
    float t;
    cudaEventElapsedTime(&t, t0, t1);
    times.push_back(t);
  }
  std::sort(times.begin(), times.end());
  return times[runs / 2];
}
