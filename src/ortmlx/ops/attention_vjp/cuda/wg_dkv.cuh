// The dK/dV pass of the fused AttentionVJP kernels on warpgroup MMAs (wgmma.cuh): the EP's TF32
// mode, head-size buckets 64 and 128 (head sizes 33-128), sm_90a. Included by kernels.cu (after
// warp_rows.cuh, whose helpers it shares); the emulator (tools/avjp_cuda_emu) runs it too.
//
// Grid as the warp-row dkv pass: (key tiles of 128, B * HK), 256 threads = 2 warpgroups, and
// warpgroup w owns keys 64 w .. 64 w + 63 of the block's tile. Steps run over the group's query
// heads and their query tiles of KQ rows; per step:
//   S^T  = K_w Q^T     A: the warpgroup's K rows (descriptor)   B: the Q tile (KQ x D)
//   dP^T = V_w dY^T    A: its V rows (descriptor)               B: the dY tile
//   P^T and dS^T in the accumulators (scale, masks, lse, delta as in the other kernels)
//   dV_w += P^T dY     A: P^T from the accumulators             B: dY^T (D x KQ, k permuted)
//   dK_w += dS^T Q     A: dS^T from the accumulators            B: Q^T
//   WITH_DQ: dQ^T += K^T dS^T over the block's 128 keys, A: K^T fragments read from the K tile
//   (D 128) or a K^T tile written once (D 64, by descriptor; no room for it at D 128), B: dS (KQ x
//   128) written by both warpgroups; warpgroup w takes the d rows 64 w .. (D 128) or the queries 32
//   w .. (D 64); the block's dQ tile goes through shared memory to global memory as 16-byte atomics
//   (sum order varies run to run).
// The products chain in the tensor cores, as the mma.sync TF32 mode's do (its drift is far
// below TF32's operand rounding).
//
// What a step reads comes ready from the pack pass (wg_pack, one block a query tile, run first):
// Q and dY rounded to TF32 in the core-matrix layout, their transposes (the B operands of dV and
// dK) and the rows' lse and delta, as one image per query tile in global memory
// (tiles.h, wg_image_floats), so that the step neither rounds nor transposes, and its tiles arrive
// by bulk copies (TMA) that one thread issues on two mbarriers: Q, dY, lse, delta (barrier 0)
// once S^T and dP^T are done with the last ones (lse and delta into the other of two buffers: the
// softmax still reads the last), Q^T and dY^T (barrier 1) once dV and dK (with dQ: and dQ^T)
// are.
//
// Shared memory (floats, core-matrix layout): K, V (128 x D), K^T at D 64 (D x 128), dS (KQ x
// 128; dQ is staged there too), the image's Q, dY (KQ x D), Q^T, dY^T (D x KQ, strides padded:
// WgTransposed), two lse/delta buffers (2 KQ each), the mbarriers: WgTiles, tiles.h wg_dkv_smem.
#pragma once

#include "wgmma.cuh"

#include <type_traits>

// Phase timing for tools/wgmma_probe/dkv_timing.cu (AVJP_WG_TIMING): thread 0 of each block adds
// the cycles since the previous mark to phase i of avjp_wg_cycles. Empty in the library.
#if defined(AVJP_WG_TIMING)
__device__ unsigned long long avjp_wg_cycles[8];
#define AVJP_WG_MARK(i)                                                           \
  do {                                                                            \
    if (threadIdx.x == 0) {                                                       \
      const long long now = clock64();                                            \
      atomicAdd(&avjp_wg_cycles[i], static_cast<unsigned long long>(now - mark)); \
      mark = now;                                                                 \
    }                                                                             \
  } while (0)
#define AVJP_WG_MARK_START long long mark = clock64()
#else
#define AVJP_WG_MARK(i) \
  do {                  \
  } while (0)
#define AVJP_WG_MARK_START
#endif

namespace {

// Whether a bucket has this pass.
template <int DMAX>
constexpr bool kWgBucket = ortmlx_avjp_tiles::wg_bucket(DMAX);

template <int DMAX>
struct WgTiles {
  static constexpr int KEYS = ortmlx_avjp_tiles::kWgKeys;                // per block
  static constexpr int KQ = ortmlx_avjp_tiles::wg_kq(DMAX);              // query rows per step
  static constexpr int T_FLOATS = ortmlx_avjp_tiles::wg_t_floats(DMAX);  // Q^T, dY^T (padded)
  static constexpr bool KT_TILE = ortmlx_avjp_tiles::wg_kt_tile(DMAX);
  static constexpr int K = 0, V = K + KEYS * DMAX, KT = V + KEYS * DMAX;
  static constexpr int DS = KT + (KT_TILE ? DMAX * KEYS : 0);
  // The image (wg_pack's order; offsets within it: I_*), then the second lse/delta buffer.
  static constexpr int I_Q = 0, I_Y = KQ * DMAX, I_LSE = 2 * KQ * DMAX, I_QT = I_LSE + 2 * KQ;
  static constexpr int I_YT = I_QT + T_FLOATS, IMAGE = I_YT + T_FLOATS;
  static constexpr int IMG = DS + KQ * KEYS, LSE2 = IMG + IMAGE, BARS = LSE2 + 2 * KQ;
  static constexpr int FLOATS = BARS + 4;  // two 8-byte mbarriers
  static_assert(IMAGE == ortmlx_avjp_tiles::wg_image_floats(DMAX), "tiles.h image");
  static_assert(4 * FLOATS == ortmlx_avjp_tiles::wg_dkv_smem(DMAX), "tiles.h layout");
  static_assert(KEYS >= DMAX, "dQ is staged in the dS tile");
  static_assert(DMAX == 64 || DMAX == 128, "wgmma buckets");
};

// Chunk e of 4 floats of an R x C core-matrix tile: consecutive chunks run down the 8 rows of
// a band first (8 x 16 bytes contiguous in shared memory: conflict-free stores).
template <int C>
__device__ __forceinline__ void cm_chunk(int e, int& row, int& col) {
  constexpr int C4 = C / 4;
  row = e / (8 * C4) * 8 + e % 8;
  col = e / 8 % C4 * 4;
}

// Rows [0, rows) x columns [0, d) of a global tile (row stride `stride`) into an R x DMAX
// core-matrix tile, zeros elsewhere: cp.async where the source allows 16-byte copies (visible
// after cp_async_wait and a barrier), else plain loads and stores.
template <int R, int DMAX>
__device__ __forceinline__ void fetch_cm(float* dst, const float* src, long long stride, int rows,
                                         int d) {
  const bool vec =
      reinterpret_cast<unsigned long long>(src) % 16 == 0 && stride % 4 == 0 && d % 4 == 0;
  for (int e = threadIdx.x; e < R * DMAX / 4; e += kThreads) {
    int r, c;
    cm_chunk<DMAX>(e, r, c);
    const bool valid = r < rows && c < d;
    float* out = dst + cm_index(r, c, DMAX);
    if (vec) {
      cp_async16(out, valid ? src + r * stride + c : src, valid);
    } else {
      *reinterpret_cast<float4*>(out) =
          valid ? chunk_scalar(src + r * stride + c, c, d) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
}

// x rounded to TF32 (nearest): with finite inputs the integer add of round_tf32_finite (one
// instruction; the MMA ignores the low 13 bits), else cvt.rna, which keeps Inf and NaN.
__device__ __forceinline__ float wg_round(float x, bool finite) {
  return __uint_as_float(finite ? round_tf32_finite(x) : cvt_tf32(x));
}

// The layout of Q^T and dY^T (DMAX x KQ): core matrices as cm_index's, spaced kWgTLead floats
// apart along K and wg_t_stride(KQ) floats from band to band (tiles.h), so that a warp's
// transposing stores (8 query rows x 4 chunks of d) fall in 32 banks; with cm_index's 32 and 8 KQ
// (both 0 mod 32) they fell in 8, 4-way conflicts. The descriptor carries the same offsets.
template <int KQ>
struct WgTransposed {
  static constexpr int LEAD = ortmlx_avjp_tiles::kWgTLead;
  static constexpr int STRIDE = ortmlx_avjp_tiles::wg_t_stride(KQ);
  __device__ static __forceinline__ int index(int r, int c) {
    return (r >> 3) * STRIDE + (c >> 2) * LEAD + (r & 7) * 4 + (c & 3);
  }
  // The B operand of k-step j (columns 8 j .. 8 j + 7).
  __device__ static __forceinline__ unsigned long long desc(const float* t, int j) {
    return wg_desc_strided(t + 2 * LEAD * j, 4u * LEAD, 4u * STRIDE);
  }
};

// Rounds a KQ x DMAX core-matrix tile to TF32 in place and writes its transpose (DMAX x KQ, the
// K index permuted for accumulator-born A operands; WgTransposed's layout) beside it. A thread
// takes 4 consecutive columns of a row (one 16-byte chunk; lanes run down the 8 rows of a band
// first, so the 128-bit loads and stores are conflict-free) and scatters them into 4 rows of the
// transpose.
template <int KQ, int DMAX>
__device__ __forceinline__ void round_and_transpose(float* tile, float* transposed, bool finite) {
#pragma unroll
  for (int e = threadIdx.x; e < KQ * DMAX / 4; e += kThreads) {
    int q, d;
    cm_chunk<DMAX>(e, q, d);
    float4* chunk = reinterpret_cast<float4*>(tile + cm_index(q, d, DMAX));
    float4 x = *chunk;
    x.x = wg_round(x.x, finite);
    x.y = wg_round(x.y, finite);
    x.z = wg_round(x.z, finite);
    x.w = wg_round(x.w, finite);
    *chunk = x;
    float* col = transposed + WgTransposed<KQ>::index(d, perm_k(q));  // rows d .. d + 3: 4 apart
    col[0] = x.x;
    col[4] = x.y;
    col[8] = x.z;
    col[12] = x.w;
  }
}

// The pack pass: block (query tile, B * HQ) writes the tile's step image (WgTiles: Q and dY
// rounded to TF32 in the core-matrix layout, lse, delta, Q^T, dY^T; zeros beyond the rows and
// the head size) to image blockIdx.y * gridDim.x + blockIdx.x of `images`, built in shared
// memory and stored as whole 16-byte chunks. Rounding by cvt.rna (Inf and NaN kept).
template <int DMAX>
__device__ __forceinline__ void wg_pack(const float* q, const float* dy, const float* lse,
                                        const float* delta, const Problem& p, float* images) {
  using T = WgTiles<DMAX>;
  constexpr int KQ = T::KQ;
  const int tid = static_cast<int>(threadIdx.x), bh = blockIdx.y, tile = blockIdx.x;
  const int bi = bh / p.hq, h = bh % p.hq, i0 = tile * KQ, rows = min(KQ, p.sq - i0);
  const long long qoff = p.offset(bi, h, i0, p.hq, p.sq), qstride = p.row_stride(p.hq);
  float* img = avjp_smem;
  fetch_cm<KQ, DMAX>(img + T::I_Q, q + qoff, qstride, rows, p.d);
  fetch_cm<KQ, DMAX>(img + T::I_Y, dy + qoff, qstride, rows, p.d);
  cp_async_commit();
  if (tid < KQ) {
    const long long row = static_cast<long long>(bh) * p.sq + i0 + tid;
    img[T::I_LSE + tid] = tid < rows ? lse[row] : 0.f;
    img[T::I_LSE + KQ + tid] = tid < rows ? delta[row] : 0.f;
  }
  cp_async_wait<0>();
  __syncthreads();
  round_and_transpose<KQ, DMAX>(img + T::I_Q, img + T::I_QT, false);
  round_and_transpose<KQ, DMAX>(img + T::I_Y, img + T::I_YT, false);
  __syncthreads();
  float4* out = reinterpret_cast<float4*>(images + (static_cast<long long>(bh) * gridDim.x + tile) *
                                                       T::IMAGE);
  for (int e = tid; e < T::IMAGE / 4; e += kThreads)
    out[e] = reinterpret_cast<const float4*>(img)[e];
}

template <int DMAX, bool WITH_DQ>
__device__ __forceinline__ void wg_dkv_kernel(const float* images, const float* k, const float* v,
                                              const Problem& p, float* dk, float* dv, float* dq) {
  using T = WgTiles<DMAX>;
  constexpr int KEYS = T::KEYS, KQ = T::KQ, NQ = KQ / 8, ND = DMAX / 8;
  float* ks = avjp_smem + T::K;
  float* vs = avjp_smem + T::V;
  float* dss = avjp_smem + T::DS;
  float* img = avjp_smem + T::IMG;
  float* qs = img + T::I_Q;
  float* ys = img + T::I_Y;
  float* qts = img + T::I_QT;
  float* yts = img + T::I_YT;
  unsigned long long* bars = reinterpret_cast<unsigned long long*>(avjp_smem + T::BARS);

  const int tid = static_cast<int>(threadIdx.x), wg = tid / 128, warp = tid % 128 / 32;
  const int g = tid % 32 / 4, t = tid % 4;
  const int tile = blockIdx.x, bg = blockIdx.y;
  const int bi = bg / p.hk, gk = bg % p.hk, group = p.hq / p.hk;
  const int j0 = tile * KEYS, cols = min(KEYS, p.sk - j0);
  const int kw = 64 * wg;  // the warpgroup's first key in the tile
  const int qtiles = (p.sq + KQ - 1) / KQ;
  const long long qstride = p.row_stride(p.hq), kstride = p.row_stride(p.hk);
  const long long koff = p.offset(bi, gk, j0, p.hk, p.sk);

  // dQ's rows take 16-byte atomics where they are 16-byte aligned.
  const bool dq_vec = WITH_DQ && reinterpret_cast<unsigned long long>(dq) % 16 == 0 &&
                      qstride % 4 == 0 && p.d % 4 == 0;

  if (tid == 0) {
    mbar_init(&bars[0]);
    mbar_init(&bars[1]);
  }
  // K and V, rounded to TF32 once.
  fetch_cm<KEYS, DMAX>(ks, k + koff, kstride, cols, p.d);
  fetch_cm<KEYS, DMAX>(vs, v + koff, kstride, cols, p.d);
  cp_async_commit();
  cp_async_wait<0>();
  __syncthreads();
  const bool finite = p.finite != 0;
  for (int e = tid; e < KEYS * DMAX; e += kThreads) {
    ks[e] = wg_round(ks[e], finite);
    vs[e] = wg_round(vs[e], finite);
  }
  if constexpr (T::KT_TILE) {
    // K^T (D x KEYS) for dQ^T's A operand; element (c, key) from K's (key, c).
    __syncthreads();
    float* kts = avjp_smem + T::KT;
    for (int e = tid; e < KEYS * DMAX; e += kThreads) {
      const int c = e % DMAX, key = e / DMAX;
      kts[cm_index(c, key, KEYS)] = ks[cm_index(key, c, DMAX)];
    }
  }
  fence_smem_async();  // K, V (and K^T) are read by the products after the steps' barriers

  float dka[ND][4], dva[ND][4];
  zero_rows(dka);
  zero_rows(dva);
  int ibegin;
  const bool none = p.no_rows_see(j0, KQ, ibegin);
  const int tiles = (p.sq - ibegin + KQ - 1) / KQ, steps = none ? 0 : group * tiles;
  auto step_rows = [&](int n, int& i0, int& h) {
    i0 = ibegin + n % tiles * KQ;
    h = gk * group + n / tiles;
    return min(KQ, p.sq - i0);
  };
  // Step n's image in global memory, and its lse/delta buffer in shared memory.
  auto image = [&](int n) {
    int i0, h;
    step_rows(n, i0, h);
    return images + ((static_cast<long long>(bi) * p.hq + h) * qtiles + i0 / KQ) * T::IMAGE;
  };
  auto lse_buffer = [&](int n) { return n % 2 == 0 ? img + T::I_LSE : avjp_smem + T::LSE2; };
  // Thread 0 only, after a barrier that ends the reads of what the copies overwrite.
  auto fetch_rows = [&](int n) {  // Q, dY, lse, delta: barrier 0
    const float* src = image(n);
    constexpr unsigned QY = 4u * 2 * KQ * DMAX, LD = 4u * 2 * KQ;
    fence_smem_async();
    mbar_expect(&bars[0], QY + LD);
    bulk_copy(qs, src + T::I_Q, QY, &bars[0]);
    bulk_copy(lse_buffer(n), src + T::I_LSE, LD, &bars[0]);
  };
  auto fetch_transposed = [&](int n) {  // Q^T, dY^T: barrier 1
    constexpr unsigned TT = 4u * 2 * T::T_FLOATS;
    fence_smem_async();
    mbar_expect(&bars[1], TT);
    bulk_copy(qts, image(n) + T::I_QT, TT, &bars[1]);
  };
  __syncthreads();  // the barriers are initialised
  if (tid == 0 && steps > 0) {
    fetch_rows(0);
    fetch_transposed(0);
  }
  AVJP_WG_MARK_START;

  for (int n = 0; n < steps; ++n) {
    int i0, h;
    const int rows = step_rows(n, i0, h);
    const unsigned parity = n & 1;
    const float* lse_s = lse_buffer(n);
    const float* delta_s = lse_s + KQ;
    mbar_wait(&bars[0], parity);  // this step's Q, dY, lse, delta are in
    AVJP_WG_MARK(0);

    // Every warpgroup runs every product of every step (a branch around wgmma makes ptxas
    // serialize them): a pair it need not compute (beyond the keys, hidden) gets P = dS = 0.
    // A chain's first product overwrites its accumulator (no zeroing: register writes between
    // the fence and the products made ptxas inject waits).
    float sa[NQ][4], pa[NQ][4];
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < ND; ++kk)
      wg_ss(sa, wg_desc(ks + cm_index(kw, 8 * kk, DMAX), DMAX), wg_desc(qs + 64 * kk, DMAX),
            kk > 0);
#pragma unroll
    for (int kk = 0; kk < ND; ++kk)
      wg_ss(pa, wg_desc(vs + cm_index(kw, 8 * kk, DMAX), DMAX), wg_desc(ys + 64 * kk, DMAX),
            kk > 0);
    wg_commit();
    wg_wait<0>();
    wg_pin(sa);
    wg_pin(pa);
    AVJP_WG_MARK(1);
    // Both warpgroups are done with Q and dY, and the last step with dS (dQ's staging) and the
    // other lse/delta buffer: the next step's rows copy in.
    __syncthreads();
    if (tid == 0 && n + 1 < steps) fetch_rows(n + 1);
    AVJP_WG_MARK(2);

    // P^T and dS^T in place (rounded to TF32: the A operands of dV and dK), dS into its tile.
    // Without a mask tensor (the common case) branch-free: selects for the keys and rows beyond
    // the tile and the causal rule; with one, the scores go through Problem::score.
    auto softmax = [&](auto masked) {
      // This thread's dS element of (j, e) is at ds_at + j 8 KEYS + (e & 1) 4 + (e >> 1) 64.
      const int krow = kw + 16 * warp + g;
      float* ds_at = dss + cm_index(2 * t, krow, KEYS);
#pragma unroll
      for (int j = 0; j < NQ; ++j) {
        // This thread's two query columns 8 j + 2 t (+ 1): their lse and delta in one load each.
        const float2 lse2 = *reinterpret_cast<const float2*>(lse_s + 8 * j + 2 * t);
        const float2 delta2 = *reinterpret_cast<const float2*>(delta_s + 8 * j + 2 * t);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = krow + 8 * (e >> 1), qr = 8 * j + 2 * t + (e & 1);
          const float row_lse = e & 1 ? lse2.y : lse2.x;
          const float row_delta = e & 1 ? delta2.y : delta2.x;
          // Padding (beyond the keys or the rows) gives exact zeros; a hidden pair P = 0, and
          // dS = 0 * (dP - delta) as in the reference (NaN where dP is).
          const bool pad = key >= cols || qr >= rows;
          bool hidden;
          float sc;
          if constexpr (decltype(masked)::value) {
            hidden = false;
            sc = pad ? 0.f : p.score(sa[j][e], bi, h, i0 + qr, j0 + key, hidden);
          } else {
            sc = sa[j][e] * p.scale;
            hidden = p.causal && j0 + key > i0 + qr;
          }
          // __expf (ex2.approx): its error, a few fp32 ulps, is far below TF32's.
          const float ex = __expf(sc - row_lse);
          const float pv = pad || hidden || isnan(row_lse) ? 0.f : ex;
          const float ds = pad ? 0.f : pv * (pa[j][e] - row_delta);
          sa[j][e] = __uint_as_float(round_tf32_finite(pv));  // pv is finite: in [0, 1]
          pa[j][e] = wg_round(ds, finite);
          if (WITH_DQ) ds_at[j * 8 * KEYS + (e & 1) * 4 + (e >> 1) * 64] = pa[j][e];
        }
      }
    };
    if (p.mask_kind == 0)
      softmax(std::false_type{});
    else
      softmax(std::true_type{});
    AVJP_WG_MARK(3);
    mbar_wait(&bars[1], parity);  // this step's Q^T and dY^T are in
    wg_fence();
#pragma unroll
    for (int j = 0; j < NQ; ++j) {
      const unsigned a[4] = {__float_as_uint(sa[j][0]), __float_as_uint(sa[j][2]),
                             __float_as_uint(sa[j][1]), __float_as_uint(sa[j][3])};
      wg_rs(dva, a, WgTransposed<KQ>::desc(yts, j));
    }
#pragma unroll
    for (int j = 0; j < NQ; ++j) {
      const unsigned a[4] = {__float_as_uint(pa[j][0]), __float_as_uint(pa[j][2]),
                             __float_as_uint(pa[j][1]), __float_as_uint(pa[j][3])};
      wg_rs(dka, a, WgTransposed<KQ>::desc(qts, j));
    }
    wg_commit();
    AVJP_WG_MARK(4);
    if (WITH_DQ) {
      fence_smem_async();
      __syncthreads();  // both warpgroups' dS columns are written
      // dQ^T (d rows x queries) over the block's 128 keys: D 128, warpgroup w takes the d rows
      // 64 w..; D 64, the queries 32 w... Keys beyond `cols` have zero K rows and dS.
      const int m0 = DMAX == 128 ? 64 * wg : 0, qo = DMAX == 128 ? 0 : 32 * wg;
      const int dr = m0 + 16 * warp + g;
      float qa[4][4];
      if constexpr (T::KT_TILE) {
        // A (all D rows, the keys as K) by descriptor from the K^T tile.
        const float* kts = avjp_smem + T::KT;
        wg_wait<0>();
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < KEYS / 8; ++kk)
          wg_ss(qa, wg_desc(kts + cm_index(m0, 8 * kk, KEYS), KEYS),
                wg_desc(dss + cm_index(qo, 8 * kk, KEYS), KEYS), kk > 0);
        wg_commit();
      } else {
        // A from K^T fragments loaded here: issued 4 k-steps a group with at most two groups in
        // flight, so their registers (and dV/dK's A operands, waited for first) stay within
        // budget.
        wg_wait<0>();
#pragma unroll
        for (int kc = 0; kc < KEYS / 32; ++kc) {
          unsigned a[4][4];
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            const int key = 32 * kc + 8 * i + t;
            a[i][0] = __float_as_uint(ks[cm_index(key, dr, DMAX)]);
            a[i][1] = __float_as_uint(ks[cm_index(key, dr + 8, DMAX)]);
            a[i][2] = __float_as_uint(ks[cm_index(key + 4, dr, DMAX)]);
            a[i][3] = __float_as_uint(ks[cm_index(key + 4, dr + 8, DMAX)]);
          }
          wg_fence();
#pragma unroll
          for (int i = 0; i < 4; ++i)
            wg_rs(qa, a[i], wg_desc(dss + cm_index(qo, 32 * kc + 8 * i, KEYS), KEYS), kc + i > 0);
          wg_commit();
          wg_wait<1>();
        }
      }
      wg_wait<0>();
      wg_pin(qa);
      AVJP_WG_MARK(5);
      // Both warpgroups are done with Q^T and dY^T (dV, dK) and with dS (dQ^T): the next step's
      // transposes copy in, and the block's dQ tile (KQ x D) goes through the dS tile, so that
      // its sums reach global memory as 4-float atomics: a quarter of the scalar ones.
      __syncthreads();
      if (tid == 0 && n + 1 < steps) fetch_transposed(n + 1);
      const long long qoff = p.offset(bi, h, i0, p.hq, p.sq);
      // Row-major [query][d], the columns XOR-swizzled by the query so that the accumulator
      // fragments' stores fall in distinct banks.
      auto staged = [&](int qr, int c) -> float& { return dss[qr * DMAX + (c ^ ((qr & 6) << 2))]; };
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int c = dr + 8 * (e >> 1), qr = qo + 8 * j + 2 * t + (e & 1);
          staged(qr, c) = qa[j][e];
        }
      __syncthreads();
      if (dq_vec) {
#pragma unroll
        for (int e = tid; e < KQ * DMAX / 4; e += kThreads) {
          const int qr = e / (DMAX / 4), c = e % (DMAX / 4) * 4;
          if (qr < rows && c < p.d) {
            float4 x = *reinterpret_cast<const float4*>(&staged(qr, c));
            red_add4(dq + qoff + qr * qstride + c, x.x * p.scale, x.y * p.scale, x.z * p.scale,
                     x.w * p.scale);
          }
        }
      } else {
        for (int e = tid; e < KQ * DMAX; e += kThreads) {
          const int qr = e / DMAX, c = e % DMAX;
          if (qr < rows && c < p.d)
            atomicAdd(dq + qoff + qr * qstride + c, staged(qr, c) * p.scale);
        }
      }
    } else {
      wg_wait<0>();
      __syncthreads();  // both warpgroups are done with Q^T and dY^T
      if (tid == 0 && n + 1 < steps) fetch_transposed(n + 1);
    }
    wg_pin(dka);
    wg_pin(dva);
    AVJP_WG_MARK(6);
  }
#pragma unroll
  for (int j = 0; j < ND; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = kw + 16 * warp + g + 8 * (e >> 1), c = 8 * j + 2 * t + (e & 1);
      if (key < cols && c < p.d) {
        dk[koff + key * kstride + c] = dka[j][e] * p.scale;
        dv[koff + key * kstride + c] = dva[j][e];
      }
    }
}

}  // namespace
