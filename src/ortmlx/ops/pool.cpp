// Pooling family: MaxPool, AveragePool (1-D to 3-D windows: kernel, strides, pads, dilations,
// ceil_mode, auto_pad, count_include_pad), LpPool, GlobalAveragePool, GlobalMaxPool, GlobalLpPool.
//
// Windows are taken as a strided view (mx::as_strided) of the padded NCHW input:
// (N, C, out..., k...) with stride*s along the output axes and dilation*s along the window axes,
// then reduced over the window axes. Output sizes and SAME_* pads follow ORT's
// pool_attributes.h (the legacy SAME pad ignores dilation; ceil_mode drops a last window that
// would start beyond the input plus its leading pad). MaxPool pads with the lowest value of the
// type (ORT clips windows to the data, which gives the same maximum). AveragePool divides by a
// count obtained by pooling a mask the same way: ones over the data plus the explicit pads for
// count_include_pad=1 (ORT counts the window clipped to [-pad_head, size + pad_tail)), ones over
// the data only for count_include_pad=0.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

ClaimResult claim_pool(const ClaimContext& c, bool is_max, bool is_lp = false) {
  ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input");
  ORTMLX_REQUIRE(c.num_outputs() == 1,
                 is_max ? "the Indices output is not implemented" : "expects 1 output");
  auto r = is_max  ? refuse_unknown_attrs(c, {"auto_pad", "ceil_mode", "dilations", "kernel_shape",
                                              "pads", "storage_order", "strides"})
           : is_lp ? refuse_unknown_attrs(c, {"auto_pad", "ceil_mode", "dilations", "kernel_shape",
                                              "p", "pads", "strides"})
                   : refuse_unknown_attrs(c, {"auto_pad", "ceil_mode", "count_include_pad",
                                              "dilations", "kernel_shape", "pads", "strides"});
  if (!r.ok) return r;
  if (is_lp) ORTMLX_REQUIRE(c.node().attr_int("p", 2) >= 1, "p must be at least 1");
  if (is_max) {
    r = require_input_type(
        c, 0,
        [](ElemType t) {
          return t == ElemType::kFloat || t == ElemType::kInt8 || t == ElemType::kUInt8;
        },
        "float32, int8 or uint8 only");
  } else {
    r = require_input_type(
        c, 0, [](ElemType t) { return t == ElemType::kFloat; }, "float32 only");
  }
  if (!r.ok) return r;
  r = require_same_types(c);
  if (!r.ok) return r;
  const NodeView& n = c.node();
  auto ks = n.attr_ints("kernel_shape");
  // kernel_shape is required and names the spatial rank: an X whose rank is known only at run
  // time is claimed against it and checked when translated (pool_geometry).
  int64_t rank = c.input_rank(0);
  if (rank < 0 && ks) rank = static_cast<int64_t>(ks->size()) + 2;
  ORTMLX_REQUIRE(rank >= 3 && rank <= 5,
                 "X rank " + std::to_string(rank) + " is not 3, 4 or 5 (1-D to 3-D windows)");
  const size_t nd = static_cast<size_t>(rank - 2);
  ORTMLX_REQUIRE(ks && ks->size() == nd, "kernel_shape must list one size per spatial dim");
  for (int64_t k : *ks) ORTMLX_REQUIRE(k >= 1, "kernel_shape must be positive");
  const auto strides = spatial_attr(n, "strides", nd, 1);
  const auto dil = spatial_attr(n, "dilations", nd, 1);
  const auto pads = spatial_attr(n, "pads", nd, 0, 2);
  ORTMLX_REQUIRE(strides && dil && pads, "strides/dilations/pads length does not match the rank");
  for (int64_t v : *strides) ORTMLX_REQUIRE(v >= 1, "strides must be positive");
  for (int64_t v : *dil) ORTMLX_REQUIRE(v >= 1, "dilations must be positive");
  for (size_t i = 0; i < 2 * nd; ++i)
    ORTMLX_REQUIRE((*pads)[i] >= 0 && (*pads)[i] < (*ks)[i % nd],
                   "pads must be non-negative and smaller than the kernel");
  // The geometry multiplies these in int64 and sizes MLX dims (int32) with them: keep each one
  // within int32 (a kernel of 2^32 + 1 would wrap when narrowed).
  for (const char* name : {"kernel_shape", "strides", "dilations", "pads"}) {
    r = require_int_range(c, name, 0, std::numeric_limits<int32_t>::max());
    if (!r.ok) return r;
  }
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  ORTMLX_REQUIRE(ap == "NOTSET" || ap == "VALID" || ap == "SAME_UPPER" || ap == "SAME_LOWER",
                 "auto_pad '" + ap + "' is unknown");
  const int64_t ceil_mode = n.attr_int("ceil_mode", 0);
  ORTMLX_REQUIRE(ceil_mode == 0 || ceil_mode == 1, "ceil_mode must be 0 or 1");
  if (is_max) {
    ORTMLX_REQUIRE(n.attr_int("storage_order", 0) == 0 || c.num_outputs() == 1,
                   "storage_order only matters for Indices");
  } else if (!is_lp) {
    const int64_t cip = n.attr_int("count_include_pad", 0);
    ORTMLX_REQUIRE(cip == 0 || cip == 1, "count_include_pad must be 0 or 1");
  }
  return ClaimResult::yes();
}

// ORT's pools accept an empty input only through N = 0 (pool_attributes.h: "Only N can be
// zero"); an empty channel or spatial dim is an error there, so it is one here too.
void require_only_n_empty(const mx::array& x) {
  if (x.size() == 0 && x.shape(0) != 0)
    throw std::runtime_error(
        "an empty input must have N = 0 (ORT rejects an empty channel or "
        "spatial dim)");
}

struct PoolGeometry {
  std::vector<int64_t> kernel, stride, dil, pad_lo, pad_hi, out;
};

PoolGeometry pool_geometry(const NodeDesc& n, const mx::array& x) {
  PoolGeometry g;
  g.kernel = *n.attr_ints("kernel_shape");
  if (x.ndim() != g.kernel.size() + 2)
    throw std::runtime_error("X rank " + std::to_string(x.ndim()) +
                             " does not match kernel_shape (" + std::to_string(g.kernel.size()) +
                             " spatial dims)");
  require_only_n_empty(x);
  const size_t nd = x.ndim() - 2;
  g.stride = *spatial_attr(n, "strides", nd, 1);
  g.dil = *spatial_attr(n, "dilations", nd, 1);
  const auto pads = *spatial_attr(n, "pads", nd, 0, 2);
  const std::string ap = n.attr_string("auto_pad", "NOTSET");
  const bool ceil_mode = n.attr_int("ceil_mode", 0) == 1;
  for (size_t i = 0; i < nd; ++i) {
    const int64_t in = x.shape(2 + static_cast<int>(i));
    const int64_t k = g.kernel[i], s = g.stride[i], d = g.dil[i];
    int64_t lo = pads[i], hi = pads[i + nd];
    if (ap == "VALID") {
      lo = hi = 0;
    } else if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      // ORT's legacy SAME padding: the undilated kernel, target size ceil(in / stride).
      const int64_t target = (in + s - 1) / s;
      const int64_t needed = (target - 1) * s + k - in;
      lo = ap == "SAME_LOWER" ? (needed + 1) / 2 : needed / 2;
      hi = needed - lo;
    }
    const int64_t num = in + lo + hi - d * (k - 1) - 1;
    // ORT divides truncating toward zero: a window overhanging the padded input by less than a
    // stride still gives one output (reduced over the taps that land on data or pads), a
    // little more gives none; only a negative size is an error.
    int64_t out = num / s + 1;
    if (ceil_mode) {
      out = static_cast<int64_t>(std::ceil(static_cast<float>(num) / static_cast<float>(s))) + 1;
      if ((out - 1) * s >= in + lo) --out;
    }
    if (out < 0) throw std::runtime_error("pooling window is larger than the padded input");
    g.pad_lo.push_back(lo);
    g.pad_hi.push_back(hi);
    g.out.push_back(out);
  }
  return g;
}

// Pads (or crops) the spatial dims of x so that every window position exists:
// low side pad_lo, extent (out-1)*stride + (k-1)*dil + 1. Fills with `fill`.
mx::array pad_for_windows(const mx::array& x, const PoolGeometry& g, const mx::array& fill,
                          mx::StreamOrDevice s) {
  const size_t nd = x.ndim() - 2;
  mx::array xp = x;
  mx::Shape stop = x.shape();
  bool crop = false;
  std::vector<int> axes;
  mx::Shape lo, hi;
  for (size_t i = 0; i < nd; ++i) {
    const int ax = 2 + static_cast<int>(i);
    const int64_t extent = (g.out[i] - 1) * g.stride[i] + (g.kernel[i] - 1) * g.dil[i] + 1;
    int64_t high = extent - g.pad_lo[i] - x.shape(ax);
    if (high < 0) {
      stop[ax] = checked_int(x.shape(ax) + high, "window extent");
      crop = true;
      high = 0;
    }
    axes.push_back(ax);
    lo.push_back(checked_int(g.pad_lo[i], "padding"));
    hi.push_back(checked_int(high, "padding"));
  }
  if (crop) xp = mx::slice(xp, mx::Shape(x.ndim(), 0), stop, s);
  return mx::pad(xp, axes, lo, hi, fill, "constant", s);
}

// (N, C, out..., k...) strided view of a padded array, made contiguous first.
mx::array windows(const mx::array& xp, const PoolGeometry& g, mx::StreamOrDevice s) {
  const size_t nd = xp.ndim() - 2;
  mx::array xc = mx::contiguous(xp, /*allow_col_major=*/false, s);
  mx::Strides st(xp.ndim());
  int64_t acc = 1;
  for (int i = static_cast<int>(xp.ndim()) - 1; i >= 0; --i) {
    st[i] = acc;
    acc *= xp.shape(i);
  }
  mx::Shape shape{xp.shape(0), xp.shape(1)};
  mx::Strides strides{st[0], st[1]};
  for (size_t i = 0; i < nd; ++i) {
    shape.push_back(checked_int(g.out[i], "output dim"));
    strides.push_back(st[2 + i] * g.stride[i]);
  }
  bool dilated = false;
  for (size_t i = 0; i < nd; ++i) {
    shape.push_back(checked_int(g.kernel[i], "kernel_shape"));
    strides.push_back(st[2 + i] * g.dil[i]);
    dilated = dilated || g.dil[i] > 1;
  }
  mx::array w = mx::as_strided(xc, shape, strides, 0, s);
  // MLX's CPU reductions (0.32) read some overlapping views wrongly: with a window step larger
  // than the output step (dilation 2, stride 1) sum and max mix up channels. A dilated view is
  // copied first; undilated ones reduce correctly in place.
  return dilated ? mx::contiguous(w, /*allow_col_major=*/false, s) : w;
}

std::vector<int> window_axes(size_t nd) {
  std::vector<int> a;
  for (size_t i = 0; i < nd; ++i) a.push_back(static_cast<int>(2 + nd + i));
  return a;
}

mx::Shape output_shape(const mx::array& x, const PoolGeometry& g) {
  mx::Shape out{x.shape(0), x.shape(1)};
  for (int64_t o : g.out) out.push_back(checked_int(o, "output dim"));
  return out;
}

mx::array lowest(mx::Dtype dt) {
  if (dt == mx::uint8) return mx::array(0, mx::uint8);
  if (dt == mx::int8) return mx::array(-128, mx::int8);
  return mx::array(-std::numeric_limits<float>::infinity(), dt);
}

void translate_max_pool(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  const PoolGeometry g = pool_geometry(n, x);
  const mx::Shape out = output_shape(x, g);
  if (x.size() == 0 || std::any_of(out.begin(), out.end(), [](int d) { return d == 0; })) {
    ctx.bind_output(n, 0, mx::zeros(out, x.dtype(), s));
    return;
  }
  mx::array xp = pad_for_windows(x, g, lowest(x.dtype()), s);
  ctx.bind_output(n, 0, mx::max(windows(xp, g, s), window_axes(x.ndim() - 2), false, s));
}

void translate_avg_pool(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  const PoolGeometry g = pool_geometry(n, x);
  const mx::Shape out = output_shape(x, g);
  if (x.size() == 0 || std::any_of(out.begin(), out.end(), [](int d) { return d == 0; })) {
    ctx.bind_output(n, 0, mx::zeros(out, x.dtype(), s));
    return;
  }
  const size_t nd = x.ndim() - 2;
  const auto axes = window_axes(nd);
  mx::array xp = pad_for_windows(x, g, mx::array(0.0f, x.dtype()), s);
  mx::array sum = mx::sum(windows(xp, g, s), axes, false, s);
  // The divisor per output position, from a (1, 1, spatial...) mask pooled the same way.
  mx::Shape mshape{1, 1};
  for (size_t i = 0; i < nd; ++i) mshape.push_back(x.shape(2 + static_cast<int>(i)));
  mx::array mask = mx::ones(mshape, mx::float32, s);
  if (n.attr_int("count_include_pad", 0) == 1) {
    // Ones over the explicit pads too; zeros beyond them (ceil_mode's extra positions).
    std::vector<int> pax;
    mx::Shape lo, hi;
    PoolGeometry inner = g;
    for (size_t i = 0; i < nd; ++i) {
      pax.push_back(2 + static_cast<int>(i));
      lo.push_back(checked_int(g.pad_lo[i], "pads"));
      hi.push_back(checked_int(g.pad_hi[i], "pads"));
      inner.pad_lo[i] = 0;
    }
    mask = mx::pad(mask, pax, lo, hi, mx::array(1.0f), "constant", s);
    mx::array mp = pad_for_windows(mask, inner, mx::array(0.0f), s);
    mx::array count = mx::sum(windows(mp, g, s), axes, false, s);
    ctx.bind_output(n, 0, mx::divide(sum, count, s));
    return;
  }
  mx::array mp = pad_for_windows(mask, g, mx::array(0.0f), s);
  mx::array count = mx::sum(windows(mp, g, s), axes, false, s);
  ctx.bind_output(n, 0, mx::divide(sum, count, s));
}

// LpPool: (sum over the window of |x|^p)^(1/p); pads add nothing (zero fill).
void translate_lp_pool(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  const PoolGeometry g = pool_geometry(n, x);
  const mx::Shape out = output_shape(x, g);
  if (x.size() == 0 || std::any_of(out.begin(), out.end(), [](int d) { return d == 0; })) {
    ctx.bind_output(n, 0, mx::zeros(out, x.dtype(), s));
    return;
  }
  const float p = static_cast<float>(n.attr_int("p", 2));
  mx::array xp = pad_for_windows(mx::abs(x, s), g, mx::array(0.0f, x.dtype()), s);
  mx::array w = windows(xp, g, s);
  mx::array pw = p == 1.0f ? w : p == 2.0f ? mx::square(w, s) : mx::power(w, mx::array(p), s);
  mx::array sum = mx::sum(pw, window_axes(x.ndim() - 2), false, s);
  mx::array y = p == 1.0f   ? sum
                : p == 2.0f ? mx::sqrt(sum, s)
                            : mx::power(sum, mx::array(1.0f / p), s);
  ctx.bind_output(n, 0, y);
}

ClaimResult claim_global_pool(const ClaimContext& c, bool is_lp = false) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = is_lp ? refuse_unknown_attrs(c, {"p"}) : refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  if (is_lp) ORTMLX_REQUIRE(c.node().attr_int("p", 2) >= 1, "p must be at least 1");
  r = require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kFloat; }, "float32 only");
  if (!r.ok) return r;
  r = require_same_types(c);
  if (!r.ok) return r;
  // An unknown rank is checked when translated (bind_empty_global).
  ORTMLX_REQUIRE(c.input_rank(0) < 0 || c.input_rank(0) >= 3,
                 "X rank must be at least 3 (N, C, spatial...)");
  return ClaimResult::yes();
}

std::vector<int> spatial_axes(const mx::array& x) {
  std::vector<int> a;
  for (int i = 2; i < static_cast<int>(x.ndim()); ++i) a.push_back(i);
  return a;
}

// An empty input (N = 0 only) pools to an empty (N, C, 1, ...) output: MLX's max cannot reduce
// an empty axis (N = 0 with an empty spatial dim too).
bool bind_empty_global(TranslationContext& ctx, const NodeDesc& n, const mx::array& x) {
  if (x.ndim() < 3)
    throw std::runtime_error("X rank " + std::to_string(x.ndim()) +
                             " is below 3 (N, C, spatial...)");
  require_only_n_empty(x);
  if (x.size() != 0) return false;
  mx::Shape out = x.shape();
  for (size_t i = 2; i < out.size(); ++i) out[i] = 1;
  ctx.bind_output(n, 0, mx::zeros(out, x.dtype(), ctx.stream()));
  return true;
}

void translate_global_avg(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  if (bind_empty_global(ctx, n, x)) return;
  ctx.bind_output(n, 0, mx::mean(x, spatial_axes(x), true, ctx.stream()));
}

void translate_global_max(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  if (bind_empty_global(ctx, n, x)) return;
  ctx.bind_output(n, 0, mx::max(x, spatial_axes(x), true, ctx.stream()));
}

void translate_global_lp(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = mx::abs(ctx.input(n, 0), s);
  if (bind_empty_global(ctx, n, x)) return;
  const float p = static_cast<float>(n.attr_int("p", 2));
  mx::array pw = p == 1.0f ? x : p == 2.0f ? mx::square(x, s) : mx::power(x, mx::array(p), s);
  mx::array sum = mx::sum(pw, spatial_axes(x), true, s);
  mx::array y = p == 1.0f   ? sum
                : p == 2.0f ? mx::sqrt(sum, s)
                            : mx::power(sum, mx::array(1.0f / p), s);
  ctx.bind_output(n, 0, y);
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
  // Older opsets add attributes over time (MaxPool: storage_order 8, ceil_mode and dilations
  // 10, int8/uint8 12; AveragePool: count_include_pad 7, ceil_mode 10; LpPool: integer p 2);
  // an old model cannot carry a later attribute (ONNX's checker refuses it), so the same claim
  // and translator serve; each old range is its own entry, as ORT's versioned kernels.
  const auto max_claim = [](const ClaimContext& c) { return claim_pool(c, true); };
  const auto avg_claim = [](const ClaimContext& c) { return claim_pool(c, false); };
  const auto lp_claim = [](const ClaimContext& c) { return claim_pool(c, false, true); };
  r.add("", "MaxPool", 1, 11, max_claim, translate_max_pool);
  r.add("", "MaxPool", 12, 1 << 30, max_claim, translate_max_pool);
  r.add("", "AveragePool", 7, 10, avg_claim, translate_avg_pool);
  r.add("", "AveragePool", 11, 1 << 30, avg_claim, translate_avg_pool);
  r.add("", "LpPool", 2, 10, lp_claim, translate_lp_pool);
  r.add(
      "", "GlobalAveragePool", 1, 1 << 30,
      [](const ClaimContext& c) { return claim_global_pool(c); }, translate_global_avg);
  r.add(
      "", "GlobalMaxPool", 1, 1 << 30, [](const ClaimContext& c) { return claim_global_pool(c); },
      translate_global_max);
  r.add("", "LpPool", 11, 1 << 30, lp_claim, translate_lp_pool);
  r.add(
      "", "GlobalLpPool", 2, 1 << 30,
      [](const ClaimContext& c) { return claim_global_pool(c, true); }, translate_global_lp);
}

}  // namespace ortmlx
