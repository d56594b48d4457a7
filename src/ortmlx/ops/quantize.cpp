// Linear (de)quantization: QuantizeLinear, DequantizeLinear (default domain, opset 10+).
// Per-tensor (scalar or 1-element scale) and per-axis (1-D scale along `axis`, opset 13+) forms
// with float32 scales and int8/uint8 (Dequantize also int32) quantized types. Block quantization,
// float8/int4 types and output_dtype are refused. Opsets 10-12 define the per-tensor form only
// (no `axis`): the same translators serve them.
#include "ortmlx/ops/common.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

bool is_f32(ElemType t) {
  return t == ElemType::kFloat;
}
bool q8(ElemType t) {
  return t == ElemType::kInt8 || t == ElemType::kUInt8;
}
bool dq_type(ElemType t) {
  return q8(t) || t == ElemType::kInt32;
}

// Shared attribute / scale / zero-point checks.
ClaimResult claim_common(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 2 && c.num_inputs() <= 3, "expects 2 or 3 inputs");
  const NodeView& n = c.node();
  if (n.since_version < 13) {
    auto r = refuse_unknown_attrs(c, {});
    if (!r.ok) return r;
    // Opsets 10-12 quantize per tensor: a scale of one element. A longer one is refused here
    // (ORT's kernel would treat it as per-axis along axis 1, which these opsets do not define).
    const TensorInfo* si = c.input(1);
    ORTMLX_REQUIRE(
        si && si->has_shape && si->shape.size() <= 1 && (si->shape.empty() || si->shape[0] == 1),
        "before opset 13 the scale must be a scalar or 1 element (static shape)");
    if (c.has_input(2)) {
      const TensorInfo* zi = c.input(2);
      ORTMLX_REQUIRE(zi && zi->has_shape && zi->shape == si->shape,
                     "zero point shape differs from the scale shape");
    }
  }
  auto r = refuse_unknown_attrs(c, {"axis", "block_size", "saturate", "output_dtype"});
  if (!r.ok) return r;
  ORTMLX_REQUIRE(n.attr_int("block_size", 0) == 0, "block quantization (block_size != 0)");
  ORTMLX_REQUIRE(n.attr_int("output_dtype", 0) == 0, "output_dtype is not implemented");
  r = require_input_type(c, 1, is_f32, "float32 scale only");
  if (!r.ok) return r;
  const int64_t sr = c.input_rank(1);
  ORTMLX_REQUIRE(sr == 0 || sr == 1, "scale must be a scalar or 1-D (static rank)");
  if (c.has_input(2)) {
    ORTMLX_REQUIRE(c.input_rank(2) == sr, "zero point rank differs from scale rank");
  }
  if (sr == 1) {
    ORTMLX_REQUIRE(c.input_rank(0) >= 1, "per-axis form needs a known input rank >= 1");
    const int64_t rank = c.input_rank(0);
    const int64_t axis = n.attr_int("axis", 1);
    ORTMLX_REQUIRE(axis >= -rank && axis < rank, "axis out of range");
  }
  return ClaimResult::yes();
}

ClaimResult claim_dequantize(const ClaimContext& c) {
  auto r = claim_common(c);
  if (!r.ok) return r;
  r = require_input_type(c, 0, dq_type, "int8, uint8 or int32");
  if (!r.ok) return r;
  if (c.has_input(2)) {
    ORTMLX_REQUIRE(c.input_type(2) == c.input_type(0), "zero point type differs from input type");
  }
  const ElemType out = c.output_type(0);
  ORTMLX_REQUIRE(out == ElemType::kUndefined || out == ElemType::kFloat, "output must be float32");
  return ClaimResult::yes();
}

ClaimResult claim_quantize(const ClaimContext& c) {
  auto r = claim_common(c);
  if (!r.ok) return r;
  r = require_input_type(c, 0, is_f32, "float32 only");
  if (!r.ok) return r;
  ElemType q = ElemType::kUInt8;
  if (c.has_input(2)) {
    r = require_input_type(c, 2, q8, "int8 or uint8 zero point");
    if (!r.ok) return r;
    q = c.input_type(2);
  }
  const ElemType out = c.output_type(0);
  ORTMLX_REQUIRE(out == ElemType::kUndefined || out == q, "output type is not " + type_str(q));
  return ClaimResult::yes();
}

// Reshapes a per-axis parameter (1-D of length C, the length of `axis` of x) so it broadcasts
// along that axis; scalars and 1-element vectors broadcast as they are. Any other length is an
// error, as in ORT (broadcasting would let a length-4 scale stretch a length-1 axis).
mx::array along_axis(const mx::array& p, const NodeDesc& n, const mx::array& x,
                     mx::StreamOrDevice s) {
  if (p.ndim() == 0 || p.size() == 1) return mx::reshape(p, {}, s);
  const int rank = static_cast<int>(x.ndim());
  const int axis = normalize_axis(n.attr_int("axis", 1), rank);
  if (p.ndim() != 1 || p.shape(0) != x.shape(axis))
    throw std::runtime_error("per-axis scale/zero point has " + std::to_string(p.size()) +
                             " values for axis " + std::to_string(axis) + " of length " +
                             std::to_string(x.shape(axis)));
  mx::Shape shape(static_cast<size_t>(rank), 1);
  shape[static_cast<size_t>(axis)] = p.shape(0);
  return mx::reshape(p, shape, s);
}

// The zero point, which must have the scale's shape (ORT raises otherwise, even where one of
// them would broadcast).
mx::array zero_point(const TranslationContext& ctx, const NodeDesc& n) {
  const mx::array zp = ctx.input(n, 2);
  if (zp.shape() != ctx.input(n, 1).shape())
    throw std::runtime_error("zero point shape differs from the scale shape");
  return zp;
}

// y = float(int32(x) - int32(zero_point)) * scale, as ORT's CPU kernel computes it.
void translate_dequantize(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const mx::array scale = along_axis(ctx.input(n, 1), n, x, s);
  mx::array xi = mx::astype(x, mx::int32, s);
  if ((n.inputs.size() > 2 && !n.inputs[2].empty())) {
    const mx::array zp = along_axis(zero_point(ctx, n), n, x, s);
    xi = mx::subtract(xi, mx::astype(zp, mx::int32, s), s);
  }
  ctx.bind_output(n, 0, mx::multiply(mx::astype(xi, mx::float32, s), scale, s));
}

// y = saturate(round_half_even(x / scale) + zero_point); the division is float32 as in ORT.
void translate_quantize(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const mx::array scale = along_axis(ctx.input(n, 1), n, x, s);
  mx::Dtype qt = mx::uint8;
  mx::array y = mx::round(mx::divide(x, scale, s), 0, s);
  if ((n.inputs.size() > 2 && !n.inputs[2].empty())) {
    const mx::array zp0 = zero_point(ctx, n);
    qt = zp0.dtype();
    y = mx::add(y, mx::astype(along_axis(zp0, n, x, s), mx::float32, s), s);
  }
  const float lo = qt == mx::int8 ? -128.f : 0.f;
  const float hi = qt == mx::int8 ? 127.f : 255.f;
  // A NaN quotient is the type's minimum in ORT (its MLAS kernel clamps with vector max/min,
  // which return the bound for NaN): -128 for int8, 0 for uint8. Cast as it is, NaN is
  // undefined (MLX's conversion gave 0 or -128 by shape).
  y = mx::where(mx::isnan(y, s), mx::array(lo), mx::clip(y, mx::array(lo), mx::array(hi), s), s);
  ctx.bind_output(n, 0, mx::astype(y, qt, s));
}

}  // namespace

void register_quantize_ops(OpRegistry& r) {
  r.add("", "DequantizeLinear", 13, 1 << 30, claim_dequantize, translate_dequantize);
  r.add("", "QuantizeLinear", 13, 1 << 30, claim_quantize, translate_quantize);
  r.add("", "DequantizeLinear", 10, 12, claim_dequantize, translate_dequantize);
  r.add("", "QuantizeLinear", 10, 12, claim_quantize, translate_quantize);
}

}  // namespace ortmlx
