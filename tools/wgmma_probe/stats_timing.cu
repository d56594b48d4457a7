// Times the stats pass of the fused AttentionVJP kernels on a GPU outside the EP, plain form, in
// the TF32 mode and the fp32-accurate one (3xTF32): the warp-row mma.sync kernel (stats) against
// the warpgroup-MMA one (cuda/wg_stats.cuh) in the library's tiling and in other tilings (key
// rows per tile, stages, blocks an SM), all on the same random inputs, each compared with the
// warp-row result of its mode.
// Build: tools/wgmma_probe/build.sh. Run: stats_timing B HQ HK S D causal (D 64 or 128; the
// binary is built for one bucket: stats_timing_d64 / stats_timing_d128).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../src/ortmlx/ops/attention_vjp/cuda/kernels.cu"
#include "tool_common.h"

namespace {

constexpr int DMAX = AVJP_BUCKET;

template <Precision P, int BK, int STAGES, int MIN_BLOCKS>
__global__ void __launch_bounds__(kThreads, MIN_BLOCKS)
    stats_variant(const float* q, const float* k, const float* y, const float* dy,
                  const int* finite, float* lse, float* delta, AVJP_SCALARS) {
  AVJP_PROBLEM(nullptr, finite);
  wg_stats_kernel<DMAX, P, BK, STAGES>(q, k, y, dy, p, lse, delta);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  ToolProblem pr;
  if (!read_problem(
          argc, argv, DMAX, [](int d) { return ortmlx_avjp_tiles::dmax_of(d); }, pr))
    return 2;
  const int b = pr.b, hq = pr.hq, hk = pr.hk, s = pr.s, d = pr.d, causal = pr.causal;
  const size_t nq = size_t(b) * hq * s * d, nk = size_t(b) * hk * s * d, nr = size_t(b) * hq * s;
  float *q = device_random(nq, 1), *k = device_random(nk, 2), *v = device_random(nk, 3);
  float *y = device_random(nq, 4), *dy = device_random(nq, 5);
  int* finite;
  cudaMalloc(&finite, 4);
  const int one = 1;
  cudaMemcpy(finite, &one, 4, cudaMemcpyHostToDevice);
  float *lse0, *delta0, *lse1, *delta1;
  cudaMalloc(&lse0, nr * 4);
  cudaMalloc(&delta0, nr * 4);
  cudaMalloc(&lse1, nr * 4);
  cudaMalloc(&delta1, nr * 4);
  const float scale = 1.f / std::sqrt(float(d));
  namespace t = ortmlx_avjp_tiles;
  const dim3 grid((s + t::kWgKeys - 1) / t::kWgKeys, b * hq);
  const double flops = 2.0 * b * hq * double(s) * s * d / (causal ? 2 : 1);
  std::printf("B=%d HQ=%d HK=%d S=%d D=%d causal=%d\n", b, hq, hk, s, d, causal);
  auto stats = AVJP_CAT(AVJP_CAT(ortmlx_avjp_stats_d, AVJP_BUCKET), _dev);
  cudaFuncSetAttribute(stats, cudaFuncAttributeMaxDynamicSharedMemorySize, t::stats_bytes(DMAX));
  for (const int mode : {t::kModeTf32, t::kModeExact}) {
    const bool split = mode != t::kModeTf32;
#define SCALARS b, hq, hk, s, s, d, 4, causal, 0, 1, 1, 1, 1, mode, scale
    const double base = median_ms(11, [&] {
      stats<<<grid, kThreads, t::stats_bytes(DMAX)>>>(q, k, v, y, dy, nullptr, finite, lse0, delta0,
                                                      SCALARS);
    });
    std::printf(" %s: stats (mma.sync)          %.3f ms  %4.0f TFLOP/s of QK^T\n",
                split ? "3xTF32" : "TF32  ", base, flops / base * 1e-9);
    const auto want_lse = host(lse0, nr), want_delta = host(delta0, nr);
    auto variant = [&](auto kernel, int bk, int stages, int min_blocks) {
      const int bytes = t::wg_stats_layout(DMAX, split, bk, stages);
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
      cudaMemset(lse1, 0, nr * 4);
      const double ms = median_ms(11, [&] {
        kernel<<<grid, kThreads, bytes>>>(q, k, y, dy, finite, lse1, delta1, SCALARS);
      });
      const cudaError_t err = cudaDeviceSynchronize();
      std::printf(
          "   wg BK %3d stages %d blocks>=%d %.3f ms  %4.0f TFLOP/s  %.2fx  |dlse| %.1e "
          "|ddelta| %.1e  %s\n",
          bk, stages, min_blocks, ms, flops / ms * 1e-9, base / ms,
          max_abs_diff(host(lse1, nr), want_lse), max_abs_diff(host(delta1, nr), want_delta),
          cudaGetErrorString(err));
    };
    using T = WgStatsTiles<DMAX>;
    constexpr int TK = T::TF32_KEYS, TS = T::TF32_STAGES, TB = kWgStatsTwoBlocks<DMAX> ? 2 : 1;
    constexpr int SK = T::SPLIT_KEYS, SS = T::SPLIT_STAGES;
    if (!split) {
      variant(stats_variant<kTf32, TK, TS, TB>, TK, TS, TB);  // the library's
      variant(stats_variant<kTf32, 128, 2, 1>, 128, 2, 1);
      variant(stats_variant<kTf32, 64, 3, 2>, 64, 3, 2);
      variant(stats_variant<kTf32, 32, 3, 2>, 32, 3, 2);
    } else {
      variant(stats_variant<kSplit, SK, SS, 1>, SK, SS, 1);  // the library's
      variant(stats_variant<kSplit, SK, 3, 1>, SK, 3, 1);
#undef SCALARS
    }
  }
  return cudaDeviceSynchronize() == cudaSuccess ? 0 : 1;
}
