// Pooling family: MaxPool (with its Indices output), AveragePool (1-D to 3-D windows: kernel,
// strides, pads, dilations, ceil_mode, auto_pad, count_include_pad), LpPool, GlobalAveragePool,
// GlobalMaxPool, GlobalLpPool.
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
#include <optional>
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
  ORTMLX_REQUIRE(c.num_outputs() == 1 || (is_max && c.num_outputs() == 2),
                 is_max ? "expects 1 or 2 outputs" : "expects 1 output");
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
          return is_float_type(t) || t == ElemType::kInt8 || t == ElemType::kUInt8;
        },
        "float16/bfloat16/float32, int8 or uint8 only");
  } else {
    r = require_input_type(c, 0, is_float_type, "float16/bfloat16/float32 only");
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
    const int64_t so = n.attr_int("storage_order", 0);
    ORTMLX_REQUIRE(so == 0 || so == 1, "storage_order must be 0 or 1");
    if (c.num_outputs() == 2 && !n.outputs[1].empty()) {
      const ElemType it = c.output_type(1);
      ORTMLX_REQUIRE(it == ElemType::kUndefined || it == ElemType::kInt64, "Indices must be int64");
    }
  } else if (!is_lp) {
    const int64_t cip = n.attr_int("count_include_pad", 0);
    ORTMLX_REQUIRE(cip == 0 || cip == 1, "count_include_pad must be 0 or 1");
  }
  return ClaimResult::yes();
}

// Half types: max pools are exact in them; the averaging pools are computed in float32 and
// rounded once (ORT's CPU EP runs float16 pools through float32; it has no bfloat16 kernels, so
// bfloat16 is tested against its float32 result rounded to bfloat16).
mx::array widen(const mx::array& a, mx::StreamOrDevice s) {
  return a.dtype() == mx::float32 || !mx::issubdtype(a.dtype(), mx::floating)
             ? a
             : mx::astype(a, mx::float32, s);
}

void bind_narrowed(TranslationContext& ctx, const NodeDesc& n, const mx::array& y, mx::Dtype dt) {
  ctx.bind_output(n, 0, y.dtype() == dt ? y : mx::astype(y, dt, ctx.stream()));
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
      // A stride beyond the kernel can make it negative: ORT (1.30) raises there in its MLAS
      // pools ("padding values must be non-negative": AveragePool before opset 19 unless
      // ceil_mode and count_include_pad are both set, float MaxPool with one output,
      // storage_order 0 and no dilation); its other kernels (LpPool, AveragePool 19 or with
      // ceil_mode and count_include_pad, fuzz seed 102; MaxPool with Indices, column-major,
      // dilated or on integers) pool with the negative pads.
      bool mlas_max = n.op_type == "MaxPool" && n.outputs.size() == 1 &&
                      n.attr_int("storage_order", 0) == 0 &&
                      mx::issubdtype(x.dtype(), mx::floating);
      for (size_t j = 0; j < nd; ++j) mlas_max = mlas_max && g.dil[j] == 1;
      if (n.op_type == "MaxPool" && n.since_version < 8) mlas_max = true;
      // An empty input (N = 0) returns before that check in ORT: the empty output.
      const bool mlas_average = n.op_type == "AveragePool" && n.since_version < 19 &&
                                !(ceil_mode && n.attr_int("count_include_pad", 0) == 1);
      if (needed < 0 && x.size() != 0 && (mlas_max || mlas_average))
        throw std::runtime_error("padding values must be non-negative (auto_pad " + ap +
                                 " with a stride larger than the kernel)");
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
  mx::Shape start(x.ndim(), 0), stop = x.shape();
  bool crop = false;
  std::vector<int> axes;
  mx::Shape lo, hi;
  for (size_t i = 0; i < nd; ++i) {
    const int ax = 2 + static_cast<int>(i);
    const int64_t extent = (g.out[i] - 1) * g.stride[i] + (g.kernel[i] - 1) * g.dil[i] + 1;
    // The padded rows the windows view spans are one MLX array: its dims are int32. (ORT pools
    // each window over the positions that land on data; a kernel near 2^31 with SAME padding
    // pads past that, fuzz seed 89.)
    if (extent > std::numeric_limits<int32_t>::max())
      throw std::runtime_error("pooling windows span " + std::to_string(extent) +
                               " padded positions on spatial axis " + std::to_string(i) +
                               " (kernel " + std::to_string(g.kernel[i]) +
                               "), which exceeds MLX's int32 dims");
    // A negative low pad (ORT's SAME padding with a stride beyond the kernel) starts the first
    // window inside the data.
    const int64_t skip = std::max<int64_t>(-g.pad_lo[i], 0),
                  low = std::max<int64_t>(g.pad_lo[i], 0);
    int64_t high = extent - low - (x.shape(ax) - skip);
    if (skip > 0) {
      start[ax] = checked_int(skip, "window start");
      crop = true;
    }
    if (high < 0) {
      stop[ax] = checked_int(x.shape(ax) + high, "window extent");
      crop = true;
      high = 0;
    }
    axes.push_back(ax);
    lo.push_back(checked_int(low, "padding"));
    hi.push_back(checked_int(high, "padding"));
  }
  if (crop) xp = mx::slice(xp, start, stop, s);
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

// The most taps a window is pooled over as separate slices (below); larger windows reduce the
// strided window view instead.
constexpr int64_t kMaxSliceTaps = 32;

// Number of taps of a window, or 0 when there are more than kMaxSliceTaps.
int64_t slice_taps(const PoolGeometry& g) {
  int64_t taps = 1;
  for (int64_t k : g.kernel) {
    taps *= k;
    if (taps > kMaxSliceTaps) return 0;
  }
  return taps;
}

// Reduces the windows of a padded input with `combine` over its taps, one strided slice of xp per
// tap (tap order = row-major over the kernel, the order ORT's loops visit them). The slices are
// views and the chain is elementwise, so under mx::compile it is one kernel that reads the input
// in place; reducing the as_strided window view instead first materialises every window (on an
// H200, ResNet-18 at batch 32 spent 2.7 of 8.6 ms per run in its one MaxPool that way).
template <class Combine>
mx::array reduce_taps(const mx::array& xp, const PoolGeometry& g, int64_t taps, Combine combine,
                      mx::StreamOrDevice s) {
  const size_t nd = xp.ndim() - 2;
  std::optional<mx::array> acc;
  for (int64_t t = 0; t < taps; ++t) {
    mx::Shape start(xp.ndim(), 0), stop = xp.shape(), step(xp.ndim(), 1);
    int64_t rest = t;
    for (size_t i = nd; i-- > 0;) {
      const int ax = 2 + static_cast<int>(i);
      const int64_t tap = rest % g.kernel[i];
      rest /= g.kernel[i];
      start[ax] = checked_int(tap * g.dil[i], "window offset");
      stop[ax] = checked_int(tap * g.dil[i] + (g.out[i] - 1) * g.stride[i] + 1, "window extent");
      step[ax] = checked_int(g.stride[i], "strides");
    }
    mx::array slice = mx::slice(xp, start, stop, step, s);
    acc = acc ? combine(*acc, slice) : slice;
  }
  return *acc;
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

// Nothing to pool: an empty input or an output with a zero dim (the result is all zeros, if any).
bool nothing_to_pool(const mx::array& x, const mx::Shape& out) {
  return x.size() == 0 || std::any_of(out.begin(), out.end(), [](int d) { return d == 0; });
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
  if (nothing_to_pool(x, out)) {
    ctx.bind_output(n, 0, mx::zeros(out, x.dtype(), s));
    return;
  }
  mx::array xp = pad_for_windows(x, g, lowest(x.dtype()), s);
  if (const int64_t taps = slice_taps(g)) {
    auto maximum = [&](const mx::array& a, const mx::array& b) { return mx::maximum(a, b, s); };
    ctx.bind_output(n, 0, reduce_taps(xp, g, taps, maximum, s));
    return;
  }
  ctx.bind_output(n, 0, mx::max(windows(xp, g, s), window_axes(x.ndim() - 2), false, s));
}

// The lowest finite value of the type: ORT's value for a window that lies wholly in the padding.
mx::array lowest_finite(mx::Dtype dt) {
  if (dt == mx::float16) return mx::array(-65504.0f, mx::float16);
  if (dt == mx::float32) return mx::array(std::numeric_limits<float>::lowest(), mx::float32);
  return lowest(dt);
}

// MaxPool with its Indices output, as ORT's CPU kernel computes both (measured on ORT 1.30): in
// each window the first element that lies on the data (scanning the window row-major) is taken,
// then only a strictly greater one replaces it. So a NaN wins only when it comes first, ties keep
// the first position, and a window wholly in the padding gives the type's lowest finite value
// with position -1 in every spatial dim. The index is (n * C + c) * prod(spatial) plus the
// position flattened row-major (storage_order 0) or column-major (storage_order 1).
void translate_max_pool_indices(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  const PoolGeometry g = pool_geometry(n, x);
  const mx::Shape out = output_shape(x, g);
  const size_t nd = x.ndim() - 2;
  if (nothing_to_pool(x, out)) {
    ctx.bind_output(n, 0, mx::zeros(out, x.dtype(), s));
    ctx.bind_output(n, 1, mx::zeros(out, mx::int64, s));
    return;
  }
  // (N, C, out..., K) windows of the data and of a mask of the positions on the data.
  mx::Shape flat = out;
  int64_t window_size = 1;
  for (int64_t k : g.kernel) window_size = checked_mul(window_size, k, "kernel size");
  flat.push_back(checked_int(window_size, "kernel size"));
  const int last = static_cast<int>(flat.size()) - 1;
  const mx::array w =
      mx::reshape(windows(pad_for_windows(x, g, mx::array(0, x.dtype()), s), g, s), flat, s);
  mx::Shape mshape{1, 1};
  for (size_t i = 0; i < nd; ++i) mshape.push_back(x.shape(2 + static_cast<int>(i)));
  mx::Shape mflat{1, 1};
  for (size_t i = 0; i < nd; ++i) mflat.push_back(out[2 + i]);
  mflat.push_back(flat.back());
  const mx::array valid = mx::reshape(
      windows(pad_for_windows(mx::ones(mshape, mx::bool_, s), g, mx::array(false), s), g, s), mflat,
      s);
  mx::Shape one = flat;
  one.back() = 1;
  const mx::array first = mx::broadcast_to(mx::argmax(valid, last, true, s), one, s);
  const mx::array any_valid = mx::broadcast_to(mx::any(valid, last, true, s), one, s);
  const bool is_float = mx::issubdtype(x.dtype(), mx::floating);
  // The best later candidate: the first maximum over the data's non-NaN elements.
  const mx::array low = lowest(x.dtype());
  mx::array candidate = mx::broadcast_to(valid, flat, s);
  if (is_float) candidate = mx::logical_and(candidate, mx::logical_not(mx::isnan(w, s), s), s);
  const mx::array key = mx::where(candidate, w, low, s);
  const mx::array best = mx::argmax(key, last, true, s);
  // The first element stays when it is NaN or when nothing is greater than the lowest value
  // (it is then the lowest value itself, or every other element is NaN).
  mx::array keep_first = mx::equal(mx::max(key, last, true, s), low, s);
  if (is_float)
    keep_first =
        mx::logical_or(keep_first, mx::isnan(mx::take_along_axis(w, first, last, s), s), s);
  const mx::array k = mx::astype(mx::where(keep_first, first, best, s), mx::int64, s);
  const mx::array value =
      mx::where(any_valid, mx::take_along_axis(w, k, last, s), lowest_finite(x.dtype()), s);
  // Spatial positions: output position * stride - leading pad + kernel offset * dilation, or -1
  // in every dim for a window wholly in the padding.
  mx::array index = mx::zeros(one, mx::int64, s);
  int64_t inner = window_size;  // product of the kernel dims after dim i
  int64_t coef_row = 1, coef_col = 1;
  std::vector<int64_t> coef(nd);
  for (size_t i = nd; i-- > 0;) {
    coef[i] = coef_row;
    coef_row *= x.shape(2 + static_cast<int>(i));
  }
  const bool col_major = n.attr_int("storage_order", 0) == 1;
  for (size_t i = 0; i < nd; ++i) {
    if (col_major) {
      coef[i] = coef_col;
      coef_col *= x.shape(2 + static_cast<int>(i));
    }
    inner /= g.kernel[i];
    const mx::array offset =
        mx::remainder(mx::floor_divide(k, mx::array(inner), s), mx::array(g.kernel[i]), s);
    mx::Shape oshape(flat.size(), 1);
    oshape[2 + i] = out[2 + i];
    const mx::array o =
        mx::reshape(mx::arange(0.0, double(out[2 + i]), 1.0, mx::int64, s), oshape, s);
    mx::array pos =
        mx::add(mx::subtract(mx::multiply(o, mx::array(g.stride[i]), s), mx::array(g.pad_lo[i]), s),
                mx::multiply(offset, mx::array(g.dil[i]), s), s);
    pos = mx::where(any_valid, pos, mx::array(int64_t{-1}), s);
    index = mx::add(index, mx::multiply(pos, mx::array(coef[i]), s), s);
  }
  const int64_t x_step = coef_row;
  mx::Shape nshape(flat.size(), 1);
  nshape[0] = out[0];
  nshape[1] = out[1];
  const mx::array nc = mx::reshape(
      mx::arange(0.0, double(checked_mul(out[0], out[1], "N * C")), 1.0, mx::int64, s), nshape, s);
  index = mx::add(index, mx::multiply(nc, mx::array(x_step), s), s);
  ctx.bind_output(n, 0, mx::squeeze(value, last, s));
  ctx.bind_output(n, 1, mx::squeeze(index, last, s));
}

void translate_avg_pool(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::Dtype dt = ctx.input(n, 0).dtype();
  mx::array x = widen(ctx.input(n, 0), s);
  const PoolGeometry g = pool_geometry(n, x);
  const mx::Shape out = output_shape(x, g);
  if (nothing_to_pool(x, out)) {
    ctx.bind_output(n, 0, mx::zeros(out, dt, s));
    return;
  }
  const size_t nd = x.ndim() - 2;
  const auto axes = window_axes(nd);
  mx::array xp = pad_for_windows(x, g, mx::array(0.0f, x.dtype()), s);
  const int64_t taps = slice_taps(g);
  auto add = [&](const mx::array& a, const mx::array& b) { return mx::add(a, b, s); };
  mx::array sum =
      taps ? reduce_taps(xp, g, taps, add, s) : mx::sum(windows(xp, g, s), axes, false, s);
  // The divisor per output position, from a (1, 1, spatial...) mask pooled the same way.
  mx::Shape mshape{1, 1};
  for (size_t i = 0; i < nd; ++i) mshape.push_back(x.shape(2 + static_cast<int>(i)));
  mx::array mask = mx::ones(mshape, mx::float32, s);
  if (n.attr_int("count_include_pad", 0) == 1) {
    // Ones over the explicit pads too; zeros beyond them (ceil_mode's extra positions). A
    // negative pad (SAME padding with a stride beyond the kernel) crops the counted span
    // instead, as ORT's [-pad_head, size + pad_tail) does.
    std::vector<int> pax;
    mx::Shape lo, hi, start(mask.ndim(), 0), stop = mask.shape();
    PoolGeometry inner = g;
    for (size_t i = 0; i < nd; ++i) {
      const int ax = 2 + static_cast<int>(i);
      pax.push_back(ax);
      start[ax] = checked_int(std::max<int64_t>(-g.pad_lo[i], 0), "pads");
      stop[ax] = std::max(start[ax],
                          checked_int(mask.shape(ax) + std::min<int64_t>(g.pad_hi[i], 0), "pads"));
      lo.push_back(checked_int(std::max<int64_t>(g.pad_lo[i], 0), "pads"));
      hi.push_back(checked_int(std::max<int64_t>(g.pad_hi[i], 0), "pads"));
      inner.pad_lo[i] = 0;
    }
    mask = mx::pad(mx::slice(mask, start, stop, s), pax, lo, hi, mx::array(1.0f), "constant", s);
    mx::array mp = pad_for_windows(mask, inner, mx::array(0.0f), s);
    mx::array count = mx::sum(windows(mp, g, s), axes, false, s);
    bind_narrowed(ctx, n, mx::divide(sum, count, s), dt);
    return;
  }
  mx::array mp = pad_for_windows(mask, g, mx::array(0.0f), s);
  mx::array count = mx::sum(windows(mp, g, s), axes, false, s);
  bind_narrowed(ctx, n, mx::divide(sum, count, s), dt);
}

// LpPool: (sum over the window of |x|^p)^(1/p); pads add nothing (zero fill).
void translate_lp_pool(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::Dtype dt = ctx.input(n, 0).dtype();
  mx::array x = widen(ctx.input(n, 0), s);
  const PoolGeometry g = pool_geometry(n, x);
  const mx::Shape out = output_shape(x, g);
  if (nothing_to_pool(x, out)) {
    ctx.bind_output(n, 0, mx::zeros(out, dt, s));
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
  bind_narrowed(ctx, n, y, dt);
}

ClaimResult claim_global_pool(const ClaimContext& c, bool is_lp = false) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = is_lp ? refuse_unknown_attrs(c, {"p"}) : refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  if (is_lp) ORTMLX_REQUIRE(c.node().attr_int("p", 2) >= 1, "p must be at least 1");
  r = require_input_type(c, 0, is_float_type, "float16/bfloat16/float32 only");
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
  const mx::array x = ctx.input(n, 0);
  if (bind_empty_global(ctx, n, x)) return;
  bind_narrowed(ctx, n, mx::mean(widen(x, ctx.stream()), spatial_axes(x), true, ctx.stream()),
                x.dtype());
}

void translate_global_max(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  if (bind_empty_global(ctx, n, x)) return;
  ctx.bind_output(n, 0, mx::max(x, spatial_axes(x), true, ctx.stream()));
}

void translate_global_lp(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::Dtype dt = ctx.input(n, 0).dtype();
  mx::array x = mx::abs(widen(ctx.input(n, 0), s), s);
  if (bind_empty_global(ctx, n, ctx.input(n, 0))) return;
  const float p = static_cast<float>(n.attr_int("p", 2));
  mx::array pw = p == 1.0f ? x : p == 2.0f ? mx::square(x, s) : mx::power(x, mx::array(p), s);
  mx::array sum = mx::sum(pw, spatial_axes(x), true, s);
  mx::array y = p == 1.0f   ? sum
                : p == 2.0f ? mx::sqrt(sum, s)
                            : mx::power(sum, mx::array(1.0f / p), s);
  bind_narrowed(ctx, n, y, dt);
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
  const auto max_translate = [](TranslationContext& ctx, const NodeDesc& n) {
    if (n.outputs.size() > 1 && !n.outputs[1].empty()) {
      translate_max_pool_indices(ctx, n);
    } else {
      translate_max_pool(ctx, n);
    }
  };
  r.add("", "MaxPool", 1, 11, max_claim, max_translate);
  r.add("", "MaxPool", 12, 1 << 30, max_claim, max_translate);
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
