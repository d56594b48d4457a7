// Row primitives of the fused CPU kernel (softmax statistics, exp, dS) in three instruction sets:
// AVX-512, AVX2 + FMA (x86-64 only, compiled with target attributes: the project is not built
// with -march flags) and portable C++. The kernel picks one per run (`Isa`, from the option
// cpu_isa or the CPU's features) and passes it to every entry point. All lengths are element
// counts; no alignment is assumed.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ORTMLX_AVJP_X86 1
#endif

namespace ortmlx::attention_vjp {

// The kernel's instruction set (micro-kernels of cpu_gemm.h and the row primitives below).
enum class Isa { kAvx512, kAvx2, kPortable };

inline const char* isa_name(Isa isa) {
  return isa == Isa::kAvx512 ? "avx512" : isa == Isa::kAvx2 ? "avx2" : "portable";
}

}  // namespace ortmlx::attention_vjp

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

// ---- AVX2 + FMA versions (8 lanes; tails run the scalar code) -------------------------------
#define ORTMLX_AVX2 __attribute__((target("avx2,fma")))

ORTMLX_AVX2 inline float hsum256(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_add_ss(x, _mm_movehdup_ps(x)));
}
ORTMLX_AVX2 inline float hmax256(__m256 v) {
  __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_max_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_max_ss(x, _mm_movehdup_ps(x)));
}

// exp(x) for x <= 0 (and NaN, which propagates), as exp512 but without scalef: 2^n is built in
// the exponent field, which holds normal numbers only, so x is clamped to [-87, 88] and inputs
// below -87.33 (where exp leaves the normal range; including -inf, i.e. masked scores) give
// exactly 0. The softmax sums at least one exp(0) = 1 per row, so dropping the denormals changes
// no sum or probability by more than 1e-38.
ORTMLX_AVX2 inline __m256 exp256(__m256 x) {
  const __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.33f), _CMP_LT_OQ);  // false for NaN
  x = _mm256_max_ps(_mm256_set1_ps(-87.f), x);  // second operand returned for NaN: kept
  x = _mm256_min_ps(_mm256_set1_ps(88.f), x);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  // n in [-126, 127] here: (n + 127) << 23 is 2^n. A NaN n converts to INT_MIN, and p is NaN.
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(tiny, _mm256_mul_ps(p, _mm256_castsi256_ps(e)));
}

ORTMLX_AVX2 inline float max_avx2(const float* x, int n) {
  __m256 m = _mm256_set1_ps(kNegInf);
  int j = 0;
  for (; j + 8 <= n; j += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + j));
  const float v = hmax256(m), t = max_scalar(x + j, n - j);
  return t > v ? t : v;
}

ORTMLX_AVX2 inline float exp_sum_avx2(float* x, int n, float shift) {
  const __m256 sh = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256 e = exp256(_mm256_sub_ps(_mm256_loadu_ps(x + j), sh));
    _mm256_storeu_ps(x + j, e);
    acc = _mm256_add_ps(acc, e);
  }
  return hsum256(acc) + exp_sum_scalar(x + j, n - j, shift);
}

ORTMLX_AVX2 inline void scale_avx2(float* x, int n, float a) {
  const __m256 va = _mm256_set1_ps(a);
  int j = 0;
  for (; j + 8 <= n; j += 8) _mm256_storeu_ps(x + j, _mm256_mul_ps(_mm256_loadu_ps(x + j), va));
  scale_scalar(x + j, n - j, a);
}

ORTMLX_AVX2 inline void ds_avx2(const float* p, float* dp, int n, float delta) {
  const __m256 dl = _mm256_set1_ps(delta);
  int j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(
        dp + j, _mm256_mul_ps(_mm256_loadu_ps(p + j), _mm256_sub_ps(_mm256_loadu_ps(dp + j), dl)));
  ds_scalar(p + j, dp + j, n - j, delta);
}

ORTMLX_AVX2 inline float dot_avx2(const float* a, const float* b, int n) {
  __m256 acc = _mm256_setzero_ps();
  int j = 0;
  for (; j + 8 <= n; j += 8)
    acc = _mm256_fmadd_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j), acc);
  return hsum256(acc) + dot_scalar(a + j, b + j, n - j);
}

ORTMLX_AVX2 inline void add_avx2(float* x, const float* m, int n) {
  int j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(x + j, _mm256_add_ps(_mm256_loadu_ps(x + j), _mm256_loadu_ps(m + j)));
  add_scalar(x + j, m + j, n - j);
}

// x[j] = -inf where the keep-mask byte is 0.
ORTMLX_AVX2 inline void keep_avx2(float* x, const uint8_t* m, int n) {
  const __m256 ninf = _mm256_set1_ps(kNegInf);
  int j = 0;
  for (; j + 8 <= n; j += 8) {
    const __m256i bytes =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(m + j)));
    const __m256i drop = _mm256_cmpeq_epi32(bytes, _mm256_setzero_si256());
    _mm256_maskstore_ps(x + j, drop, ninf);
  }
  keep_scalar(x + j, m + j, n - j);
}

#pragma GCC diagnostic pop

inline bool have_avx512() {
  static const bool yes = __builtin_cpu_supports("avx512f");
  return yes;
}
inline bool have_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#define ORTMLX_AVJP_DISPATCH(fn, ...)             \
  (isa == Isa::kAvx512 ? fn##_avx512(__VA_ARGS__) \
   : isa == Isa::kAvx2 ? fn##_avx2(__VA_ARGS__)   \
                       : fn##_scalar(__VA_ARGS__))
#else
inline bool have_avx512() {
  return false;
}
inline bool have_avx2() {
  return false;
}
#define ORTMLX_AVJP_DISPATCH(fn, ...) ((void)isa, fn##_scalar(__VA_ARGS__))
#endif

// Whether this CPU runs an instruction set's kernels.
inline bool supported(Isa isa) {
  return isa == Isa::kPortable || (isa == Isa::kAvx2 && have_avx2()) ||
         (isa == Isa::kAvx512 && have_avx512());
}
// The fastest instruction set this CPU runs.
inline Isa best_isa() {
  return have_avx512() ? Isa::kAvx512 : have_avx2() ? Isa::kAvx2 : Isa::kPortable;
}

// ---- the entry points the kernel uses -------------------------------------------------------
inline float row_max(Isa isa, const float* x, int n) {
  return ORTMLX_AVJP_DISPATCH(max, x, n);
}
// x[j] = exp(x[j] - shift); returns the sum.
inline float exp_sum(Isa isa, float* x, int n, float shift) {
  return ORTMLX_AVJP_DISPATCH(exp_sum, x, n, shift);
}
inline void scale(Isa isa, float* x, int n, float a) {
  ORTMLX_AVJP_DISPATCH(scale, x, n, a);
}
// dp[j] = p[j] * (dp[j] - delta)
inline void ds(Isa isa, const float* p, float* dp, int n, float delta) {
  ORTMLX_AVJP_DISPATCH(ds, p, dp, n, delta);
}
inline float dot(Isa isa, const float* a, const float* b, int n) {
  return ORTMLX_AVJP_DISPATCH(dot, a, b, n);
}
inline void add(Isa isa, float* x, const float* m, int n) {
  ORTMLX_AVJP_DISPATCH(add, x, m, n);
}
inline void keep(Isa isa, float* x, const uint8_t* m, int n) {
  ORTMLX_AVJP_DISPATCH(keep, x, m, n);
}

#undef ORTMLX_AVJP_DISPATCH

}  // namespace ortmlx::attention_vjp::rows
