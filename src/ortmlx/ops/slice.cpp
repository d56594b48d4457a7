// Slicing family: Slice, Split, Pad, Tile, Expand. Their shape-deciding inputs (starts/ends,
// split sizes, pads, repeats, target shape) may be constants or runtime tensors: they are read on
// the host at translate time (ops/host_values.h), so a value that depends on a runtime input keeps
// the plan on the eager path (translated per run) instead of baking one run's value in.
#include <algorithm>
#include <limits>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/host_values.h"
#include "ortmlx/ops/op_args.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

constexpr const char* kAnyType = "MLX-supported tensor types only (no float64, no strings)";

ClaimResult claim_data(const ClaimContext& c) {
  auto r = require_input_type(c, 0, mlx_supports, kAnyType);
  if (!r.ok) return r;
  for (size_t i = 0; i < c.num_outputs(); ++i) {
    const ElemType out = c.output_type(i);
    ORTMLX_REQUIRE(out == ElemType::kUndefined || out == c.input_type(0),
                   "output type differs from input type");
  }
  return ClaimResult::yes();
}

// Slice of `x` along one axis: [start, start + len * step) with a positive step, or the
// elements start, start+step, ... (len of them) with a negative one. MLX slices forward; a
// backward slice takes the same elements forward from the last one and flips them.
mx::array slice_axis(const mx::array& x, int axis, int64_t start, int64_t len, int64_t step,
                     mx::StreamOrDevice s) {
  mx::Shape lo(x.ndim(), 0), hi = x.shape(), st(x.ndim(), 1);
  const auto a = static_cast<size_t>(axis);
  if (len <= 0) {
    lo[a] = 0;
    hi[a] = 0;
    return mx::slice(x, lo, hi, st, s);
  }
  if (step > 0) {
    lo[a] = static_cast<int>(start);
    hi[a] = static_cast<int>(start + (len - 1) * step + 1);
    st[a] = static_cast<int>(step);
    return mx::slice(x, lo, hi, st, s);
  }
  const int64_t last = start + (len - 1) * step;  // smallest index taken
  lo[a] = static_cast<int>(last);
  hi[a] = static_cast<int>(start + 1);
  st[a] = static_cast<int>(-step);
  mx::array fwd = mx::slice(x, lo, hi, st, s);
  return len == 1 ? fwd : mx::flip(fwd, axis, s);
}

// ---------------------------------------------------------------- Slice

ClaimResult claim_slice(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 3 && c.num_inputs() <= 5, "expects 3 to 5 inputs");
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  r = claim_data(c);
  if (!r.ok) return r;
  const char* names[] = {"", "starts", "ends", "axes", "steps"};
  ElemType ind = ElemType::kUndefined;
  for (size_t i = 1; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    r = claim_index_list(c, i, names[i], /*allow_int32=*/true);
    if (!r.ok) return r;
    if (ind == ElemType::kUndefined) ind = c.input_type(i);
    ORTMLX_REQUIRE(c.input_type(i) == ind, "starts/ends/axes/steps have different types");
  }
  if (c.has_input(4) && c.input_is_constant(4)) {
    if (const ConstTensor* t = c.constant_input(4)) {
      for (int64_t v : t->as_int64().value_or(std::vector<int64_t>{}))
        ORTMLX_REQUIRE(v != 0, "steps must not be 0");
    }
  }
  return ClaimResult::yes();
}

// Slice opsets 1-9: starts, ends and axes are attributes, steps are 1. ORT clamps them as in
// the input form, so translate_slice serves.
ClaimResult claim_slice_attrs(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = refuse_unknown_attrs(c, {"starts", "ends", "axes"});
  if (!r.ok) return r;
  r = claim_data(c);
  if (!r.ok) return r;
  const auto starts = c.node().attr_ints("starts"), ends = c.node().attr_ints("ends");
  ORTMLX_REQUIRE(starts && ends, "starts and ends are required");
  ORTMLX_REQUIRE(starts->size() == ends->size(), "starts and ends have different lengths");
  if (auto axes = c.node().attr_ints("axes")) {
    ORTMLX_REQUIRE(axes->size() == starts->size(), "axes and starts have different lengths");
    const int64_t rank = c.input_rank(0);
    std::string why;
    if (rank >= 0 && !normalize_axes(*axes, rank, &why)) return ClaimResult::no(why);
  }
  return ClaimResult::yes();
}

void translate_slice(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  const int64_t rank = static_cast<int64_t>(x.ndim());
  const bool attrs = n.since_version < 10;
  const auto starts = attrs ? n.attr_ints("starts").value_or(std::vector<int64_t>{})
                            : host_ints(ctx, n, 1, "starts");
  const auto ends =
      attrs ? n.attr_ints("ends").value_or(std::vector<int64_t>{}) : host_ints(ctx, n, 2, "ends");
  const size_t k = starts.size();
  if (ends.size() != k) throw std::runtime_error("starts and ends have different lengths");
  std::vector<int64_t> axes_raw(k), steps(k, 1);
  if (attrs && n.attr_ints("axes")) {
    axes_raw = *n.attr_ints("axes");
  } else if (!attrs && n.inputs.size() > 3 && !n.inputs[3].empty()) {
    axes_raw = host_ints(ctx, n, 3, "axes");
  } else {
    for (size_t i = 0; i < k; ++i) axes_raw[i] = static_cast<int64_t>(i);
  }
  if (!attrs && n.inputs.size() > 4 && !n.inputs[4].empty()) steps = host_ints(ctx, n, 4, "steps");
  if (axes_raw.size() != k || steps.size() != k)
    throw std::runtime_error("starts, ends, axes and steps have different lengths");
  const auto axes = normalize_axes_or_throw(axes_raw, rank);
  for (size_t i = 0; i < k; ++i) {
    const int64_t dim = x.shape(axes[i]);
    int64_t step = steps[i];
    if (step == 0) throw std::runtime_error("Slice step must not be 0");
    // A step past the dim takes at most one element, as a step of the dim's size does: clamped
    // so, the step fits MLX's int32 and the length arithmetic below cannot overflow (a step of
    // INT64_MIN or INT64_MAX is valid ONNX, and ORT takes that one element).
    const int64_t reach = std::max<int64_t>(dim, 1);
    step = std::clamp<int64_t>(step, -reach, reach);
    // ONNX clamping: negative values count from the end (start/end may be INT64_MIN/MAX).
    auto wrap = [dim](int64_t v) { return v < 0 ? (v < -dim ? -1 : v + dim) : v; };
    int64_t start = wrap(starts[i]), end = wrap(ends[i]);
    int64_t len;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      len = end > start ? (end - start + step - 1) / step : 0;
    } else {
      // A start before the first element clamps to it (ONNX: [0, dim - 1] for negative steps,
      // as ORT does; numpy would give nothing).
      start = dim == 0 ? -1 : std::clamp<int64_t>(start, 0, dim - 1);
      end = std::clamp<int64_t>(end, -1, dim - 1);
      // ORT reads an end of INT64_MAX with a negative step as open (through element 0, the
      // sentinel exporters write for x[::-1]), not as ONNX's clamp to dim - 1 (empty).
      if (ends[i] == std::numeric_limits<int64_t>::max()) end = -1;
      len = start > end ? (start - end + (-step) - 1) / (-step) : 0;
    }
    x = slice_axis(x, axes[i], start, len, step, ctx.stream());
  }
  ctx.bind_output(n, 0, x);
}

// ---------------------------------------------------------------- Split

ClaimResult claim_split(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 1 && c.num_inputs() <= 2, "expects 1 or 2 inputs");
  ORTMLX_REQUIRE(c.num_outputs() >= 1, "expects at least 1 output");
  const int v = c.node().since_version;
  auto r = v >= 18   ? refuse_unknown_attrs(c, {"axis", "num_outputs"})
           : v >= 13 ? refuse_unknown_attrs(c, {"axis"})
                     : refuse_unknown_attrs(c, {"axis", "split"});
  if (!r.ok) return r;
  r = claim_data(c);
  if (!r.ok) return r;
  if (c.has_input(1)) {
    ORTMLX_REQUIRE(v >= 13, "split input before opset 13");
    r = claim_index_list(c, 1, "split");
    if (!r.ok) return r;
    ORTMLX_REQUIRE(!c.node().has_attr("num_outputs"), "both split and num_outputs given");
  }
  if (c.node().has_attr("num_outputs"))
    ORTMLX_REQUIRE(c.node().attr_int("num_outputs", 0) == static_cast<int64_t>(c.num_outputs()),
                   "num_outputs differs from the number of outputs");
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank != 0, "a scalar cannot be split");
  const int64_t axis = c.node().attr_int("axis", 0);
  ORTMLX_REQUIRE(rank < 0 || (axis >= -rank && axis < rank), "axis is out of range");
  return ClaimResult::yes();
}

void translate_split(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  const int axis = normalize_axis(n.attr_int("axis", 0), static_cast<int>(x.ndim()));
  const int64_t dim = x.shape(axis);
  const int64_t parts = static_cast<int64_t>(n.outputs.size());
  std::vector<int64_t> sizes;
  if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
    sizes = host_ints(ctx, n, 1, "split");
  } else if (auto s = n.attr_ints("split"); s && n.since_version < 13) {
    sizes = *s;
  } else if (n.has_attr("num_outputs")) {
    // Opset 18: ceil(dim / n) each, the last one smaller. ORT (1.30) raises where the first
    // n - 1 parts leave nothing for the last (dim 4 into 3: 2, 2 and an empty tail), as here.
    if (parts > dim)
      throw std::runtime_error("num_outputs " + std::to_string(parts) +
                               " exceeds the size of the split dim (" + std::to_string(dim) + ")");
    const int64_t each = (dim + parts - 1) / parts;
    if (each * (parts - 1) >= dim && parts > 1)
      throw std::runtime_error("split size " + std::to_string(each) +
                               " exceeds the remaining size of the axis (" +
                               std::to_string(dim % each) + ")");
    for (int64_t i = 0; i < parts; ++i)
      sizes.push_back(std::max<int64_t>(0, std::min(each, dim - i * each)));
  } else {
    if (dim % parts != 0)
      throw std::runtime_error("dim " + std::to_string(dim) + " does not split evenly into " +
                               std::to_string(parts) + " outputs");
    sizes.assign(static_cast<size_t>(parts), dim / parts);
  }
  if (static_cast<int64_t>(sizes.size()) != parts)
    throw std::runtime_error("split has " + std::to_string(sizes.size()) + " sizes for " +
                             std::to_string(parts) + " outputs");
  // Summed with a check against the remaining size: sizes that add up to the dim only modulo
  // 2^64 (two of 2^63 - 1 and a 6 for a dim of 4) are an error, as in ORT.
  int64_t total = 0;
  for (int64_t s : sizes) {
    if (s < 0) throw std::runtime_error("split sizes must be non-negative");
    if (s > dim - total)
      throw std::runtime_error("split size " + std::to_string(s) +
                               " exceeds the remaining size of the axis (" +
                               std::to_string(dim - total) + ")");
    total += s;
  }
  if (total != dim)
    throw std::runtime_error("split sizes sum to " + std::to_string(total) + ", dim is " +
                             std::to_string(dim));
  int64_t at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    ctx.bind_output(n, i, slice_axis(x, axis, at, sizes[i], 1, ctx.stream()));
    at += sizes[i];
  }
}

// ---------------------------------------------------------------- Pad

// Wrap mode. ORT's CPU kernel (1.30) copies a leading pad larger than the dim from outside the
// input (measured: uninitialised values), so wrap is claimed only where every leading pad is
// known not to exceed its dim: constant pads (and axes), static dims. Trailing pads of any size
// wrap around correctly there.
ClaimResult claim_wrap_pads(const ClaimContext& c) {
  const ConstTensor* pt = c.input_is_constant(1) ? c.constant_input(1) : nullptr;
  const auto pads = pt ? pt->as_int64() : std::nullopt;
  ORTMLX_REQUIRE(pads,
                 "wrap needs constant pads (a leading pad beyond the dim is not exact in ORT)");
  const TensorInfo* x = c.input(0);
  ORTMLX_REQUIRE(x && x->has_shape, "wrap needs the data's rank");
  const int64_t rank = x->rank();
  std::vector<int64_t> axes_raw;
  if (c.has_input(3)) {
    const ConstTensor* at = c.input_is_constant(3) ? c.constant_input(3) : nullptr;
    const auto a = at ? at->as_int64() : std::nullopt;
    ORTMLX_REQUIRE(a, "wrap needs constant axes");
    axes_raw = *a;
  } else {
    for (int64_t i = 0; i < rank; ++i) axes_raw.push_back(i);
  }
  std::string why;
  const auto axes = normalize_axes(axes_raw, rank, &why);
  ORTMLX_REQUIRE(axes, why);
  ORTMLX_REQUIRE(pads->size() == 2 * axes->size(), "pads length is not twice the axes count");
  for (size_t i = 0; i < axes->size(); ++i) {
    const int64_t dim = x->shape[static_cast<size_t>((*axes)[i])];
    const int64_t lo = (*pads)[i];
    if (lo == 0) continue;
    ORTMLX_REQUIRE(dim >= 0, "wrap needs static dims where it pads before the data");
    ORTMLX_REQUIRE(lo <= dim,
                   "a leading wrap pad larger than the dim (ORT reads outside the input there)");
  }
  return ClaimResult::yes();
}

ClaimResult claim_pad(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 2 && c.num_inputs() <= 4, "expects 2 to 4 inputs");
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  auto r = refuse_unknown_attrs(c, {"mode"});
  if (!r.ok) return r;
  r = claim_data(c);
  if (!r.ok) return r;
  const std::string mode = c.node().attr_string("mode", "constant");
  ORTMLX_REQUIRE(mode == "constant" || mode == "reflect" || mode == "edge" || mode == "wrap",
                 "mode '" + mode + "' is not implemented (constant, reflect, edge, wrap)");
  r = claim_index_list(c, 1, "pads");
  if (!r.ok) return r;
  if (c.has_input(2))
    ORTMLX_REQUIRE(c.input_type(2) == c.input_type(0), "constant_value type differs from data");
  if (c.has_input(3)) {
    ORTMLX_REQUIRE(c.node().since_version >= 18, "axes input before opset 18");
    r = claim_index_list(c, 3, "axes", /*allow_int32=*/true);
    if (!r.ok) return r;
  }
  if (mode == "wrap") {
    auto w = claim_wrap_pads(c);
    if (!w.ok) return w;
  }
  if (mode != "constant" && c.input_is_constant(1)) {
    if (const ConstTensor* t = c.constant_input(1))
      for (int64_t v : t->as_int64().value_or(std::vector<int64_t>{}))
        ORTMLX_REQUIRE(v >= 0, "negative pads are implemented for mode constant only");
  }
  return ClaimResult::yes();
}

// Pad opsets 2-10: pads and the constant `value` (a float) are attributes; ORT's kernel is
// float-only there. translate_pad reads them from the node.
ClaimResult claim_pad_attrs(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = refuse_unknown_attrs(c, {"mode", "pads", "value"});
  if (!r.ok) return r;
  r = require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kFloat; }, "float32 only");
  if (!r.ok) return r;
  r = require_same_types(c);
  if (!r.ok) return r;
  const std::string mode = c.node().attr_string("mode", "constant");
  ORTMLX_REQUIRE(mode == "constant" || mode == "reflect" || mode == "edge",
                 "mode '" + mode + "' is not implemented (constant, reflect, edge)");
  const auto pads = c.node().attr_ints("pads");
  ORTMLX_REQUIRE(pads.has_value(), "pads is required");
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank < 0 || static_cast<int64_t>(pads->size()) == 2 * rank,
                 "pads must hold 2 values per dim");
  if (mode != "constant")
    for (int64_t v : *pads)
      ORTMLX_REQUIRE(v >= 0, "negative pads are implemented for mode constant only");
  return ClaimResult::yes();
}

// Reflect padding of one axis by (lo, hi): mirrored copies without the edge element.
mx::array reflect_axis(const mx::array& x, int axis, int64_t lo, int64_t hi, mx::StreamOrDevice s) {
  const int64_t dim = x.shape(axis);
  if ((lo > 0 || hi > 0) && (lo >= dim || hi >= dim))
    throw std::runtime_error("reflect pads must be smaller than the dim (" + std::to_string(dim) +
                             ")");
  std::vector<mx::array> parts;
  if (lo > 0) parts.push_back(slice_axis(x, axis, lo, lo, -1, s));
  parts.push_back(x);
  if (hi > 0) parts.push_back(slice_axis(x, axis, dim - 2, hi, -1, s));
  return parts.size() == 1 ? x : mx::concatenate(std::move(parts), axis, s);
}

// Wrap padding of one axis by (lo, hi): output position j reads x[(j - lo) mod dim], gathered
// with host-built indices. As ORT: an empty dim cannot be wrapped, and a leading pad larger than
// the dim is not exact there (refused at claim time; checked again here).
mx::array wrap_axis(const mx::array& x, int axis, int64_t lo, int64_t hi, mx::StreamOrDevice s) {
  const int64_t dim = x.shape(axis);
  if (dim == 0) throw std::runtime_error("wrap padding of an empty dim");
  if (lo > dim) throw std::runtime_error("a leading wrap pad larger than the dim");
  const int64_t total = checked_add(checked_add(dim, lo, "padded dim"), hi, "padded dim");
  std::vector<int32_t> idx(static_cast<size_t>(total));
  for (int64_t j = 0; j < total; ++j)
    idx[static_cast<size_t>(j)] = static_cast<int32_t>((((j - lo) % dim) + dim) % dim);
  const mx::array indices(idx.begin(), {checked_int(total, "padded dim")}, mx::int32);
  return mx::take(x, indices, axis, s);
}

void translate_pad(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  const int64_t rank = static_cast<int64_t>(x.ndim());
  const bool attrs = n.since_version < 11;
  auto pads =
      attrs ? n.attr_ints("pads").value_or(std::vector<int64_t>{}) : host_ints(ctx, n, 1, "pads");
  std::vector<int> axes;
  if (n.inputs.size() > 3 && !n.inputs[3].empty()) {
    axes = normalize_axes_or_throw(host_ints(ctx, n, 3, "axes"), rank);
  } else {
    for (int i = 0; i < rank; ++i) axes.push_back(i);
  }
  const size_t k = axes.size();
  if (pads.size() != 2 * k)
    throw std::runtime_error("pads has " + std::to_string(pads.size()) + " values for " +
                             std::to_string(k) + " axes");
  const std::string mode = n.attr_string("mode", "constant");
  if (mode == "wrap" && x.size() == 0)
    throw std::runtime_error("wrap padding of an empty input (ORT raises too)");
  // Negative pads crop (constant mode only, as claimed); then the positive pads are added. The
  // output dim is dim + lo + hi (ORT raises when it is negative); a crop past the input's end
  // that the other side's padding makes up for leaves only padding on that axis.
  for (size_t i = 0; i < k; ++i) {
    const int64_t lo = pads[i], hi = pads[i + k];
    if ((lo < 0 || hi < 0) && mode != "constant")
      throw std::runtime_error("negative pads are implemented for mode constant only");
    if (lo < 0 || hi < 0) {
      const int64_t dim = x.shape(axes[i]);
      const int64_t out = checked_add(checked_add(dim, lo, "padded dim"), hi, "padded dim");
      if (out < 0) throw std::runtime_error("negative pads remove more than the dim");
      // Compared before negating: -INT64_MIN overflows.
      const int64_t crop_lo = lo < 0 ? (lo < -dim ? dim : -lo) : 0;
      const int64_t crop_hi = hi < 0 ? (hi < -dim ? dim : -hi) : 0;
      if (crop_lo + crop_hi >= dim) {  // nothing of the input is left
        x = slice_axis(x, axes[i], 0, 0, 1, ctx.stream());
        pads[i] = lo > 0 ? out : 0;
        pads[i + k] = lo > 0 ? 0 : out;
      } else {
        x = slice_axis(x, axes[i], crop_lo, dim - crop_lo - crop_hi, 1, ctx.stream());
      }
    }
  }
  std::vector<int> pad_axes;
  mx::Shape low, high;
  for (size_t i = 0; i < k; ++i) {
    const int64_t lo = std::max<int64_t>(pads[i], 0), hi = std::max<int64_t>(pads[i + k], 0);
    if (lo == 0 && hi == 0) continue;
    if (lo > std::numeric_limits<int32_t>::max() || hi > std::numeric_limits<int32_t>::max())
      throw std::runtime_error("pad " + std::to_string(std::max(lo, hi)) +
                               " exceeds MLX's int32 dims");
    pad_axes.push_back(axes[i]);
    low.push_back(static_cast<int>(lo));
    high.push_back(static_cast<int>(hi));
  }
  std::vector<int64_t> out_dims(x.shape().begin(), x.shape().end());
  for (size_t i = 0; i < pad_axes.size(); ++i)
    out_dims[static_cast<size_t>(pad_axes[i])] += int64_t{low[i]} + high[i];
  checked_shape(out_dims, x.dtype());  // MLX would sum them in int32
  if (pad_axes.empty()) {
    ctx.bind_output(n, 0, x);
    return;
  }
  if (mode == "constant") {
    mx::array value = mx::array(0, x.dtype());
    if (attrs) {
      value = mx::astype(mx::array(n.attr_float("value", 0.0f)), x.dtype(), ctx.stream());
    } else if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
      value = ctx.input(n, 2);
      if (value.size() != 1) throw std::runtime_error("constant_value must hold one value");
      value = mx::reshape(value, {}, ctx.stream());
    }
    ctx.bind_output(n, 0, mx::pad(x, pad_axes, low, high, value, "constant", ctx.stream()));
  } else if (mode == "edge") {
    for (size_t i = 0; i < pad_axes.size(); ++i)
      if (x.shape(pad_axes[i]) == 0) throw std::runtime_error("edge padding of an empty dim");
    ctx.bind_output(n, 0,
                    mx::pad(x, pad_axes, low, high, mx::array(0, x.dtype()), "edge", ctx.stream()));
  } else if (mode == "wrap") {
    for (size_t i = 0; i < pad_axes.size(); ++i)
      x = wrap_axis(x, pad_axes[i], low[i], high[i], ctx.stream());
    ctx.bind_output(n, 0, x);
  } else {
    // An empty output has nothing to mirror: as ORT CPU, no check of the pads against the dims
    // (fuzz seed 94: a (0, 2) input padded by (1, 2) on its last axis gives (0, 5)).
    if (std::find(out_dims.begin(), out_dims.end(), 0) != out_dims.end()) {
      ctx.bind_output(n, 0, mx::zeros(mx::Shape(out_dims.begin(), out_dims.end()), x.dtype()));
      return;
    }
    for (size_t i = 0; i < pad_axes.size(); ++i)
      x = reflect_axis(x, pad_axes[i], low[i], high[i], ctx.stream());
    ctx.bind_output(n, 0, x);
  }
}

// ---------------------------------------------------------------- Tile

ClaimResult claim_tile(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2 && c.num_outputs() == 1, "expects 2 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  r = claim_data(c);
  if (!r.ok) return r;
  return claim_index_list(c, 1, "repeats");
}

void translate_tile(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  const auto reps = host_ints(ctx, n, 1, "repeats");
  if (reps.size() != x.ndim())
    throw std::runtime_error("repeats has " + std::to_string(reps.size()) + " values for rank " +
                             std::to_string(x.ndim()));
  std::vector<int> r;
  std::vector<int64_t> out;
  for (size_t i = 0; i < reps.size(); ++i) {
    if (reps[i] < 0) throw std::runtime_error("repeats must be non-negative");
    r.push_back(checked_int(reps[i], "repeats"));
    out.push_back(checked_mul(x.shape(static_cast<int>(i)), reps[i], "output dim"));
  }
  checked_shape(out, x.dtype());
  if (x.ndim() == 0) {
    ctx.bind_output(n, 0, x);
    return;
  }
  ctx.bind_output(n, 0, mx::tile(x, r, ctx.stream()));
}

// ---------------------------------------------------------------- Expand

ClaimResult claim_expand(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2 && c.num_outputs() == 1, "expects 2 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  r = claim_data(c);
  if (!r.ok) return r;
  return claim_index_list(c, 1, "shape");
}

// Bidirectional broadcast of the input shape with the requested one (dims of 1 on either side
// take the other's size).
void translate_expand(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  const auto want = host_ints(ctx, n, 1, "shape");
  const size_t rank = std::max(want.size(), static_cast<size_t>(x.ndim()));
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t a = i + x.ndim() >= rank ? x.shape(static_cast<int>(i + x.ndim() - rank)) : 1;
    const int64_t b = i + want.size() >= rank ? want[i + want.size() - rank] : 1;
    if (b < 0) throw std::runtime_error("Expand shape value " + std::to_string(b) + " < 0");
    if (a != b && a != 1 && b != 1)
      throw std::runtime_error("Expand cannot broadcast dim " + std::to_string(a) + " to " +
                               std::to_string(b));
    out[i] = a == 1 ? b : a;
  }
  ctx.bind_output(n, 0, mx::broadcast_to(x, checked_shape(out, x.dtype()), ctx.stream()));
}

}  // namespace

void register_slice_ops(OpRegistry& r) {
  // Slice 1-9 took starts/ends as attributes; not implemented.
  r.add("", "Slice", 10, 1 << 30, claim_slice, translate_slice);
  r.add("", "Split", 2, 1 << 30, claim_split, translate_split);
  // Pad 2-10 took pads as an attribute; not implemented.
  r.add("", "Pad", 11, 1 << 30, claim_pad, translate_pad);
  // Attribute forms of older opsets (translators pick the form from the node's opset).
  r.add("", "Slice", 1, 9, claim_slice_attrs, translate_slice);
  r.add("", "Pad", 2, 10, claim_pad_attrs, translate_pad);
  r.add("", "Tile", 6, 1 << 30, claim_tile, translate_tile);
  r.add("", "Expand", 8, 1 << 30, claim_expand, translate_expand);
}

}  // namespace ortmlx
