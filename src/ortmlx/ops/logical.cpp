// Comparison / logical family: Equal, Less(OrEqual), Greater(OrEqual), And, Or, Xor, Not, Where,
// IsNaN, IsInf, BitShift. numpy broadcasting (as ONNX); comparisons output bool.
#include "ortmlx/ops/common.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

using BinaryFn = mx::array (*)(const mx::array&, const mx::array&, mx::StreamOrDevice);

// Types implemented and tested against ORT's CPU EP (bfloat16 has no test path: left out).
bool f32_f16(ElemType t) {
  return t == ElemType::kFloat || t == ElemType::kFloat16;
}
bool numeric(ElemType t) {
  return f32_f16(t) || is_int_type(t);
}
bool numeric_or_bool(ElemType t) {
  return numeric(t) || t == ElemType::kBool;
}
bool is_bool(ElemType t) {
  return t == ElemType::kBool;
}

ClaimResult require_output(const ClaimContext& c, size_t i, ElemType want) {
  const ElemType out = c.output_type(i);
  ORTMLX_REQUIRE(out == ElemType::kUndefined || out == want,
                 "output type " + type_str(out) + " is not " + type_str(want));
  return ClaimResult::yes();
}

// Two inputs of one type satisfying `pred`; output bool.
ClaimFn claim_compare(bool (*pred)(ElemType), const char* what) {
  return [pred, what](const ClaimContext& c) -> ClaimResult {
    ORTMLX_REQUIRE(c.num_inputs() == 2, "expects 2 inputs");
    auto r = refuse_unknown_attrs(c, {});
    if (!r.ok) return r;
    for (size_t i = 0; i < 2; ++i) {
      r = require_input_type(c, i, pred, what);
      if (!r.ok) return r;
    }
    ORTMLX_REQUIRE(
        c.input_type(0) == c.input_type(1),
        "mixed input types " + type_str(c.input_type(0)) + " and " + type_str(c.input_type(1)));
    return require_output(c, 0, ElemType::kBool);
  };
}

TranslateFn translate_binary(BinaryFn fn) {
  return [fn](TranslationContext& ctx, const NodeDesc& n) {
    ctx.bind_output(n, 0, fn(ctx.input(n, 0), ctx.input(n, 1), ctx.stream()));
  };
}

ClaimResult claim_not(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  r = require_input_type(c, 0, is_bool, "bool only");
  if (!r.ok) return r;
  return require_output(c, 0, ElemType::kBool);
}

void translate_not(TranslationContext& ctx, const NodeDesc& n) {
  ctx.bind_output(n, 0, mx::logical_not(ctx.input(n, 0), ctx.stream()));
}

// The value types ORT's CPU EP runs Where for (the others have nothing to match against).
bool where_type(ElemType t) {
  return type_in(t, {ElemType::kFloat, ElemType::kFloat16, ElemType::kInt32, ElemType::kInt64,
                     ElemType::kUInt8});
}

// Where(condition, X, Y): bool condition, X and Y of one type; all three broadcast.
ClaimResult claim_where(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 3, "expects 3 inputs");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  r = require_input_type(c, 0, is_bool, "condition must be bool");
  if (!r.ok) return r;
  for (size_t i = 1; i < 3; ++i) {
    r = require_input_type(c, i, where_type, "float32, float16, int32, int64 or uint8");
    if (!r.ok) return r;
  }
  ORTMLX_REQUIRE(c.input_type(1) == c.input_type(2), "X and Y types differ");
  return require_output(c, 0, c.input_type(1));
}

void translate_where(TranslationContext& ctx, const NodeDesc& n) {
  ctx.bind_output(n, 0, mx::where(ctx.input(n, 0), ctx.input(n, 1), ctx.input(n, 2), ctx.stream()));
}

// IsNaN / IsInf: float32/float16 in, bool out.
ClaimFn claim_float_test(std::initializer_list<const char*> attrs) {
  std::vector<const char*> known(attrs);
  return [known](const ClaimContext& c) -> ClaimResult {
    ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input");
    for (const auto& [name, v] : c.node().attrs) {
      bool ok = false;
      for (const char* k : known) ok = ok || name == k;
      ORTMLX_REQUIRE(ok, "attribute '" + name + "' is not implemented");
    }
    auto r = require_input_type(c, 0, f32_f16, "float32/float16 only");
    if (!r.ok) return r;
    return require_output(c, 0, ElemType::kBool);
  };
}

void translate_isnan(TranslationContext& ctx, const NodeDesc& n) {
  ctx.bind_output(n, 0, mx::isnan(ctx.input(n, 0), ctx.stream()));
}

void translate_isinf(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const bool neg = n.attr_int("detect_negative", 1) != 0;
  const bool pos = n.attr_int("detect_positive", 1) != 0;
  if (neg && pos) {
    ctx.bind_output(n, 0, mx::isinf(x, s));
  } else if (neg) {
    ctx.bind_output(n, 0, mx::isneginf(x, s));
  } else if (pos) {
    ctx.bind_output(n, 0, mx::isposinf(x, s));
  } else {
    ctx.bind_output(n, 0, mx::zeros(x.shape(), mx::bool_, s));
  }
}

// BitShift on unsigned integers. A shift by the type's bit width or more gives 0 (as ORT's CPU
// EP does); C++ leaves that undefined, so those lanes are selected away explicitly.
bool bitshift_type(ElemType t) {
  return type_in(t, {ElemType::kUInt8, ElemType::kUInt16, ElemType::kUInt32, ElemType::kUInt64});
}

ClaimResult claim_bitshift(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2, "expects 2 inputs");
  auto r = refuse_unknown_attrs(c, {"direction"});
  if (!r.ok) return r;
  const std::string dir = c.node().attr_string("direction", "");
  ORTMLX_REQUIRE(dir == "LEFT" || dir == "RIGHT", "direction must be LEFT or RIGHT");
  for (size_t i = 0; i < 2; ++i) {
    r = require_input_type(c, i, bitshift_type, "uint8/uint16/uint32/uint64 only");
    if (!r.ok) return r;
  }
  return require_same_types(c);
}

void translate_bitshift(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const mx::array y = ctx.input(n, 1);
  const mx::Dtype dt = x.dtype();
  const bool left = n.attr_string("direction", "") == "LEFT";
  const mx::array bits = mx::astype(mx::array(static_cast<int>(dt.size() * 8)), dt, s);
  const mx::array in_range = mx::less(y, bits, s);
  // Shift amounts clamped below the width so the shift itself stays defined.
  const mx::array safe_y = mx::where(in_range, y, mx::zeros({}, dt, s), s);
  const mx::array shifted = left ? mx::left_shift(x, safe_y, s) : mx::right_shift(x, safe_y, s);
  ctx.bind_output(n, 0, mx::where(in_range, shifted, mx::zeros({}, dt, s), s));
}

}  // namespace

void register_logical_ops(OpRegistry& r) {
  const char* kNumBool = "float32, float16, integer or bool";
  const char* kNum = "float32, float16 or integer";
  r.add("", "Equal", 13, 1 << 30, claim_compare(numeric_or_bool, kNumBool),
        translate_binary(mx::equal));
  r.add("", "Less", 13, 1 << 30, claim_compare(numeric, kNum), translate_binary(mx::less));
  r.add("", "LessOrEqual", 12, 1 << 30, claim_compare(numeric, kNum),
        translate_binary(mx::less_equal));
  r.add("", "Greater", 13, 1 << 30, claim_compare(numeric, kNum), translate_binary(mx::greater));
  r.add("", "GreaterOrEqual", 12, 1 << 30, claim_compare(numeric, kNum),
        translate_binary(mx::greater_equal));
  r.add("", "And", 7, 1 << 30, claim_compare(is_bool, "bool only"),
        translate_binary(mx::logical_and));
  r.add("", "Or", 7, 1 << 30, claim_compare(is_bool, "bool only"),
        translate_binary(mx::logical_or));
  r.add("", "Xor", 7, 1 << 30, claim_compare(is_bool, "bool only"),
        translate_binary(mx::not_equal));
  r.add("", "Not", 1, 1 << 30, claim_not, translate_not);
  r.add("", "Where", 9, 1 << 30, claim_where, translate_where);
  r.add("", "IsNaN", 13, 1 << 30, claim_float_test({}), translate_isnan);
  r.add("", "IsInf", 10, 1 << 30, claim_float_test({"detect_negative", "detect_positive"}),
        translate_isinf);
  r.add("", "BitShift", 11, 1 << 30, claim_bitshift, translate_bitshift);
  // Older versions ORT 1.30's CPU EP runs: they admit fewer types (Equal 7 no floats, Less and
  // Greater 7 no integers, none bfloat16), so the same claims serve; each its own entry.
  r.add("", "Equal", 7, 12, claim_compare(numeric_or_bool, kNumBool), translate_binary(mx::equal));
  r.add("", "Less", 7, 12, claim_compare(numeric, kNum), translate_binary(mx::less));
  r.add("", "Greater", 7, 12, claim_compare(numeric, kNum), translate_binary(mx::greater));
  r.add("", "IsNaN", 9, 12, claim_float_test({}), translate_isnan);
}

}  // namespace ortmlx
