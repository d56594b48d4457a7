// Host side of the fused CUDA AttentionVJP kernels (kernels.cu; the design is described there and
// in docs/ATTENTION_VJP.md). The CUDA flavour embeds one sm_90 cubin per head-size bucket (built
// by nvcc, see cmake/EmbedCudaKernels.cmake); MLX loads it and launches each pass as a
// precompiled custom kernel on the node's stream, so the passes are ordinary lazy MLX arrays in
// the plan's graph. When dQ and dK or dV are asked for, one pass computes all three (dkvq: dQ
// by atomics; ONNXRUNTIME_EP_MLX_ATTENTION_VJP_ONE_PASS=0 keeps the separate dq pass, whose
// sums run in a fixed order). The dq and dkv passes multiply on tensor cores: 3xTF32 (fp32
// accuracy) by default, plain TF32 when the process runs in the EP's tf32 mode
// (device::tf32_enabled()); float16/bfloat16 contracts skip the 3xTF32 terms of their inputs'
// zero lo parts (precision_mode). Other builds have no kernels, and GPUs other than sm_90 no code
// for them: cuda_fused_available() is false there and the translator keeps the MLX-op paths.
#include "ortmlx/ops/attention_vjp/cuda/fused.h"
#include "ortmlx/engine/device/device_memory.h"
#include "ortmlx/ops/attention_vjp/cuda/tiles.h"
#include "ortmlx/ops/cuda_support.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>

#include <mlx/fast.h>
#include <mlx/ops.h>

namespace ortmlx::attention_vjp {

#if ORTMLX_CUDA_KERNELS
namespace cuda_fatbin {  // generated: attention_vjp_cuda_d<bucket>.cpp in the build folder
#define ORTMLX_AVJP_BUCKET(b)            \
  extern const unsigned char kData##b[]; \
  extern const std::size_t kSize##b;     \
  extern const char* const kTag##b;
ORTMLX_AVJP_BUCKET(32)
ORTMLX_AVJP_BUCKET(64)
ORTMLX_AVJP_BUCKET(128)
ORTMLX_AVJP_BUCKET(256)
#undef ORTMLX_AVJP_BUCKET
}  // namespace cuda_fatbin

namespace {
// The cubin of a head-size bucket and the tag its kernel names carry. MLX hashes the binary on
// every launch (its module key), so each bucket is a separate, small module.
struct Binary {
  const std::string code;
  const std::string tag;
};
const Binary& binary(int dmax) {
  auto make = [](const unsigned char* data, std::size_t size, const char* tag) {
    return Binary{std::string(reinterpret_cast<const char*>(data), size), tag};
  };
  static const Binary b32 = make(cuda_fatbin::kData32, cuda_fatbin::kSize32, cuda_fatbin::kTag32);
  static const Binary b64 = make(cuda_fatbin::kData64, cuda_fatbin::kSize64, cuda_fatbin::kTag64);
  static const Binary b128 =
      make(cuda_fatbin::kData128, cuda_fatbin::kSize128, cuda_fatbin::kTag128);
  static const Binary b256 =
      make(cuda_fatbin::kData256, cuda_fatbin::kSize256, cuda_fatbin::kTag256);
  return dmax <= 32 ? b32 : dmax <= 64 ? b64 : dmax <= 128 ? b128 : b256;
}

// The kernels' `mode` scalar (tiles.h). Inputs that are TF32 values need one mma for their
// products with each other and two with P or dS (the same sums in fewer instructions:
// kernels.cu, kSplitTf32Inputs).
int precision_mode(bool inputs_are_tf32_values) {
  namespace t = ortmlx_avjp_tiles;
  if (device::tf32_enabled()) return t::kModeTf32;
  return inputs_are_tf32_values &&
                 ops::kernel_enabled("ONNXRUNTIME_EP_MLX_ATTENTION_VJP_TF32_INPUTS")
             ? t::kModeExactTf32Inputs
             : t::kModeExact;
}

}  // namespace
#endif

namespace {

using namespace ortmlx_avjp_tiles;
// CUDA's limit on the grid's y extent, which carries (batch, head).
constexpr int kMaxGridY = 65535;

}  // namespace

bool cuda_fused_available() {
  return ops::cuda_sm90_device();
}

bool cuda_fused_supports(const Config& c, int b, int sq, int sk) {
  return cuda_fused_available() && static_cast<int64_t>(b) * c.hq <= kMaxGridY && sq > 0 &&
         sk > 0 && b > 0;
}

std::vector<mx::array> cuda_fused(const Config& c, const std::vector<mx::array>& inputs,
                                  mx::StreamOrDevice s, bool inputs_are_tf32_values) {
#if !ORTMLX_CUDA_KERNELS
  (void)inputs;
  (void)s;
  (void)c;
  (void)inputs_are_tf32_values;
  throw std::runtime_error(
      "AttentionVJP cuda_fused: this build has no CUDA kernels (CUDA flavour only)");
#else
  const mx::array& q = inputs[0];
  const mx::array& k = inputs[1];
  const mx::array& v = inputs[2];
  const std::optional<mx::array> y =
      c.recompute ? std::nullopt : std::optional<mx::array>(inputs[3]);
  const mx::array& dy = inputs[static_cast<size_t>(c.tensor_inputs() - 1)];
  const mx::array& mask = inputs[static_cast<size_t>(c.tensor_inputs())];
  const int b = q.shape(0);
  const int sq = c.rank == 4 ? q.shape(2) : q.shape(1);
  const int sk = c.rank == 4 ? k.shape(2) : k.shape(1);
  if (!cuda_fused_supports(c, b, sq, sk))
    throw std::runtime_error("AttentionVJP cuda_fused: unsupported problem (B * HQ = " +
                             std::to_string(static_cast<int64_t>(b) * c.hq) + ")");
  const int dmax = dmax_of(c.d);
  const Binary& bin = binary(dmax);
  const std::string& fatbin = bin.code;
  const std::string dname = "_d" + std::to_string(dmax) + "_" + bin.tag;

  // The mask in 4-D (its broadcast dims stay 1; the kernel turns them into zero strides). Kind 0
  // reads no mask: a one-element placeholder.
  mx::array mask4 = mx::zeros({1, 1, 1, 1}, mx::bool_, s);
  if (c.mask != 0) {
    mx::Shape shape = mask.shape();
    while (shape.size() < 4) shape.insert(shape.begin(), 1);
    mask4 = mx::reshape(mask, shape, s);
  }
  // Tiles no row can see are skipped only when every input is finite (see kernels.cu): one
  // kernel reads each input once (MLX's isfinite and all would write and reread a bool array
  // per input).
  const auto count = [](const mx::array& x) { return static_cast<int64_t>(x.size()); };
  mx::array finite = mx::array(true);
  if (std::max(count(q), count(k)) <= std::numeric_limits<int>::max()) {
    const int64_t chunks = std::max(count(q), count(k)) / 4 / kThreads + 1;
    const int blocks = static_cast<int>(std::min<int64_t>(chunks, 1024));
    const std::vector<mx::fast::ScalarArg> counts = {
        static_cast<int>(count(q)), static_cast<int>(count(k)), y ? static_cast<int>(count(q)) : 0};
    finite = mx::fast::precompiled_cuda_kernel(
        "ortmlx_avjp_finite_" + bin.tag, fatbin, {q, k, v, y ? *y : dy, dy}, {{1}}, {mx::float32},
        counts, {blocks * kThreads, 1, 1}, {kThreads, 1, 1}, 0, /*init_value=*/1.f, true, s)[0];
  } else {
    for (const mx::array* x : {&q, &k, &v, &dy})
      finite = mx::logical_and(finite, mx::all(mx::isfinite(*x, s), s), s);
    if (y) finite = mx::logical_and(finite, mx::all(mx::isfinite(*y, s), s), s);
  }
  finite = mx::reshape(mx::astype(finite, mx::int32, s), {1}, s);

  const int mode = precision_mode(inputs_are_tf32_values);
  // Warpgroup MMAs at head sizes 64 and 128: the plain form's stats pass (wg_stats.cuh) in every
  // precision mode, the dK/dV pass (wg_dkv.cuh) in the TF32 mode;
  // ONNXRUNTIME_EP_MLX_ATTENTION_VJP_WGMMA=0 (read at each translation) keeps the mma.sync
  // warp-row kernels. Same grids.
  const bool wgmma_on =
      wg_bucket(dmax) && ops::kernel_enabled("ONNXRUNTIME_EP_MLX_ATTENTION_VJP_WGMMA");
  // The wgmma dK/dV pass reads step images (one per query tile, wg_image_floats each: about 4x
  // Q's size) that a pack pass writes first; an MLX array of them must have fewer than 2^31
  // elements.
  const int64_t image_count =
      static_cast<int64_t>(b) * c.hq * ((sq + wg_kq(dmax) - 1) / wg_kq(dmax));
  const bool wgmma = wgmma_on && mode == kModeTf32 &&
                     image_count * wg_image_floats(dmax) <= std::numeric_limits<int>::max();
  const std::string dkv_kind = wgmma ? "_wg" : "";
  const std::vector<mx::fast::ScalarArg> scalars = {b,
                                                    c.hq,
                                                    c.hk,
                                                    sq,
                                                    sk,
                                                    c.d,
                                                    c.rank,
                                                    c.causal,
                                                    c.mask,
                                                    mask4.shape(0),
                                                    mask4.shape(1),
                                                    mask4.shape(2),
                                                    mask4.shape(3),
                                                    mode,
                                                    c.scale};
  const std::tuple<int, int, int> block = {kThreads, 1, 1};
  auto tiles = [](int n, int t) { return (n + t - 1) / t; };

  // Pass 1: lse and delta per (batch, query head, row).
  const mx::Shape rows_shape = {b * c.hq * sq};
  const bool wg_stats = wgmma_on && !c.recompute;
  const bool split = mode != kModeTf32;
  const std::string stats_name =
      std::string(c.recompute ? "ortmlx_avjp_stats_recompute" : "ortmlx_avjp_stats") +
      (!wg_stats                          ? ""
       : wg_stats_two_blocks(dmax, split) ? "_wg2"
                                          : "_wg") +
      dname;
  static_assert(kWgKeys == query_rows(128) && kWgKeys == query_rows(64), "one stats grid");
  const std::vector<mx::array> stats = mx::fast::precompiled_cuda_kernel(
      stats_name, fatbin, {q, k, v, y ? *y : dy, dy, mask4, finite}, {rows_shape, rows_shape},
      {mx::float32, mx::float32}, scalars, {tiles(sq, query_rows(dmax)) * kThreads, b * c.hq, 1},
      block, wg_stats ? wg_stats_smem(dmax, split) : stats_bytes(dmax), std::nullopt,
      /*ensure_row_contiguous=*/true, s);

  // The dK/dV pass's inputs: Q, dY, lse and delta, or on warpgroup MMAs their step images.
  std::vector<mx::array> dkv_inputs = {q, k, v, dy, mask4, finite, stats[0], stats[1]};
  if (wgmma) {
    const mx::array packed = mx::fast::precompiled_cuda_kernel(
        "ortmlx_avjp_pack_wg" + dname, fatbin, {q, dy, stats[0], stats[1]},
        {{static_cast<int>(image_count * wg_image_floats(dmax))}}, {mx::float32}, scalars,
        {tiles(sq, wg_kq(dmax)) * kThreads, b * c.hq, 1}, block, wg_pack_smem(dmax), std::nullopt,
        true, s)[0];
    dkv_inputs = {packed, k, v, mask4, finite};
  }

  std::array<std::optional<mx::array>, 3> grads;
  if (c.wants(0) && (c.wants(1) || c.wants(2)) && warp_rows(dmax) &&
      ops::kernel_enabled("ONNXRUNTIME_EP_MLX_ATTENTION_VJP_ONE_PASS")) {
    // dQ by atomics in the dK/dV pass (kernels.cu, dkvq): MLX zeroes the outputs first.
    const std::vector<mx::array> all = mx::fast::precompiled_cuda_kernel(
        "ortmlx_avjp_dkvq" + dkv_kind + dname, fatbin, dkv_inputs,
        {k.shape(), v.shape(), q.shape()}, {mx::float32, mx::float32, mx::float32}, scalars,
        {tiles(sk, key_rows(dmax)) * kThreads, b * c.hk, 1}, block,
        wgmma ? wg_dkv_smem(dmax) : dkvq_bytes(dmax), 0.f, true, s);
    grads = {all[2], all[0], all[1]};
  } else if (c.wants(0)) {
    grads[0] = mx::fast::precompiled_cuda_kernel(
        "ortmlx_avjp_dq" + dname, fatbin, {q, k, v, dy, mask4, finite, stats[0], stats[1]},
        {q.shape()}, {mx::float32}, scalars, {tiles(sq, query_rows(dmax)) * kThreads, b * c.hq, 1},
        block, dq_bytes(dmax), std::nullopt, true, s)[0];
  }
  if ((c.wants(1) || c.wants(2)) && !grads[1]) {
    const std::vector<mx::array> dkv = mx::fast::precompiled_cuda_kernel(
        "ortmlx_avjp_dkv" + dkv_kind + dname, fatbin, dkv_inputs, {k.shape(), v.shape()},
        {mx::float32, mx::float32}, scalars, {tiles(sk, key_rows(dmax)) * kThreads, b * c.hk, 1},
        block, wgmma ? wg_dkv_smem(dmax) : dkv_bytes(dmax), std::nullopt, true, s);
    grads[1] = dkv[0];
    grads[2] = dkv[1];
  }
  std::vector<mx::array> out;
  for (int o : c.outputs) out.push_back(*grads[static_cast<size_t>(o)]);
  return out;
#endif
}

}  // namespace ortmlx::attention_vjp
