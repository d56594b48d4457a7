// Fused AttentionVJP kernels for NVIDIA GPUs (the `cuda_fused` path, docs/ATTENTION_VJP.md).
// Built by nvcc into one sm_90 cubin per head-size bucket that the library embeds and hands to
// MLX with mx::fast::precompiled_cuda_kernel; host side: fused.cpp.
//
// Three passes, FlashAttention-2 style, fp32 data (passes 2 and 3 also come as one, below):
//   1. stats:  per query row the log-sum-exp of its visible scores (NaN marks a dead row) and
//              delta = rowsum(dY * Y); the Recompute form first recomputes Y = P V (a second
//              sweep over the keys once the log-sum-exp is known).
//   2. dq:     one block per (query tile, batch, query head); loops over key tiles:
//              S = scale Q K^T + mask, P = exp(S - lse), dP = dY V^T, dS = P (dP - delta),
//              dQ += dS K; dQ = scale dQ at the end.
//   3. dkv:    one block per (key tile, batch, kv head); loops over the group's query heads and
//              the query tiles: S^T, P^T, dP^T, dS^T as above, dV += P^T dY, dK += dS^T Q.
//              A block owns its keys' dK/dV rows, so GQA groups are summed in registers.
//   2+3. dkvq: pass 3 that also adds each step's dS K to a zeroed dQ by atomics (head sizes up
//              to 128): S and dP are not computed twice, but dQ's sum order varies run to run.
//              The host takes it when dQ and dK or dV are asked for, unless switched off.
//
// Threads: 256 per block. dq and dkv multiply on tensor cores (mma_tile: mma.sync m16n8k8
// TF32, fp32 accumulation; 3xTF32 operand splitting for fp32 accuracy unless the EP runs in
// its tf32 mode): each product's result tile is spread over the 8 warps, a warp holding
// 16 x 8 accumulator fragments (struct Acc) in registers; shared rows are padded to 4 mod 32
// floats so a fragment's 8 rows x 4 columns hit 32 banks, and tiles load with 128-bit accesses.
// stats runs SIMT fp32 FMA products (tile_nt, tile_nn) over a 16 x 16 thread grid (tr, tc),
// thread (tr, tc) owning rows tr + 16 i and columns tc + 16 j, rows padded to an odd stride.
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

// How the tensor-core products round their operands (see mma_tile).
enum Precision { kTf32 = 0, kSplit = 1, kSplitSafe = 2, kSplitTf32Inputs = 3 };
using ortmlx_avjp_tiles::kModeExactTf32Inputs;
using ortmlx_avjp_tiles::kModeTf32;

struct Problem {
  int b, hq, hk, sq, sk, d, rank, causal, mask_kind;
  int mb, mh, mr, mw;  // the mask in 4-D (broadcast dims are 1)
  float scale;
  const void* mask;
  int finite;  // all of Q, K, V, Y, dY finite: hidden tiles may be skipped
  // Mode: kModeTf32 is the EP's tf32 mode (the tensor-core products round their operands to
  // TF32); kModeExactTf32Inputs says that Q, K, V, Y and dY hold TF32 values (float16 and
  // bfloat16 contracts, widened to fp32 on the host: every float16 and bfloat16 value is one).
  int mode;

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

  __device__ Precision precision() const {
    if (mode == kModeTf32) return kTf32;
    if (!finite) return kSplitSafe;
    return mode == kModeExactTf32Inputs ? kSplitTf32Inputs : kSplit;
  }

  // For a dK/dV block whose keys start at j0: with finite inputs, rows that see none of its keys
  // add exactly zero, so its steps over query tiles of `kq` rows start at `ibegin` (causal: no
  // row before the first key sees it), and none run (true) when the keys lie beyond a narrow mask.
  __device__ bool no_rows_see(int j0, int kq, int& ibegin) const {
    ibegin = finite && causal ? (j0 / kq) * kq : 0;
    return finite && mask_kind != 0 && mw != 1 && j0 >= mw;
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
  // The state of the whole row when 4 consecutive lanes (a quad) each hold a share of it; every
  // lane of the warp calls it.
  __device__ RowStat merged_over_quad() const {
    RowStat s = *this;
    for (int off = 1; off < 4; off <<= 1) {
      RowStat o;
      o.m = __shfl_xor_sync(0xffffffffu, s.m, off);
      o.l = __shfl_xor_sync(0xffffffffu, s.l, off);
      o.bad = __shfl_xor_sync(0xffffffffu, static_cast<int>(s.bad), off) != 0;
      s.merge(o);
    }
    return s;
  }
  __device__ float lse() const {
    if (bad || m == -kInf) return __int_as_float(0x7fc00000);  // dead row: NaN
    return m + logf(l);
  }
};

// Whether a bucket runs the warp-row kernels (warp_rows.cuh) or the block-tile ones below.
template <int DMAX>
constexpr bool kWarpRows = ortmlx_avjp_tiles::warp_rows(DMAX);

// Tile sizes per head-size bucket (DMAX >= d, a multiple of 16): tiles.h.
template <int DMAX>
struct Tiles {
  static constexpr int BQ = ortmlx_avjp_tiles::bq(DMAX);    // query rows (stats, dq)
  static constexpr int BK = ortmlx_avjp_tiles::bk(DMAX);    // key rows per step (stats, dq)
  static constexpr int KV = ortmlx_avjp_tiles::kv(DMAX);    // key rows per block (dkv)
  static constexpr int KQ = ortmlx_avjp_tiles::kq(DMAX);    // query rows per step (dkv)
  static constexpr int LD = ortmlx_avjp_tiles::ld(DMAX);    // row stride of D-wide tiles (stats)
  static constexpr int LDT = ortmlx_avjp_tiles::ldt(DMAX);  // the same in dq and dkv
  static constexpr int LS = ortmlx_avjp_tiles::ldt(BK);     // of dS in dq
  static constexpr int LP = ortmlx_avjp_tiles::ldt(KQ);     // of P^T, dS^T in dkv
  static constexpr int STAGES = ortmlx_avjp_tiles::dkv_stages(DMAX);  // Q/dY buffers in dkv
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
    const RowStat s = st[pass].merged_over_quad();
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
// Tensor-core products of the dq and dkv passes: mma.sync m16n8k8 with TF32 operands and fp32
// accumulation. kTf32: one product of the operands rounded to TF32 (the EP's tf32 mode).
// kSplit: 3xTF32, x = hi + lo with hi = tf32(x), lo = tf32(x - hi), acc += lo hi + hi lo + hi hi
// (the lo lo term is below fp32's rounding): fp32-level accuracy, the default. kSplitTf32Inputs:
// kSplit where the inputs (Q, K, V, Y, dY) are TF32 values already (float16/bfloat16 contracts),
// so their lo is zero: a product of two inputs (S, dP) takes one mma, a product of an
// intermediate (P, dS: the A operand) and an input (always the B operand) two, lo hi + hi hi,
// and no lo of an input is computed, stored or read. The terms it drops are exact zeros: the same
// sums as kSplit's on such inputs, in fewer instructions. kSplitSafe: 3xTF32
// for inputs that may hold Inf or NaN; the cross terms of a k-step are summed apart and dropped
// where hi hi is not finite, because Inf - Inf = NaN in lo and Inf * 0 in a cross term would
// turn an Inf of the fp32 product into NaN (hi keeps the sign and zeroness of x, so hi hi alone
// is non-finite exactly where the fp32 product is).
// Accumulation: an mma rounds the sum of its products and its accumulator toward zero, the
// addends aligned to the largest and truncated (measured: Fasi et al., PeerJ CS 2021; the model
// is in tools/avjp_cuda_emu/emu.h), a bias of about 2^-24 of the accumulator per instruction.
// Chaining every k-step of a long reduction (dQ over all keys, dK/dV over all query rows) into
// one accumulator inside the tensor cores thus drifts linearly with the sequence length (1e-4 at
// S = 8192). In both 3xTF32 forms each k-step's products therefore start from zero fragments and
// reach the accumulator through an ordinary fp32 add (round to nearest), as SIMT FMA sums do.
// kTf32 keeps the chain: its bias (about 1e-4 relative at S = 8192) is far below TF32's own
// operand rounding (1e-3), and an add per mma would cost more there than in 3xTF32.
// ---------------------------------------------------------------------------------------
#if !defined(ORTMLX_AVJP_EMU)  // the emulator (tools/avjp_cuda_emu/emu.h) brings its own
// x rounded to TF32: nearest, ties away from zero (the low 13 bits of the result do not count).
__device__ __forceinline__ unsigned cvt_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
// d += a b for one 16 x 8 tile, k = 8, fragments in the PTX ISA's layout (g = lane / 4,
// t = lane % 4): a = A(g, t), A(g + 8, t), A(g, t + 4), A(g + 8, t + 4); b = B(t, g), B(t + 4, g);
// d = D(g, 2t), D(g, 2t + 1), D(g + 8, 2t), D(g + 8, 2t + 1).
__device__ __forceinline__ void mma_tf32(float (&d)[4], const unsigned (&a)[4],
                                         const unsigned (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

// x = hi + lo as TF32 operands (lo = 0 in kTf32). kSplit's operands are finite, so the rounding
// is cvt.rna.tf32's without its Inf/NaN guard, which sm_90 spends three instructions on: add half
// a TF32 unit in the last place to the bits (a carry rounds the magnitude up, ties away from
// zero) and leave the low 13 bits, which the mma ignores; bit for bit what cvt_tf32 gives.
__device__ __forceinline__ unsigned round_tf32_finite(float x) {
  return __float_as_uint(x) + 0x1000u;
}
template <Precision P>
__device__ __forceinline__ void split(float x, unsigned& hi, unsigned& lo) {
  if (P == kSplit || P == kSplitTf32Inputs) {
    hi = round_tf32_finite(x);
    lo = round_tf32_finite(x - __uint_as_float(hi & 0xffffe000u));
  } else {
    hi = cvt_tf32(x);
    lo = P == kTf32 ? 0u : cvt_tf32(x - __uint_as_float(hi & 0xffffe000u));
  }
}

// Whether an input operand (the B operand of every product, the A operand of S and dP) carries a
// lo part: not in kTf32 (none at all) nor in kSplitTf32Inputs (zero).
template <Precision P>
constexpr bool kInputLo = P == kSplit || P == kSplitSafe;

// An input's element as TF32 operands: split, or hi alone where its lo is not used (lo = 0).
template <Precision P>
__device__ __forceinline__ void split_input(float x, unsigned& hi, unsigned& lo) {
  if (kInputLo<P>) {
    split<P>(x, hi, lo);
  } else {
    hi = P == kTf32 ? cvt_tf32(x) : round_tf32_finite(x);
    lo = 0u;
  }
}

// The products of one k-step (three for 3xTF32) into `acc` (the precisions: see above).
// A_INPUT: the A operand is an input too (S, dP), so kSplitTf32Inputs needs hi hi alone.
template <Precision P, bool A_INPUT = false>
__device__ __forceinline__ void mma_step(float (&acc)[4], const unsigned (&ah)[4],
                                         const unsigned (&al)[4], const unsigned (&bh)[2],
                                         const unsigned (&bl)[2]) {
  if (P == kTf32) {
    mma_tf32(acc, ah, bh);
  } else if (P == kSplitTf32Inputs) {
    // kSplit's chain less its zero terms (al = 0 for an input A, bl = 0 always).
    float part[4] = {0.f, 0.f, 0.f, 0.f};
    if (!A_INPUT) mma_tf32(part, al, bh);
    mma_tf32(part, ah, bh);
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[e] += part[e];
  } else if (P == kSplit) {
    // One chain of three (measured: two independent chains, hi hi apart, ran 4% slower on an
    // H100: more registers, spills in dkv).
    float part[4] = {0.f, 0.f, 0.f, 0.f};
    mma_tf32(part, al, bh);
    mma_tf32(part, ah, bl);
    mma_tf32(part, ah, bh);
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[e] += part[e];
  } else {
    float big[4] = {0.f, 0.f, 0.f, 0.f}, small[4] = {0.f, 0.f, 0.f, 0.f};
    mma_tf32(small, al, bh);
    mma_tf32(small, ah, bl);
    mma_tf32(big, ah, bh);
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[e] += isfinite(big[e]) ? big[e] + small[e] : big[e];
  }
}

// The accumulator of an M x N tile product spread over the block's 8 warps: warp w owns rows
// (w / WN) M/WM + [0, M/WM) and columns (w % WN) N/WN + [0, N/WN) as MI x NJ mma tiles of 16 x 8;
// v[mi][nj][e] is the element at (row(mi, e), col(nj, e)).
template <int M, int N>
struct Acc {
  static constexpr int kWarps = kThreads / 32;
  static constexpr int WM = M >= 64 ? 4 : M / 16, WN = kWarps / WM;
  static constexpr int MI = M / WM / 16, NJ = N / WN / 8;
  static_assert(WM * WN == kWarps && MI * WM * 16 == M && NJ * WN * 8 == N, "tile shape");
  float v[MI][NJ][4];

  __device__ void zero() {
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
      for (int nj = 0; nj < NJ; ++nj)
#pragma unroll
        for (int e = 0; e < 4; ++e) v[mi][nj][e] = 0.f;
  }
  __device__ static int row0() {
    return static_cast<int>(threadIdx.x) / 32 / WN * (M / WM);
  }
  __device__ static int col0() {
    return static_cast<int>(threadIdx.x) / 32 % WN * (N / WN);
  }
  __device__ static int row(int mi, int e) {
    return row0() + 16 * mi + static_cast<int>(threadIdx.x) % 32 / 4 + 8 * (e >> 1);
  }
  __device__ static int col(int nj, int e) {
    return col0() + 8 * nj + 2 * (static_cast<int>(threadIdx.x) % 4) + (e & 1);
  }
};

// acc += A B over k < kdim (a multiple of 8; tiles zero-padded to it). A(r, k) = A[r LDA + k];
// B(k, n) = B[n LDB + k] when BT (two row-major tiles: A B^T), else B[k LDB + n].
template <Precision P, bool BT, int LDA, int LDB, int M, int N>
__device__ __forceinline__ void mma_tile(const float* A, const float* B, int kdim, Acc<M, N>& acc) {
  using F = Acc<M, N>;
  const int g = static_cast<int>(threadIdx.x) % 32 / 4, t = static_cast<int>(threadIdx.x) % 4;
  const float* a0 = A + (F::row0() + g) * LDA + t;
  const float* b0 = BT ? B + (F::col0() + g) * LDB + t : B + t * LDB + F::col0() + g;
  // A is an input where BT (S, dP: two input tiles), an intermediate (P, dS) otherwise.
  auto split_a = [](float x, unsigned& hi, unsigned& lo) {
    if (BT)
      split_input<P>(x, hi, lo);
    else
      split<P>(x, hi, lo);
  };
  for (int k = 0; k < kdim; k += 8) {
    unsigned ah[F::MI][4], al[F::MI][4], bh[F::NJ][2], bl[F::NJ][2];
#pragma unroll
    for (int mi = 0; mi < F::MI; ++mi) {
      const float* a = a0 + 16 * mi * LDA + k;
      split_a(a[0], ah[mi][0], al[mi][0]);
      split_a(a[8 * LDA], ah[mi][1], al[mi][1]);
      split_a(a[4], ah[mi][2], al[mi][2]);
      split_a(a[8 * LDA + 4], ah[mi][3], al[mi][3]);
    }
#pragma unroll
    for (int nj = 0; nj < F::NJ; ++nj) {
      const float* b = BT ? b0 + 8 * nj * LDB + k : b0 + k * LDB + 8 * nj;
      split_input<P>(b[0], bh[nj][0], bl[nj][0]);
      split_input<P>(BT ? b[4] : b[4 * LDB], bh[nj][1], bl[nj][1]);
    }
#pragma unroll
    for (int mi = 0; mi < F::MI; ++mi)
#pragma unroll
      for (int nj = 0; nj < F::NJ; ++nj)
        mma_step<P, BT>(acc.v[mi][nj], ah[mi], al[mi], bh[nj], bl[nj]);
  }
}

template <bool BT, int LDA, int LDB, int M, int N>
__device__ __forceinline__ void mma_product(const float* A, const float* B, int kdim,
                                            Acc<M, N>& acc, Precision prec) {
  if (prec == kTf32)
    mma_tile<kTf32, BT, LDA, LDB>(A, B, kdim, acc);
  else if (prec == kSplit)
    mma_tile<kSplit, BT, LDA, LDB>(A, B, kdim, acc);
  else if (prec == kSplitTf32Inputs)
    mma_tile<kSplitTf32Inputs, BT, LDA, LDB>(A, B, kdim, acc);
  else
    mma_tile<kSplitSafe, BT, LDA, LDB>(A, B, kdim, acc);
}

// As load_rows, with 128-bit accesses when the source allows them: an aligned base, a row stride
// and d that are multiples of 4 floats (with d not a multiple of 4, a 4-float chunk would reach
// past the row into the next head's columns, which the zero padding up to DMAX must not hold).
template <int RT, int DMAX, int LD>
__device__ void load_rows4(float* dst, const float* src, long long stride, int rows, int d) {
  static_assert(LD % 4 == 0 && DMAX % 4 == 0, "128-bit rows");
  if (reinterpret_cast<unsigned long long>(src) % 16 != 0 || stride % 4 != 0 || d % 4 != 0) {
    load_rows<RT, DMAX, LD>(dst, src, stride, rows, d);
    return;
  }
  constexpr int C4 = DMAX / 4;
  for (int e = threadIdx.x; e < RT * C4; e += kThreads) {
    const int r = e / C4, c = e % C4 * 4;
    float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
    if (r < rows && c < d) x = *reinterpret_cast<const float4*>(src + r * stride + c);
    *reinterpret_cast<float4*>(dst + r * LD + c) = x;
  }
}

#if !defined(ORTMLX_AVJP_EMU)
// cp.async: 16 bytes from global to shared memory behind the thread's back (zeros when !valid);
// commit closes a group of them, wait<N> waits until at most N groups are in flight.
[[maybe_unused]] __device__ __forceinline__ void cp_async16(float* dst, const float* src,
                                                            bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}
[[maybe_unused]] __device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
#endif

// As load_rows4, asynchronously where the source allows 16-byte copies (else synchronously);
// visible to the block after cp_async_wait and a __syncthreads.
template <int RT, int DMAX, int LD>
__device__ void load_rows_async(float* dst, const float* src, long long stride, int rows, int d) {
  if (reinterpret_cast<unsigned long long>(src) % 16 != 0 || stride % 4 != 0 || d % 4 != 0) {
    load_rows<RT, DMAX, LD>(dst, src, stride, rows, d);
    return;
  }
  constexpr int C4 = DMAX / 4;
  for (int e = threadIdx.x; e < RT * C4; e += kThreads) {
    const int r = e / C4, c = e % C4 * 4;
    const bool valid = r < rows && c < d;
    cp_async16(dst + r * LD + c, valid ? src + r * stride + c : src, valid);
  }
}

}  // namespace

#include "warp_rows.cuh"  // the kernels of head sizes up to 128
#include "wg_dkv.cuh"     // the dK/dV pass on warpgroup MMAs (the TF32 mode, head sizes 64 and 128)
#include "wg_stats.cuh"   // the plain form's stats pass on warpgroup MMAs (the same)

namespace {

// ---------------------------------------------------------------------------------------
// Pass 2: dQ on tensor cores. Grid (query tiles, B * HQ).
// Shared: Q, dY (BQ x LDT), K, V (BK x LDT), dS (BQ x BK+4), lse, delta (BQ).
// ---------------------------------------------------------------------------------------
template <int DMAX>
__device__ void dq_kernel(const float* q, const float* k, const float* v, const float* dy,
                          const float* lse, const float* delta, const Problem& p, float* dq) {
  using T = Tiles<DMAX>;
  constexpr int BQ = T::BQ, BK = T::BK, LD = T::LDT, LS = T::LS;
  using SAcc = Acc<BQ, BK>;
  using DAcc = Acc<BQ, DMAX>;
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
  const long long qstride = p.row_stride(p.hq), kstride = p.row_stride(p.hk);
  const long long qoff = p.offset(bi, h, i0, p.hq, p.sq);
  const Precision prec = p.precision();

  load_rows4<BQ, DMAX, LD>(qs, q + qoff, qstride, rows, p.d);
  load_rows4<BQ, DMAX, LD>(dys, dy + qoff, qstride, rows, p.d);
  for (int r = threadIdx.x; r < BQ; r += kThreads) {
    const long long row = static_cast<long long>(bh) * p.sq + i0 + r;
    lse_s[r] = r < rows ? lse[row] : 0.f;
    delta_s[r] = r < rows ? delta[row] : 0.f;
  }

  DAcc dacc;
  dacc.zero();
  const int kend = p.finite ? p.key_limit(i0 + rows) : p.sk;
  for (int j0 = 0; j0 < kend; j0 += BK) {
    const int cols = min(BK, p.sk - j0);
    __syncthreads();
    const long long koff = p.offset(bi, g, j0, p.hk, p.sk);
    load_rows4<BK, DMAX, LD>(ks, k + koff, kstride, cols, p.d);
    load_rows4<BK, DMAX, LD>(vs, v + koff, kstride, cols, p.d);
    __syncthreads();
    SAcc sacc, pacc;
    sacc.zero();
    pacc.zero();
    mma_product<true, LD, LD>(qs, ks, p.d, sacc, prec);
    mma_product<true, LD, LD>(dys, vs, p.d, pacc, prec);
#pragma unroll
    for (int mi = 0; mi < SAcc::MI; ++mi)
#pragma unroll
      for (int nj = 0; nj < SAcc::NJ; ++nj)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = SAcc::row(mi, e), c = SAcc::col(nj, e);
          float ds = 0.f;
          if (r < rows && c < cols) {
            bool hidden;
            const float s = p.score(sacc.v[mi][nj][e], bi, h, i0 + r, j0 + c, hidden);
            ds = prob(s, hidden, lse_s[r]) * (pacc.v[mi][nj][e] - delta_s[r]);
          }
          dss[r * LS + c] = ds;
        }
    __syncthreads();
    mma_product<false, LS, LD>(dss, ks, BK, dacc, prec);
  }
#pragma unroll
  for (int mi = 0; mi < DAcc::MI; ++mi)
#pragma unroll
    for (int nj = 0; nj < DAcc::NJ; ++nj)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = DAcc::row(mi, e), c = DAcc::col(nj, e);
        if (r < rows && c < p.d) dq[qoff + r * qstride + c] = dacc.v[mi][nj][e] * p.scale;
      }
}

// ---------------------------------------------------------------------------------------
// Pass 3: dK and dV on tensor cores. Grid (key tiles, B * HK). Steps over the group's query
// heads and their query tiles. Shared: K, V (KV x LDT), STAGES x (Q, dY) (KQ x LDT), P^T, dS^T
// (KV x KQ+4), lse, delta (KQ). With 2 stages the next step's Q and dY tiles load by cp.async
// while this step multiplies (the buckets whose blocks fill an SM alone; elsewhere a second
// buffer would cost a resident block).
// ---------------------------------------------------------------------------------------
template <int DMAX>
__device__ void dkv_kernel(const float* q, const float* k, const float* v, const float* dy,
                           const float* lse, const float* delta, const Problem& p, float* dk,
                           float* dv) {
  using T = Tiles<DMAX>;
  constexpr int KV = T::KV, KQ = T::KQ, LD = T::LDT, LP = T::LP, STAGES = T::STAGES;
  using SAcc = Acc<KV, KQ>;
  using DAcc = Acc<KV, DMAX>;
  float* ks = avjp_smem;
  float* vs = ks + KV * LD;
  float* qbuf = vs + KV * LD;  // stage st: Q at qbuf + 2 st KQ LD, dY after it
  float* pts = qbuf + STAGES * 2 * KQ * LD;
  float* dsts = pts + KV * LP;
  float* lse_s = dsts + KV * LP;
  float* delta_s = lse_s + KQ;

  const int tile = blockIdx.x, bg = blockIdx.y;
  const int bi = bg / p.hk, g = bg % p.hk, group = p.hq / p.hk;
  const int j0 = tile * KV, cols = min(KV, p.sk - j0);
  const long long qstride = p.row_stride(p.hq), kstride = p.row_stride(p.hk);
  const long long koff = p.offset(bi, g, j0, p.hk, p.sk);
  const Precision prec = p.precision();

  load_rows4<KV, DMAX, LD>(ks, k + koff, kstride, cols, p.d);
  load_rows4<KV, DMAX, LD>(vs, v + koff, kstride, cols, p.d);

  DAcc dkacc, dvacc;
  dkacc.zero();
  dvacc.zero();
  int ibegin;
  const bool none = p.no_rows_see(j0, KQ, ibegin);
  // Step n: query head g group + n / tiles, query rows ibegin + (n % tiles) KQ.
  const int tiles = (p.sq - ibegin + KQ - 1) / KQ, steps = none ? 0 : group * tiles;
  auto issue = [&](int n) {  // starts loading step n's Q and dY tiles into its stage
    const int i0 = ibegin + n % tiles * KQ, h = g * group + n / tiles;
    const long long qoff = p.offset(bi, h, i0, p.hq, p.sq);
    float* qs = qbuf + n % STAGES * 2 * KQ * LD;
    load_rows_async<KQ, DMAX, LD>(qs, q + qoff, qstride, min(KQ, p.sq - i0), p.d);
    load_rows_async<KQ, DMAX, LD>(qs + KQ * LD, dy + qoff, qstride, min(KQ, p.sq - i0), p.d);
    cp_async_commit();
  };
  if (STAGES == 2 && steps > 0) issue(0);
  for (int n = 0; n < steps; ++n) {
    const int i0 = ibegin + n % tiles * KQ, h = g * group + n / tiles;
    const int rows = min(KQ, p.sq - i0);
    const float* qs = qbuf + n % STAGES * 2 * KQ * LD;
    const float* dys = qs + KQ * LD;
    __syncthreads();  // the previous step is done with the stage issue() refills, P^T and lse
    if (STAGES == 1 || n + 1 < steps) issue(STAGES == 1 ? n : n + 1);
    if (STAGES == 2 && n + 1 < steps)
      cp_async_wait<1>();
    else
      cp_async_wait<0>();
    for (int r = threadIdx.x; r < KQ; r += kThreads) {
      const long long row = (static_cast<long long>(bi) * p.hq + h) * p.sq + i0 + r;
      lse_s[r] = r < rows ? lse[row] : 0.f;
      delta_s[r] = r < rows ? delta[row] : 0.f;
    }
    __syncthreads();
    // Transposed tiles: result rows are keys, columns are query rows.
    SAcc sacc, pacc;
    sacc.zero();
    pacc.zero();
    mma_product<true, LD, LD>(ks, qs, p.d, sacc, prec);
    mma_product<true, LD, LD>(vs, dys, p.d, pacc, prec);
#pragma unroll
    for (int mi = 0; mi < SAcc::MI; ++mi)
#pragma unroll
      for (int nj = 0; nj < SAcc::NJ; ++nj)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = SAcc::row(mi, e), qr = SAcc::col(nj, e);
          float pv = 0.f, ds = 0.f;
          if (key < cols && qr < rows) {
            bool hidden;
            const float s = p.score(sacc.v[mi][nj][e], bi, h, i0 + qr, j0 + key, hidden);
            pv = prob(s, hidden, lse_s[qr]);
            ds = pv * (pacc.v[mi][nj][e] - delta_s[qr]);
          }
          pts[key * LP + qr] = pv;
          dsts[key * LP + qr] = ds;
        }
    __syncthreads();
    mma_product<false, LP, LD>(pts, dys, KQ, dvacc, prec);
    mma_product<false, LP, LD>(dsts, qs, KQ, dkacc, prec);
  }
#pragma unroll
  for (int mi = 0; mi < DAcc::MI; ++mi)
#pragma unroll
    for (int nj = 0; nj < DAcc::NJ; ++nj)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = DAcc::row(mi, e), c = DAcc::col(nj, e);
        if (key < cols && c < p.d) {
          dk[koff + key * kstride + c] = dkacc.v[mi][nj][e] * p.scale;
          dv[koff + key * kstride + c] = dvacc.v[mi][nj][e];
        }
      }
}

}  // namespace

// Entry points, one per head-size bucket. Argument order is MLX's for precompiled kernels:
// inputs, outputs, then the scalars (int, float) in the order the host passes them.
#define AVJP_SCALARS                                                                         \
  int b, int hq, int hk, int sq, int sk, int d, int rank, int causal, int mask_kind, int mb, \
      int mh, int mr, int mw, int mode, float scale
#define AVJP_PROBLEM(mask, finite)                                                              \
  Problem p {                                                                                   \
    b, hq, hk, sq, sk, d, rank, causal, mask_kind, mb, mh, mr, mw, scale, mask, finite[0], mode \
  }

#define AVJP_ENTRIES(DMAX)                                                                     \
  extern "C" __global__ void __launch_bounds__(kThreads)                                       \
      AVJP_CAT(ortmlx_avjp_stats_d##DMAX##_, ORTMLX_AVJP_TAG)(                                 \
          const float* q, const float* k, const float* v, const float* y, const float* dy,     \
          const void* mask, const int* finite, float* lse, float* delta, AVJP_SCALARS) {       \
    AVJP_PROBLEM(mask, finite);                                                                \
    if constexpr (kWarpRows<DMAX>)                                                             \
      wr_stats<DMAX, false>(q, k, v, y, dy, p, lse, delta);                                    \
    else                                                                                       \
      stats_kernel<DMAX, false>(q, k, v, y, dy, p, lse, delta);                                \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads)                                       \
      AVJP_CAT(ortmlx_avjp_stats_recompute_d##DMAX##_, ORTMLX_AVJP_TAG)(                       \
          const float* q, const float* k, const float* v, const float* y, const float* dy,     \
          const void* mask, const int* finite, float* lse, float* delta, AVJP_SCALARS) {       \
    AVJP_PROBLEM(mask, finite);                                                                \
    if constexpr (kWarpRows<DMAX>)                                                             \
      wr_stats<DMAX, true>(q, k, v, y, dy, p, lse, delta);                                     \
    else                                                                                       \
      stats_kernel<DMAX, true>(q, k, v, y, dy, p, lse, delta);                                 \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads)                                       \
      AVJP_CAT(ortmlx_avjp_dq_d##DMAX##_, ORTMLX_AVJP_TAG)(                                    \
          const float* q, const float* k, const float* v, const float* dy, const void* mask,   \
          const int* finite, const float* lse, const float* delta, float* dq, AVJP_SCALARS) {  \
    AVJP_PROBLEM(mask, finite);                                                                \
    if constexpr (kWarpRows<DMAX>)                                                             \
      wr_dq<DMAX>(q, k, v, dy, lse, delta, p, dq);                                             \
    else                                                                                       \
      dq_kernel<DMAX>(q, k, v, dy, lse, delta, p, dq);                                         \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads)                                       \
      AVJP_CAT(ortmlx_avjp_dkv_d##DMAX##_, ORTMLX_AVJP_TAG)(                                   \
          const float* q, const float* k, const float* v, const float* dy, const void* mask,   \
          const int* finite, const float* lse, const float* delta, float* dk, float* dv,       \
          AVJP_SCALARS) {                                                                      \
    AVJP_PROBLEM(mask, finite);                                                                \
    if constexpr (kWarpRows<DMAX>)                                                             \
      wr_dkv<DMAX, false>(q, k, v, dy, lse, delta, p, dk, dv, nullptr);                        \
    else                                                                                       \
      dkv_kernel<DMAX>(q, k, v, dy, lse, delta, p, dk, dv);                                    \
  }                                                                                            \
  /* Passes 2 and 3 in one (warp-row buckets; the host never launches it for the others). */   \
  extern "C" __global__ void __launch_bounds__(kThreads)                                       \
      AVJP_CAT(ortmlx_avjp_dkvq_d##DMAX##_, ORTMLX_AVJP_TAG)(                                  \
          const float* q, const float* k, const float* v, const float* dy, const void* mask,   \
          const int* finite, const float* lse, const float* delta, float* dk, float* dv,       \
          float* dq, AVJP_SCALARS) {                                                           \
    AVJP_PROBLEM(mask, finite);                                                                \
    if constexpr (kWarpRows<DMAX>) wr_dkv<DMAX, true>(q, k, v, dy, lse, delta, p, dk, dv, dq); \
  }

// The plain form's stats pass (wg_stats.cuh), and the dK/dV pass (wg_dkv.cuh, without and with
// dQ) with the pack pass that writes its step images, on warpgroup MMAs: the TF32 mode, head sizes
// 64 and 128 (empty kernels in the other buckets: the host never launches them there).
#define AVJP_WG_ENTRIES(DMAX)                                                                    \
  extern "C" __global__ void __launch_bounds__(kThreads)                                         \
      AVJP_CAT(ortmlx_avjp_stats_wg_d##DMAX##_, ORTMLX_AVJP_TAG)(                                \
          const float* q, const float* k, const float* v, const float* y, const float* dy,       \
          const void* mask, const int* finite, float* lse, float* delta, AVJP_SCALARS) {         \
    AVJP_PROBLEM(mask, finite);                                                                  \
    (void)v;                                                                                     \
    if constexpr (kWgBucket<DMAX>) wg_stats<DMAX>(q, k, y, dy, p, lse, delta);                   \
  }                                                                                              \
  /* The TF32 mode where it runs two blocks an SM (tiles.h, wg_stats_two_blocks). */             \
  extern "C" __global__ void __launch_bounds__(kThreads, 2)                                      \
      AVJP_CAT(ortmlx_avjp_stats_wg2_d##DMAX##_, ORTMLX_AVJP_TAG)(                               \
          const float* q, const float* k, const float* v, const float* y, const float* dy,       \
          const void* mask, const int* finite, float* lse, float* delta, AVJP_SCALARS) {         \
    AVJP_PROBLEM(mask, finite);                                                                  \
    (void)v;                                                                                     \
    if constexpr (kWgStatsTwoBlocks<DMAX> && kWgBucket<DMAX>)                                    \
      wg_stats_tf32<DMAX>(q, k, y, dy, p, lse, delta);                                           \
  }                                                                                              \
  extern "C" __global__ void __launch_bounds__(kThreads)                                         \
      AVJP_CAT(ortmlx_avjp_pack_wg_d##DMAX##_, ORTMLX_AVJP_TAG)(                                 \
          const float* q, const float* dy, const float* lse, const float* delta, float* images,  \
          AVJP_SCALARS) {                                                                        \
    const int finite[1] = {1};                                                                   \
    AVJP_PROBLEM(nullptr, finite);                                                               \
    if constexpr (kWgBucket<DMAX>) wg_pack<DMAX>(q, dy, lse, delta, p, images);                  \
  }                                                                                              \
  extern "C" __global__ void __launch_bounds__(kThreads)                                         \
      AVJP_CAT(ortmlx_avjp_dkv_wg_d##DMAX##_, ORTMLX_AVJP_TAG)(                                  \
          const float* images, const float* k, const float* v, const void* mask,                 \
          const int* finite, float* dk, float* dv, AVJP_SCALARS) {                               \
    AVJP_PROBLEM(mask, finite);                                                                  \
    if constexpr (kWgBucket<DMAX>) wg_dkv_kernel<DMAX, false>(images, k, v, p, dk, dv, nullptr); \
  }                                                                                              \
  extern "C" __global__ void __launch_bounds__(kThreads)                                         \
      AVJP_CAT(ortmlx_avjp_dkvq_wg_d##DMAX##_, ORTMLX_AVJP_TAG)(                                 \
          const float* images, const float* k, const float* v, const void* mask,                 \
          const int* finite, float* dk, float* dv, float* dq, AVJP_SCALARS) {                    \
    AVJP_PROBLEM(mask, finite);                                                                  \
    if constexpr (kWgBucket<DMAX>) wg_dkv_kernel<DMAX, true>(images, k, v, p, dk, dv, dq);       \
  }

// Whether every element of Q, K, V, Y and dY is finite (the `finite` flag every pass takes):
// out[0], set to 1 by MLX before the launch (init_value), becomes 0 when one is not. One read of
// each tensor (n_q, n_k, n_k, n_y, n_q floats; the Recompute form passes dY for Y with n_y 0),
// 16-byte loads where the tensor is aligned, and no write at all in the common case.
namespace {
__device__ __forceinline__ bool any_non_finite(const float* x, long long n) {
  const long long first = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  bool bad = false;
  long long done = 0;
  if (reinterpret_cast<unsigned long long>(x) % 16 == 0) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    done = n / 4 * 4;
#pragma unroll 4
    for (long long i = first; i < n / 4; i += step) {
      const float4 c = x4[i];
      bad |= !isfinite(c.x) | !isfinite(c.y) | !isfinite(c.z) | !isfinite(c.w);
    }
  }
  for (long long i = done + first; i < n; i += step) bad |= !isfinite(x[i]);
  return bad;
}
}  // namespace
extern "C" __global__ void __launch_bounds__(kThreads)
    AVJP_CAT(ortmlx_avjp_finite_, ORTMLX_AVJP_TAG)(const float* q, const float* k, const float* v,
                                                   const float* y, const float* dy, float* out,
                                                   int n_q, int n_k, int n_y) {
  if (any_non_finite(q, n_q) | any_non_finite(k, n_k) | any_non_finite(v, n_k) |
      any_non_finite(y, n_y) | any_non_finite(dy, n_q))
    out[0] = 0.f;  // every writer writes the same value
}

// One head-size bucket per build (-DAVJP_BUCKET=...): MLX hashes a precompiled kernel's whole
// binary on every launch, so each bucket is its own small module. Without it, all of them.
#if defined(AVJP_BUCKET)
#define AVJP_ENTRIES_OF(b) AVJP_ENTRIES(b) AVJP_WG_ENTRIES(b)  // expands AVJP_BUCKET first
AVJP_ENTRIES_OF(AVJP_BUCKET)
#else
AVJP_ENTRIES(32)
AVJP_ENTRIES(64)
AVJP_ENTRIES(128)
AVJP_ENTRIES(256)
AVJP_WG_ENTRIES(32)
AVJP_WG_ENTRIES(64)
AVJP_WG_ENTRIES(128)
AVJP_WG_ENTRIES(256)
#endif
