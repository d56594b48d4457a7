// Row primitives of the fused CPU kernel (softmax statistics, exp, dS), with an AVX-512 version
// picked at run time on x86-64 (the project is not built with -march flags) and a portable
// scalar version elsewhere. All lengths are element counts; no alignment is assumed.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ORTMLX_AVJP_X86 1
#endif

namespace ortmlx::attention_vjp::rows {

inline constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// ---- portable versions ----------------------------------------------------------------------
inline float max_scalar(const float* x, int n) {
  float m = kNegInf;
  for (int j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}
inline float exp_sum_scalar(float* x, int n, float shift) {
  float s = 0.f;
  for (int j = 0; j < n; ++j) s += (x[j] = std::exp(x[j] - shift));
  return s;
}
inline void scale_scalar(float* x, int n, float a) {
  for (int j = 0; j < n; ++j) x[j] *= a;
}
inline void ds_scalar(const float* p, float* dp, int n, float delta) {
  for (int j = 0; j < n; ++j) dp[j] = p[j] * (dp[j] - delta);
}
inline float dot_scalar(const float* a, const float* b, int n) {
  float s = 0.f;
  for (int j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
}
inline void add_scalar(float* x, const float* m, int n) {
  for (int j = 0; j < n; ++j) x[j] += m[j];
}
inline void keep_scalar(float* x, const uint8_t* m, int n) {
  for (int j = 0; j < n; ++j)
    if (!m[j]) x[j] = kNegInf;
}

#ifdef ORTMLX_AVJP_X86
// GCC 12's masked-load intrinsics start from _mm512_undefined_ps(), which trips
// -W(maybe-)uninitialized inside the intrinsic header; the values are fully defined.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// ---- AVX-512 versions -----------------------------------------------------------------------
#define ORTMLX_AVX512 __attribute__((target("avx512f")))

ORTMLX_AVX512 inline __mmask16 tail_mask(int rem) {
  return static_cast<__mmask16>((1u << rem) - 1u);
}

// exp(x) for x <= 0 (and NaN, which propagates): range reduction x = n ln2 + r, |r| <= ln2/2,
// Cephes' degree-6 polynomial for exp(r), then 2^n via scalef. Inputs below -150 (including -inf,
// i.e. masked scores) give exactly 0.
ORTMLX_AVX512 inline __m512 exp512(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-150.f), x);  // second operand returned for NaN: kept
  x = _mm512_min_ps(_mm512_set1_ps(88.f), x);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_scalef_ps(p, n);
}

ORTMLX_AVX512 inline float max_avx512(const float* x, int n) {
  __m512 m = _mm512_set1_ps(kNegInf);
  int j = 0;
  for (; j + 16 <= n; j += 16) m = _mm512_max_ps(m, _mm512_loadu_ps(x + j));
  if (j < n)
    m = _mm512_max_ps(m, _mm512_mask_loadu_ps(_mm512_set1_ps(kNegInf), tail_mask(n - j), x + j));
  return _mm512_reduce_max_ps(m);
}

ORTMLX_AVX512 inline float exp_sum_avx512(float* x, int n, float shift) {
  const __m512 sh = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512 e = exp512(_mm512_sub_ps(_mm512_loadu_ps(x + j), sh));
    _mm512_storeu_ps(x + j, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (j < n) {
    const __mmask16 k = tail_mask(n - j);
    const __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, x + j), sh));
    _mm512_mask_storeu_ps(x + j, k, e);
    acc = _mm512_mask_add_ps(acc, k, acc, e);
  }
  return _mm512_reduce_add_ps(acc);
}

ORTMLX_AVX512 inline void scale_avx512(float* x, int n, float a) {
  const __m512 va = _mm512_set1_ps(a);
  int j = 0;
  for (; j + 16 <= n; j += 16) _mm512_storeu_ps(x + j, _mm512_mul_ps(_mm512_loadu_ps(x + j), va));
  if (j < n) {
    const __mmask16 k = tail_mask(n - j);
    _mm512_mask_storeu_ps(x + j, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + j), va));
  }
}

ORTMLX_AVX512 inline void ds_avx512(const float* p, float* dp, int n, float delta) {
  const __m512 dl = _mm512_set1_ps(delta);
  int j = 0;
  for (; j + 16 <= n; j += 16)
    _mm512_storeu_ps(
        dp + j, _mm512_mul_ps(_mm512_loadu_ps(p + j), _mm512_sub_ps(_mm512_loadu_ps(dp + j), dl)));
  if (j < n) {
    const __mmask16 k = tail_mask(n - j);
    _mm512_mask_storeu_ps(dp + j, k,
                          _mm512_mul_ps(_mm512_maskz_loadu_ps(k, p + j),
                                        _mm512_sub_ps(_mm512_maskz_loadu_ps(k, dp + j), dl)));
  }
}

ORTMLX_AVX512 inline float dot_avx512(const float* a, const float* b, int n) {
  __m512 acc = _mm512_setzero_ps();
  int j = 0;
  for (; j + 16 <= n; j += 16)
    acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + j), _mm512_loadu_ps(b + j), acc);
  if (j < n) {
    const __mmask16 k = tail_mask(n - j);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(k, a + j), _mm512_maskz_loadu_ps(k, b + j), acc);
  }
  return _mm512_reduce_add_ps(acc);
}

ORTMLX_AVX512 inline void add_avx512(float* x, const float* m, int n) {
  int j = 0;
  for (; j + 16 <= n; j += 16)
    _mm512_storeu_ps(x + j, _mm512_add_ps(_mm512_loadu_ps(x + j), _mm512_loadu_ps(m + j)));
  if (j < n) {
    const __mmask16 k = tail_mask(n - j);
    _mm512_mask_storeu_ps(
        x + j, k, _mm512_add_ps(_mm512_maskz_loadu_ps(k, x + j), _mm512_maskz_loadu_ps(k, m + j)));
  }
}

// x[j] = -inf where the keep-mask byte is 0.
ORTMLX_AVX512 inline void keep_avx512(float* x, const uint8_t* m, int n) {
  const __m512 ninf = _mm512_set1_ps(kNegInf);
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    const __m512i bytes =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + j)));
    const __mmask16 drop = _mm512_cmpeq_epi32_mask(bytes, _mm512_setzero_si512());
    _mm512_mask_storeu_ps(x + j, drop, ninf);
  }
  for (; j < n; ++j)
    if (!m[j]) x[j] = kNegInf;
}

#pragma GCC diagnostic pop

inline bool have_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
#define ORTMLX_AVJP_DISPATCH(fn, ...) \
  (have_avx512() ? fn##_avx512(__VA_ARGS__) : fn##_scalar(__VA_ARGS__))
#else
#define ORTMLX_AVJP_DISPATCH(fn, ...) fn##_scalar(__VA_ARGS__)
#endif

// ---- the entry points the kernel uses -------------------------------------------------------
inline float row_max(const float* x, int n) {
  return ORTMLX_AVJP_DISPATCH(max, x, n);
}
// x[j] = exp(x[j] - shift); returns the sum.
inline float exp_sum(float* x, int n, float shift) {
  return ORTMLX_AVJP_DISPATCH(exp_sum, x, n, shift);
}
inline void scale(float* x, int n, float a) {
  ORTMLX_AVJP_DISPATCH(scale, x, n, a);
}
// dp[j] = p[j] * (dp[j] - delta)
inline void ds(const float* p, float* dp, int n, float delta) {
  ORTMLX_AVJP_DISPATCH(ds, p, dp, n, delta);
}
inline float dot(const float* a, const float* b, int n) {
  return ORTMLX_AVJP_DISPATCH(dot, a, b, n);
}
inline void add(float* x, const float* m, int n) {
  ORTMLX_AVJP_DISPATCH(add, x, m, n);
}
inline void keep(float* x, const uint8_t* m, int n) {
  ORTMLX_AVJP_DISPATCH(keep, x, m, n);
}

#undef ORTMLX_AVJP_DISPATCH

}  // namespace ortmlx::attention_vjp::rows
