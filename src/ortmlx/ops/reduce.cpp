// Reduce family: ReduceSum and ReduceMean. Axes come from the `axes` attribute in older opsets and
// from a constant int64 input later (ReduceSum from 13, ReduceMean from 18). Empty axes reduce
// everything unless noop_with_empty_axes=1 (then the op is the identity), as in ORT.
#include "ortmlx/ops/common.h"
#include "ortmlx/ops/op_args.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

enum class Kind { kSum, kMean };

bool reduce_type_ok(Kind kind, ElemType t) {
  if (is_float_type(t)) return true;
  // mx::sum widens small integers (int8 -> int32, uint8 -> uint32); int32/int64 keep their type.
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
