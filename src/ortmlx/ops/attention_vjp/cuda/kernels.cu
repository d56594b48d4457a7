// Fused AttentionVJP kernels for NVIDIA GPUs (the `cuda_fused` path, docs/ATTENTION_VJP.md).
// Built by nvcc into one sm_90 cubin per head-size bucket that the library embeds and hands to
// MLX with mx::fast::precompiled_cuda_kernel; host side: fused.cpp.
//
// Three passes, FlashAttention-2 style, fp32 throughout, no atomics:
//   1. stats:  per query row the log-sum-exp of its visible scores (NaN marks a dead row) and
//              delta = rowsum(dY * Y); the Recompute form first recomputes Y = P V (a second
//              sweep over the keys once the log-sum-exp is known).
//   2. dq:     one block per (query tile, batch, query head); loops over key tiles:
//              S = scale Q K^T + mask, P = exp(S - lse), dP = dY V^T, dS = P (dP - delta),
//              dQ += dS K; dQ = scale dQ at the end.
//   3. dkv:    one block per (key tile, batch, kv head); loops over the group's query heads and
//              the query tiles: S^T, P^T, dP^T, dS^T as above, dV += P^T dY, dK += dS^T Q.
//              A block owns its keys' dK/dV rows, so GQA groups are summed in registers.
//
// Threads: 256 per block as a 16 x 16 grid (tr, tc). Every product is a tile product in shared
// memory where thread (tr, tc) owns rows tr + 16 i and columns tc + 16 j of the result and keeps
// them in registers (register blocking). The two product helpers (tile_nt: A B^T, tile_nn: A B)
// are the only places that multiply, so a tensor-core (mma.sync) version can replace them.
// Shared-memory rows are padded to an odd stride so the 16 columns a warp reads hit 16 banks.
//
// Masks follow the contract: causal (top-left) and boolean-mask and beyond-the-width keys are
// hidden by a select (P = 0 whatever the score); an additive mask is added. A row with no
// visible finite score, or a visible NaN or +Inf score, is dead: P = 0 for every key. When all
// of Q, K, V, Y and dY are finite (a device flag computed by the host graph), tiles no row can
// see are skipped; otherwise every tile runs, so 0 * NaN and 0 * Inf reach the gradients through
// hidden pairs exactly as in the float64 reference.
//
// Layout: every tensor is read and written in its original layout through (batch, head, row)
// strides: rank 4 (B, H, S, D) or rank 3 (B, S, H*D). No transposes on the host.

#include "tiles.h"

#ifndef ORTMLX_AVJP_TAG
#define ORTMLX_AVJP_TAG dev
#endif
#define AVJP_CAT2(a, b) a##b
#define AVJP_CAT(a, b) AVJP_CAT2(a, b)

// The dynamic shared memory of every kernel (each lays out its tiles in it).
extern __shared__ float avjp_smem[];

namespace {

constexpr int kThreads = ortmlx_avjp_tiles::kThreads;
constexpr float kInf = __builtin_huge_valf();

struct Problem {
  int b, hq, hk, sq, sk, d, rank, causal, mask_kind;
  int mb, mh, mr, mw;  // the mask in 4-D (broadcast dims are 1)
  float scale;
  const void* mask;
  int finite;  // all of Q, K, V, Y, dY finite: hidden tiles may be skipped

  // Offset of row `row` of head `h` in batch `bi` of a tensor with `heads` heads, `rows` rows.
  __device__ long long offset(int bi, int h, int row, int heads, int rows) const {
    if (rank == 4) return ((static_cast<long long>(bi) * heads + h) * rows + row) * d;
    return (static_cast<long long>(bi) * rows + row) * heads * d + static_cast<long long>(h) * d;
  }
  // Row stride of such a tensor (consecutive rows of one head).
  __device__ long long row_stride(int heads) const { return rank == 4 ? d : heads * d; }

  // The masked score of query row i and key j of (batch bi, query head h): `dot` is Q.K. Sets
  // `hidden` for keys removed by a select (causal, boolean mask, beyond a narrow mask).
  __device__ float score(float dot, int bi, int h, int i, int j, bool& hidden) const {
    float s = dot * scale;
    hidden = causal && j > i;
    if (mask_kind != 0) {
      if (mw != 1 && j >= mw) {
        hidden = true;
      } else {
        const long long idx = (mb == 1 ? 0 : static_cast<long long>(bi) * mh * mr * mw) +
                              (mh == 1 ? 0 : static_cast<long long>(h) * mr * mw) +
                              (mr == 1 ? 0 : static_cast<long long>(i) * mw) + (mw == 1 ? 0 : j);
        if (mask_kind == 1) {
          if (!static_cast<const unsigned char*>(mask)[idx]) hidden = true;
        } else {
          s += static_cast<const float*>(mask)[idx];
        }
      }
    }
    return s;
  }

  // Keys [0, limit) can be visible to rows < row_end (causal, narrow mask); keys beyond are
  // hidden from every such row.
  __device__ int key_limit(int row_end) const {
    int lim = sk;
    if (causal) lim = min(lim, row_end);
    if (mask_kind != 0 && mw != 1) lim = min(lim, mw);
    return lim;
  }
};

// P of one score: 0 for hidden keys and dead rows (lse NaN), else exp(s - lse).
__device__ __forceinline__ float prob(float s, bool hidden, float lse) {
  if (hidden || isnan(lse)) return 0.f;
  return expf(s - lse);
}

// Loads `rows` rows (of `d` floats, row stride `stride`) from global memory into a shared tile
// of RT rows with row stride LD, zero-filling rows >= rows and columns >= d.
template <int RT, int DMAX, int LD>
__device__ void load_rows(float* dst, const float* src, long long stride, int rows, int d) {
  for (int e = threadIdx.x; e < RT * DMAX; e += kThreads) {
    const int r = e / DMAX, c = e % DMAX;
    dst[r * LD + c] = (r < rows && c < d) ? src[r * stride + c] : 0.f;
  }
}

// acc[i][j] += sum_k A[(tr + 16 i) * LDA + k] * B[(tc + 16 j) * LDB + k]  (A B^T)
template <int RM, int CN, int LDA, int LDB>
__device__ __forceinline__ void tile_nt(const float* A, const float* B, int kdim, int tr, int tc,
                                        float (&acc)[RM][CN]) {
#pragma unroll 4
  for (int k = 0; k < kdim; ++k) {
    float a[RM], bb[CN];
#pragma unroll
    for (int i = 0; i < RM; ++i) a[i] = A[(tr + 16 * i) * LDA + k];
#pragma unroll
    for (int j = 0; j < CN; ++j) bb[j] = B[(tc + 16 * j) * LDB + k];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int j = 0; j < CN; ++j) acc[i][j] = fmaf(a[i], bb[j], acc[i][j]);
  }
}

// acc[i][j] += sum_k A[(tr + 16 i) * LDA + k] * B[k * LDB + tc + 16 j]  (A B)
template <int RM, int CN, int LDA, int LDB, int KDIM>
__device__ __forceinline__ void tile_nn(const float* A, const float* B, int tr, int tc,
                                        float (&acc)[RM][CN]) {
#pragma unroll 4
  for (int k = 0; k < KDIM; ++k) {
    float a[RM], bb[CN];
#pragma unroll
    for (int i = 0; i < RM; ++i) a[i] = A[(tr + 16 * i) * LDA + k];
#pragma unroll
    for (int j = 0; j < CN; ++j) bb[j] = B[k * LDB + tc + 16 * j];
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int j = 0; j < CN; ++j) acc[i][j] = fmaf(a[i], bb[j], acc[i][j]);
  }
}

template <int RM, int CN>
__device__ __forceinline__ void zero(float (&acc)[RM][CN]) {
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < CN; ++j) acc[i][j] = 0.f;
}

// Online log-sum-exp state of one thread's share of a row.
struct RowStat {
  float m = -kInf, l = 0.f;
  bool bad = false;  // a visible NaN or +Inf score
  __device__ void add(float v) {
    if (isnan(v) || v == kInf) {
      bad = true;
    } else if (v > -kInf) {
      if (v > m) {
        l = l * expf(m - v) + 1.f;  // m = -inf at first: l = 0 * 0 + 1
        m = v;
      } else {
        l += expf(v - m);
      }
    }
  }
  __device__ void merge(const RowStat& o) {
    bad = bad || o.bad;
    const float nm = fmaxf(m, o.m);
    if (nm == -kInf) return;
    l = (m == -kInf ? 0.f : l * expf(m - nm)) + (o.m == -kInf ? 0.f : o.l * expf(o.m - nm));
    m = nm;
  }
  __device__ float lse() const {
    if (bad || m == -kInf) return __int_as_float(0x7fc00000);  // dead row: NaN
    return m + logf(l);
  }
};

// Tile sizes per head-size bucket (DMAX >= d, a multiple of 16): tiles.h.
template <int DMAX>
struct Tiles {
  static constexpr int BQ = ortmlx_avjp_tiles::bq(DMAX);  // query rows (stats, dq)
  static constexpr int BK = ortmlx_avjp_tiles::bk(DMAX);  // key rows per step (stats, dq)
  static constexpr int KV = ortmlx_avjp_tiles::kv(DMAX);  // key rows per block (dkv)
  static constexpr int KQ = ortmlx_avjp_tiles::kq(DMAX);  // query rows per step (dkv)
  static constexpr int LD = ortmlx_avjp_tiles::ld(DMAX);  // padded row stride of D-wide tiles
  static_assert(BQ % 16 == 0 && BK % 16 == 0 && KV % 16 == 0 && KQ % 16 == 0 && DMAX % 16 == 0);
};

// ---------------------------------------------------------------------------------------
// Pass 1: lse and delta. Grid (query tiles, B * HQ). RECOMPUTE: Y = P V first.
// Shared: Q (BQ x LD), K (BK x LD), S or P (BQ x BK+1), V (BK x LD, RECOMPUTE), lse (BQ).
// ---------------------------------------------------------------------------------------
template <int DMAX, bool RECOMPUTE>
__device__ void stats_kernel(const float* q, const float* k, const float* v, const float* y,
                             const float* dy, const Problem& p, float* lse_out, float* delta_out) {
  using T = Tiles<DMAX>;
  constexpr int BQ = T::BQ, BK = T::BK, LD = T::LD, LS = BK + 1;
  constexpr int RM = BQ / 16, CN = BK / 16, CD = DMAX / 16;
  float* qs = avjp_smem;
  float* ks = qs + BQ * LD;
  float* ss = ks + BK * LD;
  float* vs = ss + BQ * LS;
  float* lse_s = vs + BK * LD;

  const int tile = blockIdx.x, bh = blockIdx.y;
  const int bi = bh / p.hq, h = bh % p.hq, g = h / (p.hq / p.hk);
  const int i0 = tile * BQ, rows = min(BQ, p.sq - i0);
  const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
  const long long qstride = p.row_stride(p.hq), kstride = p.row_stride(p.hk);
  const long long qoff = p.offset(bi, h, i0, p.hq, p.sq);

  load_rows<BQ, DMAX, LD>(qs, q + qoff, qstride, rows, p.d);

  // Each row's stats are shared by 4 consecutive threads (row = tid / 4, columns tid % 4 + 4 c).
  const int srow = threadIdx.x / 4, spart = threadIdx.x % 4;
  constexpr int kRowsPerPass = kThreads / 4;
  RowStat st[(BQ + kRowsPerPass - 1) / kRowsPerPass];
  const int kend = p.key_limit(i0 + rows);  // hidden keys never change the log-sum-exp
  for (int j0 = 0; j0 < kend; j0 += BK) {
    const int cols = min(BK, p.sk - j0);
    __syncthreads();
    load_rows<BK, DMAX, LD>(ks, k + p.offset(bi, g, j0, p.hk, p.sk), kstride, cols, p.d);
    __syncthreads();
    float acc[RM][CN];
    zero(acc);
    tile_nt<RM, CN, LD, LD>(qs, ks, p.d, tr, tc, acc);
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int j = 0; j < CN; ++j) {
        const int r = tr + 16 * i, c = tc + 16 * j;
        bool hidden = true;
        float s = 0.f;
        if (r < rows && c < cols) s = p.score(acc[i][j], bi, h, i0 + r, j0 + c, hidden);
        ss[r * LS + c] = hidden ? -kInf : s;
      }
    __syncthreads();
    for (int pass = 0; pass * kRowsPerPass < BQ; ++pass) {
      const int r = srow + pass * kRowsPerPass;
      if (r < BQ)
        for (int c = spart; c < BK; c += 4) st[pass].add(ss[r * LS + c]);
    }
  }
  // Combine the 4 threads of each row (consecutive lanes), then publish lse in shared memory.
  __syncthreads();
  for (int pass = 0; pass * kRowsPerPass < BQ; ++pass) {
    RowStat s = st[pass];
    for (int off = 1; off < 4; off <<= 1) {
      RowStat o;
      o.m = __shfl_xor_sync(0xffffffffu, s.m, off);
      o.l = __shfl_xor_sync(0xffffffffu, s.l, off);
      o.bad = __shfl_xor_sync(0xffffffffu, static_cast<int>(s.bad), off) != 0;
      s.merge(o);
    }
    const int r = srow + pass * kRowsPerPass;
    if (spart == 0 && r < BQ) lse_s[r] = s.lse();
  }
  __syncthreads();

  // delta = rowsum(dY * Y), with Y given (plain) or recomputed as P V over every key it needs.
  float yacc[RM][CD];
  zero(yacc);
  if (RECOMPUTE) {
    float* ps = ss;                           // the score tile's space holds P now
    const int yend = p.finite ? kend : p.sk;  // non-finite V: 0 * V_j reaches Y for hidden keys
    for (int j0 = 0; j0 < yend; j0 += BK) {
      const int cols = min(BK, p.sk - j0);
      __syncthreads();
      load_rows<BK, DMAX, LD>(ks, k + p.offset(bi, g, j0, p.hk, p.sk), kstride, cols, p.d);
      load_rows<BK, DMAX, LD>(vs, v + p.offset(bi, g, j0, p.hk, p.sk), kstride, cols, p.d);
      __syncthreads();
      float acc[RM][CN];
      zero(acc);
      tile_nt<RM, CN, LD, LD>(qs, ks, p.d, tr, tc, acc);
#pragma unroll
      for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < CN; ++j) {
          const int r = tr + 16 * i, c = tc + 16 * j;
          float pv = 0.f;
          if (r < rows && c < cols) {
            bool hidden;
            const float s = p.score(acc[i][j], bi, h, i0 + r, j0 + c, hidden);
            pv = prob(s, hidden, lse_s[r]);
          }
          ps[r * LS + c] = pv;
        }
      __syncthreads();
      tile_nn<RM, CD, LS, LD, BK>(ps, vs, tr, tc, yacc);
    }
  } else {
#pragma unroll
    for (int i = 0; i < RM; ++i) {
      const int r = tr + 16 * i;
#pragma unroll
      for (int j = 0; j < CD; ++j) {
        const int c = tc + 16 * j;
        yacc[i][j] = (r < rows && c < p.d) ? y[qoff + r * qstride + c] : 0.f;
      }
    }
  }
  // Row sums over the 16 threads tc = 0..15 of a row group (16 consecutive lanes).
#pragma unroll
  for (int i = 0; i < RM; ++i) {
    const int r = tr + 16 * i;
    float part = 0.f;
#pragma unroll
    for (int j = 0; j < CD; ++j) {
      const int c = tc + 16 * j;
      if (r < rows && c < p.d) part = fmaf(dy[qoff + r * qstride + c], yacc[i][j], part);
    }
    for (int off = 1; off < 16; off <<= 1) part += __shfl_xor_sync(0xffffffffu, part, off);
    if (tc == 0 && r < rows) {
      const long long row = static_cast<long long>(bh) * p.sq + i0 + r;
      delta_out[row] = part;
      lse_out[row] = lse_s[r];
    }
  }
}

// ---------------------------------------------------------------------------------------
// Pass 2: dQ. Grid (query tiles, B * HQ).
// Shared: Q, dY (BQ x LD), K, V (BK x LD), dS (BQ x BK+1), lse, delta (BQ).
// ---------------------------------------------------------------------------------------
template <int DMAX>
__device__ void dq_kernel(const float* q, const float* k, const float* v, const float* dy,
                          const float* lse, const float* delta, const Problem& p, float* dq) {
  using T = Tiles<DMAX>;
  constexpr int BQ = T::BQ, BK = T::BK, LD = T::LD, LS = BK + 1;
  constexpr int RM = BQ / 16, CN = BK / 16, CD = DMAX / 16;
  float* qs = avjp_smem;
  float* dys = qs + BQ * LD;
  float* ks = dys + BQ * LD;
  float* vs = ks + BK * LD;
  float* dss = vs + BK * LD;
  float* lse_s = dss + BQ * LS;
  float* delta_s = lse_s + BQ;

  const int tile = blockIdx.x, bh = blockIdx.y;
  const int bi = bh / p.hq, h = bh % p.hq, g = h / (p.hq / p.hk);
  const int i0 = tile * BQ, rows = min(BQ, p.sq - i0);
  const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
  const long long qstride = p.row_stride(p.hq), kstride = p.row_stride(p.hk);
  const long long qoff = p.offset(bi, h, i0, p.hq, p.sq);

  load_rows<BQ, DMAX, LD>(qs, q + qoff, qstride, rows, p.d);
  load_rows<BQ, DMAX, LD>(dys, dy + qoff, qstride, rows, p.d);
  for (int r = threadIdx.x; r < BQ; r += kThreads) {
    const long long row = static_cast<long long>(bh) * p.sq + i0 + r;
    lse_s[r] = r < rows ? lse[row] : 0.f;
    delta_s[r] = r < rows ? delta[row] : 0.f;
  }

  float dacc[RM][CD];
  zero(dacc);
  const int kend = p.finite ? p.key_limit(i0 + rows) : p.sk;
  for (int j0 = 0; j0 < kend; j0 += BK) {
    const int cols = min(BK, p.sk - j0);
    __syncthreads();
    const long long koff = p.offset(bi, g, j0, p.hk, p.sk);
    load_rows<BK, DMAX, LD>(ks, k + koff, kstride, cols, p.d);
    load_rows<BK, DMAX, LD>(vs, v + koff, kstride, cols, p.d);
    __syncthreads();
    float sacc[RM][CN], pacc[RM][CN];
    zero(sacc);
    zero(pacc);
    tile_nt<RM, CN, LD, LD>(qs, ks, p.d, tr, tc, sacc);
    tile_nt<RM, CN, LD, LD>(dys, vs, p.d, tr, tc, pacc);
#pragma unroll
    for (int i = 0; i < RM; ++i)
#pragma unroll
      for (int j = 0; j < CN; ++j) {
        const int r = tr + 16 * i, c = tc + 16 * j;
        float ds = 0.f;
        if (r < rows && c < cols) {
          bool hidden;
          const float s = p.score(sacc[i][j], bi, h, i0 + r, j0 + c, hidden);
          ds = prob(s, hidden, lse_s[r]) * (pacc[i][j] - delta_s[r]);
        }
        dss[r * LS + c] = ds;
      }
    __syncthreads();
    tile_nn<RM, CD, LS, LD, BK>(dss, ks, tr, tc, dacc);
  }
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < CD; ++j) {
      const int r = tr + 16 * i, c = tc + 16 * j;
      if (r < rows && c < p.d) dq[qoff + r * qstride + c] = dacc[i][j] * p.scale;
    }
}

// ---------------------------------------------------------------------------------------
// Pass 3: dK and dV. Grid (key tiles, B * HK). Loops over the group's query heads and tiles.
// Shared: K, V (KV x LD), Q, dY (KQ x LD), P^T, dS^T (KV x KQ+1), lse, delta (KQ).
// ---------------------------------------------------------------------------------------
template <int DMAX>
__device__ void dkv_kernel(const float* q, const float* k, const float* v, const float* dy,
                           const float* lse, const float* delta, const Problem& p, float* dk,
                           float* dv) {
  using T = Tiles<DMAX>;
  constexpr int KV = T::KV, KQ = T::KQ, LD = T::LD, LP = KQ + 1;
  constexpr int RM = KV / 16, CN = KQ / 16, CD = DMAX / 16;
  float* ks = avjp_smem;
  float* vs = ks + KV * LD;
  float* qs = vs + KV * LD;
  float* dys = qs + KQ * LD;
  float* pts = dys + KQ * LD;
  float* dsts = pts + KV * LP;
  float* lse_s = dsts + KV * LP;
  float* delta_s = lse_s + KQ;

  const int tile = blockIdx.x, bg = blockIdx.y;
  const int bi = bg / p.hk, g = bg % p.hk, group = p.hq / p.hk;
  const int j0 = tile * KV, cols = min(KV, p.sk - j0);
  const int tr = threadIdx.x / 16, tc = threadIdx.x % 16;
  const long long qstride = p.row_stride(p.hq), kstride = p.row_stride(p.hk);
  const long long koff = p.offset(bi, g, j0, p.hk, p.sk);

  load_rows<KV, DMAX, LD>(ks, k + koff, kstride, cols, p.d);
  load_rows<KV, DMAX, LD>(vs, v + koff, kstride, cols, p.d);

  float dkacc[RM][CD], dvacc[RM][CD];
  zero(dkacc);
  zero(dvacc);
  // With finite inputs, rows that see none of this tile's keys add exactly zero: causal rows
  // before the first key, and every row when the tile lies beyond a narrow mask.
  int ibegin = 0;
  bool none = false;
  if (p.finite) {
    if (p.causal) ibegin = (j0 / KQ) * KQ;
    if (p.mask_kind != 0 && p.mw != 1 && j0 >= p.mw) none = true;
  }
  for (int hh = 0; hh < group && !none; ++hh) {
    const int h = g * group + hh;
    for (int i0 = ibegin; i0 < p.sq; i0 += KQ) {
      const int rows = min(KQ, p.sq - i0);
      const long long qoff = p.offset(bi, h, i0, p.hq, p.sq);
      __syncthreads();
      load_rows<KQ, DMAX, LD>(qs, q + qoff, qstride, rows, p.d);
      load_rows<KQ, DMAX, LD>(dys, dy + qoff, qstride, rows, p.d);
      for (int r = threadIdx.x; r < KQ; r += kThreads) {
        const long long row = (static_cast<long long>(bi) * p.hq + h) * p.sq + i0 + r;
        lse_s[r] = r < rows ? lse[row] : 0.f;
        delta_s[r] = r < rows ? delta[row] : 0.f;
      }
      __syncthreads();
      // Transposed tiles: result rows are keys (tr + 16 i), columns are query rows.
      float sacc[RM][CN], pacc[RM][CN];
      zero(sacc);
      zero(pacc);
      tile_nt<RM, CN, LD, LD>(ks, qs, p.d, tr, tc, sacc);
      tile_nt<RM, CN, LD, LD>(vs, dys, p.d, tr, tc, pacc);
#pragma unroll
      for (int i = 0; i < RM; ++i)
#pragma unroll
        for (int j = 0; j < CN; ++j) {
          const int key = tr + 16 * i, qr = tc + 16 * j;
          float pv = 0.f, ds = 0.f;
          if (key < cols && qr < rows) {
            bool hidden;
            const float s = p.score(sacc[i][j], bi, h, i0 + qr, j0 + key, hidden);
            pv = prob(s, hidden, lse_s[qr]);
            ds = pv * (pacc[i][j] - delta_s[qr]);
          }
          pts[key * LP + qr] = pv;
          dsts[key * LP + qr] = ds;
        }
      __syncthreads();
      tile_nn<RM, CD, LP, LD, KQ>(pts, dys, tr, tc, dvacc);
      tile_nn<RM, CD, LP, LD, KQ>(dsts, qs, tr, tc, dkacc);
    }
  }
#pragma unroll
  for (int i = 0; i < RM; ++i)
#pragma unroll
    for (int j = 0; j < CD; ++j) {
      const int key = tr + 16 * i, c = tc + 16 * j;
      if (key < cols && c < p.d) {
        dk[koff + key * kstride + c] = dkacc[i][j] * p.scale;
        dv[koff + key * kstride + c] = dvacc[i][j];
      }
    }
}

}  // namespace

// Entry points, one per head-size bucket. Argument order is MLX's for precompiled kernels:
// inputs, outputs, then the scalars (int, float) in the order the host passes them.
#define AVJP_SCALARS                                                                         \
  int b, int hq, int hk, int sq, int sk, int d, int rank, int causal, int mask_kind, int mb, \
      int mh, int mr, int mw, float scale
#define AVJP_PROBLEM(mask, finite)                                                        \
  Problem p {                                                                             \
    b, hq, hk, sq, sk, d, rank, causal, mask_kind, mb, mh, mr, mw, scale, mask, finite[0] \
  }

#define AVJP_ENTRIES(DMAX)                                                                    \
  extern "C" __global__ void __launch_bounds__(kThreads)                                      \
      AVJP_CAT(ortmlx_avjp_stats_d##DMAX##_, ORTMLX_AVJP_TAG)(                                \
          const float* q, const float* k, const float* v, const float* y, const float* dy,    \
          const void* mask, const int* finite, float* lse, float* delta, AVJP_SCALARS) {      \
    AVJP_PROBLEM(mask, finite);                                                               \
    stats_kernel<DMAX, false>(q, k, v, y, dy, p, lse, delta);                                 \
  }                                                                                           \
  extern "C" __global__ void __launch_bounds__(kThreads)                                      \
      AVJP_CAT(ortmlx_avjp_stats_recompute_d##DMAX##_, ORTMLX_AVJP_TAG)(                      \
          const float* q, const float* k, const float* v, const float* y, const float* dy,    \
          const void* mask, const int* finite, float* lse, float* delta, AVJP_SCALARS) {      \
    AVJP_PROBLEM(mask, finite);                                                               \
    stats_kernel<DMAX, true>(q, k, v, y, dy, p, lse, delta);                                  \
  }                                                                                           \
  extern "C" __global__ void __launch_bounds__(kThreads)                                      \
      AVJP_CAT(ortmlx_avjp_dq_d##DMAX##_, ORTMLX_AVJP_TAG)(                                   \
          const float* q, const float* k, const float* v, const float* dy, const void* mask,  \
          const int* finite, const float* lse, const float* delta, float* dq, AVJP_SCALARS) { \
    AVJP_PROBLEM(mask, finite);                                                               \
    dq_kernel<DMAX>(q, k, v, dy, lse, delta, p, dq);                                          \
  }                                                                                           \
  extern "C" __global__ void __launch_bounds__(kThreads)                                      \
      AVJP_CAT(ortmlx_avjp_dkv_d##DMAX##_, ORTMLX_AVJP_TAG)(                                  \
          const float* q, const float* k, const float* v, const float* dy, const void* mask,  \
          const int* finite, const float* lse, const float* delta, float* dk, float* dv,      \
          AVJP_SCALARS) {                                                                     \
    AVJP_PROBLEM(mask, finite);                                                               \
    dkv_kernel<DMAX>(q, k, v, dy, lse, delta, p, dk, dv);                                     \
  }

// One head-size bucket per build (-DAVJP_BUCKET=...): MLX hashes a precompiled kernel's whole
// binary on every launch, so each bucket is its own small module. Without it, all of them.
#if defined(AVJP_BUCKET)
#define AVJP_ENTRIES_OF(b) AVJP_ENTRIES(b)  // expands AVJP_BUCKET before the token pasting
AVJP_ENTRIES_OF(AVJP_BUCKET)
#else
AVJP_ENTRIES(32)
AVJP_ENTRIES(64)
AVJP_ENTRIES(128)
AVJP_ENTRIES(256)
#endif
