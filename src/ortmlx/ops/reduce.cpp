// Reduce family: ReduceSum and ReduceMean. Axes come from the `axes` attribute in older opsets and
// from a constant int64 input later (ReduceSum from 13, ReduceMean from 18). Empty axes reduce
// everything unless noop_with_empty_axes=1 (then the op is the identity), as in ORT.
//
// Integer sums that leave the type's range: ORT's CPU kernel accumulates integers in double and
// converts the total back saturating (run with ORT 1.30: three int32 2^30 give INT32_MAX, not the
// wrapped -2^30; [INT32_MAX, 1, -1] gives INT32_MAX, so it saturates the total, not each step).
// MLX's sum wraps. We sum exactly and saturate the total: int32 through an int64 sum, int64
// through 32-bit halves. This equals ORT wherever its double sum is exact (every partial sum
// within 2^53, which covers all int32 inputs up to 2^22 reduced elements); beyond that ORT rounds
// (int64 [2^53 + 1, 1] gives 2^53 there) and our exact total is the right one.
#include <cstdint>
#include <limits>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/op_args.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

enum class Kind { kSum, kMean };

bool reduce_type_ok(Kind kind, ElemType t) {
  if (is_float_type(t)) return true;
  // int32/int64 only: their sums saturate like ORT's (see the top); smaller integer types are
  // not implemented.
  return kind == Kind::kSum && (t == ElemType::kInt32 || t == ElemType::kInt64);
}

ClaimFn claim_reduce(Kind kind, int input_axes_opset) {
  return [kind, input_axes_opset](const ClaimContext& c) -> ClaimResult {
    const bool axes_input = c.node().since_version >= input_axes_opset;
    ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
    std::vector<int64_t> axes;
    if (axes_input) {
      ORTMLX_REQUIRE(c.num_inputs() == 1 || c.num_inputs() == 2, "expects 1 or 2 inputs");
      auto r = refuse_unknown_attrs(c, {"keepdims", "noop_with_empty_axes"});
      if (!r.ok) return r;
      if (c.has_input(1)) {
        std::string why;
        auto a = claim_const_ints(c, 1, "axes", &why);
        if (!a) return ClaimResult::no(why);
        axes = *a;
      }
    } else {
      ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input");
      auto r = refuse_unknown_attrs(c, {"axes", "keepdims", "noop_with_empty_axes"});
      if (!r.ok) return r;
      if (c.node().has_attr("axes")) {
        auto a = c.node().attr_ints("axes");
        ORTMLX_REQUIRE(a.has_value(), "axes must be a list of ints");
        axes = *a;
      }
    }
    for (const char* flag : {"keepdims", "noop_with_empty_axes"}) {
      const int64_t v = c.node().attr_int(flag, 0);
      ORTMLX_REQUIRE(v == 0 || v == 1, std::string(flag) + " must be 0 or 1");
    }
    auto r = require_input_type(
        c, 0, [kind](ElemType t) { return reduce_type_ok(kind, t); },
        kind == Kind::kSum ? "float16/bfloat16/float32/int32/int64 only"
                           : "float16/bfloat16/float32 only");
    if (!r.ok) return r;
    // Input 1 (axes, int64) differs from the data type by design: compare data and output only.
    const ElemType out = c.output_type(0);
    ORTMLX_REQUIRE(out == ElemType::kUndefined || out == c.input_type(0),
                   "output type differs from input type");
    const TensorInfo* info = c.input(0);
    if (info && info->has_shape) {
      std::string why;
      if (!normalize_axes(axes, info->rank(), &why)) return ClaimResult::no(why);
    }
    return ClaimResult::yes();
  };
}

// Exact int32 sum, saturated to the int32 range.
mx::array sum_int32_saturating(const mx::array& x, const std::vector<int>& axes, bool keepdims,
                               mx::StreamOrDevice s) {
  const mx::array total = mx::sum(mx::astype(x, mx::int64, s), axes, keepdims, s);
  const mx::array lo(static_cast<int64_t>(std::numeric_limits<int32_t>::min()));
  const mx::array hi(static_cast<int64_t>(std::numeric_limits<int32_t>::max()));
  return mx::astype(mx::clip(total, lo, hi, s), mx::int32, s);
}

// Exact int64 sum, saturated to the int64 range: x = hi * 2^32 + lo with lo in [0, 2^32); both
// halves sum exactly in int64 (fewer than 2^31 elements), and the total hi * 2^32 + lo fits iff
// the carried high sum fits 32 bits.
mx::array sum_int64_saturating(const mx::array& x, const std::vector<int>& axes, bool keepdims,
                               mx::StreamOrDevice s) {
  const mx::array mask32(int64_t{0xffffffff});
  const mx::array shift32(int64_t{32});
  const mx::array lo_sum = mx::sum(mx::bitwise_and(x, mask32, s), axes, keepdims, s);
  const mx::array hi_sum = mx::sum(mx::right_shift(x, shift32, s), axes, keepdims, s);
  const mx::array high = mx::add(hi_sum, mx::right_shift(lo_sum, shift32, s), s);
  const mx::array low = mx::bitwise_and(lo_sum, mask32, s);
  // |high| < 2^31 here, so high * 2^32 + low cannot overflow where it is selected.
  const mx::array fits_high = mx::clip(high, mx::array(int64_t{-(int64_t{1} << 31)}),
                                       mx::array(int64_t{(int64_t{1} << 31) - 1}), s);
  const mx::array exact =
      mx::add(mx::multiply(fits_high, mx::array(int64_t{1} << 32), s), low, s);
  const mx::array max64(std::numeric_limits<int64_t>::max());
  const mx::array min64(std::numeric_limits<int64_t>::min());
  return mx::where(mx::greater(high, fits_high, s), max64,
                   mx::where(mx::less(high, fits_high, s), min64, exact, s), s);
}

TranslateFn translate_reduce(Kind kind, int input_axes_opset) {
  return [kind, input_axes_opset](TranslationContext& ctx, const NodeDesc& n) {
    const auto s = ctx.stream();
    mx::array x = ctx.input(n, 0);
    std::vector<int64_t> raw;
    if (n.since_version >= input_axes_opset) {
      if (n.inputs.size() > 1 && !n.inputs[1].empty())
        raw = translate_const_ints(ctx, n, 1, "axes");
    } else if (auto a = n.attr_ints("axes")) {
      raw = *a;
    }
    if (raw.empty() && n.attr_int("noop_with_empty_axes", 0) == 1) {
      ctx.bind_output(n, 0, x);
      return;
    }
    std::vector<int> axes;
    if (raw.empty()) {
      for (int i = 0; i < static_cast<int>(x.ndim()); ++i) axes.push_back(i);
    } else {
      axes = normalize_axes_or_throw(raw, static_cast<int64_t>(x.ndim()));
    }
    const bool keepdims = n.attr_int("keepdims", 1) == 1;
    const mx::Dtype dt = x.dtype();
    // Half types accumulate in float32 and round once at the end.
    const bool widen = dt == mx::float16 || dt == mx::bfloat16;
    mx::array xin = widen ? mx::astype(x, mx::float32, s) : x;
    // ORT's CPU kernel yields 0 for a mean over zero elements (ONNX leaves it undefined; MLX
    // would give NaN): the sum of nothing is that 0.
    int64_t count = 1;
    for (int a : axes) count *= x.shape(a);
    if (kind == Kind::kSum && dt == mx::int32) {
      ctx.bind_output(n, 0, sum_int32_saturating(x, axes, keepdims, s));
      return;
    }
    if (kind == Kind::kSum && dt == mx::int64) {
      ctx.bind_output(n, 0, sum_int64_saturating(x, axes, keepdims, s));
      return;
    }
    mx::array y = kind == Kind::kSum || count == 0 ? mx::sum(xin, axes, keepdims, s)
                                                   : mx::mean(xin, axes, keepdims, s);
    if (y.dtype() != dt) y = mx::astype(y, dt, s);
    ctx.bind_output(n, 0, y);
  };
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  // One entry per op; claim and translator pick the axes form from the node's opset.
  r.add("", "ReduceSum", 1, 1 << 30, claim_reduce(Kind::kSum, 13),
        translate_reduce(Kind::kSum, 13));
  r.add("", "ReduceMean", 1, 1 << 30, claim_reduce(Kind::kMean, 18),
        translate_reduce(Kind::kMean, 18));
}

}  // namespace ortmlx
