// The stats pass of the fused AttentionVJP kernels on warpgroup MMAs (wgmma.cuh): the EP's TF32
// mode, plain form, head-size buckets 64 and 128 (head sizes 33-128), sm_90a. Included by
// kernels.cu after wg_dkv.cuh, whose tile helpers it shares; the emulator runs it too.
//
// Grid as the warp-row stats pass: (query tiles of 128, B * HQ), 256 threads = 2 warpgroups, and
// warpgroup w owns query rows 64 w .. 64 w + 63 of the block's tile. The Q tile is fetched once
// and rounded to TF32 in place; the key tiles of BK rows stream through STAGES buffers by
// cp.async, each rounded in place by the threads that copied it. Per key tile:
//   S = Q_w K^T        A: the warpgroup's Q rows (descriptor)   B: the key tile (BK x D)
// with no transposes (both operands are K-major as stored). The products of tile n run while
// the warpgroup folds tile n - 1's scores into its rows' running maximum and sum: a tile's
// maximum first, then one rescale of the sum, then the sum of its exponentials (rather than the
// warp-row pass's update per score). Each thread holds a share of two rows (the accumulator
// layout), merged over the quad at the end, where delta = rowsum(dY * Y) joins them: the rows
// a thread owns are those of the warp-row pass, so the epilogue is the same.
//
// Shared memory (floats, core-matrix layout): Q (128 x D), STAGES x K (BK x D): tiles.h,
// wg_stats_smem.
#pragma once

#include "wg_dkv.cuh"

namespace {

// Rounds to TF32, in place, the 16-byte chunks of an R x DMAX core-matrix tile that this thread
// fetched with fetch_cm (the same chunk order): once its copies are complete (cp_async_wait), no
// barrier is needed before it.
template <int R, int DMAX>
__device__ __forceinline__ void round_own_chunks(float* tile, bool finite) {
#pragma unroll
  for (int e = threadIdx.x; e < R * DMAX / 4; e += kThreads) {
    int r, c;
    cm_chunk<DMAX>(e, r, c);
    float4* chunk = reinterpret_cast<float4*>(tile + cm_index(r, c, DMAX));
    float4 x = *chunk;
    x.x = wg_round(x.x, finite);
    x.y = wg_round(x.y, finite);
    x.z = wg_round(x.z, finite);
    x.w = wg_round(x.w, finite);
    *chunk = x;
  }
}

// A thread's share of two rows of the log-sum-exp (rows r and r + 8 of the accumulator layout):
// RowStat's state, folded in a key tile at a time: the tile's maximum first, one rescale of the
// sum, then the sum of the tile's exponentials.
struct WgRowsLse {
  RowStat row[2];

  // s: a tile's scores Q.K from the accumulators, the thread's columns at key0 + 8 j + (e & 1).
  // Without a mask tensor (MASKED false) branch-free: selects for the causal rule and the keys
  // beyond sk; with one, through Problem::score. s is overwritten.
  template <bool MASKED, int NB>
  __device__ __forceinline__ void fold(float (&s)[NB][4], const Problem& p, int bi, int h, int qrow,
                                       int key0) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int qi = qrow + 8 * i;
      RowStat& st = row[i];
      float mt = -kInf;
#pragma unroll
      for (int j = 0; j < NB; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const int key = key0 + 8 * j + c;
          float& x = s[j][2 * i + c];
          bool hidden;
          float sc;
          if constexpr (MASKED) {
            hidden = key >= p.sk || qi >= p.sq;  // the mask has no such entry
            sc = hidden ? 0.f : p.score(x, bi, h, qi, key, hidden);
          } else {
            sc = x * p.scale;
            hidden = key >= p.sk || (p.causal && key > qi);
          }
          x = hidden ? -kInf : sc;
          st.bad = st.bad || isnan(x) || x == kInf;
          mt = fmaxf(mt, x);
        }
      const float mn = fmaxf(st.m, mt);
      const float base = mn == -kInf ? 0.f : mn;  // no visible score yet: every term is 0
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < NB; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) sum += __expf(s[j][2 * i + c] - base);
      st.l = st.l * __expf(st.m - base) + sum;
      st.m = mn;
    }
  }
};

template <int DMAX, int BK, int STAGES>
__device__ __forceinline__ void wg_stats_kernel(const float* q, const float* k, const float* y,
                                                const float* dy, const Problem& p, float* lse_out,
                                                float* delta_out) {
  constexpr int ROWS = ortmlx_avjp_tiles::kWgKeys, NB = BK / 8, ND = DMAX / 8;
  static_assert(DMAX == 64 || DMAX == 128, "wgmma buckets");
  static_assert((BK == 32 || BK == 64 || BK == 128) && STAGES >= 2, "key tiles");
  float* qs = avjp_smem;
  float* kbuf = avjp_smem + ROWS * DMAX;  // stage st at st * BK * DMAX

  const int tid = static_cast<int>(threadIdx.x), wg = tid / 128, warp = tid % 128 / 32;
  const int g = tid % 32 / 4, t = tid % 4;
  const int tile = blockIdx.x, bh = blockIdx.y;
  const int bi = bh / p.hq, h = bh % p.hq, gk = h / (p.hq / p.hk);
  const int i0 = tile * ROWS, rows = min(ROWS, p.sq - i0);
  const long long qstride = p.row_stride(p.hq), kstride = p.row_stride(p.hk);
  const long long qoff = p.offset(bi, h, i0, p.hq, p.sq);
  const bool finite = p.finite != 0;
  const int kend = p.key_limit(i0 + rows);  // hidden keys never change the log-sum-exp
  const int steps = (kend + BK - 1) / BK;

  // The Q tile joins the first key tile's copy group; one group per step, empty or not, so that
  // cp_async_wait<STAGES - 2> always means "this step's tile is in".
  fetch_cm<ROWS, DMAX>(qs, q + qoff, qstride, rows, p.d);
  auto fetch = [&](int n) {
    if (n < steps) {
      const int j0 = n * BK;
      fetch_cm<BK, DMAX>(kbuf + n % STAGES * BK * DMAX, k + p.offset(bi, gk, j0, p.hk, p.sk),
                         kstride, min(BK, p.sk - j0), p.d);
    }
    cp_async_commit();
  };
#pragma unroll
  for (int n = 0; n < STAGES - 1; ++n) fetch(n);

  // delta = rowsum(dY * Y) while the first tiles load, for the rows this thread's accumulators
  // hold: 16 (tid / 32) + g and + 8 of the block's tile.
  const int w0 = tid / 32 * 16;
  float part[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = w0 + g + 8 * i;
    if (r < rows)
      for (int c = t; c < p.d; c += 4)
        part[i] = fmaf(dy[qoff + r * qstride + c], y[qoff + r * qstride + c], part[i]);
  }

  // This thread's share of its two rows (query rows qrow and qrow + 8).
  WgRowsLse rs;
  const int qrow = i0 + 64 * wg + 16 * warp + g;
  auto fold_tile = [&](float(&s)[NB][4], int j0) {
    if (p.mask_kind == 0)
      rs.fold<false>(s, p, bi, h, qrow, j0 + 2 * t);
    else
      rs.fold<true>(s, p, bi, h, qrow, j0 + 2 * t);
  };

  float sa[NB][4], sp[NB][4];  // this step's scores, the previous step's
  for (int n = 0; n < steps; ++n) {
    cp_async_wait<STAGES - 2>();
    if (n == 0) round_own_chunks<ROWS, DMAX>(qs, finite);
    float* ks = kbuf + n % STAGES * BK * DMAX;
    round_own_chunks<BK, DMAX>(ks, finite);
    fence_smem_async();
    __syncthreads();  // tile n is in and rounded; both warpgroups' products of tile n - 1 are done
    fetch(n + STAGES - 1);  // into tile n - 1's stage
    zero_rows(sa);
    wg_fence();
#pragma unroll
    for (int kk = 0; kk < ND; ++kk)
      wg_ss(sa, wg_desc(qs + cm_index(64 * wg, 8 * kk, DMAX), DMAX), wg_desc(ks + 64 * kk, DMAX));
    wg_commit();
    if (n > 0) fold_tile(sp, (n - 1) * BK);  // under the products
    wg_wait<0>();
    wg_pin(sa);
#pragma unroll
    for (int j = 0; j < NB; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) sp[j][e] = sa[j][e];
  }
  if (steps > 0) fold_tile(sp, (steps - 1) * BK);
  cp_async_wait<0>();  // no copy outlives the block

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float row_lse = rs.row[i].merged_over_quad().lse();
    const float dsum = quad_sum(part[i]);
    const int r = w0 + g + 8 * i;
    if (t == 0 && r < rows) {
      const long long row = static_cast<long long>(bh) * p.sq + i0 + r;
      delta_out[row] = dsum;
      lse_out[row] = row_lse;
    }
  }
}

}  // namespace
