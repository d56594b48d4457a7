// Bitwise family (opset 18): BitwiseAnd, BitwiseOr, BitwiseXor (numpy broadcasting) and
// BitwiseNot, on the eight integer types ORT's CPU EP has kernels for.
#include "ortmlx/ops/common.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

using BinaryFn = mx::array (*)(const mx::array&, const mx::array&, mx::StreamOrDevice);

bool bitwise_type(ElemType t) {
  return type_in(t, {ElemType::kInt8, ElemType::kInt16, ElemType::kInt32, ElemType::kInt64,
                     ElemType::kUInt8, ElemType::kUInt16, ElemType::kUInt32, ElemType::kUInt64});
}

const char* kWhat = "int8/16/32/64 or uint8/16/32/64 only";

ClaimResult require_output_like_input(const ClaimContext& c) {
  const ElemType out = c.output_type(0);
  ORTMLX_REQUIRE(out == ElemType::kUndefined || out == c.input_type(0),
                 "output type " + type_str(out) + " is not " + type_str(c.input_type(0)));
  return ClaimResult::yes();
}

ClaimResult claim_binary(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2, "expects 2 inputs");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  for (size_t i = 0; i < 2; ++i) {
    r = require_input_type(c, i, bitwise_type, kWhat);
    if (!r.ok) return r;
  }
  ORTMLX_REQUIRE(
      c.input_type(0) == c.input_type(1),
      "mixed input types " + type_str(c.input_type(0)) + " and " + type_str(c.input_type(1)));
  return require_output_like_input(c);
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
  r = require_input_type(c, 0, bitwise_type, kWhat);
  if (!r.ok) return r;
  return require_output_like_input(c);
}

void translate_not(TranslationContext& ctx, const NodeDesc& n) {
  ctx.bind_output(n, 0, mx::bitwise_invert(ctx.input(n, 0), ctx.stream()));
}

}  // namespace

void register_bitwise_ops(OpRegistry& r) {
  r.add("", "BitwiseAnd", 18, 1 << 30, claim_binary, translate_binary(mx::bitwise_and));
  r.add("", "BitwiseOr", 18, 1 << 30, claim_binary, translate_binary(mx::bitwise_or));
  r.add("", "BitwiseXor", 18, 1 << 30, claim_binary, translate_binary(mx::bitwise_xor));
  r.add("", "BitwiseNot", 18, 1 << 30, claim_not, translate_not);
}

}  // namespace ortmlx
