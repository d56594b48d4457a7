// Generator family: Shape, Size, ConstantOfShape, Range. Shape and Size are built on the host
// from the live (or traced) input shape, so downstream shape arithmetic stays a constant that a
// compiled function may bake in (ops/host_values.h). ConstantOfShape and Range read their
// shape-deciding inputs on the host; Range is computed entirely on the host, the way ORT's CPU
// kernel does it (repeated addition), so float outputs match it bit for bit.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <variant>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/host_values.h"
#include "ortmlx/ops/op_args.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

constexpr const char* kAnyType = "MLX-supported tensor types only (no float64, no strings)";

// ---------------------------------------------------------------- Shape / Size

ClaimResult claim_shape(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = refuse_unknown_attrs(c, {"start", "end"});
  if (!r.ok) return r;
  // start/end arrived in opset 15; ORT ignores them before (they are not in the schema).
  ORTMLX_REQUIRE(
      c.node().since_version >= 15 || (!c.node().has_attr("start") && !c.node().has_attr("end")),
      "start/end attributes before opset 15");
  return require_input_type(c, 0, mlx_supports, kAnyType);
}

// ONNX Shape slicing: negative values count from the end, then both clamp to [0, rank].
void translate_shape(TranslationContext& ctx, const NodeDesc& n) {
  const mx::array x = ctx.input(n, 0);
  const int64_t rank = static_cast<int64_t>(x.ndim());
  auto clamp_dim = [rank](int64_t v) {
    if (v < 0) v += rank;
    return std::clamp<int64_t>(v, 0, rank);
  };
  const int64_t start = clamp_dim(n.attr_int("start", 0));
  const int64_t end = clamp_dim(n.attr_int("end", rank));
  std::vector<int64_t> dims;
  for (int64_t i = start; i < end; ++i) dims.push_back(x.shape(static_cast<int>(i)));
  ctx.bind_output(n, 0, host_int64_array(dims, {static_cast<int>(dims.size())}));
}

ClaimResult claim_size(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  return require_input_type(c, 0, mlx_supports, kAnyType);
}

void translate_size(TranslationContext& ctx, const NodeDesc& n) {
  const mx::array x = ctx.input(n, 0);
  ctx.bind_output(n, 0, host_int64_array({static_cast<int64_t>(x.size())}, {}));
}

// ---------------------------------------------------------------- ConstantOfShape

const ConstTensor* value_attr(const NodeView& node) {
  auto it = node.attrs.find("value");
  if (it == node.attrs.end()) return nullptr;
  auto p = std::get_if<std::shared_ptr<const ConstTensor>>(&it->second);
  return p ? p->get() : nullptr;
}

ClaimResult claim_constant_of_shape(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = refuse_unknown_attrs(c, {"value"});
  if (!r.ok) return r;
  r = claim_index_list(c, 0, "shape");
  if (!r.ok) return r;
  if (c.node().has_attr("value")) {
    const ConstTensor* v = value_attr(c.node());
    ORTMLX_REQUIRE(v != nullptr, "value attribute must be a tensor");
    ORTMLX_REQUIRE(v->numel() == 1, "value attribute must hold one element");
    ORTMLX_REQUIRE(
        type_in(v->dtype, {ElemType::kFloat, ElemType::kFloat16, ElemType::kInt32, ElemType::kInt64,
                           ElemType::kBool, ElemType::kInt8, ElemType::kUInt8}),
        "value type " + type_str(v->dtype) +
            " not supported (float32, float16, int32, int64, int8, uint8, bool)");
  }
  return ClaimResult::yes();
}

void translate_constant_of_shape(TranslationContext& ctx, const NodeDesc& n) {
  const auto dims = host_ints(ctx, n, 0, "shape");
  for (int64_t d : dims)
    if (d < 0) throw std::runtime_error("ConstantOfShape dim " + std::to_string(d) + " < 0");
  const ConstTensor* v = value_attr(n);
  mx::array value =
      v ? mx::reshape(constant_to_array(*v), {}, ctx.stream()) : mx::array(0.0f, mx::float32);
  const mx::Shape shape = checked_shape(dims, value.dtype());
  ctx.bind_output(n, 0, mx::full(shape, value, ctx.stream()));
}

// ---------------------------------------------------------------- Range

ClaimResult claim_range(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 3 && c.num_outputs() == 1, "expects 3 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  r = require_input_type(
      c, 0,
      [](ElemType t) {
        return type_in(t, {ElemType::kFloat, ElemType::kInt32, ElemType::kInt64});
      },
      "float32, int32, int64");
  if (!r.ok) return r;
  r = require_same_types(c);
  if (!r.ok) return r;
  for (size_t i = 0; i < 3; ++i) ORTMLX_REQUIRE(c.input_rank(i) <= 0, "inputs must be scalars");
  return ClaimResult::yes();
}

// ORT's CPU kernel: n = ceil((limit - start) / delta) with limit and start converted to double
// BEFORE the subtraction (measured on ORT 1.30: int64 [2^63 - 2, 2^63 - 1) is empty, [-2^63,
// 2^63 - 1) step 2^62 has 4 values), then values by repeated addition in T (not start + i *
// delta: float results differ in the last bits). Integer additions wrap past the type's end, as
// ORT's do; here through the unsigned type, where wrapping is defined.
template <typename T>
mx::array host_range(const mx::array& s, const mx::array& l, const mx::array& d, mx::Dtype dt) {
  const T start = s.item<T>(), limit = l.item<T>(), delta = d.item<T>();
  if (delta == T(0)) throw std::runtime_error("Range delta must not be 0");
  const double count = std::ceil((static_cast<double>(limit) - static_cast<double>(start)) /
                                 static_cast<double>(delta));
  // Checked before the cast (undefined beyond int64, and NaN counts as empty, as in ORT).
  if (count > std::numeric_limits<int32_t>::max())
    throw std::runtime_error("Range of " + std::to_string(count) +
                             " elements exceeds MLX's int32 dims");
  const int n = count > 0 ? static_cast<int>(count) : 0;
  std::vector<T> out(static_cast<size_t>(n));
  T v = start;
  for (auto& o : out) {
    o = v;
    if constexpr (std::is_integral_v<T>) {
      using U = std::make_unsigned_t<T>;
      v = static_cast<T>(static_cast<U>(v) + static_cast<U>(delta));
    } else {
      v += delta;
    }
  }
  return mx::array(out.begin(), {n}, dt);
}

void translate_range(TranslationContext& ctx, const NodeDesc& n) {
  mx::array s = host_array(ctx, n, 0, "start");
  mx::array l = host_array(ctx, n, 1, "limit");
  mx::array d = host_array(ctx, n, 2, "delta");
  for (const auto* a : {&s, &l, &d})
    if (a->size() != 1) throw std::runtime_error("Range inputs must be scalars");
  const mx::Dtype dt = s.dtype();
  mx::array out = dt == mx::float32 ? host_range<float>(s, l, d, dt)
                  : dt == mx::int32 ? host_range<int32_t>(s, l, d, dt)
                                    : host_range<int64_t>(s, l, d, dt);
  ctx.bind_output(n, 0, out);
}

// ---------------------------------------------------------------- EyeLike

// The types ORT's CPU EyeLike kernel runs (float64 has no MLX dtype), for input and output.
bool eye_type(ElemType t) {
  return type_in(t, {ElemType::kFloat, ElemType::kInt32, ElemType::kInt64, ElemType::kUInt64});
}

ClaimResult claim_eye_like(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = refuse_unknown_attrs(c, {"k", "dtype"});
  if (!r.ok) return r;
  const char* kWhat = "float32, int32, int64 or uint64 only";
  r = require_input_type(c, 0, eye_type, kWhat);
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.input_rank(0) == 2, "input must be 2-D with a known rank");
  const ElemType to = c.node().has_attr("dtype")
                          ? static_cast<ElemType>(c.node().attr_int("dtype", 0))
                          : c.input_type(0);
  ORTMLX_REQUIRE(eye_type(to), "dtype " + type_str(to) + " not supported (" + kWhat + ")");
  const ElemType out = c.output_type(0);
  ORTMLX_REQUIRE(out == ElemType::kUndefined || out == to, "output type differs from dtype");
  return ClaimResult::yes();
}

// Ones on diagonal k of an input-shaped matrix (the input's values are unused): column - row == k,
// compared elementwise. No scatter (mx::eye scatters, and MLX's GPU scatter has no 64-bit types),
// and no negation of k, so k = INT64_MIN gives the all-zero matrix ONNX asks for.
void translate_eye_like(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  if (x.ndim() != 2) throw std::runtime_error("EyeLike input must be 2-D");
  mx::Dtype dt = x.dtype();
  if (n.has_attr("dtype")) {
    const auto d = to_mlx_dtype(static_cast<ElemType>(n.attr_int("dtype", 0)));
    if (!d) throw std::runtime_error("unsupported EyeLike dtype");
    dt = *d;
  }
  const int64_t k = n.attr_int("k", 0);
  const int64_t rows = x.shape(0), cols = x.shape(1);
  if (k >= cols || k <= -rows) {  // the diagonal lies outside the matrix (or it is empty)
    ctx.bind_output(n, 0, mx::zeros(x.shape(), dt, s));
    return;
  }
  const mx::array r =
      mx::reshape(mx::arange(0.0, double(rows), 1.0, mx::int64, s), {x.shape(0), 1}, s);
  const mx::array c =
      mx::reshape(mx::arange(0.0, double(cols), 1.0, mx::int64, s), {1, x.shape(1)}, s);
  const mx::array on = mx::equal(mx::subtract(c, r, s), mx::array(k, mx::int64), s);
  ctx.bind_output(n, 0, mx::astype(on, dt, s));
}

}  // namespace

void register_generate_ops(OpRegistry& r) {
  r.add("", "Shape", 1, 1 << 30, claim_shape, translate_shape);
  r.add("", "Size", 1, 1 << 30, claim_size, translate_size);
  r.add("", "ConstantOfShape", 9, 1 << 30, claim_constant_of_shape, translate_constant_of_shape);
  r.add("", "Range", 11, 1 << 30, claim_range, translate_range);
  r.add("", "EyeLike", 9, 1 << 30, claim_eye_like, translate_eye_like);
}

}  // namespace ortmlx
