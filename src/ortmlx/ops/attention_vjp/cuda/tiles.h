// Tile geometry of the fused CUDA AttentionVJP kernels, shared by the kernels (kernels.cu, nvcc)
// and the host code that launches them (fused.cpp): rows per tile and dynamic shared memory per
// block. Plain constexpr functions, no includes, so both compilers read the same numbers.
#pragma once

namespace ortmlx_avjp_tiles {

constexpr int kThreads = 256;  // per block, as a 16 x 16 grid

// The head-size bucket a head size runs in (the kernels are instantiated for these).
constexpr int dmax_of(int d) {
  return d <= 32 ? 32 : d <= 64 ? 64 : d <= 128 ? 128 : 256;
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

// Every block fits the 227 KB of shared memory an sm_90 block may use.
static_assert(stats_smem(256) <= 227 * 1024 && dq_smem(256) <= 227 * 1024 &&
                  dkv_smem(256) <= 227 * 1024 && dq_smem(128) <= 227 * 1024 &&
                  dkv_smem(128) <= 227 * 1024,
              "tiles exceed sm_90 shared memory");

}  // namespace ortmlx_avjp_tiles
