// Index-producing and scan reductions: ArgMax, ArgMin, TopK, CumSum.
//
// Ties: ORT's CPU kernels (measured, ORT 1.30) give the first index of equal values for ArgMax/
// ArgMin (the last with select_last_index=1) and order TopK's equal values by ascending index.
// ArgMax/ArgMin here use MLX's argmax/argmin (first index); the last index is the first one of the
// reversed axis. TopK sorts with MLX's argsort, stable on the CPU backend (std::stable_sort), with
// a key whose ascending order is the wanted order: x for the smallest, -x (floats) or ~x
// (integers; no overflow) for the largest; equal keys keep ascending indices.
//
// NaN (ORT 1.30 CPU, measured over random data): ArgMax/ArgMin of a rank-1 input without
// select_last_index give the first NaN's index when there is one ([1, NaN, 3] -> 1); every other
// form runs a comparison from the first element that NaN never wins ([1, NaN, 3] -> 2, [1, 3, NaN]
// -> 1, [NaN, 1, 2] -> 0): the first (last with select_last_index) index of the extreme of the
// non-NaN values, or 0 when the first element is NaN. translate_arg builds exactly that rule, so
// it does not depend on how MLX's argmax treats NaN. TopK places NaN where its comparisons happen
// to leave it; on the EP (MLX CPU, measured) TopK sorts NaN last for both largest and smallest, so
// with NaN in the data TopK can differ from ORT CPU (documented, not tested).
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <mlx/transforms.h>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/host_values.h"
#include "ortmlx/ops/op_args.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

// ---------------------------------------------------------------- ArgMax / ArgMin

ClaimFn claim_arg(bool) {
  return [](const ClaimContext& c) -> ClaimResult {
    ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
    auto r = refuse_unknown_attrs(c, {"axis", "keepdims", "select_last_index"});
    if (!r.ok) return r;
    r = require_input_type(
        c, 0,
        [](ElemType t) {
          return type_in(t, {ElemType::kFloat, ElemType::kFloat16, ElemType::kInt8,
                             ElemType::kUInt8, ElemType::kInt32, ElemType::kInt64});
        },
        "float32/float16/int8/uint8/int32/int64 only");
    if (!r.ok) return r;
    ORTMLX_REQUIRE(c.output_type(0) == ElemType::kUndefined || c.output_type(0) == ElemType::kInt64,
                   "output must be int64");
    for (const char* flag : {"keepdims", "select_last_index"}) {
      const int64_t v = c.node().attr_int(flag, flag[0] == 'k' ? 1 : 0);
      ORTMLX_REQUIRE(v == 0 || v == 1, std::string(flag) + " must be 0 or 1");
    }
    const int64_t rank = c.input_rank(0);
    ORTMLX_REQUIRE(rank != 0, "scalar input has no axis");
    if (rank > 0) {
      const int64_t axis = c.node().attr_int("axis", 0);
      ORTMLX_REQUIRE(axis >= -rank && axis < rank, "axis is out of range");
      const TensorInfo* info = c.input(0);
      const int64_t a = axis < 0 ? axis + rank : axis;
      // ORT fails on an empty reduced axis; leave it to ORT for the same error.
      ORTMLX_REQUIRE(!(info && info->has_shape && info->shape[a] == 0), "reduced axis is empty");
    }
    return ClaimResult::yes();
  };
}

// First index of the maximum (minimum) along `axis`, or the last one with `last`: the first one
// of the reversed axis. MLX's argmax/argmin give the first index of equal values. As int64.
mx::array extreme_index(const mx::array& x, int axis, bool keepdims, bool is_max, bool last,
                        mx::StreamOrDevice s) {
  const int len = x.shape(axis);
  mx::array xin = x;
  if (last) xin = mx::take(x, mx::arange(len - 1, -1, -1, mx::int32, s), axis, s);
  mx::array idx = is_max ? mx::argmax(xin, axis, keepdims, s) : mx::argmin(xin, axis, keepdims, s);
  idx = mx::astype(idx, mx::int64, s);
  if (last) idx = mx::subtract(mx::array(static_cast<int64_t>(len - 1)), idx, s);
  return idx;
}

// ArgMax/ArgMin with ORT's NaN rule (see the top of the file).
mx::array arg_extreme(const mx::array& x, int axis, bool keepdims, bool is_max, bool last,
                      mx::StreamOrDevice s) {
  if (!mx::issubdtype(x.dtype(), mx::floating))
    return extreme_index(x, axis, keepdims, is_max, last, s);
  const mx::array nan = mx::isnan(x, s);
  const float fill =
      is_max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  const mx::array xn = mx::where(nan, mx::array(fill, x.dtype()), x, s);
  const mx::array extreme =
      is_max ? mx::max(xn, axis, /*keepdims=*/true, s) : mx::min(xn, axis, /*keepdims=*/true, s);
  // Positions holding the extreme of the non-NaN values (none when all are NaN).
  const mx::array hit = mx::astype(
      mx::logical_and(mx::equal(xn, extreme, s), mx::logical_not(nan, s), s), mx::uint8, s);
  const mx::array idx = extreme_index(hit, axis, keepdims, /*is_max=*/true, last, s);
  const mx::array nan_u8 = mx::astype(nan, mx::uint8, s);
  if (x.ndim() == 1 && !last)  // the first NaN wins
    return mx::where(mx::any(nan, axis, keepdims, s),
                     extreme_index(nan_u8, axis, keepdims, /*is_max=*/true, false, s), idx, s);
  // A NaN first element is never replaced.
  const mx::array first_nan = mx::take(nan, mx::array(0, mx::int32), axis, s);
  const mx::array first = keepdims ? mx::expand_dims(first_nan, axis, s) : first_nan;
  return mx::where(first, mx::array(int64_t{0}, mx::int64), idx, s);
}

TranslateFn translate_arg(bool is_max) {
  return [is_max](TranslationContext& ctx, const NodeDesc& n) {
    const auto s = ctx.stream();
    const mx::array x = ctx.input(n, 0);
    const int axis = normalize_axis(n.attr_int("axis", 0), static_cast<int>(x.ndim()));
    const bool keepdims = n.attr_int("keepdims", 1) == 1;
    const bool last = n.attr_int("select_last_index", 0) == 1;
    const int len = x.shape(axis);
    if (len == 0) throw std::runtime_error("ArgMax/ArgMin over an empty axis");
    if (x.size() == 0) {
      mx::Shape out = x.shape();
      if (keepdims)
        out[axis] = 1;
      else
        out.erase(out.begin() + axis);
      ctx.bind_output(n, 0, mx::zeros(out, mx::int64, s));
      return;
    }
    ctx.bind_output(n, 0, arg_extreme(x, axis, keepdims, is_max, last, s));
  };
}

// ---------------------------------------------------------------- CumSum

// The axis input: a constant int32/int64 scalar or one-element 1-D tensor.
std::optional<int64_t> const_axis(const ConstTensor* t) {
  if (!t || t->shape.size() > 1 || t->numel() != 1) return std::nullopt;
  if (t->dtype != ElemType::kInt32 && t->dtype != ElemType::kInt64) return std::nullopt;
  auto v = t->as_int64();
  if (!v || v->size() != 1) return std::nullopt;
  return (*v)[0];
}

ClaimResult claim_cumsum(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2 && c.num_outputs() == 1, "expects 2 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"exclusive", "reverse"});
  if (!r.ok) return r;
  const bool halves = c.node().since_version >= 14;
  r = require_input_type(
      c, 0,
      [halves](ElemType t) {
        return type_in(t, {ElemType::kFloat, ElemType::kInt32, ElemType::kInt64}) ||
               (halves && t == ElemType::kFloat16);
      },
      "float32/int32/int64 only, float16 from opset 14");
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.output_type(0) == ElemType::kUndefined || c.output_type(0) == c.input_type(0),
                 "output type differs from input type");
  for (const char* flag : {"exclusive", "reverse"}) {
    const int64_t v = c.node().attr_int(flag, 0);
    ORTMLX_REQUIRE(v == 0 || v == 1, std::string(flag) + " must be 0 or 1");
  }
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank != 0, "scalar input has no axis");
  ORTMLX_REQUIRE(c.input_type(1) == ElemType::kInt32 || c.input_type(1) == ElemType::kInt64,
                 "axis must be int32 or int64");
  ORTMLX_REQUIRE(c.input_rank(1) <= 1, "axis must be a scalar or a [1] tensor");
  if (c.input_is_constant(1)) {
    const auto axis = const_axis(c.constant_input(1));
    ORTMLX_REQUIRE(axis.has_value(), "axis must be a constant int32/int64 scalar or [1] tensor");
    if (rank > 0) ORTMLX_REQUIRE(*axis >= -rank && *axis < rank, "axis is out of range");
  }
  // A runtime axis is read on the host when translated (host_values.h: that plan runs eagerly).
  return ClaimResult::yes();
}

void translate_cumsum(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  // An empty input is its own result, whatever the axis: ORT returns it before reading the axis
  // (a runtime axis out of range raised here where ORT returns the empty tensor).
  if (x.size() == 0) {
    ctx.bind_output(n, 0, x);
    return;
  }
  const int axis = normalize_axis(host_int(ctx, n, 1, "axis"), static_cast<int>(x.ndim()));
  const bool reverse = n.attr_int("reverse", 0) == 1;
  const bool inclusive = n.attr_int("exclusive", 0) == 0;
  // Same-type accumulation: integers wrap like ORT's CPU kernel.
  ctx.bind_output(n, 0, mx::cumsum(x, axis, reverse, inclusive, x.dtype(), s));
}

// ---------------------------------------------------------------- TopK

bool topk_type_ok(ElemType t, int opset) {
  if (type_in(t, {ElemType::kFloat, ElemType::kFloat16})) return true;
  return opset >= 11 && type_in(t, {ElemType::kInt8, ElemType::kUInt8, ElemType::kInt16,
                                    ElemType::kInt32, ElemType::kInt64});
}

std::optional<int64_t> const_k(const ConstTensor* t) {
  if (!t || t->dtype != ElemType::kInt64 || t->numel() != 1 || t->shape.size() > 1)
    return std::nullopt;
  return (*t->as_int64())[0];
}

ClaimResult claim_topk(const ClaimContext& c) {
  const int opset = c.node().since_version;
  ORTMLX_REQUIRE(c.num_inputs() == 2 && c.num_outputs() == 2, "expects 2 inputs and 2 outputs");
  auto r = refuse_unknown_attrs(c, {"axis", "largest", "sorted"});
  if (!r.ok) return r;
  r = require_input_type(
      c, 0, [opset](ElemType t) { return topk_type_ok(t, opset); },
      "float32/float16, from opset 11 also int8/uint8/int16/int32/int64");
  if (!r.ok) return r;
  r = require_input_type(
      c, 1, [](ElemType t) { return t == ElemType::kInt64; }, "K must be int64");
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.output_type(0) == ElemType::kUndefined || c.output_type(0) == c.input_type(0),
                 "values type differs from input type");
  ORTMLX_REQUIRE(c.output_type(1) == ElemType::kUndefined || c.output_type(1) == ElemType::kInt64,
                 "indices must be int64");
  const int64_t largest = c.node().attr_int("largest", 1);
  ORTMLX_REQUIRE(largest == 0 || largest == 1, "largest must be 0 or 1");
  // Unsorted output order is whatever ORT's selection leaves; only the sorted form is exact.
  ORTMLX_REQUIRE(c.node().attr_int("sorted", 1) == 1, "sorted=0 is not implemented");
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank != 0, "scalar input has no axis");
  const int64_t axis = c.node().attr_int("axis", -1);
  if (rank > 0) ORTMLX_REQUIRE(axis >= -rank && axis < rank, "axis is out of range");
  if (c.input_is_constant(1)) {
    const auto k = const_k(c.constant_input(1));
    ORTMLX_REQUIRE(k.has_value(), "K must be a one-element int64 tensor");
    ORTMLX_REQUIRE(*k >= 0, "K must be non-negative");
    const TensorInfo* info = c.input(0);
    if (info && info->has_shape && rank > 0) {
      const int64_t dim = info->shape[axis < 0 ? axis + rank : axis];
      ORTMLX_REQUIRE(dim < 0 || *k <= dim, "K exceeds the axis length");
    }
  }
  return ClaimResult::yes();
}

// TopK opsets 1-9: K is the required `k` attribute; largest and sorted results only (the
// attributes came in opset 11), which translate_topk gives by default.
ClaimResult claim_topk_attr(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 2, "expects 1 input and 2 outputs");
  auto r = refuse_unknown_attrs(c, {"axis", "k"});
  if (!r.ok) return r;
  r = require_input_type(
      c, 0, [](ElemType t) { return topk_type_ok(t, 1); }, "float32/float16 only");
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.output_type(0) == ElemType::kUndefined || c.output_type(0) == c.input_type(0),
                 "values type differs from input type");
  ORTMLX_REQUIRE(c.output_type(1) == ElemType::kUndefined || c.output_type(1) == ElemType::kInt64,
                 "indices must be int64");
  ORTMLX_REQUIRE(c.node().has_attr("k"), "k is required");
  const int64_t k = c.node().attr_int("k", -1);
  ORTMLX_REQUIRE(k >= 0, "k must be non-negative");
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank != 0, "scalar input has no axis");
  const int64_t axis = c.node().attr_int("axis", -1);
  if (rank > 0) {
    ORTMLX_REQUIRE(axis >= -rank && axis < rank, "axis is out of range");
    const TensorInfo* info = c.input(0);
    if (info && info->has_shape) {
      const int64_t dim = info->shape[axis < 0 ? axis + rank : axis];
      ORTMLX_REQUIRE(dim < 0 || k <= dim, "k exceeds the axis length");
    }
  }
  return ClaimResult::yes();
}

void translate_topk(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const int axis = normalize_axis(n.attr_int("axis", -1), static_cast<int>(x.ndim()));
  int64_t k = 0;
  if (n.since_version < 10) {
    k = n.attr_int("k", -1);
  } else if (auto ck = const_k(ctx.constant_input(n, 1))) {
    k = *ck;
  } else {
    // A runtime K sets the output shape: it is read on the host, so this plan runs eagerly.
    if (ctx.compiling()) throw NotCompilable("TopK with a runtime K reads K on the host");
    mx::array kt = ctx.input(n, 1);
    if (kt.size() != 1) throw std::runtime_error("K must have one element");
    mx::eval(kt);
    k = mx::reshape(kt, {}, s).item<int64_t>();
  }
  const int len = x.shape(axis);
  if (k < 0 || k > len)
    throw std::runtime_error("K " + std::to_string(k) + " is out of range for axis length " +
                             std::to_string(len));
  mx::Shape out = x.shape();
  out[axis] = static_cast<int>(k);
  if (k == 0 || x.size() == 0) {
    ctx.bind_output(n, 0, mx::zeros(out, x.dtype(), s));
    ctx.bind_output(n, 1, mx::zeros(out, mx::int64, s));
    return;
  }
  const bool largest = n.attr_int("largest", 1) == 1;
  mx::array key = x;
  if (largest) {
    key = mx::issubdtype(x.dtype(), mx::integer) ? mx::bitwise_invert(x, s) : mx::negative(x, s);
  }
  mx::array order = mx::argsort(key, axis, s);
  mx::Shape start(x.ndim(), 0);
  order = mx::slice(order, start, out, s);
  ctx.bind_output(n, 0, mx::take_along_axis(x, order, axis, s));
  ctx.bind_output(n, 1, mx::astype(order, mx::int64, s));
}

}  // namespace

void register_arg_reduce_ops(OpRegistry& r) {
  r.add("", "ArgMax", 1, 1 << 30, claim_arg(true), translate_arg(true));
  r.add("", "ArgMin", 1, 1 << 30, claim_arg(false), translate_arg(false));
  r.add("", "CumSum", 11, 1 << 30, claim_cumsum, translate_cumsum);
  r.add("", "TopK", 10, 1 << 30, claim_topk, translate_topk);
  r.add("", "TopK", 1, 9, claim_topk_attr, translate_topk);
}

}  // namespace ortmlx
