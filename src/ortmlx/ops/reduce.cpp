// Reduce family: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
// ReduceLogSum, ReduceLogSumExp, ReduceSumSquare. Axes come from the `axes` attribute in older
// opsets and from an int64 input later (ReduceSum from 13, the others from 18), constant or
// computed at run time. Empty axes
// reduce everything unless noop_with_empty_axes=1 (then the op is the identity), as in ORT.
//
// Reductions over zero elements give what ORT's CPU kernel gives (measured, ORT 1.30): 0 for
// Sum/Mean/L1/L2/SumSquare, 1 for Prod, the type's lowest value for Max (-inf for floats), its
// highest for Min, -inf for LogSum/LogSumExp. Half types accumulate in float32 and round once
// (ORT's ReduceL2 of float16 300 x 100 is 3000, not inf).
//
// Integer types beyond ReduceSum: Max/Min (exact; bool from opset 20 as any/all), L1 and
// SumSquare of int32 (exact int64 sums, saturated like ORT's double accumulation). ORT computes
// integer Prod/L2/LogSum/LogSumExp in double and truncates/saturates the result; those are not
// claimed.
//
// NaN (ORT 1.30 CPU, measured): ReduceMax/ReduceMin keep a NaN only when it is the first element
// of the reduced run ([1, NaN, 3] -> 3, [NaN, 1, 2] -> NaN); MLX propagates NaN wherever it is, so
// the EP can differ from ORT there. Every other reduction propagates NaN in both.
//
// Integer sums that leave the type's range: ORT's CPU kernel accumulates integers in double and
// converts the total back saturating (run with ORT 1.30: three int32 2^30 give INT32_MAX, not the
// wrapped -2^30; [INT32_MAX, 1, -1] gives INT32_MAX, so it saturates the total, not each step).
// MLX's sum wraps. We sum exactly and saturate the total: int32 through an int64 sum, int64
// through 32-bit halves. This equals ORT wherever its double sum is exact (every partial sum
// within 2^53, which covers all int32 inputs up to 2^22 reduced elements); beyond that ORT rounds
// (int64 [2^53 + 1, 1] gives 2^53 there) and our exact total is the right one.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/host_values.h"
#include "ortmlx/ops/op_args.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

enum class Kind { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

bool reduce_type_ok(Kind kind, ElemType t, int opset) {
  // bfloat16: ORT's CPU EP has no bfloat16 reductions; they are tested against its float32
  // result rounded to bfloat16 (the same float32 accumulation, rounded once).
  if (is_float_type(t)) return true;
  switch (kind) {
    case Kind::kSum:
      // int32/int64 only: their sums saturate like ORT's (see the top).
      return t == ElemType::kInt32 || t == ElemType::kInt64;
    case Kind::kMax:
    case Kind::kMin:
      return type_in(t, {ElemType::kInt8, ElemType::kUInt8, ElemType::kInt32, ElemType::kInt64}) ||
             (t == ElemType::kBool && opset >= 20);
    case Kind::kL1:
    case Kind::kSumSquare:
      return t == ElemType::kInt32;
    default:
      return false;
  }
}

const char* reduce_types_text(Kind kind) {
  switch (kind) {
    case Kind::kSum:
      return "float16/bfloat16/float32/int32/int64 only";
    case Kind::kMax:
    case Kind::kMin:
      return "float16/bfloat16/float32/int8/uint8/int32/int64 only, bool from opset 20";
    case Kind::kL1:
    case Kind::kSumSquare:
      return "float16/bfloat16/float32/int32 only";
    default:
      return "float16/bfloat16/float32 only";
  }
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
      if (c.has_input(1) && !c.input_is_constant(1)) {
        // Axes computed at run time: read on the host when translated (host_values.h; that
        // plan runs eagerly) and checked against the live rank there.
        auto ar = claim_index_list(c, 1, "axes");
        if (!ar.ok) return ar;
      } else if (c.has_input(1)) {
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
    const int opset = c.node().since_version;
    auto r = require_input_type(
        c, 0, [kind, opset](ElemType t) { return reduce_type_ok(kind, t, opset); },
        reduce_types_text(kind));
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
  const mx::array exact = mx::add(mx::multiply(fits_high, mx::array(int64_t{1} << 32), s), low, s);
  const mx::array max64(std::numeric_limits<int64_t>::max());
  const mx::array min64(std::numeric_limits<int64_t>::min());
  return mx::where(mx::greater(high, fits_high, s), max64,
                   mx::where(mx::less(high, fits_high, s), min64, exact, s), s);
}

// Clip an exact int64 total to the int32 range.
mx::array saturate_to_int32(const mx::array& total, mx::StreamOrDevice s) {
  const mx::array lo(static_cast<int64_t>(std::numeric_limits<int32_t>::min()));
  const mx::array hi(static_cast<int64_t>(std::numeric_limits<int32_t>::max()));
  return mx::astype(mx::clip(total, lo, hi, s), mx::int32, s);
}

// The value a reduction over zero elements yields (ORT CPU, see the top), in dtype `dt`.
mx::array empty_reduction_value(Kind kind, mx::Dtype dt) {
  const double inf = std::numeric_limits<double>::infinity();
  const bool is_int = mx::issubdtype(dt, mx::integer);
  switch (kind) {
    case Kind::kMax:
    case Kind::kMin: {
      const bool lowest = kind == Kind::kMax;
      if (!is_int) return mx::astype(mx::array(lowest ? -inf : inf), dt);
      int64_t v = 0;
      if (dt == mx::int8) v = lowest ? INT8_MIN : INT8_MAX;
      if (dt == mx::uint8) v = lowest ? 0 : UINT8_MAX;
      if (dt == mx::int32) v = lowest ? INT32_MIN : INT32_MAX;
      if (dt == mx::int64)
        v = lowest ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
      return mx::astype(mx::array(v), dt);
    }
    case Kind::kProd:
      return mx::astype(mx::array(1.0), dt);
    case Kind::kLogSum:
    case Kind::kLogSumExp:
      return mx::astype(mx::array(-inf), dt);
    default:
      return mx::astype(mx::array(0.0), dt);
  }
}

// log(sum(exp(x))) with the maximum taken out for range; an infinite maximum is not taken out
// (all -inf gives -inf, any +inf gives +inf, as ORT).
mx::array logsumexp_stable(const mx::array& x, const std::vector<int>& axes, bool keepdims,
                           mx::StreamOrDevice s) {
  const mx::array m = mx::max(x, axes, /*keepdims=*/true, s);
  const mx::array shift = mx::where(mx::isinf(m, s), mx::zeros_like(m, s), m, s);
  mx::array y = mx::log(mx::sum(mx::exp(mx::subtract(x, shift, s), s), axes, keepdims, s), s);
  return mx::add(y, keepdims ? shift : mx::squeeze(shift, axes, s), s);
}

TranslateFn translate_reduce(Kind kind, int input_axes_opset) {
  return [kind, input_axes_opset](TranslationContext& ctx, const NodeDesc& n) {
    const auto s = ctx.stream();
    mx::array x = ctx.input(n, 0);
    std::vector<int64_t> raw;
    if (n.since_version >= input_axes_opset) {
      if (n.inputs.size() > 1 && !n.inputs[1].empty()) raw = host_ints(ctx, n, 1, "axes");
    } else if (auto a = n.attr_ints("axes")) {
      raw = *a;
    }
    // noop_with_empty_axes=1 with no axes reduces each element alone; ORT (1.30, measured) then
    // still applies the per-element part: |x| for L1/L2, x^2 for SumSquare, log x for LogSum.
    const bool noop = raw.empty() && n.attr_int("noop_with_empty_axes", 0) == 1;
    if (noop && kind != Kind::kL1 && kind != Kind::kL2 && kind != Kind::kSumSquare &&
        kind != Kind::kLogSum) {
      ctx.bind_output(n, 0, x);
      return;
    }
    std::vector<int> axes;
    if (noop) {
      // Reductions over no axes: only the per-element part remains.
    } else if (raw.empty() || x.ndim() == 0) {
      // A scalar reduces as itself whatever runtime axes come with it (ORT 1.30, measured: no
      // range check there; constant ones fail ONNX's shape inference first).
      for (int i = 0; i < static_cast<int>(x.ndim()); ++i) axes.push_back(i);
    } else {
      axes = normalize_axes_or_throw(raw, static_cast<int64_t>(x.ndim()));
    }
    const bool keepdims = n.attr_int("keepdims", 1) == 1;
    const mx::Dtype dt = x.dtype();
    // ORT's CPU kernel yields 0 for a mean over zero elements (ONNX leaves it undefined; MLX
    // would give NaN): the sum of nothing is that 0.
    int64_t count = 1;
    for (int a : axes) count *= x.shape(a);
    if ((kind == Kind::kMax || kind == Kind::kMin) && dt == mx::bool_) {
      // any/all give false/true over zero elements, ORT's lowest/highest bool.
      ctx.bind_output(
          n, 0, kind == Kind::kMax ? mx::any(x, axes, keepdims, s) : mx::all(x, axes, keepdims, s));
      return;
    }
    if (x.size() == 0 && kind != Kind::kSum && kind != Kind::kMean && !noop) {
      // MLX refuses some reductions of empty arrays: build the (possibly empty) result directly.
      mx::Shape out;
      for (int i = 0; i < static_cast<int>(x.ndim()); ++i) {
        const bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
        if (!reduced)
          out.push_back(x.shape(i));
        else if (keepdims)
          out.push_back(1);
      }
      ctx.bind_output(n, 0, mx::full(out, empty_reduction_value(kind, dt), s));
      return;
    }
    if (kind == Kind::kSum && dt == mx::int32) {
      ctx.bind_output(n, 0, sum_int32_saturating(x, axes, keepdims, s));
      return;
    }
    if (kind == Kind::kSum && dt == mx::int64) {
      ctx.bind_output(n, 0, sum_int64_saturating(x, axes, keepdims, s));
      return;
    }
    if (kind == Kind::kL1 && dt == mx::int32) {
      // |x| <= 2^31 in int64 and fewer than 2^31 terms: the int64 sum is exact.
      const mx::array a = mx::abs(mx::astype(x, mx::int64, s), s);
      ctx.bind_output(n, 0, saturate_to_int32(mx::sum(a, axes, keepdims, s), s));
      return;
    }
    if (kind == Kind::kSumSquare && dt == mx::int32) {
      // Squares fit int64 (<= 2^62); their sum may not: the saturating int64 sum, then int32.
      const mx::array x64 = mx::astype(x, mx::int64, s);
      const mx::array sq = mx::multiply(x64, x64, s);
      ctx.bind_output(n, 0, saturate_to_int32(sum_int64_saturating(sq, axes, keepdims, s), s));
      return;
    }
    // Half types accumulate in float32 and round once at the end.
    const bool widen = dt == mx::float16 || dt == mx::bfloat16;
    mx::array xin = widen ? mx::astype(x, mx::float32, s) : x;
    mx::array y = xin;
    switch (kind) {
      case Kind::kSum:
        y = mx::sum(xin, axes, keepdims, s);
        break;
      case Kind::kMean:
        y = count == 0 ? mx::sum(xin, axes, keepdims, s) : mx::mean(xin, axes, keepdims, s);
        break;
      case Kind::kMax:
        y = mx::max(x, axes, keepdims, s);  // exact in any type: no widening
        break;
      case Kind::kMin:
        y = mx::min(x, axes, keepdims, s);
        break;
      case Kind::kProd:
        // MLX's CPU reduction multiplies in another order than ORT's sequential loop, and a
        // partial product can underflow to 0 (or overflow) in one order and not the other (fuzz
        // seed 155: 16 factors whose product is -6.6e-30, 0 in MLX's float32 order). float64's
        // exponent range holds any partial product of up to 7 float32 factors, so on MLX's CPU
        // backend the product is taken in float64 and rounded once; only long runs of extreme
        // factors can still depend on the order. GPU backends have no float64: float32 in MLX's
        // order there.
        if (xin.dtype() == mx::float32 && ops::runs_on_cpu(s))
          y = mx::prod(mx::astype(xin, mx::float64, s), axes, keepdims, s);
        else
          y = mx::prod(xin, axes, keepdims, s);
        break;
      case Kind::kL1:
        y = mx::sum(mx::abs(xin, s), axes, keepdims, s);
        break;
      case Kind::kL2:
        y = mx::sqrt(mx::sum(mx::square(xin, s), axes, keepdims, s), s);
        break;
      case Kind::kSumSquare:
        y = mx::sum(mx::square(xin, s), axes, keepdims, s);
        break;
      case Kind::kLogSum:
        y = mx::log(mx::sum(xin, axes, keepdims, s), s);
        break;
      case Kind::kLogSumExp:
        y = logsumexp_stable(xin, axes, keepdims, s);
        break;
    }
    if (y.dtype() != dt) y = mx::astype(y, dt, s);
    ctx.bind_output(n, 0, y);
  };
}

}  // namespace

void register_reduce_ops(OpRegistry& r) {
  // One entry per op; claim and translator pick the axes form from the node's opset.
  r.add("", "ReduceSum", 1, 1 << 30, claim_reduce(Kind::kSum, 13),
        translate_reduce(Kind::kSum, 13));
  const std::pair<const char*, Kind> from18[] = {
      {"ReduceMean", Kind::kMean},
      {"ReduceMax", Kind::kMax},
      {"ReduceMin", Kind::kMin},
      {"ReduceProd", Kind::kProd},
      {"ReduceL1", Kind::kL1},
      {"ReduceL2", Kind::kL2},
      {"ReduceLogSum", Kind::kLogSum},
      {"ReduceLogSumExp", Kind::kLogSumExp},
      {"ReduceSumSquare", Kind::kSumSquare},
  };
  for (const auto& [op, kind] : from18)
    r.add("", op, 1, 1 << 30, claim_reduce(kind, 18), translate_reduce(kind, 18));
}

}  // namespace ortmlx
