// Checks the warpgroup-MMA building blocks of the fused AttentionVJP kernels (cuda/wgmma.cuh) on
// an sm_90 GPU against a float64 product on the host, and times their TF32 rate:
//   ss   D = A B^T, A and B from shared memory (core-matrix layout, descriptors)
//   rs   the same with A from registers (fragment layout)
//   acc  X = A B^T, then X C with X's accumulators as the A operand (k order permuted, perm_k)
// Build: nvcc -std=c++17 -O3 -arch=sm_90a -o probe probe.cu   (tools/wgmma_probe/build.sh)
// Prints one line per check (max relative error) and per timing (TFLOP/s of the whole GPU).
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../../src/ortmlx/ops/attention_vjp/cuda/wgmma.cuh"

namespace {

constexpr int kK = 32;  // reduction length of the checks: 4 k-steps

__device__ unsigned tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// a: 64 x kK row-major, b: N x kK row-major, d: 64 x N row-major. mode 0: A by descriptor,
// 1: A from registers.
template <int N>
__global__ void check_product(const float* a, const float* b, float* d, int mode) {
  __shared__ __align__(128) float as[64 * kK];
  __shared__ __align__(128) float bs[N * kK];
  const int tid = threadIdx.x;
  for (int e = tid; e < 64 * kK; e += 128)
    as[cm_index(e / kK, e % kK, kK)] = __uint_as_float(tf32(a[e]));
  for (int e = tid; e < N * kK; e += 128)
    bs[cm_index(e / kK, e % kK, kK)] = __uint_as_float(tf32(b[e]));
  fence_smem_async();
  __syncthreads();
  float acc[N / 8][4];
  for (int j = 0; j < N / 8; ++j)
    for (int e = 0; e < 4; ++e) acc[j][e] = 0.f;
  const int w = tid / 32, g = tid % 32 / 4, t = tid % 4;
  unsigned fr[kK / 8][4];
  for (int kk = 0; kk < kK / 8; ++kk) {
    fr[kk][0] = tf32(a[(16 * w + g) * kK + 8 * kk + t]);
    fr[kk][1] = tf32(a[(16 * w + g + 8) * kK + 8 * kk + t]);
    fr[kk][2] = tf32(a[(16 * w + g) * kK + 8 * kk + t + 4]);
    fr[kk][3] = tf32(a[(16 * w + g + 8) * kK + 8 * kk + t + 4]);
  }
  wg_fence();
  for (int kk = 0; kk < kK / 8; ++kk) {
    if (mode == 0)
      wg_ss(acc, wg_desc(as + 64 * kk, kK), wg_desc(bs + 64 * kk, kK));
    else
      wg_rs(acc, fr[kk], wg_desc(bs + 64 * kk, kK));
  }
  wg_commit();
  wg_wait<0>();
  wg_pin(acc);
  for (int j = 0; j < N / 8; ++j)
    for (int e = 0; e < 4; ++e)
      d[(16 * w + g + 8 * (e >> 1)) * N + 8 * j + 2 * t + (e & 1)] = acc[j][e];
}

// X = A B^T (64 x 32, A 64 x kK, B 32 x kK), then D = X C (C: 32 x N row-major) with X's
// accumulators as A and C stored as the B tile (N rows, K = 32 columns in perm_k order).
template <int N>
__global__ void check_chain(const float* a, const float* b, const float* c, float* d) {
  __shared__ __align__(128) float as[64 * kK];
  __shared__ __align__(128) float bs[32 * kK];
  __shared__ __align__(128) float cs[N * 32];
  const int tid = threadIdx.x;
  for (int e = tid; e < 64 * kK; e += 128)
    as[cm_index(e / kK, e % kK, kK)] = __uint_as_float(tf32(a[e]));
  for (int e = tid; e < 32 * kK; e += 128)
    bs[cm_index(e / kK, e % kK, kK)] = __uint_as_float(tf32(b[e]));
  for (int e = tid; e < 32 * N; e += 128) {  // c row r (k), column n
    const int r = e / N, n = e % N;
    cs[cm_index(n, perm_k(r), 32)] = __uint_as_float(tf32(c[e]));
  }
  fence_smem_async();
  __syncthreads();
  float x[4][4] = {};
  wg_fence();
  for (int kk = 0; kk < kK / 8; ++kk)
    wg_ss(x, wg_desc(as + 64 * kk, kK), wg_desc(bs + 64 * kk, kK));
  wg_commit();
  wg_wait<0>();
  wg_pin(x);
  float acc[N / 8][4] = {};
  unsigned fr[4][4];
  for (int j = 0; j < 4; ++j) {
    fr[j][0] = tf32(x[j][0]);
    fr[j][1] = tf32(x[j][2]);
    fr[j][2] = tf32(x[j][1]);
    fr[j][3] = tf32(x[j][3]);
  }
  wg_fence();
  for (int j = 0; j < 4; ++j) wg_rs(acc, fr[j], wg_desc(cs + 64 * j, 32));
  wg_commit();
  wg_wait<0>();
  wg_pin(acc);
  const int w = tid / 32, g = tid % 32 / 4, t = tid % 4;
  for (int j = 0; j < N / 8; ++j)
    for (int e = 0; e < 4; ++e)
      d[(16 * w + g + 8 * (e >> 1)) * N + 8 * j + 2 * t + (e & 1)] = acc[j][e];
}

// Throughput: each warpgroup of the block runs `iters` chains of 16 k-steps (m64nNk8) on tiles in
// shared memory; A by descriptor (mode 0) or from registers (mode 1).
template <int N, int MODE>
__global__ void __launch_bounds__(256) rate(float* sink, int iters) {
  extern __shared__ __align__(128) float sm[];
  float* as = sm;                 // 2 warpgroups x 64 x 128
  float* bs = sm + 2 * 64 * 128;  // N x 128
  for (int e = threadIdx.x; e < 2 * 64 * 128 + N * 128; e += blockDim.x) sm[e] = 1e-3f * (e % 7);
  fence_smem_async();
  __syncthreads();
  const int wg = threadIdx.x / 128;
  float acc[N / 8][4] = {};
  unsigned fr[4] = {tf32(1.f), tf32(2.f), tf32(3.f), tf32(4.f)};
  for (int it = 0; it < iters; ++it) {
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < 16; ++kk) {
      if (MODE == 0)
        wg_ss(acc, wg_desc(as + wg * 64 * 128 + 64 * kk, 128), wg_desc(bs + 64 * kk, 128));
      else
        wg_rs(acc, fr, wg_desc(bs + 64 * kk, 128));
    }
    wg_commit();
    wg_wait<1>();
  }
  wg_wait<0>();
  wg_pin(acc);
  float s = 0.f;
  for (int j = 0; j < N / 8; ++j)
    for (int e = 0; e < 4; ++e) s += acc[j][e];
  if (s == 12345.f) sink[0] = s;
}

double max_rel(const std::vector<float>& got, const std::vector<double>& want) {
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num = std::fmax(num, std::fabs(got[i] - want[i]));
    den = std::fmax(den, std::fabs(want[i]));
  }
  return num / den;
}

std::vector<float> random_values(size_t n, unsigned seed) {
  std::vector<float> v(n);
  srand(seed);
  for (auto& x : v) x = static_cast<float>(rand()) / RAND_MAX * 2.f - 1.f;
  return v;
}

float* to_device(const std::vector<float>& v) {
  float* p;
  cudaMalloc(&p, v.size() * sizeof(float));
  cudaMemcpy(p, v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice);
  return p;
}

template <int N>
bool run_product(int mode) {
  auto a = random_values(64 * kK, 1), b = random_values(N * kK, 2);
  std::vector<double> want(64 * N, 0.0);
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < N; ++j)
      for (int k = 0; k < kK; ++k) want[i * N + j] += double(a[i * kK + k]) * b[j * kK + k];
  float *da = to_device(a), *db = to_device(b), *dd;
  cudaMalloc(&dd, 64 * N * sizeof(float));
  check_product<N><<<1, 128>>>(da, db, dd, mode);
  std::vector<float> got(64 * N);
  const cudaError_t err = cudaMemcpy(got.data(), dd, got.size() * 4, cudaMemcpyDeviceToHost);
  const double e = err == cudaSuccess ? max_rel(got, want) : 1.0;
  std::printf("%s N=%d: max rel error %.2e %s%s\n", mode == 0 ? "ss " : "rs ", N, e,
              e < 5e-3 ? "ok" : "WRONG", err == cudaSuccess ? "" : cudaGetErrorString(err));
  cudaFree(da);
  cudaFree(db);
  cudaFree(dd);
  return e < 5e-3;
}

template <int N>
bool run_chain() {
  auto a = random_values(64 * kK, 3), b = random_values(32 * kK, 4), c = random_values(32 * N, 5);
  std::vector<double> x(64 * 32, 0.0), want(64 * N, 0.0);
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 32; ++j)
      for (int k = 0; k < kK; ++k) x[i * 32 + j] += double(a[i * kK + k]) * b[j * kK + k];
  for (int i = 0; i < 64; ++i)
    for (int n = 0; n < N; ++n)
      for (int j = 0; j < 32; ++j) want[i * N + n] += x[i * 32 + j] * c[j * N + n];
  float *da = to_device(a), *db = to_device(b), *dc = to_device(c), *dd;
  cudaMalloc(&dd, 64 * N * sizeof(float));
  check_chain<N><<<1, 128>>>(da, db, dc, dd);
  std::vector<float> got(64 * N);
  const cudaError_t err = cudaMemcpy(got.data(), dd, got.size() * 4, cudaMemcpyDeviceToHost);
  const double e = err == cudaSuccess ? max_rel(got, want) : 1.0;
  std::printf("acc N=%d: max rel error %.2e %s%s\n", N, e, e < 5e-3 ? "ok" : "WRONG",
              err == cudaSuccess ? "" : cudaGetErrorString(err));
  return e < 5e-3;
}

template <int N, int MODE>
void run_rate() {
  const int mode = MODE;
  const int smem = (2 * 64 * 128 + N * 128) * 4, iters = 4096;
  cudaFuncSetAttribute(rate<N, MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  float* sink;
  cudaMalloc(&sink, 4);
  rate<N, MODE><<<sms, 256, smem>>>(sink, 16);
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  cudaEventRecord(t0);
  rate<N, MODE><<<sms, 256, smem>>>(sink, iters);
  cudaEventRecord(t1);
  cudaEventSynchronize(t1);
  float ms = 0;
  cudaEventElapsedTime(&ms, t0, t1);
  const double flops = 2.0 * 64 * N * 8 * 16 * double(iters) * 2 * sms;
  std::printf("rate %s N=%d: %.0f TFLOP/s (%s)\n", mode == 0 ? "ss" : "rs", N,
              flops / (ms * 1e-3) / 1e12, cudaGetErrorString(cudaGetLastError()));
  cudaFree(sink);
}

}  // namespace

int main() {
  bool ok = true;
  for (int mode = 0; mode < 2; ++mode) {
    ok &= run_product<32>(mode);
    ok &= run_product<64>(mode);
    ok &= run_product<128>(mode);
  }
  ok &= run_chain<32>();
  ok &= run_chain<64>();
  ok &= run_chain<128>();
  run_rate<32, 0>();
  run_rate<64, 0>();
  run_rate<128, 0>();
  run_rate<32, 1>();
  run_rate<64, 1>();
  run_rate<128, 1>();
  std::printf("%s\n", ok ? "ALL OK" : "SOME WRONG");
  return ok ? 0 : 1;
}
