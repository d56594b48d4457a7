// Cast family: Cast between the element types MLX runs (bool, int8..int64, uint8..uint64, float16,
// bfloat16, float32). mx::astype follows C++ static_cast like ORT's CPU kernel: float -> int
// truncates toward zero, anything -> bool is `!= 0`. NaN/out-of-range float -> int is
// implementation-defined in both, and not relied upon.
#include "ortmlx/ops/common.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

constexpr const char* kCastTypes =
    "bool, int8..int64, uint8..uint64, float16, bfloat16, float32 only";

// `saturate` is a boolean: ORT 1.30 casts integers into garbage for other values (int64 65534 to
// int16 with saturate=2^32 gave 4160; found by the fuzz suite), so only 0 and 1 are claimed.
ClaimResult require_boolean_saturate(const ClaimContext& c) {
  const int64_t saturate = c.node().attr_int("saturate", 1);
  ORTMLX_REQUIRE(saturate == 0 || saturate == 1,
                 "saturate " + std::to_string(saturate) + " is not 0 or 1");
  return ClaimResult::yes();
}

ClaimResult claim_cast(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input");
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  // `saturate` (opset 19) and `round_mode` (opset 24, float8e8m0 rounding) only affect float8
  // targets, which are never claimed (ORT's inliner writes round_mode on the Cast of CastLike).
  auto r = refuse_unknown_attrs(c, {"to", "saturate", "round_mode"});
  if (!r.ok) return r;
  r = require_boolean_saturate(c);
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.node().has_attr("to"), "attribute 'to' is required");
  const auto to = static_cast<ElemType>(c.node().attr_int("to", 0));
  ORTMLX_REQUIRE(mlx_supports(to),
                 std::string("cast to ") + type_str(to) + " not supported (" + kCastTypes + ")");
  r = require_input_type(c, 0, mlx_supports, kCastTypes);
  if (!r.ok) return r;
  const ElemType out = c.output_type(0);
  ORTMLX_REQUIRE(out == ElemType::kUndefined || out == to, "output type differs from 'to'");
  return ClaimResult::yes();
}

void translate_cast(TranslationContext& ctx, const NodeDesc& n) {
  const auto to = to_mlx_dtype(static_cast<ElemType>(n.attr_int("to", 0)));
  if (!to) throw std::runtime_error("unsupported Cast target type");
  mx::array x = ctx.input(n, 0);
  ctx.bind_output(n, 0, x.dtype() == *to ? x : mx::astype(x, *to, ctx.stream()));
}

// CastLike(input, target_type): Cast to input 1's element type (input 1's values are unused).
ClaimResult claim_cast_like(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2, "expects 2 inputs");
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  // As for Cast: both attributes only matter for float8 targets, never claimed.
  auto r = refuse_unknown_attrs(c, {"saturate", "round_mode"});
  if (!r.ok) return r;
  r = require_boolean_saturate(c);
  if (!r.ok) return r;
  r = require_input_type(c, 0, mlx_supports, kCastTypes);
  if (!r.ok) return r;
  r = require_input_type(c, 1, mlx_supports, kCastTypes);
  if (!r.ok) return r;
  const ElemType to = c.input_type(1);
  const ElemType out = c.output_type(0);
  ORTMLX_REQUIRE(out == ElemType::kUndefined || out == to, "output type differs from input 1's");
  return ClaimResult::yes();
}

void translate_cast_like(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  const mx::Dtype to = ctx.input(n, 1).dtype();
  ctx.bind_output(n, 0, x.dtype() == to ? x : mx::astype(x, to, ctx.stream()));
}

}  // namespace

void register_cast_ops(OpRegistry& r) {
  // Cast 1-5 named the target type with a string; not implemented.
  r.add("", "Cast", 6, 1 << 30, claim_cast, translate_cast);
  r.add("", "CastLike", 15, 1 << 30, claim_cast_like, translate_cast_like);
}

}  // namespace ortmlx
