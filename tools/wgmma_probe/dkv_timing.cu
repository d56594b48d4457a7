// Times the dK/dV/dQ pass of the fused AttentionVJP kernels on a GPU outside the EP: the
// warp-row mma.sync kernel (dkvq) against the warpgroup-MMA one (dkvq_wg, with the pack pass
// that writes its step images, timed apart), both in the TF32 mode on the same random inputs,
// with the wgmma kernel's time split into its phases (clock64 marks of thread 0,
// cuda/wg_dkv.cuh, AVJP_WG_TIMING) and the two results compared.
// Build: tools/wgmma_probe/build.sh. Run: dkv_timing B HQ HK S D causal (D 64 or 128; the binary
// is built for one bucket: dkv_timing_d64 / dkv_timing_d128).
#define AVJP_WG_TIMING
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../src/ortmlx/ops/attention_vjp/cuda/kernels.cu"
#include "tool_common.h"

namespace {

double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

}  // namespace

int main(int argc, char** argv) {
  constexpr int DMAX = AVJP_BUCKET;
  ToolProblem pr;
  if (!read_problem(
          argc, argv, DMAX, [](int d) { return ortmlx_avjp_tiles::dmax_of(d); }, pr))
    return 2;
  const int b = pr.b, hq = pr.hq, hk = pr.hk, s = pr.s, d = pr.d, causal = pr.causal;
  const size_t nq = size_t(b) * hq * s * d, nk = size_t(b) * hk * s * d;
  float *q = device_random(nq, 1), *k = device_random(nk, 2), *v = device_random(nk, 3);
  float *y = device_random(nq, 4), *dy = device_random(nq, 5);
  unsigned char* mask;
  cudaMalloc(&mask, 1);
  int* finite;
  cudaMalloc(&finite, 4);
  const int one = 1;
  cudaMemcpy(finite, &one, 4, cudaMemcpyHostToDevice);
  float *lse, *delta, *dk[2], *dv[2], *dq[2], *images;
  const int kq = ortmlx_avjp_tiles::wg_kq(DMAX), qtiles = (s + kq - 1) / kq;
  cudaMalloc(&images, size_t(b) * hq * qtiles * ortmlx_avjp_tiles::wg_image_floats(DMAX) * 4);
  cudaMalloc(&lse, size_t(b) * hq * s * 4);
  cudaMalloc(&delta, size_t(b) * hq * s * 4);
  for (int i = 0; i < 2; ++i) {
    cudaMalloc(&dk[i], nk * 4);
    cudaMalloc(&dv[i], nk * 4);
    cudaMalloc(&dq[i], nq * 4);
  }
  const float scale = 1.f / std::sqrt(float(d));
  const int mode = ortmlx_avjp_tiles::kModeTf32;
  namespace t = ortmlx_avjp_tiles;
  constexpr int kThreads = t::kThreads;
  auto tiles = [](int n, int m) { return (n + m - 1) / m; };
#define SCALARS b, hq, hk, s, s, d, 4, causal, 0, 1, 1, 1, 1, mode, scale
  auto stats = AVJP_CAT(AVJP_CAT(ortmlx_avjp_stats_d, AVJP_BUCKET), _dev);
  auto dkvq = AVJP_CAT(AVJP_CAT(ortmlx_avjp_dkvq_d, AVJP_BUCKET), _dev);
  auto dkvq_wg = AVJP_CAT(AVJP_CAT(ortmlx_avjp_dkvq_wg_d, AVJP_BUCKET), _dev);
  auto pack_wg = AVJP_CAT(AVJP_CAT(ortmlx_avjp_pack_wg_d, AVJP_BUCKET), _dev);
  cudaFuncSetAttribute(pack_wg, cudaFuncAttributeMaxDynamicSharedMemorySize, t::wg_pack_smem(DMAX));
  cudaFuncSetAttribute(stats, cudaFuncAttributeMaxDynamicSharedMemorySize, t::stats_bytes(DMAX));
  cudaFuncSetAttribute(dkvq, cudaFuncAttributeMaxDynamicSharedMemorySize, t::dkvq_bytes(DMAX));
  cudaFuncSetAttribute(dkvq_wg, cudaFuncAttributeMaxDynamicSharedMemorySize, t::wg_dkv_smem(DMAX));
  stats<<<dim3(tiles(s, t::query_rows(DMAX)), b * hq), kThreads, t::stats_bytes(DMAX)>>>(
      q, k, v, y, dy, mask, finite, lse, delta, SCALARS);
  const dim3 grid(tiles(s, t::key_rows(DMAX)), b * hk);
  auto pack = [&] {
    pack_wg<<<dim3(qtiles, b * hq), kThreads, t::wg_pack_smem(DMAX)>>>(q, dy, lse, delta, images,
                                                                       SCALARS);
  };
  pack();
  auto run = [&](int which) {
    cudaMemset(dq[which], 0, nq * 4);
    if (which == 0)
      dkvq<<<grid, kThreads, t::dkvq_bytes(DMAX)>>>(q, k, v, dy, mask, finite, lse, delta, dk[0],
                                                    dv[0], dq[0], SCALARS);
    else
      dkvq_wg<<<grid, kThreads, t::wg_dkv_smem(DMAX)>>>(images, k, v, mask, finite, dk[1], dv[1],
                                                        dq[1], SCALARS);
  };
  // Each pass: one untimed launch and 5 timed (the phase cycles below count all 6 of dkvq_wg).
  const double ms[2] = {median_ms(5, [&] { run(0); }), median_ms(5, [&] { run(1); })};
  const double pack_ms = median_ms(5, pack);
  const cudaError_t err = cudaDeviceSynchronize();
  const double flops = 2.0 * b * hq * double(s) * s * d * 5 / (causal ? 2 : 1);
  std::printf("B=%d HQ=%d HK=%d S=%d D=%d causal=%d  %s\n", b, hq, hk, s, d, causal,
              cudaGetErrorString(err));
  std::printf("  dkvq (mma.sync) %.3f ms  %.0f TFLOP/s of its 5 products\n", ms[0],
              flops / ms[0] * 1e-9);
  std::printf("  dkvq_wg (wgmma) %.3f ms  %.0f TFLOP/s   speedup %.2fx\n", ms[1],
              flops / ms[1] * 1e-9, ms[0] / ms[1]);
  std::printf("  pack (step images) %.3f ms; dkvq_wg + pack %.3f ms, speedup %.2fx\n", pack_ms,
              ms[1] + pack_ms, ms[0] / (ms[1] + pack_ms));
  std::printf("  rel L2 wg vs mma.sync: dK %.2e dV %.2e dQ %.2e\n",
              rel_l2(host(dk[1], nk), host(dk[0], nk)), rel_l2(host(dv[1], nk), host(dv[0], nk)),
              rel_l2(host(dq[1], nq), host(dq[0], nq)));
  // Phase cycles (all 6 timed runs of the wg kernel): per block step.
  unsigned long long cyc[8];
  cudaMemcpyFromSymbol(cyc, avjp_wg_cycles, sizeof(cyc));
  const int tq = causal ? 0 : tiles(s, kq);
  double steps = 0;  // block steps of one run
  for (unsigned x = 0; x < grid.x; ++x)
    steps += (causal ? tiles(s - int(x) * t::kWgKeys / kq * kq, kq) : tq) * double(hq / hk);
  steps *= grid.y * 6;
  const char* names[8] = {"wait Q/dY/lse (mbarrier)",   "S^T dP^T wgmma",
                          "barrier + next rows' copy",  "softmax, dS store",
                          "wait Q^T/dY^T, dV dK issue", "dQ (barrier, waits, wgmma)",
                          "dQ atomics, next Q^T copy",  "(unused)"};
  double total = 0;
  for (int i = 0; i < 8; ++i) total += cyc[i];
  for (int i = 0; i < 8; ++i)
    std::printf("  phase %d %-28s %7.0f cycles/step (%4.1f%%)\n", i, names[i], cyc[i] / steps,
                100.0 * cyc[i] / total);
  return err == cudaSuccess ? 0 : 1;
}
