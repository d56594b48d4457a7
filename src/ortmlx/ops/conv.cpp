// Convolution family: Conv and ConvTranspose (1-D, 2-D, 3-D; groups incl. depthwise; dilations,
// strides, asymmetric pads, auto_pad; optional bias), float32; float16 and bfloat16 are computed
// in float32 and rounded once (ORT's CPU EP runs float16 Conv through float32 on x86; it has no
// bfloat16 kernel, so bfloat16 is tested against its float32 result rounded to bfloat16).
//
// ONNX is channels-first (N, C, spatial...), MLX convolutions are channels-last
// (N, spatial..., C) with weights (O, kernel..., I/groups): inputs and weights are transposed
// around mx::conv_general. ONNX Conv is a cross-correlation, as is conv_general with flip=false.
//
// ConvTranspose is the gradient of a convolution: a convolution of the stride-dilated input
// (input_dilation = strides) with the flipped kernel, padded by dilation*(k-1) on both sides.
// The ONNX pads then crop the result (pad_lo at the start, pad_hi at the end) and output_padding
// adds zeros at the end; both are folded into the padding of that convolution, and where they
// exceed it (a negative padding) the result is cropped instead.
#include <algorithm>
#include <limits>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ortmlx/engine/layout.h"
#include "ortmlx/ops/common.h"
#include "ortmlx/ops/conv.h"
#include "ortmlx/ops/conv/cuda/channels_last.h"
#include "ortmlx/ops/conv/cuda/cudnn_conv.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

// The rank the claim checks the attributes against. X's rank may be unknown until run time (a
// model whose input shape is symbolic in rank, e.g. audio front ends): W's rank is the same by
// definition, and else kernel_shape names the spatial rank. The translator checks the live rank
// (check_conv_rank) and fails naming the node where it does not fit.
int64_t claim_rank(const ClaimContext& c) {
  if (c.input_rank(0) >= 0) return c.input_rank(0);
  if (c.input_rank(1) >= 0) return c.input_rank(1);
  if (auto ks = c.node().attr_ints("kernel_shape")) return static_cast<int64_t>(ks->size()) + 2;
  return -1;
}

// Run-time half of claim_rank: the live X rank must be one Conv defines and match W and every
// spatial attribute list.
void check_conv_rank(const NodeDesc& n, const mx::array& x, const mx::array& w) {
  const size_t rank = x.ndim();
  if (rank < 3 || rank > 5)
    throw std::runtime_error("X rank " + std::to_string(rank) + " is not 3, 4 or 5 (1-D to 3-D)");
  if (w.ndim() != rank) throw std::runtime_error("W rank differs from X rank");
  const size_t nd = rank - 2;
  for (const char* name : {"strides", "dilations", "output_padding", "kernel_shape"})
    if (!spatial_attr(n, name, nd, 1))
      throw std::runtime_error(std::string(name) + " length does not match X rank " +
                               std::to_string(rank));
  if (!spatial_attr(n, "pads", nd, 0, 2))
    throw std::runtime_error("pads length does not match X rank " + std::to_string(rank));
}

// Checks shared by Conv and ConvTranspose: float32 X/W(/B) of equal type and rank 3..5, the
// attribute lists sized to the spatial rank, positive strides/dilations, non-negative pads.
ClaimResult claim_conv_common(const ClaimContext& c, bool transpose) {
  ORTMLX_REQUIRE(c.num_inputs() == 2 || c.num_inputs() == 3, "expects 2 or 3 inputs (X, W, B)");
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  auto r = transpose
               ? refuse_unknown_attrs(c, {"auto_pad", "dilations", "group", "kernel_shape", "pads",
                                          "strides", "output_padding", "output_shape"})
               : refuse_unknown_attrs(
                     c, {"auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"});
  if (!r.ok) return r;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    r = require_input_type(c, i, is_float_type, "float16/bfloat16/float32 only");
    if (!r.ok) return r;
  }
  r = require_same_types(c);
  if (!r.ok) return r;
  ORTMLX_REQUIRE(!c.has_input(2) || c.input_rank(2) == 1, "B must be 1-D");
  return claim_conv_attributes(c, claim_rank(c), 1, transpose);
}

ClaimResult claim_conv(const ClaimContext& c) {
  return claim_conv_common(c, false);
}

ClaimResult claim_conv_transpose(const ClaimContext& c) {
  auto r = claim_conv_common(c, true);
  if (!r.ok) return r;
  const NodeView& n = c.node();
  const size_t nd = static_cast<size_t>(claim_rank(c) - 2);
  const auto op = spatial_attr(n, "output_padding", nd, 0);
  ORTMLX_REQUIRE(op, "output_padding length does not match the rank");
  const auto strides = spatial_attr(n, "strides", nd, 1);
  const auto dil = spatial_attr(n, "dilations", nd, 1);
  for (size_t i = 0; i < nd; ++i)
    ORTMLX_REQUIRE((*op)[i] >= 0 && ((*op)[i] < (*strides)[i] || (*op)[i] < (*dil)[i]),
                   "output_padding must be non-negative and below stride or dilation");
  if (auto os = n.attr_ints("output_shape")) {
    // output_shape may list the spatial dims only, or (N, C, spatial...): ORT takes the last nd.
    ORTMLX_REQUIRE(os->size() == nd, "output_shape must list exactly the spatial dims");
  }
  return ClaimResult::yes();
}

}  // namespace

ClaimResult ops::claim_conv_attributes(const ClaimContext& c, int64_t rank, size_t w_input,
                                       bool transpose) {
  ORTMLX_REQUIRE(rank >= 3 && rank <= 5,
                 "X rank " + std::to_string(rank) + " is not 3, 4 or 5 (1-D to 3-D)");
  ORTMLX_REQUIRE(c.input_rank(w_input) < 0 || c.input_rank(w_input) == rank,
                 "W rank differs from X rank");
  const size_t nd = static_cast<size_t>(rank - 2);
  const NodeView& n = c.node();
  const auto strides = spatial_attr(n, "strides", nd, 1);
  const auto dil = spatial_attr(n, "dilations", nd, 1);
  const auto pads = spatial_attr(n, "pads", nd, 0, 2);
  ORTMLX_REQUIRE(strides && dil && pads, "strides/dilations/pads length does not match the rank");
  for (int64_t v : *strides) ORTMLX_REQUIRE(v >= 1, "strides must be positive");
  for (int64_t v : *dil) ORTMLX_REQUIRE(v >= 1, "dilations must be positive");
  for (int64_t v : *pads) ORTMLX_REQUIRE(v >= 0, "negative pads are not implemented");
  if (auto ks = n.attr_ints("kernel_shape")) {
    ORTMLX_REQUIRE(ks->size() == nd, "kernel_shape length does not match the rank");
    const TensorInfo* w = c.input(w_input);
    if (w && w->has_shape)
      for (size_t i = 0; i < nd; ++i)
        ORTMLX_REQUIRE(w->shape[2 + i] < 0 || w->shape[2 + i] == (*ks)[i],
                       "kernel_shape differs from W's spatial shape");
  }
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  ORTMLX_REQUIRE(ap == "NOTSET" || ap == "VALID" || ap == "SAME_UPPER" || ap == "SAME_LOWER",
                 "auto_pad '" + ap + "' is unknown");
  // MLX takes these as int32: larger values would wrap (2^32 + 1 -> 1) or divide by zero.
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  for (const char* name : {"group", "strides", "dilations", "kernel_shape"}) {
    auto r = require_int_range(c, name, 1, kMax);
    if (!r.ok) return r;
  }
  for (const char* name : {"pads", "output_padding", "output_shape"}) {
    auto r = require_int_range(c, name, 0, kMax);
    if (!r.ok) return r;
  }
  ORTMLX_REQUIRE(ap == "NOTSET" || !n.has_attr("pads"),
                 "pads together with auto_pad " + ap + " is ambiguous and not implemented");
  // ORT's CPU kernels reject SAME_* padding with dilations (its legacy SAME pad ignores them):
  // there is no reference behaviour to match.
  if (!transpose && (ap == "SAME_UPPER" || ap == "SAME_LOWER"))
    for (int64_t d : *dil)
      ORTMLX_REQUIRE(d == 1, "auto_pad " + ap +
                                 " with dilations is not implemented (ORT's CPU "
                                 "kernel rejects it)");
  return ClaimResult::yes();
}

namespace {

// mx::conv_general, with groups on 3-D convolutions done one group at a time (MLX 0.32
// handles groups only for 1-D and 2-D). x: (N, s..., C) channels-last, w: (M, k..., C/groups).
mx::array conv_nd(const mx::array& x, const mx::array& w, const std::vector<int>& stride,
                  const std::vector<int>& lo, const std::vector<int>& hi,
                  const std::vector<int>& kdil, const std::vector<int>& idil, int groups, bool flip,
                  mx::StreamOrDevice s) {
  if (groups == 1 || x.ndim() < 5)
    return mx::conv_general(x, w, stride, lo, hi, kdil, idil, groups, flip, s);
  const int cg = x.shape(-1) / groups, mg = w.shape(0) / groups;
  const int xr = static_cast<int>(x.ndim()), wr = static_cast<int>(w.ndim());
  std::vector<mx::array> parts;
  for (int g = 0; g < groups; ++g) {
    mx::Shape xs(xr, 0), xe = x.shape(), ws(wr, 0), we = w.shape();
    xs[xr - 1] = g * cg;
    xe[xr - 1] = (g + 1) * cg;
    ws[0] = g * mg;
    we[0] = (g + 1) * mg;
    parts.push_back(mx::conv_general(mx::slice(x, xs, xe, s), mx::slice(w, ws, we, s), stride, lo,
                                     hi, kdil, idil, 1, flip, s));
  }
  return mx::concatenate(parts, -1, s);
}

struct ConvGeometry {
  std::vector<int> stride, dil, pad_lo, pad_hi;
};

// Pads for Conv: explicit (NOTSET), zero (VALID) or SAME_* from the live spatial sizes.
ConvGeometry conv_geometry(const NodeDesc& n, const mx::array& x, const mx::array& w) {
  const size_t nd = x.ndim() - 2;
  ConvGeometry g;
  const auto strides = *spatial_attr(n, "strides", nd, 1);
  const auto dil = *spatial_attr(n, "dilations", nd, 1);
  const auto pads = *spatial_attr(n, "pads", nd, 0, 2);
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  for (size_t i = 0; i < nd; ++i) {
    g.stride.push_back(checked_int(strides[i], "strides"));
    g.dil.push_back(checked_int(dil[i], "dilations"));
    if (ap == "NOTSET") {
      g.pad_lo.push_back(checked_int(pads[i], "pads"));
      g.pad_hi.push_back(checked_int(pads[i + nd], "pads"));
    } else if (ap == "VALID") {
      g.pad_lo.push_back(0);
      g.pad_hi.push_back(0);
    } else {
      const int64_t in = x.shape(2 + static_cast<int>(i));
      const int64_t k = w.shape(2 + static_cast<int>(i));
      const int64_t out = (in + strides[i] - 1) / strides[i];
      const int64_t total =
          std::max<int64_t>(0, (out - 1) * strides[i] + (k - 1) * dil[i] + 1 - in);
      const int64_t small = total / 2, big = total - small;
      g.pad_lo.push_back(checked_int(ap == "SAME_UPPER" ? small : big, "auto_pad padding"));
      g.pad_hi.push_back(checked_int(ap == "SAME_UPPER" ? big : small, "auto_pad padding"));
    }
  }
  return g;
}

}  // namespace

// (N, C, s...) -> (N, s..., C) and back.
std::vector<int> ops::to_channels_last(size_t rank) {
  std::vector<int> p{0};
  for (size_t i = 2; i < rank; ++i) p.push_back(static_cast<int>(i));
  p.push_back(1);
  return p;
}
std::vector<int> ops::to_channels_first(size_t rank) {
  std::vector<int> p{0, static_cast<int>(rank) - 1};
  for (size_t i = 1; i + 1 < rank; ++i) p.push_back(static_cast<int>(i));
  return p;
}

namespace {

void check_kernel_shape(const NodeDesc& n, const mx::array& w) {
  if (auto ks = n.attr_ints("kernel_shape"))
    for (size_t i = 0; i < ks->size(); ++i)
      if ((*ks)[i] != w.shape(2 + static_cast<int>(i)))
        throw std::runtime_error("kernel_shape does not match W's spatial shape");
}

// Half inputs in float32 (see the top).
mx::array widen(const mx::array& a, mx::StreamOrDevice s) {
  return a.dtype() == mx::float32 ? a : mx::astype(a, mx::float32, s);
}

mx::array add_bias(TranslationContext& ctx, const NodeDesc& n, mx::array y_cl) {
  // y is channels-last here: the bias broadcasts along the last axis.
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    mx::array b = widen(ctx.input(n, 2), ctx.stream());
    if (b.ndim() != 1 || b.shape(0) != y_cl.shape(-1))
      throw std::runtime_error("B must have one value per output channel");
    y_cl = mx::add(y_cl, b, ctx.stream());
  }
  return y_cl;
}

}  // namespace

namespace {

// X (N, C, s...) as MLX's convolutions take it, (N, s..., C): the NHWC data behind the NCHW view a
// channels-last producer left (engine/layout.h; MLX sees the transposes cancel, no copy), else one
// CUDA kernel where it applies (conv/cuda/channels_last.h), else MLX's transpose (its general
// copy when the convolution makes it contiguous).
bool input_takes_nhwc_kernel(const mx::array& x, mx::StreamOrDevice s) {
  return x.ndim() == 4 && !channels_last_source(x) && cuda_nchw_to_nhwc_applies(x, s);
}
mx::array input_channels_last(const mx::array& x, mx::StreamOrDevice s) {
  if (input_takes_nhwc_kernel(x, s)) return cuda_nchw_to_nhwc(x, s);
  return mx::transpose(x, to_channels_last(x.ndim()), s);
}
// The report's path when the kernel takes a translator's X.
void mark_nhwc_kernel(TranslationContext& ctx, const NodeDesc& n, const mx::array& x) {
  if (input_takes_nhwc_kernel(x, ctx.stream()))
    ctx.mark_fast(n, "Conv input -> NHWC by one CUDA kernel");
}

}  // namespace

namespace {

// Checks X and W against each other and the node (rank, kernel_shape, channels and groups) and
// returns the geometry and the output's spatial sizes.
ConvGeometry checked_geometry(const NodeDesc& n, const mx::array& x, const mx::array& w, int groups,
                              mx::Shape& out_spatial) {
  check_conv_rank(n, x, w);
  check_kernel_shape(n, w);
  const int c_in = x.shape(1), m = w.shape(0);
  if (groups < 1 || c_in % groups != 0 || m % groups != 0 || int64_t{w.shape(1)} * groups != c_in)
    throw std::runtime_error("channels do not match group * W.shape[1] (or M % group != 0)");
  ConvGeometry g = conv_geometry(n, x, w);
  out_spatial.clear();
  for (size_t i = 0; i + 2 < x.ndim(); ++i) {
    const int64_t in = int64_t{x.shape(2 + static_cast<int>(i))} + g.pad_lo[i] + g.pad_hi[i];
    const int64_t span = static_cast<int64_t>(w.shape(2 + static_cast<int>(i)) - 1) * g.dil[i] + 1;
    if (in < span) throw std::runtime_error("kernel is larger than the padded input");
    out_spatial.push_back(checked_int((in - span) / g.stride[i] + 1, "output dim"));
  }
  return g;
}

}  // namespace

mx::array ops::conv_forward_cl(const NodeDesc& n, const mx::array& x, const mx::array& w,
                               int groups, const std::optional<mx::array>& w_cl,
                               mx::StreamOrDevice s) {
  mx::Shape out_shape;
  const ConvGeometry g = checked_geometry(n, x, w, groups, out_shape);
  const size_t rank = x.ndim();
  out_shape.insert(out_shape.begin(), x.shape(0));
  out_shape.push_back(w.shape(0));
  if (x.shape(0) == 0 || x.shape(1) == 0) return mx::zeros(out_shape, x.dtype(), s);
  mx::array xc = input_channels_last(x, s);
  mx::array wc =
      w_cl ? *w_cl : mx::contiguous(mx::transpose(w, to_channels_last(rank), s), false, s);
  return conv_nd(xc, wc, g.stride, g.pad_lo, g.pad_hi, g.dil, std::vector<int>(rank - 2, 1), groups,
                 /*flip=*/false, s);
}

namespace {

// Conv in ONNX's layout on cuDNN (conv/cuda/cudnn_conv.h), bias included, where it applies: 2-D
// and 3-D, and 1-D as 2-D of unit height; pads cuDNN cannot take (unequal at the two ends) are
// added to X first, beyond the part common to both ends. nullopt where it does not apply.
std::optional<mx::array> conv_nchw_cudnn(TranslationContext& ctx, const NodeDesc& n,
                                         const mx::array& x, const mx::array& w, int groups) {
  const auto s = ctx.stream();
  mx::Shape spatial;
  const ConvGeometry g = checked_geometry(n, x, w, groups, spatial);
  const bool one_d = x.ndim() == 3;
  mx::array xn = x, wn = w;
  CudnnConvGeometry cg;
  cg.groups = groups;
  std::vector<int> extra_lo, extra_hi;
  if (one_d) {  // (N, C, L) -> (N, C, 1, L)
    xn = mx::expand_dims(x, 2, s);
    wn = mx::expand_dims(w, 2, s);
    cg = {{0}, {1}, {1}, groups};
    extra_lo.push_back(0);
    extra_hi.push_back(0);
    spatial.insert(spatial.begin(), 1);
  }
  for (size_t i = 0; i < g.pad_lo.size(); ++i) {
    const int common = std::min(g.pad_lo[i], g.pad_hi[i]);
    cg.pads.push_back(common);
    cg.strides.push_back(g.stride[i]);
    cg.dilations.push_back(g.dil[i]);
    extra_lo.push_back(g.pad_lo[i] - common);
    extra_hi.push_back(g.pad_hi[i] - common);
  }
  mx::Shape out_shape{x.shape(0), w.shape(0)};
  out_shape.insert(out_shape.end(), spatial.begin(), spatial.end());
  // Padded first (a lazy op, dropped unevaluated when cuDNN does not apply): the shape cuDNN runs
  // is the padded one.
  if (std::any_of(extra_lo.begin(), extra_lo.end(), [](int p) { return p != 0; }) ||
      std::any_of(extra_hi.begin(), extra_hi.end(), [](int p) { return p != 0; })) {
    std::vector<int> axes;
    for (size_t i = 2; i < xn.ndim(); ++i) axes.push_back(static_cast<int>(i));
    xn = mx::pad(xn, axes, mx::Shape(extra_lo.begin(), extra_lo.end()),
                 mx::Shape(extra_hi.begin(), extra_hi.end()), mx::array(0.0f), "constant", s);
  }
  if (!cudnn_conv_applies(xn, wn, cg, out_shape, s)) return std::nullopt;
  mx::array y = cudnn_conv(xn, wn, cg, out_shape, s);
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    mx::array b = widen(ctx.input(n, 2), s);
    if (b.ndim() != 1 || b.shape(0) != w.shape(0))
      throw std::runtime_error("B must have one value per output channel");
    mx::Shape per_channel(y.ndim() - 1, 1);
    per_channel[0] = b.shape(0);
    y = mx::add(y, mx::reshape(b, per_channel, s), s);
  }
  ctx.mark_fast(n, "Conv NCHW on cuDNN (algorithm timed per shape)");
  return one_d ? mx::squeeze(y, 2, s) : y;
}

}  // namespace

namespace {

void translate_conv(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::Dtype dt = ctx.input(n, 0).dtype();
  mx::array x = widen(ctx.input(n, 0), s);
  mx::array w = widen(ctx.input(n, 1), s);
  check_conv_rank(n, x, w);
  const size_t rank = x.ndim();
  const int groups = checked_int(n.attr_int("group", 1), "group");
  auto bind = [&](const mx::array& y) {
    ctx.bind_output(n, 0, dt == mx::float32 ? y : mx::astype(y, dt, s));
  };
  if (auto y = conv_nchw_cudnn(ctx, n, x, w, groups)) return bind(*y);
  // A constant weight is transposed (and made contiguous, as the convolution kernels need it)
  // once per plan instead of on every run.
  std::optional<mx::array> w_cl;
  if (ctx.constant_input(n, 1))
    w_cl = ctx.derived_constant(n.inputs[1] + "#channels_last", [&] {
      return mx::contiguous(mx::transpose(w, to_channels_last(rank), s), false, s);
    });
  mark_nhwc_kernel(ctx, n, x);
  mx::array y_cl = add_bias(ctx, n, conv_forward_cl(n, x, w, groups, w_cl, s));
  bind(mx::transpose(y_cl, to_channels_first(rank), s));
}

void translate_conv_transpose(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::Dtype dt = ctx.input(n, 0).dtype();
  mx::array x = widen(ctx.input(n, 0), s);
  mx::array w = widen(ctx.input(n, 1), s);
  check_conv_rank(n, x, w);
  const size_t rank = x.ndim();
  const size_t nd = rank - 2;
  check_kernel_shape(n, w);
  const int groups = checked_int(n.attr_int("group", 1), "group");
  mark_nhwc_kernel(ctx, n, x);
  const int c_in = x.shape(1);
  if (w.shape(0) != c_in || c_in % groups != 0)
    throw std::runtime_error("W.shape[0] must equal the input channels, divisible by group");
  const int cg = c_in / groups, mg = w.shape(1);
  const int m = checked_int(int64_t{mg} * groups, "output channels");
  const auto strides = *spatial_attr(n, "strides", nd, 1);
  const auto dil = *spatial_attr(n, "dilations", nd, 1);
  const auto pads = *spatial_attr(n, "pads", nd, 0, 2);
  const auto opad = *spatial_attr(n, "output_padding", nd, 0);
  const auto out_attr = n.attr_ints("output_shape");
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  std::vector<int64_t> lo(nd), hi(nd), out(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t in = x.shape(2 + static_cast<int>(i));
    const int64_t span = static_cast<int64_t>(w.shape(2 + static_cast<int>(i)) - 1) * dil[i] + 1;
    // Output before any pads; each term is an int32 value (claimed), so int64 cannot overflow.
    const int64_t full = strides[i] * (in - 1) + opad[i] + span;
    if (out_attr || ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      // The target size is output_shape, else in * stride. How the total padding splits was
      // measured on ORT 1.30's CPU kernel (tests/ops/test_conv.py): SAME_UPPER puts the odd unit
      // at the end, every other auto_pad (NOTSET with output_shape included) at the start. A
      // target beyond the full output gets zeros (plus bias) at the end, as ORT's does. SAME_*
      // with a kernel extent plus output_padding below the stride has a negative total padding,
      // which ORT clamps to zero: the output is the full one, smaller than ONNX's in * stride.
      out[i] = out_attr ? (*out_attr)[i] : std::min(in * strides[i], full);
      const int64_t total = full - out[i];
      const bool upper = ap == "SAME_UPPER";
      lo[i] = total < 0 ? 0 : (upper ? total / 2 : total - total / 2);
      hi[i] = total - lo[i];
    } else if (ap == "VALID") {
      lo[i] = hi[i] = 0;
      out[i] = full;
    } else {
      lo[i] = pads[i];
      hi[i] = pads[i + nd];
      out[i] = full - lo[i] - hi[i];
    }
    if (out[i] <= 0) throw std::runtime_error("output size is not positive");
  }
  // W (C, M/g, k...) -> (g, C/g, M/g, k...) -> (g, M/g, k..., C/g) -> (M, k..., C/g).
  mx::Shape wg{groups, cg, mg};
  for (size_t i = 0; i < nd; ++i) wg.push_back(w.shape(2 + static_cast<int>(i)));
  std::vector<int> perm{0, 2};
  for (size_t i = 0; i < nd; ++i) perm.push_back(3 + static_cast<int>(i));
  perm.push_back(1);
  mx::Shape wshape{m};
  for (size_t i = 0; i < nd; ++i) wshape.push_back(w.shape(2 + static_cast<int>(i)));
  wshape.push_back(cg);
  mx::array wc = mx::reshape(mx::transpose(mx::reshape(w, wg, s), perm, s), wshape, s);
  // Padding of the equivalent convolution; negative parts become crops afterwards.
  std::vector<int> plo(nd), phi(nd), crop_lo(nd);
  for (size_t i = 0; i < nd; ++i) {
    const int64_t span = static_cast<int64_t>(w.shape(2 + static_cast<int>(i)) - 1) * dil[i];
    const int64_t a = span - lo[i];
    const int64_t b = span - hi[i] + opad[i];
    plo[i] = checked_int(std::max<int64_t>(a, 0), "padding");
    phi[i] = checked_int(std::max<int64_t>(b, 0), "padding");
    crop_lo[i] = checked_int(std::max<int64_t>(-a, 0), "crop");
  }
  mx::Shape out_full{x.shape(0)};
  for (size_t i = 0; i < nd; ++i) out_full.push_back(checked_int(out[i], "output dim"));
  out_full.push_back(m);
  mx::array y_cl = mx::zeros({}, x.dtype(), s);
  if (x.shape(0) == 0 || c_in == 0) {
    y_cl = mx::zeros(out_full, x.dtype(), s);
  } else {
    mx::array xc = input_channels_last(x, s);
    std::vector<int> st(nd), dl(nd);
    for (size_t i = 0; i < nd; ++i) {
      st[i] = checked_int(strides[i], "strides");
      dl[i] = checked_int(dil[i], "dilations");
    }
    y_cl = conv_nd(xc, wc, std::vector<int>(nd, 1), plo, phi, dl, st, groups, /*flip=*/true, s);
    // Crop to the ONNX output (start crop_lo, length out).
    mx::Shape start(rank, 0), stop = y_cl.shape();
    bool crop = false;
    for (size_t i = 0; i < nd; ++i) {
      start[1 + i] = crop_lo[i];
      stop[1 + i] = checked_int(int64_t{out_full[1 + i]} + crop_lo[i], "crop end");
      if (stop[1 + i] > y_cl.shape(1 + static_cast<int>(i)))
        throw std::runtime_error("internal: transposed convolution came out too short");
      crop = crop || start[1 + i] != 0 || stop[1 + i] != y_cl.shape(1 + static_cast<int>(i));
    }
    if (crop) y_cl = mx::slice(y_cl, start, stop, s);
  }
  y_cl = add_bias(ctx, n, y_cl);
  mx::array y = mx::transpose(y_cl, to_channels_first(rank), s);
  ctx.bind_output(n, 0, dt == mx::float32 ? y : mx::astype(y, dt, s));
}

}  // namespace

void register_conv_ops(OpRegistry& r) {
  // Opsets 1-10 differ from 11 only in documentation (kernel_shape inference, the pads default):
  // the same claim and translator, registered apart so each ONNX version range is its own entry
  // (as ORT's versioned kernels).
  r.add("", "Conv", 1, 10, claim_conv, translate_conv);
  r.add("", "Conv", 11, 1 << 30, claim_conv, translate_conv);
  r.add("", "ConvTranspose", 1, 10, claim_conv_transpose, translate_conv_transpose);
  r.add("", "ConvTranspose", 11, 1 << 30, claim_conv_transpose, translate_conv_transpose);
}

}  // namespace ortmlx
