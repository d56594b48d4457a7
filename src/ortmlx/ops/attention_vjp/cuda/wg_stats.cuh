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

// Splits the 16-byte chunks of an R x DMAX core-matrix tile that this thread fetched with
// fetch_cm (the same chunk order) into the TF32 operands of precision P, in place: the hi plane
// is the fetched tile, the lo plane (where P has one: kInputLo) another of the same layout. The
// TF32 mode rounds (wg_round). Once its copies are complete (cp_async_wait) a thread needs no
// barrier before it.
template <int R, int DMAX, Precision P>
__device__ __forceinline__ void split_own_chunks(float* hi, float* lo, bool finite) {
#pragma unroll
  for (int e = threadIdx.x; e < R * DMAX / 4; e += kThreads) {
    int r, c;
    cm_chunk<DMAX>(e, r, c);
    const int at = cm_index(r, c, DMAX);
    float x[4];
    *reinterpret_cast<float4*>(x) = *reinterpret_cast<const float4*>(hi + at);
    unsigned h[4], l[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if constexpr (P == kTf32) {
        h[i] = __float_as_uint(wg_round(x[i], finite));
        l[i] = 0u;
      } else {
        split_input<P>(x[i], h[i], l[i]);
      }
    }
    *reinterpret_cast<uint4*>(hi + at) = make_uint4(h[0], h[1], h[2], h[3]);
    if constexpr (kInputLo<P>)
      *reinterpret_cast<uint4*>(lo + at) = make_uint4(l[0], l[1], l[2], l[3]);
  }
}

// A thread's share of two rows of the log-sum-exp (rows r and r + 8 of the accumulator layout):
// RowStat's running maximum and sum, folded in a key tile at a time: the tile's maximum first,
// one rescale of the sum, then the sum of the tile's exponentials. A visible NaN or +Inf score
// needs no flag per score: it turns the sum into NaN (NaN - base, or Inf - Inf), which lse() reads
// as a dead row before the quad's shares merge (RowStat's merge drops the sum of a share whose
// maximum is -Inf).
struct WgRowsLse {
  float m[2] = {-kInf, -kInf}, l[2] = {0.f, 0.f};

  // s: a tile's scores Q.K from the accumulators, the thread's columns at key0 + 8 j + (e & 1).
  // `edge`: a key of the tile may be hidden from a row of this thread (beyond sk, or by the
  // causal rule). Without a mask tensor (MASKED false) the other tiles take no selects at all
  // and edge tiles branch-free ones; with one, every score goes through Problem::score. s is
  // overwritten.
  template <bool MASKED, int NB>
  __device__ __forceinline__ void fold(float (&s)[NB][4], const Problem& p, int bi, int h, int qrow,
                                       int key0, bool edge) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int qi = qrow + 8 * i;
      float mt = -kInf;
      if (!MASKED && !edge) {
#pragma unroll
        for (int j = 0; j < NB; ++j)
#pragma unroll
          for (int c = 0; c < 2; ++c) {
            float& x = s[j][2 * i + c];
            x *= p.scale;
            mt = fmaxf(mt, x);
          }
      } else {
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
            mt = fmaxf(mt, x);
          }
      }
      const float mn = fmaxf(m[i], mt);
      const float base = mn == -kInf ? 0.f : mn;  // no visible score yet: every term is 0
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < NB; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) sum += __expf(s[j][2 * i + c] - base);
      l[i] = l[i] * __expf(m[i] - base) + sum;
      m[i] = mn;
    }
  }

  // Row i's log-sum-exp, the quad's shares merged (every lane of the warp calls it).
  __device__ __forceinline__ float lse(int i) const {
    RowStat st;
    st.m = m[i];
    st.l = l[i];
    st.bad = isnan(l[i]);
    return st.merged_over_quad().lse();
  }
};

template <int DMAX, Precision P, int BK, int STAGES>
__device__ __forceinline__ void wg_stats_kernel(const float* q, const float* k, const float* y,
                                                const float* dy, const Problem& p, float* lse_out,
                                                float* delta_out) {
  constexpr int ROWS = ortmlx_avjp_tiles::kWgKeys, NB = BK / 8, ND = DMAX / 8;
  constexpr bool LO = kInputLo<P>;  // Q and K carry lo planes (3xTF32 on fp32 inputs)
  constexpr int STAGE = (LO ? 2 : 1) * BK * DMAX;  // floats: K hi [, K lo]
  static_assert(DMAX == 64 || DMAX == 128, "wgmma buckets");
  static_assert((BK == 32 || BK == 64 || BK == 128) && STAGES >= 2, "key tiles");
  float* qs = avjp_smem;                                 // Q hi
  float* qlo = avjp_smem + ROWS * DMAX;                  // Q lo (LO)
  float* kbuf = avjp_smem + (LO ? 2 : 1) * ROWS * DMAX;  // stage st at st * STAGE

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
      fetch_cm<BK, DMAX>(kbuf + n % STAGES * STAGE, k + p.offset(bi, gk, j0, p.hk, p.sk), kstride,
                         min(BK, p.sk - j0), p.d);
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
    const bool edge = j0 + BK > p.sk || (p.causal && j0 + BK - 1 > qrow);
    if (p.mask_kind == 0)
      rs.fold<false>(s, p, bi, h, qrow, j0 + 2 * t, edge);
    else
      rs.fold<true>(s, p, bi, h, qrow, j0 + 2 * t, edge);
  };

  // The products of a tile: S in one chain (TF32), or, 3xTF32, the cross terms in one chain and
  // hi x hi in chains of 4 k-steps each, added at the end with round-to-nearest adds: an MMA
  // rounds its accumulator toward zero (tools/avjp_cuda_emu/emu.h), and over D / 8 k-steps in one
  // chain that bias reached 4x the warp-row pass's error (which adds every k-step apart; a wait
  // per k-step would stall wgmma). Non-finite inputs (kSplitSafe): the cross terms count only
  // where hi x hi is finite, as in mma_step.
  constexpr int CHAINS = P == kTf32 ? 1 : ND / 4;     // mode 2 chains as mode 0: the same bits
  float big[CHAINS][NB][4], small[NB][4], sp[NB][4];  // this step's products, the previous S
  for (int n = 0; n < steps; ++n) {
    cp_async_wait<STAGES - 2>();
    if (n == 0) split_own_chunks<ROWS, DMAX, P>(qs, qlo, finite);
    float* ks = kbuf + n % STAGES * STAGE;
    float* klo = ks + BK * DMAX;
    split_own_chunks<BK, DMAX, P>(ks, klo, finite);
    fence_smem_async();
    __syncthreads();  // tile n is in and split; both warpgroups' products of tile n - 1 are done
    fetch(n + STAGES - 1);  // into tile n - 1's stage
    wg_fence();
    const float* qw = qs + cm_index(64 * wg, 0, DMAX);  // the warpgroup's 64 rows
    const float* qlw = qlo + cm_index(64 * wg, 0, DMAX);
#pragma unroll
    for (int kk = 0; kk < ND; ++kk) {
      // Each chain's first product overwrites its accumulator (no zeroing).
      if constexpr (LO) {
        wg_ss(small, wg_desc(qlw + 64 * kk, DMAX), wg_desc(ks + 64 * kk, DMAX), kk > 0);
        wg_ss(small, wg_desc(qw + 64 * kk, DMAX), wg_desc(klo + 64 * kk, DMAX));
      }
      wg_ss(big[kk * CHAINS / ND], wg_desc(qw + 64 * kk, DMAX), wg_desc(ks + 64 * kk, DMAX),
            kk % (ND / CHAINS) != 0);
    }
    wg_commit();
    if (n > 0) fold_tile(sp, (n - 1) * BK);  // under the products
    wg_wait<0>();
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) wg_pin(big[c]);
    if (LO) wg_pin(small);
#pragma unroll
    for (int j = 0; j < NB; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float b = big[0][j][e];
#pragma unroll
        for (int c = 1; c < CHAINS; ++c) b += big[c][j][e];
        sp[j][e] = !LO ? b : P == kSplitSafe && !isfinite(b) ? b : b + small[j][e];
      }
  }
  if (steps > 0) fold_tile(sp, (steps - 1) * BK);
  cp_async_wait<0>();  // no copy outlives the block

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float row_lse = rs.lse(i);
    const float dsum = quad_sum(part[i]);
    const int r = w0 + g + 8 * i;
    if (t == 0 && r < rows) {
      const long long row = static_cast<long long>(bh) * p.sq + i0 + r;
      delta_out[row] = dsum;
      lse_out[row] = row_lse;
    }
  }
}

// The pass in the problem's precision (tiles.h: key rows per tile, stages). The TF32 mode's
// tiling is the same in wg_stats and wg_stats_tf32 (the entry for two blocks an SM, tiles.h).
template <int DMAX>
struct WgStatsTiles {
  static constexpr int TF32_KEYS = ortmlx_avjp_tiles::wg_stats_keys(DMAX, false);
  static constexpr int TF32_STAGES = ortmlx_avjp_tiles::wg_stats_stages(DMAX, false);
  static constexpr int SPLIT_KEYS = ortmlx_avjp_tiles::wg_stats_keys(DMAX, true);
  static constexpr int SPLIT_STAGES = ortmlx_avjp_tiles::wg_stats_stages(DMAX, true);
};
template <int DMAX>
constexpr bool kWgStatsTwoBlocks = ortmlx_avjp_tiles::wg_stats_two_blocks(DMAX, false);
template <int DMAX>
__device__ __forceinline__ void wg_stats_tf32(const float* q, const float* k, const float* y,
                                              const float* dy, const Problem& p, float* lse,
                                              float* delta) {
  using T = WgStatsTiles<DMAX>;
  wg_stats_kernel<DMAX, kTf32, T::TF32_KEYS, T::TF32_STAGES>(q, k, y, dy, p, lse, delta);
}
template <int DMAX>
__device__ void wg_stats(const float* q, const float* k, const float* y, const float* dy,
                         const Problem& p, float* lse, float* delta) {
  using T = WgStatsTiles<DMAX>;
  constexpr int KEYS = T::SPLIT_KEYS, STAGES = T::SPLIT_STAGES;
  const Precision prec = p.precision();
  if (prec == kTf32)
    wg_stats_tf32<DMAX>(q, k, y, dy, p, lse, delta);
  else if (prec == kSplit)
    wg_stats_kernel<DMAX, kSplit, KEYS, STAGES>(q, k, y, dy, p, lse, delta);
  else if (prec == kSplitTf32Inputs)
    wg_stats_kernel<DMAX, kSplitTf32Inputs, KEYS, STAGES>(q, k, y, dy, p, lse, delta);
  else
    wg_stats_kernel<DMAX, kSplitSafe, KEYS, STAGES>(q, k, y, dy, p, lse, delta);
}

}  // namespace
