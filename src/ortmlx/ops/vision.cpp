// Vision family: CenterCropPad (opset 18+), MaxUnpool (9-10, 11+), Col2Im (18+), AffineGrid
// (20+), MaxRoiPool (1+).
//
// CenterCropPad:
// ORT's CPU EP has no CenterCropPad kernel: it runs ONNX's function body (Pad to at least the
// target size, split evenly with the extra element on the right, then Slice the centre, the
// extra element again on the right; a negative size gives an empty axis). The target sizes
// decide the output shape, so they are read on the host (host_values.h).
//
// MaxUnpool: X's values written at their indices I (flat over the whole output, as MaxPool's
// Indices output gives them) into zeros of the unpooled shape (from kernel_shape, strides and
// pads, or the output_shape input: the indices then address that shape's flat elements, as in
// ORT's kernel, not the inferred shape's as ONNX's reference has it). An index outside the
// output is an error (a runtime check;
// the scatter sees clamped indices). Duplicate indices are written in an unspecified order (ORT:
// the last one wins); MaxPool's own indices repeat only with equal values.
//
// AffineGrid: theta [N, 2, 3] ([N, 3, 4]) applied to the base grid of normalised coordinates
// (x fastest), built in float32 as ORT's kernel builds it.
//
// MaxRoiPool: per region of interest [batch, x1, y1, x2, y2] (scaled, rounded half away from
// zero), the maximum over each of pooled_shape bins (floor / ceil bin edges in float32, clipped
// to the image; an empty bin is 0), as ORT's kernel. The bins are masks over the image, maxed
// over columns then rows. A batch index outside [0, N) is an error (runtime check; the gather
// sees a clamped index). NaN: ORT's running max keeps a NaN only when it is the last element of
// its bin; here any NaN in a bin makes it NaN.
//
// Col2Im: the sliding blocks of the input summed into the image (the inverse of im2col). The
// destination of every block element is known from the shapes alone: one scatter-add.
#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/host_values.h"
#include "ortmlx/ops/op_args.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

constexpr const char* kAnyType = "MLX-supported tensor types only (no float64, no strings)";

// ---------------------------------------------------------------- CenterCropPad

ClaimResult claim_center_crop_pad(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2 && c.num_outputs() == 1, "expects 2 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"axes"});
  if (!r.ok) return r;
  r = require_input_type(c, 0, mlx_supports, kAnyType);
  if (!r.ok) return r;
  // int64 only: ORT cannot expand the function body for int32 (its Max mixes the two).
  r = claim_index_list(c, 1, "shape");
  if (!r.ok) return r;
  const ElemType out = c.output_type(0);
  ORTMLX_REQUIRE(out == ElemType::kUndefined || out == c.input_type(0),
                 "output type differs from input type");
  const int64_t rank = c.input_rank(0);
  if (rank >= 0 && c.node().has_attr("axes")) {
    std::string why;
    ORTMLX_REQUIRE(normalize_axes(*c.node().attr_ints("axes"), rank, &why).has_value(), why);
  }
  return ClaimResult::yes();
}

void translate_center_crop_pad(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  const int rank = static_cast<int>(x.ndim());
  std::vector<int> axes;
  if (n.has_attr("axes")) {
    axes = normalize_axes_or_throw(*n.attr_ints("axes"), rank);
  } else {
    for (int a = 0; a < rank; ++a) axes.push_back(a);
  }
  const std::vector<int64_t> target = host_ints(ctx, n, 1, "shape");
  if (target.size() != axes.size())
    throw std::runtime_error("shape holds " + std::to_string(target.size()) + " values for " +
                             std::to_string(axes.size()) + " axes");
  std::vector<std::pair<int, int>> pads(static_cast<size_t>(rank), {0, 0});
  bool pad = false;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t d = x.shape(axes[i]), t = target[i];
    checked_int(t, "CenterCropPad target size");
    if (t > d) {
      const int64_t left = (t - d) / 2;
      pads[static_cast<size_t>(axes[i])] = {checked_int(left, "CenterCropPad pad"),
                                            checked_int(t - d - left, "CenterCropPad pad")};
      pad = true;
    }
  }
  if (pad) {
    std::vector<int> ax(static_cast<size_t>(rank));
    std::vector<int> lo, hi;
    for (int a = 0; a < rank; ++a) {
      ax[static_cast<size_t>(a)] = a;
      lo.push_back(pads[static_cast<size_t>(a)].first);
      hi.push_back(pads[static_cast<size_t>(a)].second);
    }
    x = mx::pad(x, ax, mx::Shape(lo.begin(), lo.end()), mx::Shape(hi.begin(), hi.end()),
                mx::zeros({}, x.dtype(), s), "constant", s);
  }
  mx::Shape start(static_cast<size_t>(rank), 0), stop = x.shape();
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t d = x.shape(axes[i]), t = target[i];
    if (t < 0) {
      // The body's Slice then ends before it starts (or, counted from the end, before the
      // start clamped to the dim): an empty axis whatever the negative size.
      start[static_cast<size_t>(axes[i])] = 0;
      stop[static_cast<size_t>(axes[i])] = 0;
      continue;
    }
    const int64_t first = (d - t) / 2;
    start[static_cast<size_t>(axes[i])] = checked_int(first, "CenterCropPad start");
    stop[static_cast<size_t>(axes[i])] = checked_int(first + t, "CenterCropPad stop");
  }
  ctx.bind_output(n, 0, mx::slice(x, start, stop, s));
}

// ---------------------------------------------------------------- MaxUnpool

bool f32(ElemType t) {
  return t == ElemType::kFloat;
}

// Checks the int list attributes of a pooling-like node against `nd` spatial dims.
ClaimResult claim_window_attrs(const ClaimContext& c, size_t nd, bool dilations) {
  const auto& n = c.node();
  auto ks = n.attr_ints("kernel_shape");
  if (ks) {
    ORTMLX_REQUIRE(ks->size() == nd, "kernel_shape must list one size per spatial dim");
    for (int64_t k : *ks) ORTMLX_REQUIRE(k >= 1, "kernel_shape values must be positive");
  }
  auto st = spatial_attr(n, "strides", nd, 1);
  ORTMLX_REQUIRE(st.has_value(), "strides must list one value per spatial dim");
  for (int64_t v : *st) ORTMLX_REQUIRE(v >= 1, "strides must be positive");
  auto pads = spatial_attr(n, "pads", nd, 0, 2);
  ORTMLX_REQUIRE(pads.has_value(), "pads must list two values per spatial dim");
  for (int64_t v : *pads) ORTMLX_REQUIRE(v >= 0, "pads must be >= 0");
  if (dilations) {
    auto dil = spatial_attr(n, "dilations", nd, 1);
    ORTMLX_REQUIRE(dil.has_value(), "dilations must list one value per spatial dim");
    for (int64_t v : *dil) ORTMLX_REQUIRE(v >= 1, "dilations must be positive");
  }
  for (const char* name : {"kernel_shape", "strides", "pads", "dilations"})
    ORTMLX_REQUIRE(require_int_range(c, name, 0, std::numeric_limits<int32_t>::max()).ok,
                   std::string(name) + " values must fit int32");
  return ClaimResult::yes();
}

ClaimResult claim_max_unpool(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 2 && c.num_inputs() <= 3 && c.num_outputs() == 1,
                 "expects 2 or 3 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"kernel_shape", "strides", "pads"});
  if (!r.ok) return r;
  r = require_input_type(c, 0, f32, "float32 only (ORT's kernel)");
  if (!r.ok) return r;
  r = require_input_type(
      c, 1, [](ElemType t) { return t == ElemType::kInt64; }, "int64 indices");
  if (!r.ok) return r;
  if (c.has_input(2)) {
    r = claim_index_list(c, 2, "output_shape");
    if (!r.ok) return r;
  }
  const auto ks = c.node().attr_ints("kernel_shape");
  ORTMLX_REQUIRE(ks.has_value(), "kernel_shape is required");
  ORTMLX_REQUIRE(ks->size() >= 1 && ks->size() <= 3, "1 to 3 spatial dims (as ORT's kernel)");
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank < 0 || rank == static_cast<int64_t>(ks->size()) + 2,
                 "X rank must be 2 + the number of kernel_shape values");
  return claim_window_attrs(c, ks->size(), false);
}

void translate_max_unpool(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0), idx = ctx.input(n, 1);
  const std::vector<int64_t> ks = *n.attr_ints("kernel_shape");
  const size_t nd = ks.size();
  if (x.ndim() != nd + 2) throw std::runtime_error("X rank must be 2 + len(kernel_shape)");
  if (idx.shape() != x.shape()) throw std::runtime_error("I must have X's shape");
  const auto st = *spatial_attr(n, "strides", nd, 1);
  const auto pads = *spatial_attr(n, "pads", nd, 0, 2);
  std::vector<int64_t> out = {x.shape(0), x.shape(1)};
  for (size_t i = 0; i < nd; ++i) {
    const int64_t v = checked_add(
        checked_add(checked_mul(x.shape(static_cast<int>(i + 2)) - 1, st[i], "MaxUnpool dim"),
                    ks[i], "MaxUnpool dim"),
        -(pads[i] + pads[i + nd]), "MaxUnpool dim");
    if (v <= 0)
      throw std::runtime_error("the unpooled size of spatial dim " + std::to_string(i) +
                               " is not positive (" + std::to_string(v) + ")");
    out.push_back(v);
  }
  int64_t total = 1;
  for (int64_t d : out) total = checked_mul(total, d, "MaxUnpool output size");
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    const std::vector<int64_t> given = host_ints(ctx, n, 2, "output_shape");
    if (given.size() != out.size())
      throw std::runtime_error("output_shape must list one size per dim of X");
    if (given[0] != out[0] || given[1] != out[1])
      throw std::runtime_error("output_shape must keep X's batch and channel dims");
    int64_t want = 1;
    for (int64_t d : given) {
      if (d < 0) throw std::runtime_error("output_shape values must be >= 0");
      want = checked_mul(want, d, "MaxUnpool output size");
    }
    if (want < total)
      throw std::runtime_error("output_shape is smaller than the unpooled shape (" +
                               std::to_string(want) + " < " + std::to_string(total) + " elements)");
    out = given;
    total = want;
  }
  const mx::Shape shape = checked_shape(out, mx::float32);
  const int64_t m = x.size();
  if (m == 0 || total == 0) {
    ctx.bind_output(n, 0, mx::zeros(shape, mx::float32, s));
    return;
  }
  const mx::array i64 = mx::reshape(mx::astype(idx, mx::int64, s), checked_shape({m}), s);
  const mx::array size(total, mx::int64), zero(int64_t{0}, mx::int64);
  ctx.require(n, mx::logical_and(mx::greater_equal(i64, zero, s), mx::less(i64, size, s), s),
              "index out of bounds: every index must be within [0, " + std::to_string(total) +
                  ") (the output's element count)");
  const mx::array safe = mx::minimum(mx::maximum(i64, zero, s), mx::array(total - 1, mx::int64), s);
  const mx::array flat = mx::zeros(checked_shape({total, 1}), mx::float32, s);
  const mx::array upd = mx::reshape(x, checked_shape({m, 1, 1}), s);
  ctx.bind_output(n, 0, mx::reshape(mx::scatter(flat, {safe}, upd, {0}, s), shape, s));
}

// ---------------------------------------------------------------- Col2Im

// Block-element/destination pairs beyond this are refused at run time (host-built index lists).
constexpr int64_t kMaxCol2ImPairs = int64_t{1} << 26;

ClaimResult claim_col2im(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 3 && c.num_outputs() == 1, "expects 3 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"dilations", "pads", "strides"});
  if (!r.ok) return r;
  r = require_input_type(c, 0, f32, "float32 only (ORT's kernel)");
  if (!r.ok) return r;
  r = claim_index_list(c, 1, "image_shape");
  if (!r.ok) return r;
  r = claim_index_list(c, 2, "block_shape");
  if (!r.ok) return r;
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank < 0 || rank == 3, "input must be 3-D (N, C * prod(block_shape), L)");
  const TensorInfo* img = c.input(1);
  const bool known = img && img->has_shape && img->shape.size() == 1 && img->shape[0] >= 1;
  if (known) {
    r = claim_window_attrs(c, static_cast<size_t>(img->shape[0]), true);
    if (!r.ok) return r;
  }
  // ORT's kernel for other than 2 image dims walks the dilated block extent with the dilation
  // applied again: its result is not ONNX's Col2Im, and not matched here.
  if (auto dil = c.node().attr_ints("dilations")) {
    bool plain = true;
    for (int64_t d : *dil) plain = plain && d == 1;
    ORTMLX_REQUIRE(plain || (known && img->shape[0] == 2),
                   "dilations other than 1 are implemented for 2 image dims only (ORT's N-d "
                   "kernel differs from ONNX's definition there)");
  }
  return ClaimResult::yes();
}

void translate_col2im(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array col = ctx.input(n, 0);
  const std::vector<int64_t> img = host_ints(ctx, n, 1, "image_shape");
  const std::vector<int64_t> blk = host_ints(ctx, n, 2, "block_shape");
  const size_t nd = img.size();
  if (nd == 0 || blk.size() != nd)
    throw std::runtime_error(
        "image_shape and block_shape must hold the same number (>= 1) of "
        "values");
  auto st_o = spatial_attr(n, "strides", nd, 1);
  auto dil_o = spatial_attr(n, "dilations", nd, 1);
  auto pads_o = spatial_attr(n, "pads", nd, 0, 2);
  if (!st_o || !dil_o || !pads_o)
    throw std::runtime_error(
        "strides, dilations and pads must list a value per image dim "
        "(pads: two)");
  const auto &st = *st_o, &dil = *dil_o, &pads = *pads_o;
  std::vector<int64_t> slides(nd);
  int64_t k_total = 1, l_total = 1, p_total = 1;
  for (size_t i = 0; i < nd; ++i) {
    if (img[i] <= 0 || blk[i] <= 0)
      throw std::runtime_error("image_shape and block_shape values must be positive");
    const int64_t span =
        checked_add(checked_mul(dil[i], blk[i] - 1, "Col2Im block"), 1, "Col2Im block");
    const int64_t padded = checked_add(img[i], pads[i] + pads[i + nd], "Col2Im image");
    if (padded < span)
      throw std::runtime_error("the padded image is smaller than the dilated block in dim " +
                               std::to_string(i));
    slides[i] = (padded - span) / st[i] + 1;
    k_total = checked_mul(k_total, blk[i], "Col2Im block size");
    l_total = checked_mul(l_total, slides[i], "Col2Im block count");
    p_total = checked_mul(p_total, img[i], "Col2Im image size");
  }
  if (col.ndim() != 3) throw std::runtime_error("input must be 3-D (N, C * prod(block), L)");
  const int64_t nb = col.shape(0), ck = col.shape(1);
  if (ck == 0 || ck % k_total != 0)
    throw std::runtime_error("input dim 1 (" + std::to_string(ck) +
                             ") must be a positive multiple of prod(block_shape) (" +
                             std::to_string(k_total) + ")");
  if (col.shape(2) != l_total)
    throw std::runtime_error("input dim 2 (" + std::to_string(col.shape(2)) +
                             ") must be the number of sliding blocks (" + std::to_string(l_total) +
                             ")");
  const int64_t ch = ck / k_total;
  const int64_t pairs = checked_mul(k_total, l_total, "Col2Im pairs");
  if (pairs > kMaxCol2ImPairs)
    throw std::runtime_error("more than 2^26 block elements are not implemented");
  std::vector<int64_t> out_shape = {nb, ch};
  out_shape.insert(out_shape.end(), img.begin(), img.end());
  const mx::Shape shape = checked_shape(out_shape, mx::float32);
  // Destination (flat over the image) of each block element k at each block position l, in
  // (k, l) order; elements that fall on the padding are dropped.
  std::vector<int64_t> src, dst;
  std::vector<int64_t> kc(nd, 0), lc(nd, 0);
  for (int64_t k = 0; k < k_total; ++k) {
    std::fill(lc.begin(), lc.end(), 0);
    for (int64_t l = 0; l < l_total; ++l) {
      int64_t flat = 0;
      bool inside = true;
      for (size_t i = 0; i < nd && inside; ++i) {
        const int64_t y = lc[i] * st[i] - pads[i] + kc[i] * dil[i];
        inside = y >= 0 && y < img[i];
        flat = flat * img[i] + y;
      }
      if (inside) {
        src.push_back(k * l_total + l);
        dst.push_back(flat);
      }
      for (size_t i = nd; i-- > 0;) {
        if (++lc[i] < slides[i]) break;
        lc[i] = 0;
      }
    }
    for (size_t i = nd; i-- > 0;) {
      if (++kc[i] < blk[i]) break;
      kc[i] = 0;
    }
  }
  const int64_t rows = checked_mul(nb, ch, "Col2Im rows");
  if (rows == 0 || dst.empty()) {
    ctx.bind_output(n, 0, mx::zeros(shape, mx::float32, s));
    return;
  }
  const int64_t v = static_cast<int64_t>(dst.size());
  const mx::array src_a(src.begin(), checked_shape({v}), mx::int64);
  const mx::array dst_a(dst.begin(), checked_shape({v}), mx::int64);
  // [N * C, K * L] -> the kept pairs [V, N * C] -> summed into [P, N * C].
  const mx::array c2 = mx::reshape(col, checked_shape({rows, pairs}), s);
  const mx::array picked = mx::transpose(mx::take(c2, src_a, 1, s), {1, 0}, s);
  const mx::array acc =
      mx::scatter_add(mx::zeros(checked_shape({p_total, rows}), mx::float32, s), {dst_a},
                      mx::reshape(picked, checked_shape({v, 1, rows}), s), {0}, s);
  ctx.bind_output(n, 0, mx::reshape(mx::transpose(acc, {1, 0}, s), shape, s));
}

// ---------------------------------------------------------------- AffineGrid

ClaimResult claim_affine_grid(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2 && c.num_outputs() == 1, "expects 2 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"align_corners"});
  if (!r.ok) return r;
  r = require_input_type(c, 0, f32, "float32 theta only (MLX has no float64)");
  if (!r.ok) return r;
  r = claim_index_list(c, 1, "size");
  if (!r.ok) return r;
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank < 0 || rank == 3, "theta must be 3-D");
  return ClaimResult::yes();
}

// ORT's coordinates along an axis of `len`: Eigen's LinSpaced(len, -1, 1) in float32 (-1 + i *
// step, the last exactly 1; a single point is 1), scaled by (len - 1) / len without
// align_corners.
mx::array base_coords(int64_t len, bool align, mx::StreamOrDevice s) {
  std::vector<float> v(static_cast<size_t>(len));
  const float step = len > 1 ? 2.0f / static_cast<float>(len - 1) : 0.0f;
  for (int64_t i = 0; i < len; ++i)
    v[static_cast<size_t>(i)] = i == len - 1 ? 1.0f : -1.0f + static_cast<float>(i) * step;
  if (!align)
    for (float& x : v) x = x * static_cast<float>(len - 1) / static_cast<float>(len);
  (void)s;
  return mx::array(v.begin(), checked_shape({len}), mx::float32);
}

void translate_affine_grid(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array theta = ctx.input(n, 0);
  const std::vector<int64_t> size = host_ints(ctx, n, 1, "size");
  if (size.size() != 4 && size.size() != 5)
    throw std::runtime_error("size must hold 4 (N, C, H, W) or 5 (N, C, D, H, W) values");
  const int sd = static_cast<int>(size.size()) - 2;  // spatial dims: 2 or 3
  if (theta.ndim() != 3 || theta.shape(1) != sd || theta.shape(2) != sd + 1)
    throw std::runtime_error("theta must be [N, " + std::to_string(sd) + ", " +
                             std::to_string(sd + 1) + "] for a size of " +
                             std::to_string(size.size()) + " values");
  if (size[0] != theta.shape(0))
    throw std::runtime_error("size[0] (" + std::to_string(size[0]) + ") must be theta's batch (" +
                             std::to_string(theta.shape(0)) + ")");
  if (size[0] < 0) throw std::runtime_error("size[0] (N) must be >= 0");
  for (size_t i = 2; i < size.size(); ++i)
    if (size[i] <= 0)  // ORT's kernel refuses empty grids
      throw std::runtime_error("size[" + std::to_string(i) + "] must be positive");
  const bool align = n.attr_int("align_corners", 0) != 0;
  // Spatial extents in (D,) H, W order; coordinate k of the grid runs along extent sd - 1 - k.
  std::vector<int64_t> ext(size.begin() + 2, size.end());
  int64_t points = 1;
  for (int64_t e : ext) points = checked_mul(points, e, "AffineGrid points");
  std::vector<int64_t> out_dims = {size[0]};
  out_dims.insert(out_dims.end(), ext.begin(), ext.end());
  out_dims.push_back(sd);
  const mx::Shape out_shape = checked_shape(out_dims, mx::float32);
  if (points == 0 || size[0] == 0) {
    ctx.bind_output(n, 0, mx::zeros(out_shape, mx::float32, s));
    return;
  }
  // Base grid [points, sd] with x (the last extent) first.
  std::vector<mx::array> cols;
  for (int k = 0; k < sd; ++k) {
    const int axis = sd - 1 - k;
    mx::Shape along(static_cast<size_t>(sd), 1);
    along[static_cast<size_t>(axis)] = checked_int(ext[static_cast<size_t>(axis)], "extent");
    mx::array c = mx::reshape(base_coords(ext[static_cast<size_t>(axis)], align, s), along, s);
    c = mx::broadcast_to(c, checked_shape(ext), s);
    cols.push_back(mx::reshape(c, checked_shape({points, 1}), s));
  }
  const mx::array base = mx::concatenate(cols, 1, s);  // [P, sd]
  const mx::array rot = mx::slice(theta, {0, 0, 0}, {theta.shape(0), sd, sd}, s);
  const mx::array shift = mx::slice(theta, {0, 0, sd}, {theta.shape(0), sd, sd + 1}, s);
  // [N, sd, sd] @ [sd, P] + [N, sd, 1] -> [N, sd, P] -> [N, P, sd]
  const mx::array g = mx::add(mx::matmul(rot, mx::transpose(base, {1, 0}, s), s), shift, s);
  ctx.bind_output(n, 0, mx::reshape(mx::transpose(g, {0, 2, 1}, s), out_shape, s));
}

// ---------------------------------------------------------------- MaxRoiPool

ClaimResult claim_max_roi_pool(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2 && c.num_outputs() == 1, "expects 2 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"pooled_shape", "spatial_scale"});
  if (!r.ok) return r;
  for (size_t i = 0; i < 2; ++i) {
    r = require_input_type(c, i, f32, "float32 only (ORT's kernel)");
    if (!r.ok) return r;
  }
  const auto ps = c.node().attr_ints("pooled_shape");
  ORTMLX_REQUIRE(ps && ps->size() == 2, "pooled_shape must hold 2 values");
  for (int64_t v : *ps)
    ORTMLX_REQUIRE(v >= 1 && v <= 4096, "pooled_shape values must be in [1, 4096]");
  const int64_t xr = c.input_rank(0), rr = c.input_rank(1);
  ORTMLX_REQUIRE(xr < 0 || xr == 4, "X must be 4-D (N, C, H, W)");
  ORTMLX_REQUIRE(rr < 0 || rr == 2, "rois must be 2-D (num_rois, 5)");
  return ClaimResult::yes();
}

// std::round of float32: half away from zero.
mx::array round_half_away(const mx::array& v, mx::StreamOrDevice s) {
  const mx::array a = mx::floor(mx::add(mx::abs(v, s), mx::array(0.5f), s), s);
  return mx::where(mx::less(v, mx::array(0.0f), s), mx::negative(a, s), a, s);
}

// Bin edges along one image axis: [R, P] starts and ends (clipped to [0, size]).
std::pair<mx::array, mx::array> roi_bins(const mx::array& lo, const mx::array& hi, int pooled,
                                         int size, mx::StreamOrDevice s) {
  const mx::array one(1, mx::int32);
  const mx::array extent = mx::maximum(mx::add(mx::subtract(hi, lo, s), one, s), one, s);  // [R]
  const mx::array bin =
      mx::divide(mx::astype(extent, mx::float32, s), mx::array(static_cast<float>(pooled)), s);
  const mx::array p = mx::reshape(mx::arange(0, pooled, mx::float32, s), {1, pooled}, s);
  const mx::array b2 = mx::expand_dims(bin, 1, s), lo2 = mx::expand_dims(lo, 1, s);
  mx::array start = mx::astype(mx::floor(mx::multiply(p, b2, s), s), mx::int32, s);
  mx::array end =
      mx::astype(mx::ceil(mx::multiply(mx::add(p, mx::array(1.0f), s), b2, s), s), mx::int32, s);
  const mx::array zero(0, mx::int32), top(size, mx::int32);
  start = mx::minimum(mx::maximum(mx::add(start, lo2, s), zero, s), top, s);
  end = mx::minimum(mx::maximum(mx::add(end, lo2, s), zero, s), top, s);
  return {start, end};
}

void translate_max_roi_pool(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0), rois = ctx.input(n, 1);
  if (x.ndim() != 4) throw std::runtime_error("X must be 4-D (N, C, H, W)");
  if (rois.ndim() != 2 || rois.shape(1) != 5)
    throw std::runtime_error("rois must be [num_rois, 5] (batch_index, x1, y1, x2, y2)");
  const auto ps = *n.attr_ints("pooled_shape");
  const int ph = checked_int(ps[0], "pooled height"), pw = checked_int(ps[1], "pooled width");
  const float scale = n.attr_float("spatial_scale", 1.0f);
  const int nb = x.shape(0), ch = x.shape(1), hh = x.shape(2), ww = x.shape(3);
  const int nr = rois.shape(0);
  const mx::Shape out_shape = checked_shape({nr, ch, ph, pw}, mx::float32);
  // Masked maxima hold (R, C, H, PW, W) and (R, C, PH, H, PW) values.
  int64_t work = checked_mul(
      checked_mul(checked_mul(nr, ch, "MaxRoiPool"), hh, "MaxRoiPool"),
      std::max<int64_t>(checked_mul(pw, ww, "MaxRoiPool"), checked_mul(ph, pw, "MaxRoiPool")),
      "MaxRoiPool");
  if (work > (int64_t{1} << 28))
    throw std::runtime_error("MaxRoiPool needs more than 2^28 masked values (not implemented)");
  if (nr == 0 || ch == 0) {
    ctx.bind_output(n, 0, mx::zeros(out_shape, mx::float32, s));
    return;
  }
  auto column = [&](int j) { return mx::squeeze(mx::slice(rois, {0, j}, {nr, j + 1}, s), {1}, s); };
  // Batch index: truncated toward zero, as ORT's static_cast<int>.
  const mx::array bf = column(0);
  ctx.require(n,
              mx::logical_and(mx::greater(bf, mx::array(-1.0f), s),
                              mx::less(bf, mx::array(static_cast<float>(nb)), s), s),
              "roi batch index out of range: it must be within [0, " + std::to_string(nb) + ")");
  if (nb == 0) throw std::runtime_error("X has an empty batch: no roi batch index is valid");
  if (hh == 0 || ww == 0) {  // every bin is empty
    ctx.bind_output(n, 0, mx::zeros(out_shape, mx::float32, s));
    return;
  }
  const mx::array bi =
      mx::clip(mx::astype(mx::clip(bf, mx::array(0.0f), mx::array(static_cast<float>(nb - 1)), s),
                          mx::int32, s),
               mx::array(0, mx::int32), mx::array(nb - 1, mx::int32), s);
  // Rounded, scaled corners; clamped far outside the image first (ORT casts them to int, which
  // the image clip then bounds; values beyond int range are undefined there).
  const float big = 1e8f;
  auto corner = [&](int j) {
    const mx::array v = mx::clip(round_half_away(mx::multiply(column(j), mx::array(scale), s), s),
                                 mx::array(-big), mx::array(big), s);
    return mx::astype(v, mx::int32, s);
  };
  const auto [hs, he] = roi_bins(corner(2), corner(4), ph, hh, s);  // [R, PH]
  const auto [ws, we] = roi_bins(corner(1), corner(3), pw, ww, s);  // [R, PW]
  const mx::array hpos = mx::reshape(mx::arange(0, hh, mx::int32, s), {1, 1, hh}, s);
  const mx::array wpos = mx::reshape(mx::arange(0, ww, mx::int32, s), {1, 1, ww}, s);
  const mx::array hmask = mx::logical_and(mx::greater_equal(hpos, mx::expand_dims(hs, 2, s), s),
                                          mx::less(hpos, mx::expand_dims(he, 2, s), s), s);
  const mx::array wmask = mx::logical_and(mx::greater_equal(wpos, mx::expand_dims(ws, 2, s), s),
                                          mx::less(wpos, mx::expand_dims(we, 2, s), s), s);
  const mx::array lowest(std::numeric_limits<float>::lowest());
  const mx::array xb = mx::take(x, bi, 0, s);  // [R, C, H, W]
  // Columns: [R, C, H, 1, W] against [R, 1, 1, PW, W] -> [R, C, H, PW].
  const mx::array cols = mx::max(
      mx::where(mx::reshape(wmask, {nr, 1, 1, pw, ww}, s), mx::expand_dims(xb, 3, s), lowest, s),
      {4}, false, s);
  // Rows: [R, C, 1, H, PW] against [R, 1, PH, H, 1] -> [R, C, PH, PW].
  mx::array y = mx::max(
      mx::where(mx::reshape(hmask, {nr, 1, ph, hh, 1}, s), mx::expand_dims(cols, 2, s), lowest, s),
      {3}, false, s);
  const mx::array empty =
      mx::logical_or(mx::reshape(mx::less_equal(he, hs, s), {nr, 1, ph, 1}, s),
                     mx::reshape(mx::less_equal(we, ws, s), {nr, 1, 1, pw}, s), s);
  y = mx::where(empty, mx::array(0.0f), mx::maximum(y, lowest, s), s);
  ctx.bind_output(n, 0, y);
}

}  // namespace

void register_vision_ops(OpRegistry& r) {
  r.add("", "MaxRoiPool", 1, 1 << 30, claim_max_roi_pool, translate_max_roi_pool);
  r.add("", "AffineGrid", 20, 1 << 30, claim_affine_grid, translate_affine_grid);
  r.add("", "CenterCropPad", 18, 1 << 30, claim_center_crop_pad, translate_center_crop_pad);
  // Two schema versions (11 clarifies the output_shape input); one semantics.
  r.add("", "MaxUnpool", 9, 10, claim_max_unpool, translate_max_unpool);
  r.add("", "MaxUnpool", 11, 1 << 30, claim_max_unpool, translate_max_unpool);
  r.add("", "Col2Im", 18, 1 << 30, claim_col2im, translate_col2im);
}

}  // namespace ortmlx
