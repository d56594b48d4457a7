// Shape family: Reshape, Transpose, Unsqueeze, Squeeze, Flatten, Concat, Identity.
// Axes arguments must be constant initializers (read at claim time to validate them and at
// translate time to build the op); output shapes are computed from the live input shape.
// Reshape's shape may also be computed in the graph (Shape -> Gather -> Concat, the torch export
// pattern) or arrive at run time: it is read on the host while translating (ops/host_values.h).
#include <algorithm>
#include <numeric>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/host_values.h"
#include "ortmlx/ops/op_args.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

constexpr const char* kAnyType = "MLX-supported tensor types only (no float64, no strings)";

// Data input 0 of a supported type, output 0 of the same type.
ClaimResult claim_data_input(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  auto r = require_input_type(c, 0, mlx_supports, kAnyType);
  if (!r.ok) return r;
  const ElemType out = c.output_type(0);
  ORTMLX_REQUIRE(out == ElemType::kUndefined || out == c.input_type(0),
                 "output type differs from input type");
  return ClaimResult::yes();
}

// ---------------------------------------------------------------- Reshape

// The output shape for a Reshape `spec` (ONNX rules: 0 copies the input dim unless allowzero,
// one -1 is inferred). Throws on a shape that does not fit the element count.
mx::Shape reshape_target(const mx::Shape& in, const std::vector<int64_t>& spec, bool allowzero) {
  std::vector<int64_t> out(spec.size());
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < spec.size(); ++i) {
    int64_t d = spec[i];
    if (d == 0 && !allowzero) {
      if (i >= in.size())
        throw std::runtime_error("Reshape copies dim " + std::to_string(i) +
                                 " but the input has rank " + std::to_string(in.size()));
      d = in[i];
    }
    if (d == -1) {
      infer = static_cast<int>(i);
      continue;
    }
    if (d < 0) throw std::runtime_error("Reshape dim " + std::to_string(d) + " is invalid");
    out[i] = d;
    // Checked: a product wrapping to 0 would match an empty input.
    known = checked_mul(known, d, "Reshape target size");
  }
  const int64_t total = shape_product(in, 0, in.size());
  if (infer >= 0) {
    // ORT refuses to infer -1 next to a zero-sized dim (the answer would be ambiguous).
    if (known == 0 || total % known != 0)
      throw std::runtime_error("Reshape cannot infer the -1 dimension for " +
                               std::to_string(total) + " elements");
    out[static_cast<size_t>(infer)] = total / known;
  } else if (known != total) {
    throw std::runtime_error("Reshape target has " + std::to_string(known) +
                             " elements, input has " + std::to_string(total));
  }
  return checked_shape(out);
}

// Checks a constant Reshape target against the ONNX rules (one -1 at most, 0 copies an input dim
// that must exist unless allowzero).
ClaimResult check_reshape_spec(const ClaimContext& c, const std::vector<int64_t>& spec,
                               int64_t allowzero) {
  int minus_ones = 0;
  bool zero = false;
  const int64_t rank = c.input_rank(0);
  for (size_t i = 0; i < spec.size(); ++i) {
    const int64_t d = spec[i];
    ORTMLX_REQUIRE(d >= -1, "shape value " + std::to_string(d) + " is invalid");
    minus_ones += d == -1;
    zero = zero || d == 0;
    if (d == 0 && allowzero == 0 && rank >= 0)
      ORTMLX_REQUIRE(static_cast<int64_t>(i) < rank,
                     "shape copies dim " + std::to_string(i) + " beyond the input rank");
  }
  ORTMLX_REQUIRE(minus_ones <= 1, "shape has more than one -1");
  ORTMLX_REQUIRE(!(allowzero == 1 && zero && minus_ones == 1),
                 "allowzero=1 with both 0 and -1 in the shape is invalid");
  return ClaimResult::yes();
}

ClaimResult claim_reshape(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2, "expects 2 inputs (data, shape)");
  auto r = refuse_unknown_attrs(c, {"allowzero"});
  if (!r.ok) return r;
  r = claim_data_input(c);
  if (!r.ok) return r;
  const int64_t allowzero = c.node().attr_int("allowzero", 0);
  ORTMLX_REQUIRE(allowzero == 0 || allowzero == 1, "allowzero must be 0 or 1");
  // A shape computed in the graph or fed at run time is checked when it is read.
  if (!c.input_is_constant(1)) return claim_index_list(c, 1, "shape");
  std::string why;
  auto spec = claim_const_ints(c, 1, "shape", &why);
  if (!spec) return ClaimResult::no(why);
  return check_reshape_spec(c, *spec, allowzero);
}

// Reshape 1-4: the target is the `shape` attribute (required by ORT's kernel); opset 1's
// consumed_inputs is a legacy annotation without effect.
ClaimResult claim_reshape_v1(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input before opset 5");
  auto r = refuse_unknown_attrs(c, {"shape", "consumed_inputs"});
  if (!r.ok) return r;
  r = claim_data_input(c);
  if (!r.ok) return r;
  auto spec = c.node().attr_ints("shape");
  ORTMLX_REQUIRE(spec.has_value(), "the shape attribute is required");
  return check_reshape_spec(c, *spec, 0);
}

void translate_reshape_v1(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  const auto spec = n.attr_ints("shape");
  if (!spec) throw std::runtime_error("Reshape needs the shape attribute");
  ctx.bind_output(n, 0, ctx.reshape(x, reshape_target(x.shape(), *spec, false)));
}

void translate_reshape(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  const auto spec = host_ints(ctx, n, 1, "shape");
  int minus_ones = 0;
  for (int64_t d : spec) {
    if (d < -1) throw std::runtime_error("Reshape dim " + std::to_string(d) + " is invalid");
    minus_ones += d == -1;
  }
  if (minus_ones > 1) throw std::runtime_error("Reshape shape has more than one -1");
  ctx.bind_output(n, 0,
                  ctx.reshape(x, reshape_target(x.shape(), spec, n.attr_int("allowzero", 0) == 1)));
}

// ---------------------------------------------------------------- Transpose

ClaimResult claim_transpose(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input");
  auto r = refuse_unknown_attrs(c, {"perm"});
  if (!r.ok) return r;
  r = claim_data_input(c);
  if (!r.ok) return r;
  if (c.node().has_attr("perm")) {
    auto perm = c.node().attr_ints("perm");
    ORTMLX_REQUIRE(perm.has_value(), "perm must be a list of ints");
    std::vector<int64_t> sorted = *perm;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i)
      ORTMLX_REQUIRE(sorted[i] == static_cast<int64_t>(i),
                     "perm is not a permutation of 0..rank-1");
    const int64_t rank = c.input_rank(0);
    ORTMLX_REQUIRE(rank < 0 || rank == static_cast<int64_t>(perm->size()),
                   "perm length differs from the input rank");
  }
  return ClaimResult::yes();
}

void translate_transpose(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  std::vector<int> axes(x.ndim());
  if (auto perm = n.attr_ints("perm")) {
    if (perm->size() != x.ndim())
      throw std::runtime_error("perm length " + std::to_string(perm->size()) +
                               " differs from the input rank " + std::to_string(x.ndim()));
    std::transform(perm->begin(), perm->end(), axes.begin(),
                   [](int64_t p) { return static_cast<int>(p); });
  } else {
    std::iota(axes.rbegin(), axes.rend(), 0);  // default: reverse the dimensions
  }
  ctx.bind_output(n, 0, ctx.transpose(x, axes));
}

// ---------------------------------------------------------------- Unsqueeze / Squeeze

// Axes for (Un)Squeeze: the `axes` attribute before opset 13, input 1 from 13 on (constant, or
// computed at run time: `runtime`, then `axes` stays empty).
// `required` for Unsqueeze. Sets `present` to whether axes were given at all.
ClaimResult claim_squeeze_axes(const ClaimContext& c, bool required, std::vector<int64_t>* axes,
                               bool* present, bool* runtime) {
  *present = false;
  *runtime = false;
  if (c.node().since_version < 13) {
    ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input before opset 13");
    auto r = refuse_unknown_attrs(c, {"axes"});
    if (!r.ok) return r;
    if (auto a = c.node().attr_ints("axes")) {
      *axes = *a;
      *present = true;
    }
  } else {
    ORTMLX_REQUIRE(c.num_inputs() == 1 || c.num_inputs() == 2, "expects 1 or 2 inputs");
    auto r = refuse_unknown_attrs(c, {});
    if (!r.ok) return r;
    if (c.has_input(1) && !c.input_is_constant(1)) {
      // Axes computed at run time: read on the host when translated (host_values.h; that plan
      // runs eagerly) and checked against the live shape there.
      auto ar = claim_index_list(c, 1, "axes");
      if (!ar.ok) return ar;
      *present = true;
      *runtime = true;
    } else if (c.has_input(1)) {
      std::string why;
      auto a = claim_const_ints(c, 1, "axes", &why);
      if (!a) return ClaimResult::no(why);
      *axes = *a;
      *present = true;
    }
  }
  ORTMLX_REQUIRE(!required || *present, "axes are required");
  return claim_data_input(c);
}

std::vector<int64_t> translate_squeeze_axes(TranslationContext& ctx, const NodeDesc& n,
                                            bool* present) {
  *present = false;
  if (n.since_version < 13) {
    auto a = n.attr_ints("axes");
    *present = a.has_value();
    return a ? *a : std::vector<int64_t>{};
  }
  if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
    *present = true;
    return host_ints(ctx, n, 1, "axes");
  }
  return {};
}

ClaimResult claim_unsqueeze(const ClaimContext& c) {
  std::vector<int64_t> axes;
  bool present = false;
  bool runtime = false;
  auto r = claim_squeeze_axes(c, true, &axes, &present, &runtime);
  if (!r.ok) return r;
  if (runtime) return ClaimResult::yes();
  ORTMLX_REQUIRE(!axes.empty(), "axes is empty");
  const int64_t rank = c.input_rank(0);
  if (rank >= 0) {
    std::string why;
    if (!normalize_axes(axes, rank + static_cast<int64_t>(axes.size()), &why))
      return ClaimResult::no(why);
  }
  return ClaimResult::yes();
}

void translate_unsqueeze(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  bool present = false;
  const auto raw = translate_squeeze_axes(ctx, n, &present);
  if (raw.empty()) throw std::runtime_error("axes is empty");
  // Axes index the output, whose rank is the input rank plus the number of new axes.
  const int64_t out_rank = static_cast<int64_t>(x.ndim() + raw.size());
  const auto axes = normalize_axes_or_throw(raw, out_rank);
  std::vector<bool> inserted(static_cast<size_t>(out_rank), false);
  for (int a : axes) inserted[static_cast<size_t>(a)] = true;
  mx::Shape out;
  size_t src = 0;
  for (int64_t i = 0; i < out_rank; ++i)
    out.push_back(inserted[static_cast<size_t>(i)] ? 1 : x.shape(static_cast<int>(src++)));
  ctx.bind_output(n, 0, ctx.reshape(x, out));
}

ClaimResult claim_squeeze(const ClaimContext& c) {
  std::vector<int64_t> axes;
  bool present = false;
  bool runtime = false;
  auto r = claim_squeeze_axes(c, false, &axes, &present, &runtime);
  if (!r.ok) return r;
  const TensorInfo* info = c.input(0);
  if (info && info->has_shape) {
    std::string why;
    // ORT sorts and de-duplicates Squeeze axes, so repeats are accepted.
    auto norm = normalize_axes(axes, info->rank(), &why, /*allow_repeats=*/true);
    if (!norm) return ClaimResult::no(why);
    for (int a : *norm) {
      const int64_t d = info->shape[static_cast<size_t>(a)];
      ORTMLX_REQUIRE(d == 1 || d < 0,
                     "cannot squeeze axis " + std::to_string(a) + " of size " + std::to_string(d));
    }
  }
  return ClaimResult::yes();
}

// Without axes (or with an empty list, as ORT treats it) every size-1 dim of the LIVE shape goes.
void translate_squeeze(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  bool present = false;
  const auto raw = translate_squeeze_axes(ctx, n, &present);
  const int rank = static_cast<int>(x.ndim());
  std::vector<bool> drop(static_cast<size_t>(rank), false);
  if (raw.empty()) {
    for (int i = 0; i < rank; ++i) drop[static_cast<size_t>(i)] = x.shape(i) == 1;
  } else {
    for (int a : normalize_axes_or_throw(raw, rank, /*allow_repeats=*/true)) {
      if (x.shape(a) != 1)
        throw std::runtime_error("cannot squeeze axis " + std::to_string(a) + " of size " +
                                 std::to_string(x.shape(a)));
      drop[static_cast<size_t>(a)] = true;
    }
  }
  mx::Shape out;
  for (int i = 0; i < rank; ++i)
    if (!drop[static_cast<size_t>(i)]) out.push_back(x.shape(i));
  ctx.bind_output(n, 0, ctx.reshape(x, out));
}

// ---------------------------------------------------------------- Flatten

ClaimResult claim_flatten(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input");
  auto r = refuse_unknown_attrs(c, {"axis"});
  if (!r.ok) return r;
  r = claim_data_input(c);
  if (!r.ok) return r;
  const int64_t axis = c.node().attr_int("axis", 1);
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(
      rank < 0 || (axis >= -rank && axis <= rank),
      "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return ClaimResult::yes();
}

// Output is 2-D: (prod(d[0:axis]), prod(d[axis:])); axis may equal the rank.
void translate_flatten(TranslationContext& ctx, const NodeDesc& n) {
  mx::array x = ctx.input(n, 0);
  const int64_t rank = static_cast<int64_t>(x.ndim());
  int64_t axis = n.attr_int("axis", 1);
  if (axis < -rank || axis > rank)
    throw std::runtime_error("axis " + std::to_string(axis) + " is out of range for rank " +
                             std::to_string(rank));
  if (axis < 0) axis += rank;
  const auto& s = x.shape();
  const auto a = static_cast<size_t>(axis);
  ctx.bind_output(
      n, 0, ctx.reshape(x, checked_shape({shape_product(s, 0, a), shape_product(s, a, s.size())})));
}

// ---------------------------------------------------------------- Concat

ClaimResult claim_concat(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 1, "expects at least 1 input");
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  auto r = refuse_unknown_attrs(c, {"axis"});
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.node().has_attr("axis"), "axis attribute is required");
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    r = require_input_type(c, i, mlx_supports, kAnyType);
    if (!r.ok) return r;
  }
  r = require_same_types(c);
  if (!r.ok) return r;
  const int64_t axis = c.node().attr_int("axis", 0);
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    const int64_t rank = c.input_rank(i);
    ORTMLX_REQUIRE(rank != 0, "scalar inputs cannot be concatenated");
    ORTMLX_REQUIRE(
        rank < 0 || (axis >= -rank && axis < rank),
        "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  }
  return ClaimResult::yes();
}

void translate_concat(TranslationContext& ctx, const NodeDesc& n) {
  std::vector<mx::array> parts;
  for (size_t i = 0; i < n.inputs.size(); ++i) parts.push_back(ctx.input(n, i));
  const int rank = static_cast<int>(parts[0].ndim());
  for (const auto& p : parts)
    if (static_cast<int>(p.ndim()) != rank)
      throw std::runtime_error("Concat inputs have different ranks");
  const int axis = normalize_axis(n.attr_int("axis", 0), rank);
  // ONNX: every dim but the axis's must match, empty inputs included. ORT CPU 1.30 skips empty
  // inputs in that check yet still adds their axis size to the output, whose share it never
  // writes; the EP raises (docs/RELIABILITY.md).
  for (size_t i = 1; i < parts.size(); ++i)
    for (int d = 0; d < rank; ++d)
      if (d != axis && parts[i].shape(d) != parts[0].shape(d))
        throw std::runtime_error(
            "Concat input " + std::to_string(i) + " has dim " + std::to_string(parts[i].shape(d)) +
            " on axis " + std::to_string(d) + " where input 0 has " +
            std::to_string(parts[0].shape(d)) + " (only the concatenation axis " +
            std::to_string(axis) + " may differ)");
  if (parts.size() == 1) {
    ctx.bind_output(n, 0, parts[0]);
    return;
  }
  ctx.bind_output(n, 0, mx::concatenate(std::move(parts), axis, ctx.stream()));
}

// ---------------------------------------------------------------- Identity

ClaimResult claim_identity(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input");
  auto r = refuse_unknown_attrs(c, {});
  if (!r.ok) return r;
  // Sequence/optional values have no tensor type in the graph view: refused here.
  return claim_data_input(c);
}

void translate_identity(TranslationContext& ctx, const NodeDesc& n) {
  ctx.bind_output(n, 0, ctx.input(n, 0));
}

}  // namespace

void register_shape_ops(OpRegistry& r) {
  r.add("", "Reshape", 5, 1 << 30, claim_reshape, translate_reshape);
  r.add("", "Reshape", 1, 4, claim_reshape_v1, translate_reshape_v1);
  r.add("", "Transpose", 1, 1 << 30, claim_transpose, translate_transpose);
  r.add("", "Unsqueeze", 1, 1 << 30, claim_unsqueeze, translate_unsqueeze);
  r.add("", "Squeeze", 1, 1 << 30, claim_squeeze, translate_squeeze);
  r.add("", "Flatten", 1, 1 << 30, claim_flatten, translate_flatten);
  // Concat 1-3 had an optional axis (default 1); not implemented.
  r.add("", "Concat", 4, 1 << 30, claim_concat, translate_concat);
  r.add("", "Identity", 1, 1 << 30, claim_identity, translate_identity);
}

}  // namespace ortmlx
