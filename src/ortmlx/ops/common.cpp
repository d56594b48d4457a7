#include "ortmlx/ops/common.h"

#include <limits>
#include <stdexcept>

namespace ortmlx::ops {

ClaimResult require_same_types(const ClaimContext& c) {
  ElemType first = ElemType::kUndefined;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    const ElemType t = c.input_type(i);
    if (first == ElemType::kUndefined) first = t;
    if (t != first)
      return ClaimResult::no("mixed input types " + type_str(first) + " and " + type_str(t));
  }
  const ElemType out = c.output_type(0);
  if (out != ElemType::kUndefined && out != first)
    return ClaimResult::no("output type " + type_str(out) + " differs from input type " +
                           type_str(first));
  return ClaimResult::yes();
}

ClaimResult refuse_unknown_attrs(const ClaimContext& c, std::initializer_list<const char*> known) {
  for (const auto& [name, value] : c.node().attrs) {
    bool ok = false;
    for (const char* k : known)
      if (name == k) ok = true;
    if (!ok) return ClaimResult::no("attribute '" + name + "' is not implemented");
  }
  return ClaimResult::yes();
}

std::optional<std::vector<int64_t>> spatial_attr(const NodeView& n, const char* name, size_t nd,
                                                 int64_t fallback, size_t mult) {
  auto v = n.attr_ints(name);
  if (!v) return std::vector<int64_t>(nd * mult, fallback);
  if (v->size() != nd * mult) return std::nullopt;
  return v;
}

int checked_int(int64_t v, const char* what) {
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
    throw std::runtime_error(std::string(what) + " " + std::to_string(v) +
                             " exceeds MLX's int32 range");
  return static_cast<int>(v);
}

int64_t checked_mul(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r))
    throw std::runtime_error(std::string(what) + " overflows int64 (" + std::to_string(a) + " * " +
                             std::to_string(b) + ")");
  return r;
}

int64_t checked_add(int64_t a, int64_t b, const char* what) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r))
    throw std::runtime_error(std::string(what) + " overflows int64 (" + std::to_string(a) + " + " +
                             std::to_string(b) + ")");
  return r;
}

mx::array exp_full_range(const mx::array& x, mx::StreamOrDevice s) {
  if (runs_on_gpu(s) || !mx::issubdtype(x.dtype(), mx::floating)) return mx::exp(x, s);
  // Below the clamp MLX's exp is used as it is; float16 overflows long before it anyway.
  constexpr float kMlxCpuExpClamp = 88.0f;
  const mx::array halves = mx::exp(mx::multiply(x, mx::array(0.5f, x.dtype()), s), s);
  return mx::where(mx::greater(x, mx::array(kMlxCpuExpClamp, x.dtype()), s),
                   mx::multiply(halves, halves, s), mx::exp(x, s), s);
}

ClaimResult require_int_range(const ClaimContext& c, const char* name, int64_t lo, int64_t hi) {
  const NodeView& n = c.node();
  if (!n.has_attr(name)) return ClaimResult::yes();
  std::vector<int64_t> values;
  if (auto v = n.attr_ints(name)) {
    values = *v;
  } else {
    values.push_back(n.attr_int(name, lo));
  }
  for (int64_t v : values)
    if (v < lo || v > hi)
      return ClaimResult::no("attribute '" + std::string(name) + "' value " + std::to_string(v) +
                             " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) +
                             "]");
  return ClaimResult::yes();
}

}  // namespace ortmlx::ops
