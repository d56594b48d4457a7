// ai.onnx.ml family, numeric forms: Binarizer, Scaler, Normalizer, Imputer, ArrayFeatureExtractor,
// FeatureVectorizer, OneHotEncoder, LabelEncoder, LinearRegressor, LinearClassifier. What users
// see is ONNX Runtime's CPU kernels, so these follow them where they differ from the ONNX text:
// per-feature attributes index the last axis of rank-1/2 inputs, post transforms apply to a
// single score column only when PROBIT, duplicate keys/categories resolve the way ORT's hash maps
// resolve them, and string forms are refused.
#include <cmath>
#include <limits>
#include <numbers>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/ml_common.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;
using namespace ortmlx::ops::ml;

bool f32_i32_i64(ElemType t) {
  return type_in(t, {ElemType::kFloat, ElemType::kInt32, ElemType::kInt64});
}
const char* kF32I32I64 = "float, int32 or int64 (the types ORT CPU has kernels for)";

// Rank 1 or 2 where ORT's kernel reads dims[0] and dims[1] only.
ClaimResult require_rank_1_2(const ClaimContext& c) {
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank == -1 || rank == 1 || rank == 2,
                 "input rank " + std::to_string(rank) +
                     " is not 1 or 2 (ORT's kernel reads the feature count from dim 1)");
  return ClaimResult::yes();
}

void require_rank_1_2(const mx::array& x) {
  if (x.ndim() != 1 && x.ndim() != 2)
    throw std::runtime_error("input must be rank 1 or 2, got rank " + std::to_string(x.ndim()));
}

// ---------------------------------------------------------------- Binarizer

ClaimResult claim_binarizer(const ClaimContext& c) {
  ORTMLX_CLAIM_OK(refuse_unknown_attrs(c, {"threshold"}));
  return require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kFloat; },
      "float only: ORT CPU's only Binarizer kernel");
}

void translate_binarizer(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const mx::array t(n.attr_float("threshold", 1.0f));
  ctx.require(n, mx::logical_not(mx::isnan(x, s), s), "input data holds NaN");
  ctx.bind_output(n, 0, mx::astype(mx::greater(x, t, s), mx::float32, s));
}

// ---------------------------------------------------------------- Scaler

ClaimResult claim_scaler(const ClaimContext& c) {
  ORTMLX_CLAIM_OK(refuse_unknown_attrs(c, {"scale", "offset"}));
  ORTMLX_CLAIM_OK(require_input_type(c, 0, f32_i32_i64, kF32I32I64));
  ORTMLX_CLAIM_OK(require_rank_1_2(c));
  const auto scale = c.node().attr_floats("scale").value_or(std::vector<float>{});
  const auto offset = c.node().attr_floats("offset").value_or(std::vector<float>{});
  ORTMLX_REQUIRE(!scale.empty(), "scale is empty (ORT refuses the node)");
  ORTMLX_REQUIRE(scale.size() == offset.size(),
                 "scale and offset differ in length (ORT refuses the node)");
  const TensorInfo* in = c.input(0);
  if (in && in->has_shape && !in->shape.empty() && in->shape.back() >= 0) {
    ORTMLX_REQUIRE(scale.size() == 1 || static_cast<int64_t>(scale.size()) == in->shape.back(),
                   "scale length " + std::to_string(scale.size()) +
                       " is neither 1 nor the feature count " + std::to_string(in->shape.back()));
  }
  return ClaimResult::yes();
}

void translate_scaler(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  require_rank_1_2(x);
  const auto scale = n.attr_floats("scale").value_or(std::vector<float>{});
  const auto offset = n.attr_floats("offset").value_or(std::vector<float>{});
  const int stride = x.shape().back();
  if (!(static_cast<int>(scale.size()) == stride || scale.size() == 1))
    throw std::runtime_error("Either both scale and offset can be of feature size (" +
                             std::to_string(stride) + ") or 1");
  const mx::array sc = float_vector(scale), off = float_vector(offset);
  const mx::array xf = mx::astype(x, mx::float32, s);
  ctx.bind_output(n, 0, mx::multiply(mx::subtract(xf, off, s), sc, s));
}

// ---------------------------------------------------------------- Normalizer

ClaimResult claim_normalizer(const ClaimContext& c) {
  ORTMLX_CLAIM_OK(refuse_unknown_attrs(c, {"norm"}));
  ORTMLX_CLAIM_OK(require_input_type(c, 0, f32_i32_i64, kF32I32I64));
  ORTMLX_CLAIM_OK(require_rank_1_2(c));
  const std::string norm = c.node().attr_string("norm", "MAX");
  ORTMLX_REQUIRE(norm == "MAX" || norm == "L1" || norm == "L2",
                 "norm '" + norm + "' is not MAX, L1 or L2");
  return ClaimResult::yes();
}

void translate_normalizer(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  require_rank_1_2(x);
  const std::string norm = n.attr_string("norm", "MAX");
  const int axis = static_cast<int>(x.ndim()) - 1;
  const mx::array xf = mx::astype(x, mx::float32, s);
  const mx::array zero(0.0f);
  mx::array out = xf;
  if (x.shape(axis) == 0) {
    // No features: nothing to divide (MLX cannot reduce an empty axis with max).
  } else if (norm == "MAX") {
    // ORT starts from the lowest float and keeps it against NaN (std::max(max, NaN) is max).
    const mx::array lowest(std::numeric_limits<float>::lowest());
    const mx::array m =
        mx::maximum(mx::max(mx::where(mx::isnan(xf, s), lowest, xf, s), axis, true, s), lowest, s);
    out = mx::where(mx::not_equal(m, zero, s), mx::divide(xf, m, s), xf, s);
  } else if (norm == "L1") {
    // |x| in the input's type, then float, as ORT sums it.
    const mx::array sum = mx::sum(mx::astype(mx::abs(x, s), mx::float32, s), axis, true, s);
    out = mx::where(mx::not_equal(sum, zero, s), mx::divide(xf, sum, s), xf, s);
  } else {
    // ORT squares in the input's type (an integer square wraps) and takes sqrt(x^2 / sum).
    const mx::array sq = mx::astype(mx::multiply(x, x, s), mx::float32, s);
    const mx::array sum = mx::sum(sq, axis, true, s);
    const mx::array mag = mx::sqrt(mx::divide(sq, sum, s), s);
    const mx::array neg = mx::less(x, mx::array(0, x.dtype()), s);
    out =
        mx::where(mx::not_equal(sum, zero, s), mx::where(neg, mx::negative(mag, s), mag, s), xf, s);
  }
  ctx.bind_output(n, 0, out);
}

// ---------------------------------------------------------------- Imputer

ClaimResult claim_imputer(const ClaimContext& c) {
  ORTMLX_CLAIM_OK(refuse_unknown_attrs(c, {"imputed_value_floats", "replaced_value_float",
                                           "imputed_value_int64s", "replaced_value_int64"}));
  ORTMLX_CLAIM_OK(require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kFloat || t == ElemType::kInt64; },
      "float or int64: ORT CPU's Imputer kernel"));
  ORTMLX_CLAIM_OK(require_rank_1_2(c));
  const NodeView& n = c.node();
  const size_t nf = n.attr_floats("imputed_value_floats").value_or(std::vector<float>{}).size();
  const size_t ni = n.attr_ints("imputed_value_int64s").value_or(std::vector<int64_t>{}).size();
  ORTMLX_REQUIRE((nf == 0) != (ni == 0),
                 "exactly one of imputed_value_floats and imputed_value_int64s must be given");
  if (c.input_type(0) == ElemType::kFloat) {
    ORTMLX_REQUIRE(nf != 0, "float input needs imputed_value_floats");
    ORTMLX_REQUIRE(n.has_attr("replaced_value_float"),
                   "replaced_value_float is absent (ORT requires it with imputed_value_floats)");
  } else {
    ORTMLX_REQUIRE(ni != 0, "int64 input needs imputed_value_int64s");
    ORTMLX_REQUIRE(n.has_attr("replaced_value_int64"),
                   "replaced_value_int64 is absent (ORT requires it with imputed_value_int64s)");
  }
  return ClaimResult::yes();
}

void translate_imputer(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  require_rank_1_2(x);
  const int stride = x.shape().back();
  mx::array match = mx::array(false);
  mx::array values = mx::array(0);
  size_t count = 0;
  if (x.dtype() == mx::float32) {
    const auto v = n.attr_floats("imputed_value_floats").value_or(std::vector<float>{});
    const float r = n.attr_float("replaced_value_float", 0.0f);
    values = float_vector(v);
    count = v.size();
    match = std::isnan(r) ? mx::isnan(x, s) : mx::equal(x, mx::array(r), s);
  } else {
    const auto v = n.attr_ints("imputed_value_int64s").value_or(std::vector<int64_t>{});
    values = int64_vector(v);
    count = v.size();
    match = mx::equal(x, mx::array(n.attr_int("replaced_value_int64", 0), mx::int64), s);
  }
  // One value per feature when the counts agree, else ORT uses the first value everywhere.
  if (static_cast<int>(count) != stride) values = mx::take(values, 0, s);
  ctx.bind_output(n, 0, mx::where(match, values, x, s));
}

// ---------------------------------------------------------------- ArrayFeatureExtractor

ClaimResult claim_array_feature_extractor(const ClaimContext& c) {
  ORTMLX_CLAIM_OK(refuse_unknown_attrs(c, {}));
  ORTMLX_REQUIRE(c.num_inputs() == 2, "expects 2 inputs");
  ORTMLX_CLAIM_OK(require_input_type(c, 0, f32_i32_i64, kF32I32I64));
  ORTMLX_CLAIM_OK(require_input_type(
      c, 1, [](ElemType t) { return t == ElemType::kInt64; }, "indices must be int64"));
  ORTMLX_REQUIRE(c.input_rank(0) != 0, "X is a scalar (ORT refuses it)");
  return ClaimResult::yes();
}

void translate_array_feature_extractor(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const mx::array y = ctx.input(n, 1);
  if (x.ndim() == 0) throw std::runtime_error("X input has empty dimensions");
  if (y.size() == 0) throw std::runtime_error("Invalid Y argument: num_indices = 0");
  const int axis = static_cast<int>(x.ndim()) - 1;
  const int stride = x.shape(axis);
  if (stride == 0)
    throw std::runtime_error("Invalid Y argument: X's last axis is empty, so no index is valid");
  const mx::array idx = mx::flatten(y, s);
  const mx::array dim(static_cast<int64_t>(stride), mx::int64);
  ctx.require(
      n,
      mx::logical_and(mx::greater_equal(idx, mx::array(0, mx::int64), s), mx::less(idx, dim, s), s),
      "Invalid Y argument: index is out of range: every index must be in [0, " +
          std::to_string(stride) + ")");
  const mx::array safe = mx::clip(idx, mx::array(0, mx::int64),
                                  mx::array(static_cast<int64_t>(stride - 1), mx::int64), s);
  mx::array z = mx::take(x, safe, axis, s);
  if (x.ndim() == 1) z = ctx.reshape(z, {1, static_cast<int>(idx.size())});
  ctx.bind_output(n, 0, z);
}

// ---------------------------------------------------------------- FeatureVectorizer

ClaimResult claim_feature_vectorizer(const ClaimContext& c) {
  ORTMLX_CLAIM_OK(refuse_unknown_attrs(c, {"inputdimensions"}));
  const auto dims = c.node().attr_ints("inputdimensions").value_or(std::vector<int64_t>{});
  ORTMLX_REQUIRE(dims.size() == c.num_inputs(), "inputdimensions has " +
                                                    std::to_string(dims.size()) + " values for " +
                                                    std::to_string(c.num_inputs()) + " inputs");
  int64_t total = 0;
  for (int64_t d : dims) {
    ORTMLX_REQUIRE(d >= 0 && d <= std::numeric_limits<int32_t>::max(),
                   "inputdimensions value " + std::to_string(d) + " is out of range");
    total += d;
  }
  ORTMLX_REQUIRE(total <= std::numeric_limits<int32_t>::max(), "inputdimensions sum too large");
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    ORTMLX_CLAIM_OK(require_input_type(c, i, f32_i32_i64, kF32I32I64));
    ORTMLX_REQUIRE(c.input_rank(i) != 0, "input " + std::to_string(i) + " is a scalar");
  }
  return ClaimResult::yes();
}

void translate_feature_vectorizer(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const auto dims = n.attr_ints("inputdimensions").value_or(std::vector<int64_t>{});
  const auto rows_of = [](const mx::array& a) { return a.ndim() == 1 ? 1 : a.shape(0); };
  const int batch = rows_of(ctx.input(n, 0));
  std::vector<mx::array> parts;
  for (size_t i = 0; i < dims.size(); ++i) {
    const mx::array x = ctx.input(n, i);
    if (x.ndim() == 0)
      throw std::runtime_error("input " + std::to_string(i) + " has no dimensions");
    const int rows = rows_of(x);
    if (rows > batch)
      throw std::runtime_error("input " + std::to_string(i) + " has " + std::to_string(rows) +
                               " rows, more than the first input's " + std::to_string(batch));
    const int width = rows == 0 ? 0 : static_cast<int>(x.size() / rows);
    const int feature = checked_int(dims[i], "inputdimensions value");
    const int keep = std::min(width, feature);
    mx::array part = mx::astype(ctx.reshape(x, {rows, width}), mx::float32, s);
    part = mx::slice(part, {0, 0}, {rows, keep}, s);
    // Features the input lacks and rows past its own batch stay zero, as in ORT's kernel.
    if (keep < feature)
      part = mx::concatenate({part, ctx.zeros({rows, feature - keep}, mx::float32)}, 1, s);
    if (rows < batch)
      part = mx::concatenate({part, ctx.zeros({batch - rows, feature}, mx::float32)}, 0, s);
    parts.push_back(part);
  }
  ctx.bind_output(
      n, 0, parts.empty() ? ctx.zeros({batch, 0}, mx::float32) : mx::concatenate(parts, 1, s));
}

// ---------------------------------------------------------------- OneHotEncoder

ClaimResult claim_one_hot_encoder(const ClaimContext& c) {
  ORTMLX_CLAIM_OK(refuse_unknown_attrs(c, {"cats_int64s", "cats_strings", "zeros"}));
  ORTMLX_REQUIRE(!c.node().has_attr("cats_strings"), "string categories are not supported");
  ORTMLX_CLAIM_OK(require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kFloat || t == ElemType::kInt64; },
      "int64 or float: ORT CPU's numeric OneHotEncoder kernels"));
  const auto cats = c.node().attr_ints("cats_int64s").value_or(std::vector<int64_t>{});
  ORTMLX_REQUIRE(!cats.empty(), "cats_int64s is empty (ORT refuses the node)");
  ORTMLX_REQUIRE(c.input_rank(0) <= 2, "input rank above 2 (ORT refuses it)");
  return ClaimResult::yes();
}

void translate_one_hot_encoder(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  if (x.ndim() > 2) throw std::runtime_error("input rank above 2");
  const auto cats = n.attr_ints("cats_int64s").value_or(std::vector<int64_t>{});
  // ORT maps each category to its last position: an earlier duplicate never fires.
  std::unordered_map<int64_t, size_t> last;
  for (size_t j = 0; j < cats.size(); ++j) last[cats[j]] = j;
  std::vector<uint8_t> live(cats.size(), 0);
  for (const auto& [cat, j] : last) live[j] = 1;
  const int nc = static_cast<int>(cats.size());
  const mx::array xi = mx::expand_dims(mx::astype(x, mx::int64, s), -1, s);
  const mx::array hit =
      mx::logical_and(mx::equal(xi, int64_vector(cats), s),
                      mx::astype(mx::array(live.begin(), {nc}, mx::uint8), mx::bool_, s), s);
  if (n.attr_int("zeros", 1) == 0)
    ctx.require(n, mx::any(hit, -1, false, s), "Unknown Category and zeros = 0.");
  ctx.bind_output(n, 0, mx::astype(hit, mx::float32, s));
}

// ---------------------------------------------------------------- LabelEncoder

// Keys or values of one numeric kind, from the list attribute or (opset 4) the tensor one.
struct NumericTable {
  bool ok = false;
  std::string why;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  size_t size() const { return ints.size() + floats.size(); }
};

const ConstTensor* tensor_attr(const NodeView& n, const char* name) {
  auto it = n.attrs.find(name);
  if (it == n.attrs.end()) return nullptr;
  const auto* p = std::get_if<std::shared_ptr<const ConstTensor>>(&it->second);
  return p ? p->get() : nullptr;
}

NumericTable read_table(const NodeView& n, ElemType t, const char* int_attr, const char* float_attr,
                        const char* tensor_name, bool tensors_ok) {
  NumericTable out;
  const char* attr = t == ElemType::kInt64 ? int_attr : float_attr;
  if (n.has_attr(attr)) {
    if (t == ElemType::kInt64)
      out.ints = n.attr_ints(attr).value_or(std::vector<int64_t>{});
    else
      out.floats = n.attr_floats(attr).value_or(std::vector<float>{});
    out.ok = true;
    return out;
  }
  const ConstTensor* tensor = tensors_ok ? tensor_attr(n, tensor_name) : nullptr;
  if (!tensor) {
    out.why = std::string(attr) + " is absent";
    return out;
  }
  if (tensor->dtype != t) {
    out.why =
        std::string(tensor_name) + " has type " + type_str(tensor->dtype) + ", not " + type_str(t);
    return out;
  }
  if (t == ElemType::kInt64) {
    out.ints = tensor->as_int64().value_or(std::vector<int64_t>{});
  } else {
    const auto d = tensor->as_double().value_or(std::vector<double>{});
    for (double v : d) out.floats.push_back(static_cast<float>(v));
  }
  out.ok = true;
  return out;
}

bool int64_or_float(ElemType t) {
  return t == ElemType::kInt64 || t == ElemType::kFloat;
}

ClaimResult claim_label_encoder(const ClaimContext& c) {
  const NodeView& n = c.node();
  const bool v4 = n.since_version >= 4;
  ORTMLX_CLAIM_OK(refuse_unknown_attrs(
      c, {"keys_int64s", "keys_floats", "values_int64s", "values_floats", "default_int64",
          "default_float", "default_string", "keys_tensor", "values_tensor", "default_tensor",
          "keys_strings", "values_strings"}));
  ORTMLX_REQUIRE(!n.has_attr("keys_strings") && !n.has_attr("values_strings"),
                 "string tables are not supported");
  ORTMLX_CLAIM_OK(require_input_type(c, 0, int64_or_float, "int64 or float keys only"));
  const ElemType vt = c.output_type(0);
  ORTMLX_REQUIRE(int64_or_float(vt), "output type " + type_str(vt) +
                                         " is not int64 or float (string tables not supported)");
  const NumericTable keys =
      read_table(n, c.input_type(0), "keys_int64s", "keys_floats", "keys_tensor", v4);
  ORTMLX_REQUIRE(keys.ok, keys.why);
  const NumericTable values =
      read_table(n, vt, "values_int64s", "values_floats", "values_tensor", v4);
  ORTMLX_REQUIRE(values.ok, values.why);
  ORTMLX_REQUIRE(keys.size() == values.size(), "keys and values differ in length");
  if (const ConstTensor* d = v4 ? tensor_attr(n, "default_tensor") : nullptr) {
    ORTMLX_REQUIRE(d->dtype == vt && d->numel() >= 1,
                   "default_tensor must hold a value of the output type");
  }
  return ClaimResult::yes();
}

void translate_label_encoder(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const bool v4 = n.since_version >= 4;
  const mx::array x = ctx.input(n, 0);
  const ElemType kt = x.dtype() == mx::int64 ? ElemType::kInt64 : ElemType::kFloat;
  const ElemType vt = n.output_infos.at(0).dtype;
  const NumericTable keys = read_table(n, kt, "keys_int64s", "keys_floats", "keys_tensor", v4);
  const NumericTable values =
      read_table(n, vt, "values_int64s", "values_floats", "values_tensor", v4);
  if (!keys.ok || !values.ok || keys.size() != values.size())
    throw std::runtime_error("LabelEncoder tables do not match the claim");
  // Defaults as ORT's kernels pick them (opset 4 has 0.0 for int64 -> float, -0.0 otherwise).
  mx::array deflt(0);
  const ConstTensor* dt = v4 ? tensor_attr(n, "default_tensor") : nullptr;
  if (vt == ElemType::kInt64) {
    int64_t d = n.attr_int("default_int64", -1);
    if (dt) d = dt->as_int64().value().at(0);
    deflt = mx::array(d, mx::int64);
  } else {
    float d = (v4 && kt == ElemType::kInt64) ? 0.0f : -0.0f;
    d = n.attr_float("default_float", d);
    if (dt) d = static_cast<float>(dt->as_double().value().at(0));
    deflt = mx::array(d);
  }
  const int k = static_cast<int>(keys.size());
  if (k == 0) {
    ctx.bind_output(n, 0, mx::broadcast_to(deflt, x.shape(), s));
    return;
  }
  const mx::array key_arr =
      kt == ElemType::kInt64 ? int64_vector(keys.ints) : float_vector(keys.floats);
  const mx::array val_arr =
      vt == ElemType::kInt64 ? int64_vector(values.ints) : float_vector(values.floats);
  const mx::array xe = mx::expand_dims(x, -1, s);
  mx::array eq = mx::equal(xe, key_arr, s);
  if (v4 && kt == ElemType::kFloat)  // opset 4's map finds a NaN key for a NaN input
    eq = mx::logical_or(eq, mx::logical_and(mx::isnan(xe, s), mx::isnan(key_arr, s), s), s);
  // The first of equal keys wins (ORT's map keeps the first insertion); argmax finds it.
  const mx::array first = first_max(mx::astype(eq, mx::int32, s), -1, s);
  const mx::array found = mx::any(eq, -1, false, s);
  ctx.bind_output(n, 0, mx::where(found, mx::take(val_arr, first, s), deflt, s));
}

// ---------------------------------------------------------------- LinearRegressor

ClaimResult claim_linear_regressor(const ClaimContext& c) {
  ORTMLX_CLAIM_OK(
      refuse_unknown_attrs(c, {"coefficients", "intercepts", "post_transform", "targets"}));
  ORTMLX_CLAIM_OK(require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kFloat; }, "float only: ORT CPU's kernel"));
  const NodeView& n = c.node();
  ORTMLX_REQUIRE(n.has_attr("targets"), "targets is absent (ORT requires it)");
  ORTMLX_REQUIRE(n.has_attr("coefficients"), "coefficients is absent (ORT requires it)");
  const int64_t targets = n.attr_int("targets", 1);
  ORTMLX_REQUIRE(targets >= 1 && targets <= (1 << 20), "targets out of range");
  ORTMLX_CLAIM_OK(claim_post_transform(n));
  ORTMLX_REQUIRE(c.input_rank(0) <= 2, "input rank above 2 (ORT refuses it)");
  return claim_weights(c, n.attr_floats("coefficients")->size(), targets);
}

void translate_linear_regressor(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const int targets = checked_int(n.attr_int("targets", 1), "targets");
  const mx::array x = as_batch(ctx, ctx.input(n, 0));
  const mx::array w = weight_matrix(n, "coefficients", targets, x.shape(1));
  const auto intercepts = n.attr_floats("intercepts").value_or(std::vector<float>{});
  mx::array y = mx::matmul(x, mx::transpose(w, s), s);
  // ORT adds the intercepts only when there is one per target.
  if (static_cast<int>(intercepts.size()) == targets) y = mx::add(y, float_vector(intercepts), s);
  ctx.bind_output(n, 0, post_transform(y, parse_post_transform(n), s));
}

// ---------------------------------------------------------------- LinearClassifier

ClaimResult claim_linear_classifier(const ClaimContext& c) {
  ORTMLX_CLAIM_OK(
      refuse_unknown_attrs(c, {"coefficients", "intercepts", "post_transform", "multi_class",
                               "classlabels_ints", "classlabels_strings"}));
  ORTMLX_CLAIM_OK(require_input_type(c, 0, f32_i32_i64, kF32I32I64));
  const NodeView& n = c.node();
  ORTMLX_REQUIRE(!n.has_attr("classlabels_strings"), "string class labels are not supported");
  ORTMLX_REQUIRE(n.has_attr("coefficients"), "coefficients is absent (ORT requires it)");
  ORTMLX_CLAIM_OK(claim_post_transform(n));
  const size_t classes = n.attr_floats("intercepts").value_or(std::vector<float>{}).size();
  ORTMLX_REQUIRE(classes >= 1, "intercepts is empty (ORT counts the classes by the intercepts)");
  const size_t labels = n.attr_ints("classlabels_ints").value_or(std::vector<int64_t>{}).size();
  if (classes > 1) ORTMLX_REQUIRE(labels >= classes, "fewer class labels than classes");
  if (classes == 1 && labels == 2)
    ORTMLX_REQUIRE(parse_post_transform(n) != PostTransform::kProbit,
                   "PROBIT on a binary classifier with two labels leaves ORT's second score "
                   "column unwritten");
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank == -1 || rank == 1 || rank == 2, "input rank is not 1 or 2");
  return claim_weights(c, n.attr_floats("coefficients")->size(), static_cast<int64_t>(classes));
}

void translate_linear_classifier(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x0 = ctx.input(n, 0);
  if (x0.ndim() != 1 && x0.ndim() != 2) throw std::runtime_error("input must be rank 1 or 2");
  const mx::array x = as_batch(ctx, mx::astype(x0, mx::float32, s));
  const auto intercepts = n.attr_floats("intercepts").value_or(std::vector<float>{});
  const auto labels = n.attr_ints("classlabels_ints").value_or(std::vector<int64_t>{});
  const int classes = static_cast<int>(intercepts.size());
  const mx::array w = weight_matrix(n, "coefficients", classes, x.shape(1));
  const mx::array scores =
      mx::add(mx::matmul(x, mx::transpose(w, s), s), float_vector(intercepts), s);
  const PostTransform pt = parse_post_transform(n);
  if (classes == 1) {
    const bool two = labels.size() == 2;
    const mx::array pos(two ? labels[1] : int64_t{1}, mx::int64);
    const mx::array neg(two ? labels[0] : int64_t{0}, mx::int64);
    const mx::array col = mx::squeeze(scores, 1, s);
    ctx.bind_output(n, 0, mx::where(mx::greater(col, mx::array(0.0f), s), pos, neg, s));
    // Two labels: ORT writes two columns (PROBIT refused at claim).
    ctx.bind_output(n, 1,
                    two ? binary_scores(scores, pt, false, s) : post_transform(scores, pt, s));
    return;
  }
  const mx::array best = first_max(scores, 1, s);  // first of equal maxima, like ORT
  ctx.bind_output(n, 0, mx::take(int64_vector(labels), best, s));
  ctx.bind_output(n, 1, post_transform(scores, pt, s));
}

}  // namespace

void register_ml_ops(OpRegistry& r) {
  const char* ml = "ai.onnx.ml";
  const int any = 1 << 30;
  r.add(ml, "Binarizer", 1, any, claim_binarizer, translate_binarizer);
  r.add(ml, "Scaler", 1, any, claim_scaler, translate_scaler);
  r.add(ml, "Normalizer", 1, any, claim_normalizer, translate_normalizer);
  r.add(ml, "Imputer", 1, any, claim_imputer, translate_imputer);
  r.add(ml, "ArrayFeatureExtractor", 1, any, claim_array_feature_extractor,
        translate_array_feature_extractor);
  r.add(ml, "FeatureVectorizer", 1, any, claim_feature_vectorizer, translate_feature_vectorizer);
  r.add(ml, "OneHotEncoder", 1, any, claim_one_hot_encoder, translate_one_hot_encoder);
  r.add(ml, "LabelEncoder", 2, any, claim_label_encoder, translate_label_encoder);
  r.add(ml, "LinearRegressor", 1, any, claim_linear_regressor, translate_linear_regressor);
  r.add(ml, "LinearClassifier", 1, any, claim_linear_classifier, translate_linear_classifier);
  register_ml_svm_ops(r);
}

}  // namespace ortmlx
