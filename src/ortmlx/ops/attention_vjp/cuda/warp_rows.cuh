// The warp-row kernels of the fused CUDA AttentionVJP path (head sizes up to 128; included by
// kernels.cu, whose helpers they use: Problem, RowStat, prob, split, mma_tf32, the row loaders).
//
// FlashAttention-2's layout: each of a block's 8 warps owns 16 rows of every tile it computes
// (query rows in stats and dq, key rows in dkv), so a score tile S (16 x keys or 16 x queries)
// is born in the warp's mma accumulators, turns into P and dS there, and feeds the next product
// straight from those registers: no shared-memory round trip and no block barrier between the
// products of a step, and the operand tile every warp reads (K, V in stats and dq; Q, dY in dkv)
// loads by cp.async for the next step while this one multiplies.
//
// An accumulator tile X (16 x N) is float x[N / 8][4], x[n][e] at row g + 8 (e >> 1) and column
// 8 n + 2 t + (e & 1) (g = lane / 4, t = lane % 4: the PTX ISA's m16n8 C layout). As the A
// operand of the next m16n8k8 product (16 x k), the A layout wants columns t and t + 4 of a
// k-step where the thread holds 2t and 2t + 1: the reduction's order is free, so k-step n takes
// x[n][0], x[n][2], x[n][1], x[n][3] as A(g, t), A(g + 8, t), A(g, t + 4), A(g + 8, t + 4), i.e.
// k = t stands for column 2t and k = t + 4 for 2t + 1, and the B operand reads its rows in that
// same order (row 8 n + 2 t as k = t, row 8 n + 2 t + 1 as k = t + 4).
#pragma once

namespace {

template <int DMAX, bool TF32 = false>  // TF32: the TF32 mode's dkv tiles
struct WarpTiles {
  static constexpr int ROWS = 16 * ortmlx_avjp_tiles::kWarps;  // query rows (stats, dq), keys (dkv)
  static constexpr int BK = ortmlx_avjp_tiles::wr_bk(DMAX);    // key rows per step (stats)
  static constexpr int DQ_BK = ortmlx_avjp_tiles::wr_dq_bk(DMAX);  // key rows per step (dq)
  static constexpr int LD = ortmlx_avjp_tiles::ldt(DMAX);          // row stride of shared tiles
  static constexpr int DS_LD = ortmlx_avjp_tiles::wr_ds_ld();      // dS tile (dkv with dQ)
  static constexpr int KQ = ortmlx_avjp_tiles::wr_kq(DMAX, TF32);  // query rows per step (dkv)
  static constexpr int STAGE = ortmlx_avjp_tiles::wr_dkv_stage(DMAX, TF32);  // floats (dkv)
  // dkv's shared memory in floats, without and with dQ (the host allocates for the larger mode).
  static constexpr int DKV = ortmlx_avjp_tiles::wr_dkv_layout(DMAX, TF32, false);
  static constexpr int DKVQ = ortmlx_avjp_tiles::wr_dkv_layout(DMAX, TF32, true);
  static_assert(BK % 8 == 0 && DQ_BK % 8 == 0 && DMAX % 8 == 0);
};

template <int N>
__device__ __forceinline__ void zero_rows(float (&x)[N][4]) {
#pragma unroll
  for (int n = 0; n < N; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) x[n][e] = 0.f;
}

// A B operand tile in shared memory, split into TF32 hi and lo once, when it was stored, in two
// planes of the same layout: every warp reads it in a step, and splitting at each read (two cvt,
// an and, a subtract) would repeat that work once per warp. Always an input (K, V, Q or dY): no
// lo plane where kInputLo<P> is false.
struct SplitTile {
  const unsigned* hi;
  const unsigned* lo;
  template <Precision P>
  __device__ __forceinline__ void get(int i, unsigned& h, unsigned& l) const {
    h = hi[i];
    l = kInputLo<P> ? lo[i] : 0u;
  }
};

// acc (16 x 8 NB) += A B^T over k < kdim (tiles zero-padded to a multiple of 8): A is the warp's
// 16 rows at `a` (row stride LDA), B has 8 NB rows (row stride LDB); both are inputs (S, dP).
template <Precision P, int NB, int LDA, int LDB>
__device__ __forceinline__ void rows_abt(const float* a, const SplitTile& b, int kdim,
                                         float (&acc)[NB][4]) {
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const float* a0 = a + g * LDA + t;
  const int b0 = g * LDB + t;
  // Two k-steps an iteration: the next step's shared loads and splits issue while this step's
  // mma chain runs (one step an iteration waited out each chain; four spill at D 128).
#pragma unroll 2
  for (int k = 0; k < kdim; k += 8) {
    unsigned ah[4], al[4];
    split_input<P>(a0[k], ah[0], al[0]);
    split_input<P>(a0[8 * LDA + k], ah[1], al[1]);
    split_input<P>(a0[k + 4], ah[2], al[2]);
    split_input<P>(a0[8 * LDA + k + 4], ah[3], al[3]);
#pragma unroll
    for (int n = 0; n < NB; ++n) {
      unsigned bh[2], bl[2];
      b.template get<P>(b0 + 8 * n * LDB + k, bh[0], bl[0]);
      b.template get<P>(b0 + 8 * n * LDB + k + 4, bh[1], bl[1]);
      mma_step<P, true>(acc[n], ah, al, bh, bl);
    }
  }
}

// The warp's 16 rows of an A operand that stays the same over a whole sweep (Q in stats), held
// in registers as TF32 hi/lo fragments of every k-step up to DMAX: split once, not at each tile.
template <Precision P, int DMAX>
struct RowFrags {
  unsigned hi[DMAX / 8][4], lo[DMAX / 8][4];
  template <int LDA>
  __device__ __forceinline__ void load(const float* a) {
    const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
    const float* a0 = a + g * LDA + t;
#pragma unroll
    for (int kk = 0; kk < DMAX / 8; ++kk) {
      split_input<P>(a0[8 * kk], hi[kk][0], lo[kk][0]);
      split_input<P>(a0[8 * LDA + 8 * kk], hi[kk][1], lo[kk][1]);
      split_input<P>(a0[8 * kk + 4], hi[kk][2], lo[kk][2]);
      split_input<P>(a0[8 * LDA + 8 * kk + 4], hi[kk][3], lo[kk][3]);
    }
  }
};

// As rows_abt, with A from RowFrags (k-steps at or beyond kdim skipped: zero padding).
template <Precision P, int NB, int DMAX, int LDB>
__device__ __forceinline__ void frags_abt(const RowFrags<P, DMAX>& a, const SplitTile& b, int kdim,
                                          float (&acc)[NB][4]) {
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int b0 = g * LDB + t;
#pragma unroll
  for (int kk = 0; kk < DMAX / 8; ++kk) {
    if (8 * kk >= kdim) break;
#pragma unroll
    for (int n = 0; n < NB; ++n) {
      unsigned bh[2], bl[2];
      b.template get<P>(b0 + 8 * n * LDB + 8 * kk, bh[0], bl[0]);
      b.template get<P>(b0 + 8 * n * LDB + 8 * kk + 4, bh[1], bl[1]);
      mma_step<P, true>(acc[n], a.hi[kk], a.lo[kk], bh, bl);
    }
  }
}

// acc (16 x 8 NB) += X B: X (16 x 8 KX) is an accumulator tile in registers, B has 8 KX rows
// (row stride LDB) of which the first 8 NB columns count. k order as in the file comment.
template <Precision P, int KX, int NB, int LDB>
__device__ __forceinline__ void rows_xb(const float (&x)[KX][4], const SplitTile& b,
                                        float (&acc)[NB][4]) {
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
#pragma unroll
  for (int kk = 0; kk < KX; ++kk) {
    unsigned ah[4], al[4];
    split<P>(x[kk][0], ah[0], al[0]);
    split<P>(x[kk][2], ah[1], al[1]);
    split<P>(x[kk][1], ah[2], al[2]);
    split<P>(x[kk][3], ah[3], al[3]);
    const int b0 = (8 * kk + 2 * t) * LDB + g;
#pragma unroll
    for (int n = 0; n < NB; ++n) {
      unsigned bh[2], bl[2];
      b.template get<P>(b0 + 8 * n, bh[0], bl[0]);
      b.template get<P>(b0 + LDB + 8 * n, bh[1], bl[1]);
      mma_step<P>(acc[n], ah, al, bh, bl);
    }
  }
}

// Row and column of element e of n-block n of the calling thread's accumulator fragments.
__device__ __forceinline__ int frag_row(int e) {
  return static_cast<int>(threadIdx.x) % 32 / 4 + 8 * (e >> 1);
}
__device__ __forceinline__ int frag_col(int n, int e) {
  return 8 * n + 2 * (static_cast<int>(threadIdx.x) % 4) + (e & 1);
}

// Sums v over the 4 lanes of a quad (the threads that share an accumulator row).
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  v += __shfl_xor_sync(0xffffffffu, v, 2);
  return v;
}

// Columns c .. c + 3 of a row read one float at a time, zeros at and past d (`s` points at column
// c < d): the 4-float chunk where a 16-byte load cannot take the source.
__device__ __forceinline__ float4 chunk_scalar(const float* s, int c, int d) {
  return make_float4(s[0], c + 1 < d ? s[1] : 0.f, c + 2 < d ? s[2] : 0.f, c + 3 < d ? s[3] : 0.f);
}

// A RT x DMAX tile of rows (d floats each, row stride `stride`) in flight through registers: each
// thread fetches its 4-float chunks from global memory (zeros beyond `rows` and d) before a step
// computes and stores them split into TF32 hi/lo planes after it (the next step's operands).
template <int RT, int DMAX>
struct RowChunks {
  static constexpr int C4 = DMAX / 4;  // chunks per row
  static constexpr int N = (RT * C4 + kThreads - 1) / kThreads;
  float4 v[N];

  __device__ __forceinline__ void fetch(const float* src, long long stride, int rows, int d) {
    const bool vec =
        reinterpret_cast<unsigned long long>(src) % 16 == 0 && stride % 4 == 0 && d % 4 == 0;
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int e = static_cast<int>(threadIdx.x) + i * kThreads, r = e / C4, c = e % C4 * 4;
      float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
      if (r < rows && r < RT && c < d) {
        const float* s = src + r * stride + c;
        x = vec ? *reinterpret_cast<const float4*>(s) : chunk_scalar(s, c, d);
      }
      v[i] = x;
    }
  }
  template <Precision P, int LD>
  __device__ __forceinline__ void store(unsigned* hi, unsigned* lo) const {
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const int e = static_cast<int>(threadIdx.x) + i * kThreads, r = e / C4, c = e % C4 * 4;
      if (r >= RT) continue;
      uint4 h, l;
      split_input<P>(v[i].x, h.x, l.x);
      split_input<P>(v[i].y, h.y, l.y);
      split_input<P>(v[i].z, h.z, l.z);
      split_input<P>(v[i].w, h.w, l.w);
      *reinterpret_cast<uint4*>(hi + r * LD + c) = h;
      if (kInputLo<P>) *reinterpret_cast<uint4*>(lo + r * LD + c) = l;
    }
  }
};

// As RowChunks, with the tile in flight through shared memory (`stage`, RT x LD floats) instead of
// registers: cp.async copies each thread's chunks there behind its back (plain loads and stores
// where the source is not 16-byte aligned), and after waiting for its copies the same thread
// splits the same chunks into the hi/lo planes (its own writes: no barrier). Frees the registers
// RowChunks holds through a step. `stage` may be the hi plane itself (TF32: rounded in place).
template <int RT, int DMAX, int LD>
__device__ __forceinline__ void fetch_chunks_async(float* stage, const float* src, long long stride,
                                                   int rows, int d) {
  constexpr int C4 = DMAX / 4, N = (RT * C4 + kThreads - 1) / kThreads;
  const bool vec =
      reinterpret_cast<unsigned long long>(src) % 16 == 0 && stride % 4 == 0 && d % 4 == 0;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int e = static_cast<int>(threadIdx.x) + i * kThreads, r = e / C4, c = e % C4 * 4;
    if (r >= RT) continue;
    const bool valid = r < rows && c < d;
    float* dst = stage + r * LD + c;
    if (vec) {
      cp_async16(dst, valid ? src + r * stride + c : src, valid);
    } else {
      *reinterpret_cast<float4*>(dst) =
          valid ? chunk_scalar(src + r * stride + c, c, d) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  }
}
template <Precision P, int RT, int DMAX, int LD>
__device__ __forceinline__ void split_chunks(const float* stage, unsigned* hi, unsigned* lo) {
  constexpr int C4 = DMAX / 4, N = (RT * C4 + kThreads - 1) / kThreads;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int e = static_cast<int>(threadIdx.x) + i * kThreads, r = e / C4, c = e % C4 * 4;
    if (r >= RT) continue;
    const float4 x = *reinterpret_cast<const float4*>(stage + r * LD + c);
    uint4 h, l;
    split_input<P>(x.x, h.x, l.x);
    split_input<P>(x.y, h.y, l.y);
    split_input<P>(x.z, h.z, l.z);
    split_input<P>(x.w, h.w, l.w);
    *reinterpret_cast<uint4*>(hi + r * LD + c) = h;
    if (kInputLo<P>) *reinterpret_cast<uint4*>(lo + r * LD + c) = l;
  }
}

// ---------------------------------------------------------------------------------------
// Pass 1 (warp rows): lse and delta. Grid (query tiles of ROWS, B * HQ). Shared: Q (ROWS x LD),
// 2 stages x (K, V as TF32 hi/lo planes (BK x LD each)). RECOMPUTE: Y = P V in registers on a
// second sweep. Inlined into its entry point: as a __noinline__ function it read the Problem's
// fields through local memory at every score (495 local loads in the d128 SASS, 2 inlined; the
// pass ran 11-20% faster inlined on an H100). dq and dkv stay separate functions (dkvq at D 128
// spills more when inlined, and measured no faster).
// ---------------------------------------------------------------------------------------
template <int DMAX, bool RECOMPUTE, Precision PREC>
__device__ __forceinline__ void wr_stats_kernel(const float* q, const float* k, const float* v,
                                                const float* y, const float* dy, const Problem& p,
                                                float* lse_out, float* delta_out) {
  using T = WarpTiles<DMAX>;
  constexpr int ROWS = T::ROWS, BK = T::BK, LD = T::LD, NB = BK / 8, ND = DMAX / 8;
  constexpr int PLANE = BK * LD, STAGE = 4 * PLANE;  // K hi, K lo, V hi, V lo
  float* qs = avjp_smem;
  unsigned* kvbuf = reinterpret_cast<unsigned*>(qs + ROWS * LD);  // stage st at + st STAGE

  const int tile = blockIdx.x, bh = blockIdx.y;
  const int bi = bh / p.hq, h = bh % p.hq, gk = h / (p.hq / p.hk);
  const int i0 = tile * ROWS, rows = min(ROWS, p.sq - i0);
  const int w0 = static_cast<int>(threadIdx.x) / 32 * 16;  // the warp's first row in the tile
  const long long qstride = p.row_stride(p.hq), kstride = p.row_stride(p.hk);
  const long long qoff = p.offset(bi, h, i0, p.hq, p.sq);
  const bool active = w0 < rows;
  load_rows4<ROWS, DMAX, LD>(qs, q + qoff, qstride, rows, p.d);
  const float* qw = qs + w0 * LD;
  // S = Q K^T of a key tile. The warp's Q rows split once, in registers, where they fit beside
  // the Recompute form's Y accumulators (at D 128 they would spill: 456 bytes of stack).
  constexpr bool kQInRegisters = !RECOMPUTE || DMAX <= 64;
  RowFrags<PREC, kQInRegisters ? DMAX : 8> qf;
  if (kQInRegisters) {
    __syncthreads();
    qf.template load<LD>(qw);
  }
  auto scores = [&](const SplitTile& ks, float(&s)[NB][4]) {
    if constexpr (kQInRegisters)
      frags_abt<PREC, NB, DMAX, LD>(qf, ks, p.d, s);
    else
      rows_abt<PREC, NB, LD, LD>(qw, ks, p.d, s);
  };

  // One sweep over the key tiles [0, kend): `body(j0, ks, vs)` per tile, K and V (when with_v)
  // as TF32 hi/lo planes: fetched into registers while the previous tile multiplies, split once
  // as they are stored.
  RowChunks<BK, DMAX> kc, vc;
  auto sweep = [&](int kend, bool with_v, auto&& body) {
    const int steps = (kend + BK - 1) / BK;
    auto fetch = [&](int n) {
      const int j0 = n * BK, cols = min(BK, p.sk - j0);
      const long long koff = p.offset(bi, gk, j0, p.hk, p.sk);
      kc.fetch(k + koff, kstride, cols, p.d);
      if (with_v) vc.fetch(v + koff, kstride, cols, p.d);
    };
    auto store = [&](int n) {
      unsigned* st = kvbuf + n % 2 * STAGE;
      kc.template store<PREC, LD>(st, st + PLANE);
      if (with_v) vc.template store<PREC, LD>(st + 2 * PLANE, st + 3 * PLANE);
    };
    __syncthreads();  // a previous sweep is done with the stages
    if (steps > 0) {
      fetch(0);
      store(0);
    }
    for (int n = 0; n < steps; ++n) {
      __syncthreads();  // stage n % 2 is stored; every warp is done with step n - 1's stage
      if (n + 1 < steps) fetch(n + 1);
      const unsigned* st = kvbuf + n % 2 * STAGE;
      body(n * BK, SplitTile{st, st + PLANE}, SplitTile{st + 2 * PLANE, st + 3 * PLANE});
      if (n + 1 < steps) store(n + 1);
    }
  };
  // Whether a key tile at j0 holds a key some row of this warp can see under the causal rule.
  auto reaches = [&](int j0) { return active && !(p.causal && j0 > i0 + w0 + 15); };

  RowStat st[2];                            // rows g and g + 8 of the warp
  const int kend = p.key_limit(i0 + rows);  // hidden keys never change the log-sum-exp
  sweep(kend, false, [&](int j0, const SplitTile& ks, const SplitTile&) {
    if (!reaches(j0)) return;
    const int cols = min(BK, p.sk - j0);
    float s[NB][4];
    zero_rows(s);
    scores(ks, s);
#pragma unroll
    for (int n = 0; n < NB; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = w0 + frag_row(e), c = frag_col(n, e);
        if (r < rows && c < cols) {
          bool hidden;
          const float sc = p.score(s[n][e], bi, h, i0 + r, j0 + c, hidden);
          if (!hidden) st[e >> 1].add(sc);
        }
      }
  });
  float lse_r[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) lse_r[i] = st[i].merged_over_quad().lse();

  // delta = rowsum(dY * Y): Y given (plain), or recomputed as P V over every key it needs.
  float part[2] = {0.f, 0.f};
  const int g = static_cast<int>(threadIdx.x) % 32 / 4, t = static_cast<int>(threadIdx.x) % 4;
  if (RECOMPUTE) {
    float yacc[ND][4];
    zero_rows(yacc);
    const int yend = p.finite ? kend : p.sk;  // non-finite V: 0 * V_j reaches Y for hidden keys
    sweep(yend, true, [&](int j0, const SplitTile& ks, const SplitTile& vs) {
      if (!(p.finite ? reaches(j0) : active)) return;
      const int cols = min(BK, p.sk - j0);
      float s[NB][4];
      zero_rows(s);
      scores(ks, s);
#pragma unroll
      for (int n = 0; n < NB; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = w0 + frag_row(e), c = frag_col(n, e);
          float pv = 0.f;
          if (r < rows && c < cols) {
            bool hidden;
            const float sc = p.score(s[n][e], bi, h, i0 + r, j0 + c, hidden);
            pv = prob(sc, hidden, lse_r[e >> 1]);
          }
          s[n][e] = pv;
        }
      rows_xb<PREC, NB, ND, LD>(s, vs, yacc);
    });
#pragma unroll
    for (int n = 0; n < ND; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = w0 + frag_row(e), c = frag_col(n, e);
        if (r < rows && c < p.d)
          part[e >> 1] = fmaf(dy[qoff + r * qstride + c], yacc[n][e], part[e >> 1]);
      }
  } else {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = w0 + g + 8 * i;
      if (r < rows)
        for (int c = t; c < p.d; c += 4)
          part[i] = fmaf(dy[qoff + r * qstride + c], y[qoff + r * qstride + c], part[i]);
    }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float dsum = quad_sum(part[i]);
    const int r = w0 + g + 8 * i;
    if (t == 0 && r < rows) {
      const long long row = static_cast<long long>(bh) * p.sq + i0 + r;
      delta_out[row] = dsum;
      lse_out[row] = lse_r[i];
    }
  }
}

// ---------------------------------------------------------------------------------------
// Pass 2 (warp rows): dQ. Grid (query tiles of ROWS, B * HQ). Shared: Q, dY (ROWS x LD),
// 2 stages x (K, V as TF32 hi/lo planes (BK x LD each)). Per key tile a warp computes S and dP
// for its 16 rows, dS in place, and dQ += dS K from those registers. K and V are the operands
// every warp reads: split once, as dkv does with Q and dY.
// ---------------------------------------------------------------------------------------
template <int DMAX, Precision PREC>
__device__ __noinline__ void wr_dq_kernel(const float* q, const float* k, const float* v,
                                          const float* dy, const float* lse, const float* delta,
                                          const Problem& p, float* dq) {
  using T = WarpTiles<DMAX>;
  constexpr int ROWS = T::ROWS, BK = T::DQ_BK, LD = T::LD, NB = BK / 8, ND = DMAX / 8;
  constexpr int PLANE = BK * LD, STAGE = 4 * PLANE;  // K hi, K lo, V hi, V lo
  float* qs = avjp_smem;
  float* dys = qs + ROWS * LD;
  unsigned* kvbuf = reinterpret_cast<unsigned*>(dys + ROWS * LD);  // stage st at + st STAGE

  const int tile = blockIdx.x, bh = blockIdx.y;
  const int bi = bh / p.hq, h = bh % p.hq, gk = h / (p.hq / p.hk);
  const int i0 = tile * ROWS, rows = min(ROWS, p.sq - i0);
  const int w0 = static_cast<int>(threadIdx.x) / 32 * 16;
  const long long qstride = p.row_stride(p.hq), kstride = p.row_stride(p.hk);
  const long long qoff = p.offset(bi, h, i0, p.hq, p.sq);
  const bool active = w0 < rows;

  load_rows4<ROWS, DMAX, LD>(qs, q + qoff, qstride, rows, p.d);
  load_rows4<ROWS, DMAX, LD>(dys, dy + qoff, qstride, rows, p.d);
  float lse_r[2], delta_r[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = w0 + frag_row(2 * i);
    const long long row = static_cast<long long>(bh) * p.sq + i0 + r;
    lse_r[i] = r < rows ? lse[row] : 0.f;
    delta_r[i] = r < rows ? delta[row] : 0.f;
  }
  const float* qw = qs + w0 * LD;
  const float* dyw = dys + w0 * LD;

  float dacc[ND][4];
  zero_rows(dacc);
  const int kend = p.finite ? p.key_limit(i0 + rows) : p.sk;
  const int steps = (kend + BK - 1) / BK;
  RowChunks<BK, DMAX> kc, vc;
  auto fetch = [&](int n) {
    const int j0 = n * BK, cols = min(BK, p.sk - j0);
    const long long koff = p.offset(bi, gk, j0, p.hk, p.sk);
    kc.fetch(k + koff, kstride, cols, p.d);
    vc.fetch(v + koff, kstride, cols, p.d);
  };
  auto store = [&](int n) {
    unsigned* st = kvbuf + n % 2 * STAGE;
    kc.template store<PREC, LD>(st, st + PLANE);
    vc.template store<PREC, LD>(st + 2 * PLANE, st + 3 * PLANE);
  };
  if (steps > 0) {
    fetch(0);
    store(0);
  }
  for (int n = 0; n < steps; ++n) {
    // Stage n % 2 is stored and visible; every warp is done with step n - 1's stage.
    __syncthreads();
    if (n + 1 < steps) fetch(n + 1);  // global loads in flight while this step multiplies
    const int j0 = n * BK, cols = min(BK, p.sk - j0);
    // With finite inputs a tile no row of the warp can see adds exactly zero.
    if (active && !(p.finite && p.causal && j0 > i0 + w0 + 15)) {
      const unsigned* st = kvbuf + n % 2 * STAGE;
      const SplitTile ks{st, st + PLANE}, vs{st + 2 * PLANE, st + 3 * PLANE};
      float s[NB][4], dp[NB][4];
      zero_rows(s);
      zero_rows(dp);
      rows_abt<PREC, NB, LD, LD>(qw, ks, p.d, s);
      rows_abt<PREC, NB, LD, LD>(dyw, vs, p.d, dp);
#pragma unroll
      for (int nb = 0; nb < NB; ++nb)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = w0 + frag_row(e), c = frag_col(nb, e);
          float ds = 0.f;
          if (r < rows && c < cols) {
            bool hidden;
            const float sc = p.score(s[nb][e], bi, h, i0 + r, j0 + c, hidden);
            ds = prob(sc, hidden, lse_r[e >> 1]) * (dp[nb][e] - delta_r[e >> 1]);
          }
          s[nb][e] = ds;
        }
      rows_xb<PREC, NB, ND, LD>(s, ks, dacc);
    }
    if (n + 1 < steps) store(n + 1);
  }
#pragma unroll
  for (int n = 0; n < ND; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = w0 + frag_row(e), c = frag_col(n, e);
      if (r < rows && c < p.d) dq[qoff + r * qstride + c] = dacc[n][e] * p.scale;
    }
}

// dQ of one dkv step, added to global memory: dQ (KQ x DMAX) += scale dS K over the block's
// ROWS keys, dS (KQ x ROWS) in shared memory (row stride LDS, written by every warp for its
// keys), K the block's tile (ROWS x DMAX, fp32, row stride LDK). The (KQ / 16) x (DMAX / 8)
// fragments of 16 x 8 are dealt to the warps in order, F each, all of one warp in one 16-row
// band so its A fragments serve them all. k order as rows_xb's: k = t is key 2t of the k-step,
// k = t + 4 key 2t + 1, so A comes as one 64-bit read per row (conflict-free with LDS = 8 mod
// 32) and B's 8 rows x 4 columns hit 32 banks (LDK = 4 mod 32). Every (query row, key block)
// pair is added by exactly one block, in no fixed order: dQ's sum order varies run to run.
template <Precision P, int KQ, int DMAX, int LDS, int LDK>
__device__ __forceinline__ void step_dq(const float* dss, const float* ks, int kdim, float* dq,
                                        long long qstride, int rows, int d, float scale) {
  constexpr int NBD = DMAX / 8, FRAGS = KQ / 16 * NBD, F = FRAGS / (kThreads / 32);
  static_assert(FRAGS % (kThreads / 32) == 0 && NBD % F == 0, "fragments per warp");
  const int lane = static_cast<int>(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  const int first = static_cast<int>(threadIdx.x) / 32 * F, mt = first / NBD;
  const float* a0 = dss + (16 * mt + g) * LDS + 2 * t;
  const float* b0 = ks + 2 * t * LDK + 8 * (first % NBD) + g;
  float acc[F][4];
  zero_rows(acc);
#pragma unroll 2  // as in rows_abt: two k-steps' loads and mma chains overlap
  for (int k = 0; k < kdim; k += 8) {
    const float2 x = *reinterpret_cast<const float2*>(a0 + k);
    const float2 y = *reinterpret_cast<const float2*>(a0 + 8 * LDS + k);
    unsigned ah[4], al[4];
    split<P>(x.x, ah[0], al[0]);
    split<P>(y.x, ah[1], al[1]);
    split<P>(x.y, ah[2], al[2]);
    split<P>(y.y, ah[3], al[3]);
#pragma unroll
    for (int f = 0; f < F; ++f) {
      unsigned bh[2], bl[2];
      split_input<P>(b0[k * LDK + 8 * f], bh[0], bl[0]);
      split_input<P>(b0[(k + 1) * LDK + 8 * f], bh[1], bl[1]);
      mma_step<P>(acc[f], ah, al, bh, bl);
    }
  }
#pragma unroll
  for (int f = 0; f < F; ++f)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int r = 16 * mt + frag_row(e), c = 8 * (first % NBD + f) + 2 * t + (e & 1);
      if (r < rows && c < d) atomicAdd(dq + r * qstride + c, acc[f][e] * scale);
    }
}

// ---------------------------------------------------------------------------------------
// Pass 3 (warp rows): dK and dV. Grid (key tiles of ROWS, B * HK). Steps over the group's query
// heads and their query tiles. Shared: K, V (ROWS x LD), 2 stages x (Q, dY as TF32 hi/lo planes
// (KQ x LD each; hi alone in the TF32 mode), lse, delta (KQ)), then a staging area (tiles.h).
// Per step a warp computes S^T and dP^T for its 16 keys, P^T and dS^T in place, dV += P^T dY
// and dK += dS^T Q from those registers; GQA groups sum in registers. Q and dY are the operands
// every warp reads: split once, when the previous step's threads split the chunks they copied in
// (fetch_chunks_async, split_chunks), instead of once per warp. The TF32 mode, without lo planes,
// takes twice the query rows a step at D 128 (KQ 32): half the steps and barriers, each K and V
// fragment serving twice the products.
// WITH_DQ (the one-pass form, replacing pass 2): each step also writes its dS to shared memory
// (KQ x ROWS, after the stages) and the block adds dS K to dQ by atomics (step_dq); dQ starts
// zeroed. Pass 2 recomputes S and dP for its dS; this form reuses them: 5 tile products a
// (query, key) pair where passes 2 and 3 take 7.
// ---------------------------------------------------------------------------------------
template <int DMAX, Precision PREC, bool WITH_DQ>
__device__ __noinline__ void wr_dkv_kernel(const float* q, const float* k, const float* v,
                                           const float* dy, const float* lse, const float* delta,
                                           const Problem& p, float* dk, float* dv, float* dq) {
  // The TF32 mode's layout wherever Q and dY have no lo planes (kSplitTf32Inputs too).
  constexpr bool kTf32Mode = !kInputLo<PREC>;
  using T = WarpTiles<DMAX, kTf32Mode>;
  constexpr int ROWS = T::ROWS, LD = T::LD, ND = DMAX / 8, DS_LD = T::DS_LD;
  constexpr int KQ = T::KQ, NQ = KQ / 8, STAGE = T::STAGE;
  // A stage: Q hi, [Q lo], dY hi, [dY lo], lse, delta (no lo planes in the TF32 mode).
  constexpr int PLANE = KQ * LD, PLANES = kTf32Mode ? 2 : 4;
  constexpr int DY_PLANE = PLANES / 2 * PLANE, LO = kTf32Mode ? 0 : PLANE;
  static_assert(STAGE == PLANES * PLANE + 2 * KQ && KQ % 16 == 0);
  static_assert((WITH_DQ ? T::DKVQ : T::DKV) == 2 * ROWS * LD + 2 * STAGE +
                                                    (WITH_DQ ? KQ * DS_LD : 0) +
                                                    (kTf32Mode ? 0 : 2 * PLANE));
  float* ks = avjp_smem;
  float* vs = ks + ROWS * LD;
  unsigned* qbuf = reinterpret_cast<unsigned*>(vs + ROWS * LD);  // stage st at qbuf + st STAGE
  float* dss = reinterpret_cast<float*>(qbuf + 2 * STAGE);       // dS (KQ x DS_LD), WITH_DQ

  const int tile = blockIdx.x, bg = blockIdx.y;
  const int bi = bg / p.hk, gk = bg % p.hk, group = p.hq / p.hk;
  const int j0 = tile * ROWS, cols = min(ROWS, p.sk - j0);
  const int w0 = static_cast<int>(threadIdx.x) / 32 * 16;  // the warp's first key in the tile
  const long long qstride = p.row_stride(p.hq), kstride = p.row_stride(p.hk);
  const long long koff = p.offset(bi, gk, j0, p.hk, p.sk);
  const bool active = w0 < cols;

  load_rows4<ROWS, DMAX, LD>(ks, k + koff, kstride, cols, p.d);
  load_rows4<ROWS, DMAX, LD>(vs, v + koff, kstride, cols, p.d);
  const float* kw = ks + w0 * LD;
  const float* vw = vs + w0 * LD;

  float dkacc[ND][4], dvacc[ND][4];
  zero_rows(dkacc);
  zero_rows(dvacc);
  int ibegin;
  const bool none = p.no_rows_see(j0, KQ, ibegin);
  // Step n: query head gk group + n / tiles, query rows ibegin + (n % tiles) KQ.
  const int tiles = (p.sq - ibegin + KQ - 1) / KQ, steps = none ? 0 : group * tiles;
  // Q and dY of the next step in flight: through the staging area after the dS tile, or in the
  // TF32 mode straight into the stage's planes (rounded in place).
  float* staging = reinterpret_cast<float*>(qbuf + 2 * STAGE) + (WITH_DQ ? KQ * DS_LD : 0);
  auto q_stage = [&](int n) {
    return kTf32Mode ? reinterpret_cast<float*>(qbuf + n % 2 * STAGE) : staging;
  };
  auto dy_stage = [&](int n) {
    return kTf32Mode ? reinterpret_cast<float*>(qbuf + n % 2 * STAGE + DY_PLANE) : staging + PLANE;
  };
  float lse_r = 0.f, delta_r = 0.f;  // thread r < KQ: row r of the fetched step
  auto fetch = [&](int n) {
    const int i0 = ibegin + n % tiles * KQ, h = gk * group + n / tiles;
    const int rows = min(KQ, p.sq - i0);
    const long long qoff = p.offset(bi, h, i0, p.hq, p.sq);
    fetch_chunks_async<KQ, DMAX, LD>(q_stage(n), q + qoff, qstride, rows, p.d);
    fetch_chunks_async<KQ, DMAX, LD>(dy_stage(n), dy + qoff, qstride, rows, p.d);
    cp_async_commit();
    const int r = static_cast<int>(threadIdx.x);
    const long long row = (static_cast<long long>(bi) * p.hq + h) * p.sq + i0 + r;
    lse_r = r < rows ? lse[row] : 0.f;
    delta_r = r < rows ? delta[row] : 0.f;
  };
  auto store = [&](int n) {
    unsigned* st = qbuf + n % 2 * STAGE;
    cp_async_wait<0>();
    split_chunks<PREC, KQ, DMAX, LD>(q_stage(n), st, st + LO);
    split_chunks<PREC, KQ, DMAX, LD>(dy_stage(n), st + DY_PLANE, st + DY_PLANE + LO);
    float* ld = reinterpret_cast<float*>(st + PLANES * PLANE);
    if (threadIdx.x < KQ) {
      ld[threadIdx.x] = lse_r;
      ld[KQ + threadIdx.x] = delta_r;
    }
  };
  if (steps > 0) {
    fetch(0);
    store(0);
  }
  for (int n = 0; n < steps; ++n) {
    const int i0 = ibegin + n % tiles * KQ, h = gk * group + n / tiles;
    const int rows = min(KQ, p.sq - i0);
    // Stage n % 2 is stored and visible; every warp is done with step n - 1's stage.
    __syncthreads();
    if (n + 1 < steps) fetch(n + 1);  // global loads in flight while this step multiplies
    // With finite inputs a step whose query rows all come before the warp's keys adds zero.
    const bool works = active && !(p.finite && p.causal && i0 + rows - 1 < j0 + w0);
    if (works) {
      const unsigned* st = qbuf + n % 2 * STAGE;
      const SplitTile qs{st, st + LO}, dys{st + DY_PLANE, st + DY_PLANE + LO};
      const float* lse_s = reinterpret_cast<const float*>(st + PLANES * PLANE);
      const float* delta_s = lse_s + KQ;
      float sa[NQ][4], dpt[NQ][4];
      zero_rows(sa);
      zero_rows(dpt);
      rows_abt<PREC, NQ, LD, LD>(kw, qs, p.d, sa);
      rows_abt<PREC, NQ, LD, LD>(vw, dys, p.d, dpt);
#pragma unroll
      for (int nq = 0; nq < NQ; ++nq)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = w0 + frag_row(e), qr = frag_col(nq, e);
          float pv = 0.f, ds = 0.f;
          if (key < cols && qr < rows) {
            bool hidden;
            const float sc = p.score(sa[nq][e], bi, h, i0 + qr, j0 + key, hidden);
            pv = prob(sc, hidden, lse_s[qr]);
            ds = pv * (dpt[nq][e] - delta_s[qr]);
          }
          sa[nq][e] = pv;
          dpt[nq][e] = ds;
          if (WITH_DQ) dss[qr * DS_LD + key] = ds;
        }
      rows_xb<PREC, NQ, ND, LD>(sa, dys, dvacc);
      rows_xb<PREC, NQ, ND, LD>(dpt, qs, dkacc);
    }
    if (WITH_DQ) {
      __syncthreads();  // every working warp's dS columns are written
      // Keys past `cols`, and with finite inputs past the step's last query row (hidden), add
      // nothing. Rounded up to a k-step, this limit stays below the first key of every warp
      // that did not work (w0 >= cols, or w0 >= i0 + rows - j0: multiples of 16), whose dS
      // columns hold an earlier step's values.
      const int kend = p.finite && p.causal ? min(cols, i0 + rows - j0) : cols;
      const long long qoff = p.offset(bi, h, i0, p.hq, p.sq);
      step_dq<PREC, KQ, DMAX, DS_LD, LD>(dss, ks, (kend + 7) / 8 * 8, dq + qoff, qstride, rows, p.d,
                                         p.scale);
    }
    if (n + 1 < steps) store(n + 1);
  }
#pragma unroll
  for (int n = 0; n < ND; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int key = w0 + frag_row(e), c = frag_col(n, e);
      if (key < cols && c < p.d) {
        dk[koff + key * kstride + c] = dkacc[n][e] * p.scale;
        dv[koff + key * kstride + c] = dvacc[n][e];
      }
    }
}

// Entry points: the kernels above with the precision of their products (Problem::precision)
// fixed at compile time (dq and dkv: one register allocation each, as __noinline__ functions).
template <int DMAX, bool RECOMPUTE>
__device__ void wr_stats(const float* q, const float* k, const float* v, const float* y,
                         const float* dy, const Problem& p, float* lse, float* delta) {
  const Precision prec = p.precision();
  if (prec == kTf32)
    wr_stats_kernel<DMAX, RECOMPUTE, kTf32>(q, k, v, y, dy, p, lse, delta);
  else if (prec == kSplit)
    wr_stats_kernel<DMAX, RECOMPUTE, kSplit>(q, k, v, y, dy, p, lse, delta);
  else if (prec == kSplitTf32Inputs)
    wr_stats_kernel<DMAX, RECOMPUTE, kSplitTf32Inputs>(q, k, v, y, dy, p, lse, delta);
  else
    wr_stats_kernel<DMAX, RECOMPUTE, kSplitSafe>(q, k, v, y, dy, p, lse, delta);
}
template <int DMAX>
__device__ void wr_dq(const float* q, const float* k, const float* v, const float* dy,
                      const float* lse, const float* delta, const Problem& p, float* dq) {
  const Precision prec = p.precision();
  if (prec == kTf32)
    wr_dq_kernel<DMAX, kTf32>(q, k, v, dy, lse, delta, p, dq);
  else if (prec == kSplit)
    wr_dq_kernel<DMAX, kSplit>(q, k, v, dy, lse, delta, p, dq);
  else if (prec == kSplitTf32Inputs)
    wr_dq_kernel<DMAX, kSplitTf32Inputs>(q, k, v, dy, lse, delta, p, dq);
  else
    wr_dq_kernel<DMAX, kSplitSafe>(q, k, v, dy, lse, delta, p, dq);
}
template <int DMAX, bool WITH_DQ>
__device__ void wr_dkv(const float* q, const float* k, const float* v, const float* dy,
                       const float* lse, const float* delta, const Problem& p, float* dk, float* dv,
                       float* dq) {
  const Precision prec = p.precision();
  if (prec == kTf32)
    wr_dkv_kernel<DMAX, kTf32, WITH_DQ>(q, k, v, dy, lse, delta, p, dk, dv, dq);
  else if (prec == kSplit)
    wr_dkv_kernel<DMAX, kSplit, WITH_DQ>(q, k, v, dy, lse, delta, p, dk, dv, dq);
  else if (prec == kSplitTf32Inputs)
    wr_dkv_kernel<DMAX, kSplitTf32Inputs, WITH_DQ>(q, k, v, dy, lse, delta, p, dk, dv, dq);
  else
    wr_dkv_kernel<DMAX, kSplitSafe, WITH_DQ>(q, k, v, dy, lse, delta, p, dk, dv, dq);
}

}  // namespace
