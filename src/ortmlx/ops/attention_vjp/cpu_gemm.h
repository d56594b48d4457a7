// Register-blocked GEMMs for the fused CPU kernel's tile products, one per instruction set
// (AVX-512, AVX2 + FMA, portable C++), picked per run by the kernel (cpu_rows.h: Isa).
//
//     C[M x N] = alpha * A B   (or C += alpha * A B)
//     a(i, k) = A[i * a_row + k * a_col]    (any strides: covers A and A^T)
//     B row-major (K x N, ldb), C row-major (ldc)
//
// All products of the kernel have one short dimension (D, or the panel's rows) and operands that
// are already in cache, where OpenBLAS spends much of its time packing; a plain micro-kernel (rows
// of A broadcast, B streamed, no packing) measured 1.3x (K = D) to 2.2x (N = D) faster than
// OpenBLAS's sgemm on these shapes on an AVX-512 machine, and it runs on the kernel's own worker
// threads, so no path needs a BLAS library (whose thread pool would fight the workers).
//   AVX-512: 6 rows x 64 columns of accumulators (24 of the 32 zmm registers).
//   AVX2:    6 rows x 16 columns (12 of the 16 ymm registers: the BLIS Haswell shape).
//   portable: 4 rows x 8 columns in GCC/Clang vector types (SSE2 on x86-64, NEON on AArch64).
#pragma once

#include <cstdint>
#include <cstring>

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
ORTMLX_AVX512 inline void micro512(const float* a, int64_t a_row, int64_t a_col, const float* b,
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
ORTMLX_AVX512 inline void rows512(int64_t m, const float* a, int64_t a_row, int64_t a_col,
                                  const float* b, int64_t ldb, float* c, int64_t ldc, int64_t k_len,
                                  float alpha, bool accumulate, __mmask16 last) {
  constexpr int MR = 6;
  int64_t i = 0;
  for (; i + MR <= m; i += MR)
    micro512<MR, NV>(a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc, k_len, alpha,
                     accumulate, last);
  const float* ai = a + i * a_row;
  float* ci = c + i * ldc;
  switch (m - i) {
    case 5:
      micro512<5, NV>(ai, a_row, a_col, b, ldb, ci, ldc, k_len, alpha, accumulate, last);
      break;
    case 4:
      micro512<4, NV>(ai, a_row, a_col, b, ldb, ci, ldc, k_len, alpha, accumulate, last);
      break;
    case 3:
      micro512<3, NV>(ai, a_row, a_col, b, ldb, ci, ldc, k_len, alpha, accumulate, last);
      break;
    case 2:
      micro512<2, NV>(ai, a_row, a_col, b, ldb, ci, ldc, k_len, alpha, accumulate, last);
      break;
    case 1:
      micro512<1, NV>(ai, a_row, a_col, b, ldb, ci, ldc, k_len, alpha, accumulate, last);
      break;
    default:
      break;
  }
}

// One column block of up to 64 columns over every row of C.
ORTMLX_AVX512 inline void block512(int64_t m, int64_t cols, const float* a, int64_t a_row,
                                   int64_t a_col, const float* b, int64_t ldb, float* c,
                                   int64_t ldc, int64_t k_len, float alpha, bool accumulate) {
  const int nv = static_cast<int>((cols + 15) / 16);
  const int rem = static_cast<int>(cols - 16 * (nv - 1));
  const __mmask16 last = static_cast<__mmask16>(rem == 16 ? 0xffffu : (1u << rem) - 1u);
  switch (nv) {
    case 4:
      rows512<4>(m, a, a_row, a_col, b, ldb, c, ldc, k_len, alpha, accumulate, last);
      break;
    case 3:
      rows512<3>(m, a, a_row, a_col, b, ldb, c, ldc, k_len, alpha, accumulate, last);
      break;
    case 2:
      rows512<2>(m, a, a_row, a_col, b, ldb, c, ldc, k_len, alpha, accumulate, last);
      break;
    default:
      rows512<1>(m, a, a_row, a_col, b, ldb, c, ldc, k_len, alpha, accumulate, last);
      break;
  }
}

// ---- AVX2 + FMA ---------------------------------------------------------------------------------
// One MR x (NV*8) tile. kMasked (the last column block only): lanes of the last vector column
// outside `last` are neither read nor written. Full blocks use plain loads and stores: masked ones
// cost a register in the loop and are microcoded on some AMD cores.
template <int MR, int NV, bool kMasked>
ORTMLX_AVX2 inline void micro256(const float* a, int64_t a_row, int64_t a_col, const float* b,
                                 int64_t ldb, float* c, int64_t ldc, int64_t k_len, float alpha,
                                 bool accumulate, __m256i last) {
  __m256 acc[MR][NV];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_setzero_ps();
  for (int64_t k = 0; k < k_len; ++k) {
    const float* bk = b + k * ldb;
    __m256 bv[NV];
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v)
      bv[v] = kMasked && v + 1 == NV ? _mm256_maskload_ps(bk + 8 * v, last)
                                     : _mm256_loadu_ps(bk + 8 * v);
    const float* ak = a + k * a_col;
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m256 av = _mm256_broadcast_ss(ak + r * a_row);
#pragma GCC unroll 2
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm256_fmadd_ps(av, bv[v], acc[r][v]);
    }
  }
  const __m256 al = _mm256_set1_ps(alpha);
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
    float* cr = c + r * ldc;
#pragma GCC unroll 2
    for (int v = 0; v < NV; ++v) {
      __m256 x = _mm256_mul_ps(al, acc[r][v]);
      if (kMasked && v + 1 == NV) {
        if (accumulate) x = _mm256_add_ps(x, _mm256_maskload_ps(cr + 8 * v, last));
        _mm256_maskstore_ps(cr + 8 * v, last, x);
      } else {
        if (accumulate) x = _mm256_add_ps(x, _mm256_loadu_ps(cr + 8 * v));
        _mm256_storeu_ps(cr + 8 * v, x);
      }
    }
  }
}

template <int NV, bool kMasked>
ORTMLX_AVX2 inline void rows256(int64_t m, const float* a, int64_t a_row, int64_t a_col,
                                const float* b, int64_t ldb, float* c, int64_t ldc, int64_t k_len,
                                float alpha, bool accumulate, __m256i last) {
  constexpr int MR = 6;
  int64_t i = 0;
  for (; i + MR <= m; i += MR)
    micro256<MR, NV, kMasked>(a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc, k_len, alpha,
                              accumulate, last);
  const float* ai = a + i * a_row;
  float* ci = c + i * ldc;
  switch (m - i) {
    case 5:
      micro256<5, NV, kMasked>(ai, a_row, a_col, b, ldb, ci, ldc, k_len, alpha, accumulate, last);
      break;
    case 4:
      micro256<4, NV, kMasked>(ai, a_row, a_col, b, ldb, ci, ldc, k_len, alpha, accumulate, last);
      break;
    case 3:
      micro256<3, NV, kMasked>(ai, a_row, a_col, b, ldb, ci, ldc, k_len, alpha, accumulate, last);
      break;
    case 2:
      micro256<2, NV, kMasked>(ai, a_row, a_col, b, ldb, ci, ldc, k_len, alpha, accumulate, last);
      break;
    case 1:
      micro256<1, NV, kMasked>(ai, a_row, a_col, b, ldb, ci, ldc, k_len, alpha, accumulate, last);
      break;
    default:
      break;
  }
}

// One column block of up to 16 columns over every row of C.
ORTMLX_AVX2 inline void block256(int64_t m, int64_t cols, const float* a, int64_t a_row,
                                 int64_t a_col, const float* b, int64_t ldb, float* c, int64_t ldc,
                                 int64_t k_len, float alpha, bool accumulate) {
  const int nv = cols > 8 ? 2 : 1;
  const int rem = static_cast<int>(cols - 8 * (nv - 1));
  // Lane j is active when rem > j (maskload/maskstore read the sign bit).
  const __m256i last =
      _mm256_cmpgt_epi32(_mm256_set1_epi32(rem), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  if (cols == 16)
    rows256<2, false>(m, a, a_row, a_col, b, ldb, c, ldc, k_len, alpha, accumulate, last);
  else if (nv == 2)
    rows256<2, true>(m, a, a_row, a_col, b, ldb, c, ldc, k_len, alpha, accumulate, last);
  else if (cols == 8)
    rows256<1, false>(m, a, a_row, a_col, b, ldb, c, ldc, k_len, alpha, accumulate, last);
  else
    rows256<1, true>(m, a, a_row, a_col, b, ldb, c, ldc, k_len, alpha, accumulate, last);
}

#pragma GCC diagnostic pop

#endif

// ---- portable ---------------------------------------------------------------------------------
// GCC/Clang vector extensions: 4-lane float vectors the compiler maps to the target's baseline
// SIMD (SSE2 on x86-64, NEON on AArch64), so the accumulators stay in registers.
using Vec4 = float __attribute__((vector_size(16)));
inline constexpr int kPortableCols = 8;

// One MR x 8 tile (the first `cols` columns are read and written; 8 when kFull).
template <int MR, bool kFull>
inline void micro_portable(const float* a, int64_t a_row, int64_t a_col, const float* b,
                           int64_t ldb, float* c, int64_t ldc, int64_t k_len, float alpha,
                           bool accumulate, int64_t cols) {
  const size_t bytes = static_cast<size_t>(kFull ? kPortableCols : cols) * sizeof(float);
  Vec4 acc[MR][2] = {};
  for (int64_t k = 0; k < k_len; ++k) {
    Vec4 bv[2] = {};
    std::memcpy(bv, b + k * ldb, bytes);
    const float* ak = a + k * a_col;
    for (int r = 0; r < MR; ++r) {
      const float av = ak[r * a_row];
      acc[r][0] += av * bv[0];
      acc[r][1] += av * bv[1];
    }
  }
  for (int r = 0; r < MR; ++r) {
    float* cr = c + r * ldc;
    Vec4 x[2] = {alpha * acc[r][0], alpha * acc[r][1]};
    if (accumulate) {
      Vec4 old[2] = {};
      std::memcpy(old, cr, bytes);
      x[0] += old[0];
      x[1] += old[1];
    }
    std::memcpy(cr, x, bytes);
  }
}

template <bool kFull>
inline void rows_portable(int64_t m, const float* a, int64_t a_row, int64_t a_col, const float* b,
                          int64_t ldb, float* c, int64_t ldc, int64_t k_len, float alpha,
                          bool accumulate, int64_t cols) {
  constexpr int MR = 4;
  int64_t i = 0;
  for (; i + MR <= m; i += MR)
    micro_portable<MR, kFull>(a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc, k_len, alpha,
                              accumulate, cols);
  for (; i < m; ++i)  // leftover rows one at a time
    micro_portable<1, kFull>(a + i * a_row, a_row, a_col, b, ldb, c + i * ldc, ldc, k_len, alpha,
                             accumulate, cols);
}

inline void block_portable(int64_t m, int64_t cols, const float* a, int64_t a_row, int64_t a_col,
                           const float* b, int64_t ldb, float* c, int64_t ldc, int64_t k_len,
                           float alpha, bool accumulate) {
  if (cols == kPortableCols)
    rows_portable<true>(m, a, a_row, a_col, b, ldb, c, ldc, k_len, alpha, accumulate, cols);
  else
    rows_portable<false>(m, a, a_row, a_col, b, ldb, c, ldc, k_len, alpha, accumulate, cols);
}

// ---- the driver ---------------------------------------------------------------------------------
// C (M x N) = alpha * A B, or += when `accumulate`. Long K is cut into chunks (a chunk of B
// stays in L2 while every row block passes over it; C is then accumulated chunk by chunk); within
// a chunk, column blocks are outermost so a B block stays in L1/L2 across the row blocks.
// 512 measured best for dQ = dS K at Sk = 2048, D = 128 with AVX-512 (no chunking: 25% slower).
// `isa` must be one this CPU runs (rows::supported).
inline constexpr int64_t kChunk = 512;
inline void run(Isa isa, int64_t m, int64_t n, int64_t k_len, float alpha, const float* a,
                int64_t a_row, int64_t a_col, const float* b, int64_t ldb, float* c, int64_t ldc,
                bool accumulate) {
  using Block = void (*)(int64_t, int64_t, const float*, int64_t, int64_t, const float*, int64_t,
                         float*, int64_t, int64_t, float, bool);
  Block block = block_portable;
  int64_t width = kPortableCols;
#ifdef ORTMLX_AVJP_X86
  if (isa == Isa::kAvx512) block = block512, width = 64;
  if (isa == Isa::kAvx2) block = block256, width = 16;
#else
  (void)isa;
#endif
  for (int64_t k0 = 0; k0 < k_len || k0 == 0; k0 += kChunk) {
    const int64_t kl = k_len - k0 < kChunk ? k_len - k0 : kChunk;
    const bool acc = accumulate || k0 > 0;
    for (int64_t j = 0; j < n; j += width)
      block(m, n - j < width ? n - j : width, a + k0 * a_col, a_row, a_col, b + k0 * ldb + j, ldb,
            c + j, ldc, kl, alpha, acc);
    if (k_len == 0) break;
  }
}

}  // namespace ortmlx::attention_vjp::gemm
