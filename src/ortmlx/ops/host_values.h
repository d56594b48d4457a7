// Host values of small integer inputs that decide output SHAPES (Reshape/Expand shapes, Slice
// starts/ends, Tile repeats, Pad pads, Range bounds, OneHot depth, Split sizes), read while a
// plan is translated.
//
// Why this is sound with the compiled path: a compiled function is keyed on input shapes and
// dtypes only, so it may bake in a value only when that value is fixed by the shape key. Values
// that are: constant initializers, and arrays built from them and from static shapes (Shape and
// Size outputs are host-built constants; Gather/Concat/... of those are lazy but depend on no
// runtime input). While tracing, anything that depends on a fused input is an MLX tracer: reading
// it would bake one run's value into every later run, so the translator throws NotCompilable and
// the executor runs the plan eagerly (each run translated again, the value read for that run).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <mlx/transforms.h>

#include "ortmlx/ops/common.h"

namespace ortmlx::ops {

// The array of input i, evaluated, after checking that reading it is sound (see above).
inline mx::array host_array(const TranslationContext& ctx, const NodeDesc& n, size_t i,
                            const char* what) {
  mx::array a = ctx.input(n, i);
  if (ctx.compiling() && a.is_tracer())
    throw NotCompilable(std::string(what) +
                        " input depends on a runtime value (read on the host each run)");
  if (a.size() != 0) mx::eval(a);
  return a;
}

// Integer (or float, truncated as ONNX casts do) values of input i, flattened, as int64.
inline std::vector<int64_t> host_ints(const TranslationContext& ctx, const NodeDesc& n, size_t i,
                                      const char* what) {
  if (const ConstTensor* t = ctx.constant_input(n, i)) {
    if (auto v = t->as_int64()) return *v;
  }
  mx::array a = host_array(ctx, n, i, what);
  if (a.size() == 0) return {};
  if (a.dtype() != mx::int64) {
    a = mx::astype(a, mx::int64);
    mx::eval(a);
  }
  a = mx::contiguous(a);
  mx::eval(a);
  const int64_t* p = a.data<int64_t>();
  return std::vector<int64_t>(p, p + a.size());
}

// Float values of input i (a constant's as stored, a runtime one read as float32), flattened.
inline std::vector<double> host_doubles(const TranslationContext& ctx, const NodeDesc& n, size_t i,
                                        const char* what) {
  if (const ConstTensor* t = ctx.constant_input(n, i))
    return t->as_double().value_or(std::vector<double>{});
  mx::array a = host_array(ctx, n, i, what);
  if (a.size() == 0) return {};
  a = mx::contiguous(mx::astype(a, mx::float32));
  mx::eval(a);
  const float* p = a.data<float>();
  return std::vector<double>(p, p + a.size());
}

// One host scalar (a 0-d or 1-element tensor) as int64.
inline int64_t host_int(const TranslationContext& ctx, const NodeDesc& n, size_t i,
                        const char* what) {
  auto v = host_ints(ctx, n, i, what);
  if (v.size() != 1)
    throw std::runtime_error(std::string(what) + " must hold one value, got " +
                             std::to_string(v.size()));
  return v[0];
}

// Claim-time check of a shape-like input: int64 (or one of `also`), at most 1-D when known.
inline ClaimResult claim_index_list(const ClaimContext& c, size_t i, const char* what,
                                    bool allow_int32 = false) {
  if (!c.has_input(i)) return ClaimResult::no(std::string(what) + " input is absent");
  const ElemType t = c.input_type(i);
  if (!(t == ElemType::kInt64 || (allow_int32 && t == ElemType::kInt32)))
    return ClaimResult::no(std::string(what) + " input must be int64" +
                           (allow_int32 ? " or int32" : "") + ", got " + type_str(t));
  const int64_t rank = c.input_rank(i);
  if (rank > 1) return ClaimResult::no(std::string(what) + " input must be 1-D");
  return ClaimResult::yes();
}

// A host-built int64 array (Shape, Size, Range outputs): has data at once, so later readers see
// a constant even while tracing.
inline mx::array host_int64_array(const std::vector<int64_t>& v, const mx::Shape& shape) {
  return mx::array(v.begin(), shape, mx::int64);
}

}  // namespace ortmlx::ops
