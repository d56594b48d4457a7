// Register-blocked AVX-512 GEMM for the fused CPU kernel's tile products.
//
//     C[M x N] = alpha * A B   (or C += alpha * A B)
//     a(i, k) = A[i * a_row + k * a_col]    (any strides: covers A and A^T)
//     B row-major (K x N, ldb), C row-major (ldc)
//
// All products of the kernel have one short dimension (D, or the panel's rows) and operands that
// are already in cache, where OpenBLAS spends much of its time packing; this plain micro-kernel
// (6 rows x 64 columns of accumulators, A broadcast, B streamed, no packing) measured 1.3x (K = D)
// to 2.2x (N = D) faster than OpenBLAS's sgemm on these shapes on the AVX-512 machine here.
// Callers fall back to OpenBLAS when AVX-512 is absent.
#pragma once

#include <cstdint>

#include "ortmlx/ops/attention_vjp/cpu_rows.h"

namespace ortmlx::attention_vjp::gemm {

#ifdef ORTMLX_AVJP_X86
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

// One MR x (NV*16) tile; the last vector column is masked by `last` (all ones when full).
template <int MR, int NV>
ORTMLX_AVX512 inline void micro(const float* a, int64_t a_row, int64_t a_col, const float* b,
                                int64_t ldb, float* c, int64_t ldc, int64_t k_len, float alpha,
                                bool accumulate, __mmask16 last) {
  __m512 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t k = 0; k < k_len; ++k) {
    const float* bk = b + k * ldb;
    __m512 bv[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v)
      bv[v] = v + 1 < NV ? _mm512_loadu_ps(bk + 16 * v) : _mm512_maskz_loadu_ps(last, bk + 16 * v);
    const float* ak = a + k * a_col;
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512 av = _mm512_set1_ps(ak[r * a_row]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
  const __m512 al = _mm512_set1_ps(alpha);
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    float* cr = c + r * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __mmask16 m = v + 1 < NV ? static_cast<__mmask16>(0xffff) : last;
      __m512 x = _mm512_mul_ps(al, acc[r][v]);
      if (accumulate) x = _mm512_add_ps(x, _mm512_maskz_loadu_ps(m, cr + 16 * v));
      _mm512_mask_storeu_ps(cr + 16 * v, m, x);
    }
  }
}

template <int NV>
ORTMLX_AVX512 inline void rows_of(int64_t m, const float* a, int64_t a_row, int64_t a_col,
                                  const float* b, int64_t ldb, float* c, int64_t ldc, int64_t k_len,
                                  float alpha, bool accumulate, __mmask16 last) {
  constexpr int MR = 6;
  int64_t i = 0;
  for (; i + MR <= m; i += MR)
    micro<MR, NV>(a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc, k_len, alpha, accumulate,
                  last);
  const float* ai = a + i * a_row;
  float* ci = c + i * ldc;
  switch (m - i) {
    case 5:
      micro<5, NV>(ai, a_row, a_col, b, ldb, ci, ldc, k_len, alpha, accumulate, last);
      break;
    case 4:
      micro<4, NV>(ai, a_row, a_col, b, ldb, ci, ldc, k_len, alpha, accumulate, last);
      break;
    case 3:
      micro<3, NV>(ai, a_row, a_col, b, ldb, ci, ldc, k_len, alpha, accumulate, last);
      break;
    case 2:
      micro<2, NV>(ai, a_row, a_col, b, ldb, ci, ldc, k_len, alpha, accumulate, last);
      break;
    case 1:
      micro<1, NV>(ai, a_row, a_col, b, ldb, ci, ldc, k_len, alpha, accumulate, last);
      break;
    default:
      break;
  }
}

// C (M x N) = alpha * A B, or += when `accumulate`. Long K is cut into chunks (a chunk of B
// stays in L2 while every row block passes over it; C is then accumulated chunk by chunk); within
// a chunk, column blocks of 64 are outermost so a B block stays in L1/L2 across the row blocks.
// 512 measured best for dQ = dS K at Sk = 2048, D = 128 (no chunking: 25% slower).
inline constexpr int64_t kChunk = 512;
ORTMLX_AVX512 inline void run(int64_t m, int64_t n, int64_t k_len, float alpha, const float* a,
                              int64_t a_row, int64_t a_col, const float* b, int64_t ldb, float* c,
                              int64_t ldc, bool accumulate) {
  const int64_t kc = kChunk;
  for (int64_t k0 = 0; k0 < k_len || k0 == 0; k0 += kc) {
    const int64_t kl = k_len - k0 < kc ? k_len - k0 : kc;
    const bool acc = accumulate || k0 > 0;
    const float* ak = a + k0 * a_col;
    const float* bk = b + k0 * ldb;
    for (int64_t j = 0; j < n; j += 64) {
      const int64_t cols = n - j < 64 ? n - j : 64;
      const int nv = static_cast<int>((cols + 15) / 16);
      const int rem = static_cast<int>(cols - 16 * (nv - 1));
      const __mmask16 last = static_cast<__mmask16>(rem == 16 ? 0xffffu : (1u << rem) - 1u);
      const float* bj = bk + j;
      float* cj = c + j;
      switch (nv) {
        case 4:
          rows_of<4>(m, ak, a_row, a_col, bj, ldb, cj, ldc, kl, alpha, acc, last);
          break;
        case 3:
          rows_of<3>(m, ak, a_row, a_col, bj, ldb, cj, ldc, kl, alpha, acc, last);
          break;
        case 2:
          rows_of<2>(m, ak, a_row, a_col, bj, ldb, cj, ldc, kl, alpha, acc, last);
          break;
        default:
          rows_of<1>(m, ak, a_row, a_col, bj, ldb, cj, ldc, kl, alpha, acc, last);
          break;
      }
    }
    if (k_len == 0) break;
  }
}

#pragma GCC diagnostic pop

inline bool available() {
  return rows::have_avx512();
}
#else
inline bool available() {
  return false;
}
inline void run(int64_t, int64_t, int64_t, float, const float*, int64_t, int64_t, const float*,
                int64_t, float*, int64_t, bool) {}
#endif

}  // namespace ortmlx::attention_vjp::gemm
