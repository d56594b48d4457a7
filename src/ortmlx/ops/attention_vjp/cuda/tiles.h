// Tile geometry of the fused CUDA AttentionVJP kernels, shared by the kernels (kernels.cu,
// warp_rows.cuh; nvcc) and the host code that launches them (fused.cpp): rows per block and
// dynamic shared memory per block. Plain constexpr functions, no includes, so both compilers read
// the same numbers.
#pragma once

namespace ortmlx_avjp_tiles {

constexpr int kThreads = 256;  // per block: 8 warps (a 16 x 16 grid in the SIMT stats pass)
constexpr int kWarps = kThreads / 32;

// The kernels' precision mode, the `mode` scalar the host passes: 3xTF32 products (fp32
// accuracy), the EP's tf32 mode (one TF32 product), or 3xTF32 on inputs that are TF32 values
// (float16/bfloat16 contracts widened to fp32), whose zero lo terms the products skip.
constexpr int kModeExact = 0;
constexpr int kModeTf32 = 1;
constexpr int kModeExactTf32Inputs = 2;

// The head-size bucket a head size runs in (the kernels are instantiated for these).
constexpr int dmax_of(int d) {
  return d <= 32 ? 32 : d <= 64 ? 64 : d <= 128 ? 128 : 256;
}

// Which kernels a bucket runs: the warp-row kernels (warp_rows.cuh: each warp owns 16 rows of
// the result, P and dS stay in registers) up to 128; the block-tile kernels (kernels.cu) at 256,
// where a warp's 16 rows of dK and dV would not fit its registers.
constexpr bool warp_rows(int dmax) {
  return dmax <= 128;
}

// stats and dq: query rows per block, key rows per step.
constexpr int bq(int dmax) {
  return dmax >= 256 ? 32 : 64;
}
constexpr int bk(int dmax) {
  return dmax >= 128 ? 32 : 64;
}
// dkv: key rows per block, query rows per step.
constexpr int kv(int dmax) {
  return dmax >= 256 ? 32 : 64;
}
constexpr int kq(int dmax) {
  return dmax >= 128 ? 32 : 64;
}
// Row stride of D-wide shared tiles of the SIMT stats pass (odd: the 16 rows a warp reads fall
// in 16 banks).
constexpr int ld(int dmax) {
  return dmax + 1;
}
// Row stride of the tensor-core passes' tiles (dq, dkv), D-wide or score-wide: 4 mod 32, so the
// 8 rows x 4 columns of an mma fragment a warp reads fall in 32 banks; a multiple of 4 keeps
// 128-bit stores aligned.
constexpr int ldt(int cols) {
  return cols + 4;
}

// Dynamic shared memory in bytes, in the order the kernels lay their tiles out.
// stats: Q (bq x ld), K (bk x ld), S/P (bq x bk+1), V (bk x ld), lse (bq).
constexpr int stats_smem(int dmax) {
  return 4 * (bq(dmax) * ld(dmax) + 2 * bk(dmax) * ld(dmax) + bq(dmax) * (bk(dmax) + 1) + bq(dmax));
}
// dq: Q, dY (bq x ldt(dmax)), K, V (bk x ldt(dmax)), dS (bq x ldt(bk)), lse, delta (bq).
constexpr int dq_smem(int dmax) {
  return 4 * (2 * bq(dmax) * ldt(dmax) + 2 * bk(dmax) * ldt(dmax) + bq(dmax) * ldt(bk(dmax)) +
              2 * bq(dmax));
}
// dkv: Q/dY buffers (2: the next step's tiles load by cp.async during this one) where a block
// fills an SM alone anyway (registers and shared memory at D > 64); 1 where a second buffer
// would halve the resident blocks.
constexpr int dkv_stages(int dmax) {
  return dmax >= 128 ? 2 : 1;
}
// dkv: K, V (kv x ldt(dmax)), stages x (Q, dY) (kq x ldt(dmax)), P^T, dS^T (kv x ldt(kq)), lse,
// delta (kq).
constexpr int dkv_smem(int dmax) {
  return 4 * (2 * kv(dmax) * ldt(dmax) + dkv_stages(dmax) * 2 * kq(dmax) * ldt(dmax) +
              2 * kv(dmax) * ldt(kq(dmax)) + 2 * kq(dmax));
}

// Warp-row kernels (dmax <= 128). stats and dq: 16 query rows per warp; key rows per step.
// dkv: 16 key rows per warp; query rows per step. The step tiles every warp reads (K/V in stats
// and dq, Q/dY in dkv) are double-buffered: fetched through registers (stats, dq) or a shared
// staging area (dkv), stored split into TF32 hi/lo planes.
constexpr int wr_bk(int dmax) {
  return dmax >= 128 ? 32 : 64;
}
// dq's key rows per step (its K/V stages hold hi/lo planes).
constexpr int wr_dq_bk(int dmax) {
  return dmax >= 128 ? 16 : 32;
}
// dkv's query rows per step: 32, or 16 at D 128 where the stages hold lo planes too (3xTF32 on
// float32 inputs); `tf32`: stages of hi planes alone, 32 rows in the same space (the TF32 mode,
// and 3xTF32 on inputs that are TF32 values, whose lo is zero).
constexpr int wr_kq(int dmax, bool tf32 = false) {
  return dmax >= 128 && !tf32 ? 16 : 32;
}
// stats: Q (rows x ldt), 2 stages x (K, V as hi/lo planes (bk x ldt each)).
constexpr int wr_stats_smem(int dmax) {
  return 4 * (16 * kWarps * ldt(dmax) + 2 * 4 * wr_bk(dmax) * ldt(dmax));
}
// dq: Q, dY (rows x ldt), 2 stages x (K, V as hi/lo planes (dq_bk x ldt each)).
constexpr int wr_dq_smem(int dmax) {
  return 4 * (2 * 16 * kWarps * ldt(dmax) + 2 * 4 * wr_dq_bk(dmax) * ldt(dmax));
}
// dkv with dQ (one pass for all three gradients): the dkv tiles, then dS (kq x wr_ds_ld()), read
// as 64-bit pairs: a row stride of 8 mod 32 floats keeps a half-warp's 16 reads in 32 banks.
constexpr int wr_ds_ld() {
  return 16 * kWarps + 8;
}
// dkv: K, V (keys x ldt), 2 stages x (Q, dY as planes (kq x ldt each): hi and lo, or hi alone in
// the TF32 mode; lse, delta (kq)), [dS (kq x wr_ds_ld()) with dQ], then in the 3xTF32 modes a
// staging area: the next step's Q and dY as fp32 rows, copied in by cp.async and split into a
// stage's planes by the threads that copied them (the TF32 mode copies into the planes and rounds
// them in place). Floats.
constexpr int wr_dkv_stage(int dmax, bool tf32) {
  return (tf32 ? 2 : 4) * wr_kq(dmax, tf32) * ldt(dmax) + 2 * wr_kq(dmax, tf32);
}
constexpr int wr_dkv_layout(int dmax, bool tf32, bool with_dq) {
  return 2 * 16 * kWarps * ldt(dmax) + 2 * wr_dkv_stage(dmax, tf32) +
         (with_dq ? wr_kq(dmax, tf32) * wr_ds_ld() : 0) + (tf32 ? 0 : 2 * wr_kq(dmax) * ldt(dmax));
}
constexpr int max_of(int a, int b) {
  return a > b ? a : b;
}
// Bytes: the larger of the two modes' layouts (the mode is known on the device only).
constexpr int wr_dkv_smem(int dmax) {
  return 4 * max_of(wr_dkv_layout(dmax, false, false), wr_dkv_layout(dmax, true, false));
}
constexpr int wr_dkvq_smem(int dmax) {
  return 4 * max_of(wr_dkv_layout(dmax, false, true), wr_dkv_layout(dmax, true, true));
}

// What the host launches: query rows per stats/dq block, key rows per dkv block, shared memory.
constexpr int query_rows(int dmax) {
  return warp_rows(dmax) ? 16 * kWarps : bq(dmax);
}
constexpr int key_rows(int dmax) {
  return warp_rows(dmax) ? 16 * kWarps : kv(dmax);
}
constexpr int stats_bytes(int dmax) {
  return warp_rows(dmax) ? wr_stats_smem(dmax) : stats_smem(dmax);
}
constexpr int dq_bytes(int dmax) {
  return warp_rows(dmax) ? wr_dq_smem(dmax) : dq_smem(dmax);
}
constexpr int dkv_bytes(int dmax) {
  return warp_rows(dmax) ? wr_dkv_smem(dmax) : dkv_smem(dmax);
}
// The one-pass dK/dV/dQ kernel exists for the warp-row buckets only.
constexpr int dkvq_bytes(int dmax) {
  return wr_dkvq_smem(dmax);
}

// The dK/dV pass on warpgroup MMAs (wg_dkv.cuh; the TF32 mode at head sizes 64 and 128): 128
// keys per block (2 warpgroups of 64), query rows per step, and its shared memory: K, V
// (128 x D), [K^T], dS (KQ x 128), a step image (wg_image_floats) with a second
// lse/delta buffer, two mbarriers.
constexpr int kWgKeys = 128;
constexpr bool wg_bucket(int dmax) {
  return dmax == 64 || dmax == 128;
}
constexpr int wg_kq(int dmax) {
  return dmax >= 128 ? 32 : 64;
}
// Q^T and dY^T (D x KQ) are core-matrix tiles with padded strides (wg_dkv.cuh, WgTransposed):
// the next core matrix along K 36 floats on (not 32), the next band of 8 rows a multiple of 32
// floats plus 8, so that the scattered stores that transpose Q and dY hit 32 banks.
constexpr int kWgTLead = 36;
constexpr int wg_t_stride(int kq) {
  const int band = (kq / 4 - 1) * kWgTLead + 32;  // a band's floats: the last core matrix's end
  return (band - 8 + 31) / 32 * 32 + 8;           // the least multiple of 32 plus 8 holding it
}
constexpr int wg_t_floats(int dmax) {
  return dmax / 8 * wg_t_stride(wg_kq(dmax));
}
// Whether the pass keeps K^T (D x kWgKeys) as a tile for dQ^T's A operand (by descriptor); else
// each step reads K^T fragments out of the K tile (D 128: no room for the tile).
constexpr bool wg_kt_tile(int dmax) {
  return dmax <= 64;
}
// A step's image, as the pack pass (wg_pack) writes it for each query tile and the dK/dV pass
// copies it in by two bulk copies: Q and dY (KQ x D core-matrix tiles, rounded to TF32), lse and
// delta (KQ each), Q^T and dY^T (padded). Floats; every part a multiple of 4 (16-byte copies).
constexpr int wg_image_floats(int dmax) {
  return 2 * wg_kq(dmax) * dmax + 2 * wg_kq(dmax) + 2 * wg_t_floats(dmax);
}
constexpr int wg_pack_smem(int dmax) {
  return 4 * wg_image_floats(dmax);
}
constexpr int wg_dkv_smem(int dmax) {
  return 4 * ((wg_kt_tile(dmax) ? 3 : 2) * kWgKeys * dmax + wg_kq(dmax) * kWgKeys +
              wg_image_floats(dmax) + 2 * wg_kq(dmax)) +
         16;
}
static_assert(wg_t_stride(32) % 32 == 8 && wg_t_stride(64) % 32 == 8 &&
                  wg_t_stride(32) >= 7 * kWgTLead + 32 && wg_t_stride(64) >= 15 * kWgTLead + 32,
              "padded transposes");
static_assert(kWgKeys == 16 * kWarps, "the wgmma pass keeps the warp-row pass's grid");

// The stats pass on warpgroup MMAs (wg_stats.cuh; the plain form at head sizes 64 and 128):
// kWgKeys query rows a block (2 warpgroups of 64, the warp-row pass's grid), key tiles of
// wg_stats_keys rows through wg_stats_stages buffers. Shared memory: Q (kWgKeys x D) and the
// stages (keys x D each), each with a lo plane beside it in the 3xTF32 modes (`split`). The TF32
// mode at D 64 runs two blocks an SM (an entry of its own, launch bounds for two): 64-key tiles in
// 3 stages, 1.1x-1.3x faster than 128-key tiles in 2 stages with one block when timed alone
// (tools/wgmma_probe/stats_timing.cu), 1.0x-1.2x in the EP (H100).
constexpr int kWgStatsStages = 2;
constexpr bool wg_stats_two_blocks(int dmax, bool split) {
  return !split && dmax <= 64;
}
constexpr int wg_stats_keys(int dmax, bool split) {
  return wg_stats_two_blocks(dmax, split) ? 64 : !split ? 128 : dmax >= 128 ? 32 : 64;
}
constexpr int wg_stats_stages(int dmax, bool split) {
  return wg_stats_two_blocks(dmax, split) ? 3 : kWgStatsStages;
}
constexpr int wg_stats_layout(int dmax, bool split, int keys, int stages) {
  return 4 * (split ? 2 : 1) * (kWgKeys * dmax + stages * keys * dmax);
}
constexpr int wg_stats_smem(int dmax, bool split) {
  return wg_stats_layout(dmax, split, wg_stats_keys(dmax, split), wg_stats_stages(dmax, split));
}
static_assert(2 * wg_stats_smem(64, false) <= 228 * 1024 - 2 * 1024, "two stats blocks an SM");

// Every block fits the 227 KB of shared memory an sm_90 block may use.
static_assert(stats_smem(256) <= 227 * 1024 && dq_smem(256) <= 227 * 1024 &&
                  dkv_smem(256) <= 227 * 1024 && dq_smem(128) <= 227 * 1024 &&
                  dkv_smem(128) <= 227 * 1024 && wr_stats_smem(128) <= 227 * 1024 &&
                  wr_dq_smem(128) <= 227 * 1024 && wr_dkv_smem(128) <= 227 * 1024 &&
                  wr_dkvq_smem(128) <= 227 * 1024 && wr_dkvq_smem(64) <= 227 * 1024 &&
                  wg_dkv_smem(128) <= 227 * 1024 && wg_dkv_smem(64) <= 227 * 1024 &&
                  wg_pack_smem(128) <= 227 * 1024 && wg_pack_smem(64) <= 227 * 1024 &&
                  wg_stats_smem(128, true) <= 227 * 1024 && wg_stats_smem(64, true) <= 227 * 1024,
              "tiles exceed sm_90 shared memory");

}  // namespace ortmlx_avjp_tiles
