// Indexing family: Gather, GatherElements, GatherND, ScatterND, ScatterElements (and Scatter, its
// deprecated opset 9-10 name), OneHot, Trilu.
// Indices are runtime arrays (any values work in a compiled function; only OneHot's depth and
// Trilu's k are read on the host). Negative indices count from the end of their axis. An index
// out of range is an error, as in ORT: a runtime check (TranslationContext::require) raises it
// after the evaluation. MLX's gather and scatter kernels do not bounds-check, so the indices the
// kernels see are clamped into range as well: the evaluation that precedes the error never reads
// or writes outside a tensor.
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
constexpr const char* kIndexType = "int32 or int64 indices";

bool index_type(ElemType t) {
  return t == ElemType::kInt32 || t == ElemType::kInt64;
}

// Data input 0 of any MLX type, indices input `idx` int32/int64, output 0 of the data type.
ClaimResult claim_data_indices(const ClaimContext& c, size_t idx) {
  auto r = require_input_type(c, 0, mlx_supports, kAnyType);
  if (!r.ok) return r;
  r = require_input_type(c, idx, index_type, kIndexType);
  if (!r.ok) return r;
  const ElemType out = c.output_type(0);
  ORTMLX_REQUIRE(out == ElemType::kUndefined || out == c.input_type(0),
                 "output type differs from data type");
  return ClaimResult::yes();
}

// Indices as int64 with negative values moved into range: idx + dim where idx < 0.
// `dims` broadcasts against idx (a scalar, or one dim per trailing index component).
mx::array wrap_negative(const mx::array& idx, const mx::array& dims, mx::StreamOrDevice s) {
  const mx::array i = mx::astype(idx, mx::int64, s);
  return mx::where(mx::less(i, mx::array(0, mx::int64), s), mx::add(i, dims, s), i, s);
}

// "[-4,3]"; "[]" for an empty axis, where no index is valid.
std::string inclusive_range(int64_t dim) {
  return dim == 0 ? "[] (the axis is empty)"
                  : "[" + std::to_string(-dim) + "," + std::to_string(dim - 1) + "]";
}

// Indices checked against their dims and made safe for MLX's kernels. Every index must lie in
// [-dim, dim) (ORT's rule), else the run raises `message` naming the node. The indices returned
// are wrapped and clamped to [0, dim - 1] whatever the input, so the kernels that run before the
// error is raised stay inside the tensor. Callers make sure no index meets an empty axis (an
// empty buffer has no element to clamp to): see require_nonempty_axes.
mx::array checked_indices(TranslationContext& ctx, const NodeDesc& n, const mx::array& idx,
                          const mx::array& dims, const std::string& message) {
  const auto s = ctx.stream();
  const mx::array i = mx::astype(idx, mx::int64, s);
  ctx.require(
      n, mx::logical_and(mx::greater_equal(i, mx::negative(dims, s), s), mx::less(i, dims, s), s),
      message);
  const mx::array wrapped =
      mx::where(mx::less(i, mx::array(0, mx::int64), s), mx::add(i, dims, s), i, s);
  const mx::array zero(0, mx::int64);
  const mx::array last = mx::maximum(mx::subtract(dims, mx::array(1, mx::int64), s), zero, s);
  return mx::minimum(mx::maximum(wrapped, zero, s), last, s);
}

mx::array checked_indices(TranslationContext& ctx, const NodeDesc& n, const mx::array& idx,
                          int64_t dim, int axis) {
  return checked_indices(ctx, n, idx, mx::array(dim, mx::int64),
                         "indices element out of data bounds: every index must be within the "
                         "inclusive range " +
                             inclusive_range(dim) + " of data axis " + std::to_string(axis));
}

// An index into an empty axis is out of range whatever its value, and there is no element a
// kernel could read instead: known from shapes alone, so raised while the graph is built.
void require_nonempty_axis(const mx::array& idx, int64_t dim, int axis) {
  if (dim == 0 && idx.size() != 0)
    throw std::runtime_error("indices element out of data bounds: data axis " +
                             std::to_string(axis) + " is empty, so no index is valid");
}

// ---------------------------------------------------------------- Gather

ClaimResult claim_gather(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2 && c.num_outputs() == 1, "expects 2 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"axis"});
  if (!r.ok) return r;
  r = claim_data_indices(c, 1);
  if (!r.ok) return r;
  const int64_t rank = c.input_rank(0), axis = c.node().attr_int("axis", 0);
  ORTMLX_REQUIRE(rank != 0, "scalar data cannot be gathered");
  ORTMLX_REQUIRE(rank < 0 || (axis >= -rank && axis < rank), "axis is out of range");
  return ClaimResult::yes();
}

void translate_gather(TranslationContext& ctx, const NodeDesc& n) {
  const mx::array x = ctx.input(n, 0);
  const int axis = normalize_axis(n.attr_int("axis", 0), static_cast<int>(x.ndim()));
  const mx::array raw = ctx.input(n, 1);
  require_nonempty_axis(raw, x.shape(axis), axis);
  const mx::array idx = checked_indices(ctx, n, raw, x.shape(axis), axis);
  ctx.bind_output(n, 0, mx::take(x, idx, axis, ctx.stream()));
}

// ---------------------------------------------------------------- GatherElements

ClaimResult claim_gather_elements(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2 && c.num_outputs() == 1, "expects 2 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"axis"});
  if (!r.ok) return r;
  r = claim_data_indices(c, 1);
  if (!r.ok) return r;
  const int64_t rank = c.input_rank(0), axis = c.node().attr_int("axis", 0);
  ORTMLX_REQUIRE(rank != 0, "scalar data cannot be gathered");
  ORTMLX_REQUIRE(rank < 0 || (axis >= -rank && axis < rank), "axis is out of range");
  return ClaimResult::yes();
}

// Data sliced to the indices' extent on the other axes (ONNX lets indices be smaller there;
// MLX's take_along_axis wants them broadcast-compatible).
mx::array crop_to(const mx::array& x, const mx::array& idx, int axis, mx::StreamOrDevice s) {
  if (idx.ndim() != x.ndim()) throw std::runtime_error("indices rank differs from data rank");
  mx::Shape hi = x.shape();
  bool crop = false;
  for (int d = 0; d < static_cast<int>(x.ndim()); ++d) {
    if (d == axis) continue;
    if (idx.shape(d) > x.shape(d))
      throw std::runtime_error("indices dim " + std::to_string(d) + " exceeds the data dim");
    if (idx.shape(d) < x.shape(d)) {
      hi[static_cast<size_t>(d)] = idx.shape(d);
      crop = true;
    }
  }
  return crop ? mx::slice(x, mx::Shape(x.ndim(), 0), hi, s) : x;
}

void translate_gather_elements(TranslationContext& ctx, const NodeDesc& n) {
  const mx::array x = ctx.input(n, 0);
  const int axis = normalize_axis(n.attr_int("axis", 0), static_cast<int>(x.ndim()));
  const mx::array raw = ctx.input(n, 1);
  require_nonempty_axis(raw, x.shape(axis), axis);
  const mx::array idx = checked_indices(ctx, n, raw, x.shape(axis), axis);
  ctx.bind_output(
      n, 0, mx::take_along_axis(crop_to(x, idx, axis, ctx.stream()), idx, axis, ctx.stream()));
}

// ---------------------------------------------------------------- GatherND / ScatterND

// Row-major linear offsets of the index tuples in idx[..., k] over `dims` (k dims), after
// wrapping negatives per component; each component is checked against its dim. Result has idx's
// shape without the last axis.
mx::array linear_offsets(TranslationContext& ctx, const NodeDesc& n, const mx::array& idx,
                         const std::vector<int64_t>& dims) {
  const auto s = ctx.stream();
  const int k = static_cast<int>(dims.size());
  mx::Shape lead(idx.shape().begin(), idx.shape().end() - 1);
  if (k == 0) return mx::zeros(lead, mx::int64, s);
  std::string bounds;
  for (int j = 0; j < k; ++j) {
    if (dims[j] == 0 && idx.size() != 0)
      throw std::runtime_error("invalid index: component " + std::to_string(j) +
                               " of every index tuple addresses an empty data dim");
    bounds += (j ? ", " : "") + inclusive_range(dims[j]);
  }
  std::vector<int64_t> strides(dims.size(), 1);
  for (int j = k - 2; j >= 0; --j) strides[j] = strides[j + 1] * dims[j + 1];
  const mx::array wrapped = checked_indices(
      ctx, n, idx, host_int64_array(dims, {k}),
      "invalid index: index tuple components must be within the inclusive ranges " + bounds);
  return mx::sum(mx::multiply(wrapped, host_int64_array(strides, {k}), s), -1, false, s);
}

ClaimResult claim_gather_nd(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2 && c.num_outputs() == 1, "expects 2 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"batch_dims"});
  if (!r.ok) return r;
  // ONNX types GatherND indices as int64 only.
  r = claim_data_indices(c, 1);
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.input_type(1) == ElemType::kInt64, "indices must be int64");
  ORTMLX_REQUIRE(c.node().attr_int("batch_dims", 0) >= 0, "batch_dims must be >= 0");
  return ClaimResult::yes();
}

void translate_gather_nd(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0), idx = ctx.input(n, 1);
  const int64_t r = x.ndim(), q = idx.ndim(), b = n.attr_int("batch_dims", 0);
  if (q < 1 || r < 1 || b >= std::min(q, r))
    throw std::runtime_error("GatherND needs batch_dims < min(rank(data), rank(indices))");
  const int64_t k = idx.shape(-1);
  if (k > r - b) throw std::runtime_error("index tuples are longer than rank(data) - batch_dims");
  int64_t batch = 1;
  for (int64_t d = 0; d < b; ++d) {
    if (x.shape(d) != idx.shape(d))
      throw std::runtime_error("GatherND batch dims of data and indices differ");
    batch *= x.shape(d);
  }
  std::vector<int64_t> dims(x.shape().begin() + b, x.shape().begin() + b + k);
  const int64_t p = shape_product(x.shape(), b, b + k), rest = shape_product(x.shape(), b + k, r);
  const int64_t m = shape_product(idx.shape(), b, q - 1);
  mx::Shape out(idx.shape().begin(), idx.shape().end() - 1);
  out.insert(out.end(), x.shape().begin() + b + k, x.shape().end());
  if (rest == 0) {
    // Empty slices: ORT (1.30, measured) returns the empty result without looking at the
    // indices, whatever they hold.
    ctx.bind_output(n, 0, mx::zeros(out, x.dtype(), s));
    return;
  }
  mx::array lin = mx::reshape(linear_offsets(ctx, n, idx, dims), checked_shape({batch, m, 1}), s);
  lin = mx::broadcast_to(lin, checked_shape({batch, m, rest}), s);
  const mx::array x3 = mx::reshape(x, checked_shape({batch, p, rest}), s);
  ctx.bind_output(n, 0, mx::reshape(mx::take_along_axis(x3, lin, 1, s), out, s));
}

// reduction attribute of ScatterND (16+: add, mul; 18+: max, min) and ScatterElements.
ClaimResult claim_reduction(const ClaimContext& c) {
  const std::string red = c.node().attr_string("reduction", "none");
  ORTMLX_REQUIRE(red == "none" || red == "add" || red == "mul" || red == "max" || red == "min",
                 "reduction '" + red + "' is not implemented");
  if (red != "none") {
    ORTMLX_REQUIRE(type_in(c.input_type(0), {ElemType::kFloat, ElemType::kFloat16, ElemType::kInt32,
                                             ElemType::kInt64}),
                   "reduction " + red + " implemented for float32, float16, int32, int64");
    // ORT's CPU EP has no float16 kernel for any reduction; max and min are exact, but a
    // float16 sum or product of repeated targets rounds in an order nothing defines.
    ORTMLX_REQUIRE(c.input_type(0) != ElemType::kFloat16 || red == "max" || red == "min",
                   "reduction " + red +
                       " on float16 is not implemented (its rounding depends on "
                       "the order of repeated targets; ORT's CPU EP has no such kernel)");
    // A reducing scatter cannot move 64-bit values as word pairs (scatter_rows).
    ORTMLX_REQUIRE(c.input_type(0) != ElemType::kInt64 || !gpu_backend(),
                   "reduction " + red + " on int64 data: MLX's GPU scatter has no 64-bit types");
  }
  return ClaimResult::yes();
}

// Scatter of `upd` rows [M, 1, R] into `data2` [P, R] at row offsets `lin` [M]. A plain scatter
// of 8-byte elements moves them as pairs of 4-byte words (a bit-exact view): MLX's GPU scatter
// has no 64-bit element types, and the view costs nothing on any backend.
mx::array scatter_rows(const NodeDesc& n, const mx::array& data2, const mx::array& lin,
                       const mx::array& upd, mx::StreamOrDevice s) {
  const std::string red = n.attr_string("reduction", "none");
  const std::vector<int> axes{0};
  if (red == "add") return mx::scatter_add(data2, {lin}, upd, axes, s);
  if (red == "mul") return mx::scatter_prod(data2, {lin}, upd, axes, s);
  if (red == "max") return mx::scatter_max(data2, {lin}, upd, axes, s);
  if (red == "min") return mx::scatter_min(data2, {lin}, upd, axes, s);
  if (data2.itemsize() == 8) {
    const mx::array words =
        mx::scatter(mx::view(data2, mx::uint32, s), {lin}, mx::view(upd, mx::uint32, s), axes, s);
    return mx::view(words, data2.dtype(), s);
  }
  return mx::scatter(data2, {lin}, upd, axes, s);
}

ClaimResult claim_scatter_nd(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 3 && c.num_outputs() == 1, "expects 3 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"reduction"});
  if (!r.ok) return r;
  r = claim_data_indices(c, 1);
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.input_type(1) == ElemType::kInt64, "indices must be int64");
  ORTMLX_REQUIRE(c.input_type(2) == c.input_type(0), "updates type differs from data type");
  return claim_reduction(c);
}

void translate_scatter_nd(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0), idx = ctx.input(n, 1), upd = ctx.input(n, 2);
  const int64_t r = x.ndim(), q = idx.ndim();
  if (q < 1) throw std::runtime_error("indices must have rank >= 1");
  const int64_t k = idx.shape(-1);
  if (k > r) throw std::runtime_error("index tuples are longer than rank(data)");
  mx::Shape want(idx.shape().begin(), idx.shape().end() - 1);
  want.insert(want.end(), x.shape().begin() + k, x.shape().end());
  if (upd.shape() != want) throw std::runtime_error("updates shape does not match ScatterND");
  std::vector<int64_t> dims(x.shape().begin(), x.shape().begin() + k);
  const int64_t p = shape_product(x.shape(), 0, k), rest = shape_product(x.shape(), k, r);
  const int64_t m = shape_product(idx.shape(), 0, q - 1);
  if (m == 0) {
    ctx.bind_output(n, 0, x);
    return;
  }
  // Checked even when the data is empty: ORT rejects the indices whatever the rows hold.
  const mx::array lin = mx::reshape(linear_offsets(ctx, n, idx, dims), checked_shape({m}), s);
  if (x.size() == 0) {
    ctx.bind_output(n, 0, x);
    return;
  }
  const mx::array x2 = mx::reshape(x, checked_shape({p, rest}), s);
  const mx::array u3 = mx::reshape(upd, checked_shape({m, 1, rest}), s);
  ctx.bind_output(n, 0, mx::reshape(scatter_rows(n, x2, lin, u3, s), x.shape(), s));
}

// ---------------------------------------------------------------- ScatterElements

ClaimResult claim_scatter_elements(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 3 && c.num_outputs() == 1, "expects 3 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"axis", "reduction"});
  if (!r.ok) return r;
  r = claim_data_indices(c, 1);
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.input_type(2) == c.input_type(0), "updates type differs from data type");
  const int64_t rank = c.input_rank(0), axis = c.node().attr_int("axis", 0);
  ORTMLX_REQUIRE(rank != 0, "scalar data cannot be scattered into");
  ORTMLX_REQUIRE(rank < 0 || (axis >= -rank && axis < rank), "axis is out of range");
  return claim_reduction(c);
}

// Scatter (opsets 9-10): ScatterElements before it was renamed, with no reduction attribute.
ClaimResult claim_scatter(const ClaimContext& c) {
  ORTMLX_REQUIRE(!c.node().has_attr("reduction"), "Scatter has no reduction attribute");
  return claim_scatter_elements(c);
}

// Each update goes to the data element whose coordinates are its own, except along `axis`, where
// the index says. Built as flat offsets into the data, then one row scatter.
void translate_scatter_elements(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0), idx = ctx.input(n, 1), upd = ctx.input(n, 2);
  const int rank = static_cast<int>(x.ndim());
  const int axis = normalize_axis(n.attr_int("axis", 0), rank);
  if (idx.ndim() != x.ndim() || upd.shape() != idx.shape())
    throw std::runtime_error("indices and updates must share one shape of the data's rank");
  for (int d = 0; d < rank; ++d)
    if (d != axis && idx.shape(d) > x.shape(d))
      throw std::runtime_error("indices dim " + std::to_string(d) + " exceeds the data dim");
  // Indices on an empty axis are rejected; otherwise empty data means no indices either.
  require_nonempty_axis(idx, x.shape(axis), axis);
  if (idx.size() == 0 || x.size() == 0) {
    ctx.bind_output(n, 0, x);
    return;
  }
  const mx::array along = checked_indices(ctx, n, idx, x.shape(axis), axis);
  mx::array lin = mx::zeros(idx.shape(), mx::int64, s);
  int64_t stride = 1;
  for (int d = rank - 1; d >= 0; --d) {
    mx::array coord = along;
    if (d != axis) {
      mx::Shape shp(static_cast<size_t>(rank), 1);
      shp[static_cast<size_t>(d)] = idx.shape(d);
      coord = mx::reshape(mx::arange(0.0, double(idx.shape(d)), 1.0, mx::int64, s), shp, s);
    }
    lin = mx::add(lin, mx::multiply(coord, mx::array(stride, mx::int64), s), s);
    stride *= x.shape(d);
  }
  const int64_t m = idx.size();
  const mx::array flat = mx::reshape(x, checked_shape({static_cast<int64_t>(x.size()), 1}), s);
  const mx::array out = scatter_rows(n, flat, mx::reshape(lin, checked_shape({m}), s),
                                     mx::reshape(upd, checked_shape({m, 1, 1}), s), s);
  ctx.bind_output(n, 0, mx::reshape(out, x.shape(), s));
}

// ---------------------------------------------------------------- OneHot

ClaimResult claim_one_hot(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 3 && c.num_outputs() == 1, "expects 3 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"axis"});
  if (!r.ok) return r;
  auto numeric = [](ElemType t) {
    return type_in(t, {ElemType::kInt32, ElemType::kInt64, ElemType::kFloat});
  };
  r = require_input_type(c, 0, numeric, "indices int32, int64 or float32");
  if (!r.ok) return r;
  r = require_input_type(c, 1, numeric, "depth int32, int64 or float32");
  if (!r.ok) return r;
  r = require_input_type(
      c, 2,
      [](ElemType t) {
        return type_in(t,
                       {ElemType::kFloat, ElemType::kFloat16, ElemType::kInt32, ElemType::kInt64});
      },
      "values float32, float16, int32, int64");
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.input_rank(1) <= 1, "depth must be a scalar or a 1-element tensor");
  const int64_t rank = c.input_rank(0), axis = c.node().attr_int("axis", -1);
  ORTMLX_REQUIRE(rank < 0 || (axis >= -(rank + 1) && axis <= rank), "axis is out of range");
  return ClaimResult::yes();
}

// Positions equal to the (wrapped) index get values[1], all others values[0]; indices outside
// [-depth, depth) give a row of values[0], as ONNX says.
void translate_one_hot(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array idx = ctx.input(n, 0), values = ctx.input(n, 2);
  const int64_t depth = host_int(ctx, n, 1, "depth");
  if (depth <= 0) throw std::runtime_error("OneHot depth must be positive");
  if (values.size() != 2) throw std::runtime_error("OneHot values must hold 2 elements");
  const int out_rank = static_cast<int>(idx.ndim()) + 1;
  const int axis = normalize_axis(n.attr_int("axis", -1), out_rank);
  // Not clamped: an index outside [-depth, depth) must match no position (a row of off values).
  const mx::array wrapped =
      mx::expand_dims(wrap_negative(idx, mx::array(depth, mx::int64), s), axis, s);
  mx::Shape along(static_cast<size_t>(out_rank), 1);
  along[static_cast<size_t>(axis)] = checked_shape({depth})[0];
  const mx::array positions =
      mx::reshape(mx::arange(0.0, static_cast<double>(depth), 1.0, mx::int64, s), along, s);
  const mx::array flat = mx::reshape(values, {2}, s);
  ctx.bind_output(
      n, 0,
      mx::where(mx::equal(wrapped, positions, s), mx::take(flat, 1, s), mx::take(flat, 0, s), s));
}

// ---------------------------------------------------------------- Trilu

ClaimResult claim_trilu(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 1 && c.num_inputs() <= 2, "expects 1 or 2 inputs");
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  auto r = refuse_unknown_attrs(c, {"upper"});
  if (!r.ok) return r;
  r = require_input_type(c, 0, mlx_supports, kAnyType);
  if (!r.ok) return r;
  if (c.has_input(1)) {
    r = require_input_type(
        c, 1, [](ElemType t) { return t == ElemType::kInt64; }, "k must be int64");
    if (!r.ok) return r;
  }
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank < 0 || rank >= 2, "input rank must be >= 2");
  return ClaimResult::yes();
}

// Keeps x[..., i, j] where j - i >= k (upper) or j - i <= k (lower). The mask is built from k as
// an array, so a runtime k stays compilable (the output shape never depends on it).
void translate_trilu(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  if (x.ndim() < 2) throw std::runtime_error("Trilu input rank must be >= 2");
  mx::array k = mx::array(int64_t{0}, mx::int64);
  if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
    k = ctx.input(n, 1);
    if (k.size() != 1) throw std::runtime_error("Trilu k must hold one value");
    k = mx::reshape(k, {}, s);
  }
  const int rows = x.shape(-2), cols = x.shape(-1);
  const mx::array i = mx::reshape(mx::arange(0.0, double(rows), 1.0, mx::int64, s), {rows, 1}, s);
  const mx::array j = mx::reshape(mx::arange(0.0, double(cols), 1.0, mx::int64, s), {1, cols}, s);
  const mx::array diff = mx::subtract(j, i, s);
  const bool upper = n.attr_int("upper", 1) != 0;
  const mx::array keep = upper ? mx::greater_equal(diff, k, s) : mx::less_equal(diff, k, s);
  ctx.bind_output(n, 0, mx::where(keep, x, mx::zeros_like(x, s), s));
}

}  // namespace

void register_index_ops(OpRegistry& r) {
  r.add("", "Gather", 1, 1 << 30, claim_gather, translate_gather);
  r.add("", "GatherElements", 11, 1 << 30, claim_gather_elements, translate_gather_elements);
  r.add("", "GatherND", 11, 1 << 30, claim_gather_nd, translate_gather_nd);
  r.add("", "ScatterND", 11, 1 << 30, claim_scatter_nd, translate_scatter_nd);
  r.add("", "ScatterElements", 11, 1 << 30, claim_scatter_elements, translate_scatter_elements);
  r.add("", "Scatter", 9, 10, claim_scatter, translate_scatter_elements);
  r.add("", "OneHot", 9, 1 << 30, claim_one_hot, translate_one_hot);
  r.add("", "Trilu", 14, 1 << 30, claim_trilu, translate_trilu);
}

}  // namespace ortmlx
