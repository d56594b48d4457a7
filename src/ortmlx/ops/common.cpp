#include "ortmlx/ops/common.h"

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

}  // namespace ortmlx::ops
