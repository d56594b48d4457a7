// Runs the passes of kernels.cu on the CPU emulation (emu.h), with the grids the host side
// (src/ortmlx/ops/attention_vjp/cuda/fused.cpp) launches: stats, then dq and dkv, or (one_pass)
// dkvq into a zeroed dQ; with avjp_emu_wgmma(1), the passes on warpgroup MMAs where the host
// takes them (head sizes 33-128): the plain form's stats pass in every precision mode, the
// dK/dV(/dQ) pass in the TF32 mode (after the pack pass that writes its step images). Called from
// check.py through ctypes.
#include <algorithm>
#include <functional>
#include <vector>

#define AVJP_KERNELS_SOURCE
#include "../../src/ortmlx/ops/attention_vjp/cuda/kernels.cu"

namespace {
int use_wgmma = 0;
void launch(int gx, int gy, const std::function<void()>& body) {
  emu_launch({gx, gy, 1}, {256, 1, 1}, body);
}
}  // namespace

#define ARGS b, hq, hk, sq, sk, d, rank, causal, mask_kind, mb, mh, mr, mw, mode, scale
#define BUCKET(DM)                                                                                \
  if (dmax == DM) {                                                                               \
    constexpr int BQ = ortmlx_avjp_tiles::query_rows(DM);                                         \
    constexpr int KV = ortmlx_avjp_tiles::key_rows(DM);                                           \
    const bool wg_on = use_wgmma && ortmlx_avjp_tiles::wg_bucket(DM);                             \
    const bool wg = wg_on && mode == ortmlx_avjp_tiles::kModeTf32;                                \
    launch((sq + BQ - 1) / BQ, b * hq, [&] {                                                      \
      if (recompute) AVJP_CAT(ortmlx_avjp_stats_recompute_d##DM##_, ORTMLX_AVJP_TAG)              \
      (q, k, v, y, dy, mask, finite, lse, delta, ARGS);                                           \
      else if (wg_on && ortmlx_avjp_tiles::wg_stats_two_blocks(DM, !wg))                          \
          AVJP_CAT(ortmlx_avjp_stats_wg2_d##DM##_, ORTMLX_AVJP_TAG)(q, k, v, y, dy, mask, finite, \
                                                                    lse, delta, ARGS);            \
      else if (wg_on) AVJP_CAT(ortmlx_avjp_stats_wg_d##DM##_, ORTMLX_AVJP_TAG)(                   \
          q, k, v, y, dy, mask, finite, lse, delta, ARGS);                                        \
      else AVJP_CAT(ortmlx_avjp_stats_d##DM##_, ORTMLX_AVJP_TAG)(q, k, v, y, dy, mask, finite,    \
                                                                 lse, delta, ARGS);               \
    });                                                                                           \
    /* The wgmma dK/dV pass reads the pack pass's step images. */                                 \
    constexpr int KQ = ortmlx_avjp_tiles::wg_kq(DM);                                              \
    std::vector<float> images;                                                                    \
    if (wg) {                                                                                     \
      images.resize(static_cast<size_t>(b) * hq * ((sq + KQ - 1) / KQ) *                          \
                    ortmlx_avjp_tiles::wg_image_floats(DM));                                      \
      launch((sq + KQ - 1) / KQ, b * hq, [&] {                                                    \
        AVJP_CAT(ortmlx_avjp_pack_wg_d##DM##_, ORTMLX_AVJP_TAG)                                   \
        (q, dy, lse, delta, images.data(), ARGS);                                                 \
      });                                                                                         \
    }                                                                                             \
    if (one_pass) {                                                                               \
      if (!ortmlx_avjp_tiles::warp_rows(DM)) return 1;                                            \
      std::fill(dq, dq + static_cast<long long>(b) * hq * sq * d, 0.f); /* MLX's init_value */    \
      launch((sk + KV - 1) / KV, b * hk, [&] {                                                    \
        if (wg) AVJP_CAT(ortmlx_avjp_dkvq_wg_d##DM##_, ORTMLX_AVJP_TAG)                           \
        (images.data(), k, v, mask, finite, dk, dv, dq, ARGS);                                    \
        else AVJP_CAT(ortmlx_avjp_dkvq_d##DM##_, ORTMLX_AVJP_TAG)(q, k, v, dy, mask, finite, lse, \
                                                                  delta, dk, dv, dq, ARGS);       \
      });                                                                                         \
      return 0;                                                                                   \
    }                                                                                             \
    launch((sq + BQ - 1) / BQ, b * hq, [&] {                                                      \
      AVJP_CAT(ortmlx_avjp_dq_d##DM##_, ORTMLX_AVJP_TAG)                                          \
      (q, k, v, dy, mask, finite, lse, delta, dq, ARGS);                                          \
    });                                                                                           \
    launch((sk + KV - 1) / KV, b * hk, [&] {                                                      \
      if (wg) AVJP_CAT(ortmlx_avjp_dkv_wg_d##DM##_, ORTMLX_AVJP_TAG)                              \
      (images.data(), k, v, mask, finite, dk, dv, ARGS);                                          \
      else AVJP_CAT(ortmlx_avjp_dkv_d##DM##_, ORTMLX_AVJP_TAG)(q, k, v, dy, mask, finite, lse,    \
                                                               delta, dk, dv, ARGS);              \
    });                                                                                           \
    return 0;                                                                                     \
  }

// The mma accumulation model (emu.h): kind 0 exact, 1 truncating; returns 1 on bad arguments.
extern "C" int avjp_emu_mma_model(int kind, int guard, int terms) {
  if ((kind != kEmuMmaExact && kind != kEmuMmaTrunc) || guard < 0 || guard > 20 || terms < 1 ||
      8 % terms != 0)
    return 1;
  emu_mma_set_model(kind, guard, terms);
  return 0;
}

// Whether the dK/dV pass runs on warpgroup MMAs where the host would take them.
extern "C" void avjp_emu_wgmma(int on) {
  use_wgmma = on;
}

extern "C" int avjp_emu(int recompute, int one_pass, int dmax, const float* q, const float* k,
                        const float* v, const float* y, const float* dy, const void* mask,
                        const int* finite, float* lse, float* delta, float* dq, float* dk,
                        float* dv, int b, int hq, int hk, int sq, int sk, int d, int rank,
                        int causal, int mask_kind, int mb, int mh, int mr, int mw, int mode,
                        float scale) {
  BUCKET(32)
  BUCKET(64)
  BUCKET(128)
  BUCKET(256)
  return 1;
}

// The finite-flag kernel on `blocks` blocks: *out starts at 1 (MLX's init_value) and becomes 0
// when an element is not finite.
extern "C" void avjp_emu_finite(int blocks, const float* q, const float* k, const float* v,
                                const float* y, const float* dy, float* out, int n_q, int n_k,
                                int n_y) {
  *out = 1.f;
  launch(blocks, 1, [&] {
    AVJP_CAT(ortmlx_avjp_finite_, ORTMLX_AVJP_TAG)(q, k, v, y, dy, out, n_q, n_k, n_y);
  });
}
