// Shared pieces of the ai.onnx.ml family (ml.cpp, ml_svm.cpp): attribute vectors as MLX arrays,
// the batch/weight layout ORT's linear kernels use, and the score post transforms with ORT's
// formulas (its PROBIT is an approximate inverse error function, not the exact one).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <numbers>
#include <stdexcept>
#include <string>
#include <vector>

#include "ortmlx/ops/common.h"

// Claim helper: returns the refusal of a sub-check, else goes on.
#define ORTMLX_CLAIM_OK(expr)              \
  do {                                     \
    ::ortmlx::ClaimResult claim_ = (expr); \
    if (!claim_.ok) return claim_;         \
  } while (0)

namespace ortmlx::ops::ml {

inline mx::array float_vector(const std::vector<float>& v) {
  return mx::array(v.begin(), {static_cast<int>(v.size())}, mx::float32);
}

inline mx::array int64_vector(const std::vector<int64_t>& v) {
  return mx::array(v.begin(), {static_cast<int>(v.size())}, mx::int64);
}

enum class PostTransform { kNone, kLogistic, kSoftmax, kSoftmaxZero, kProbit };

// ORT reads any unknown name as PROBIT; the claim refuses unknown names instead.
inline PostTransform parse_post_transform(const NodeView& n) {
  const std::string p = n.attr_string("post_transform", "NONE");
  if (p == "NONE") return PostTransform::kNone;
  if (p == "LOGISTIC") return PostTransform::kLogistic;
  if (p == "SOFTMAX") return PostTransform::kSoftmax;
  if (p == "SOFTMAX_ZERO") return PostTransform::kSoftmaxZero;
  return PostTransform::kProbit;
}

inline ClaimResult claim_post_transform(const NodeView& n) {
  const std::string p = n.attr_string("post_transform", "NONE");
  ORTMLX_REQUIRE(
      p == "NONE" || p == "LOGISTIC" || p == "SOFTMAX" || p == "SOFTMAX_ZERO" || p == "PROBIT",
      "post_transform '" + p + "' is not NONE, LOGISTIC, SOFTMAX, SOFTMAX_ZERO or PROBIT");
  return ClaimResult::yes();
}

// ORT's logistic: 1 / (1 + exp(-|v|)), mirrored for negative v.
inline mx::array ort_logistic(const mx::array& v, mx::StreamOrDevice s) {
  const mx::array one(1.0f);
  const mx::array p =
      mx::divide(one, mx::add(one, mx::exp(mx::negative(mx::abs(v, s), s), s), s), s);
  return mx::where(mx::less(v, mx::array(0.0f), s), mx::subtract(one, p, s), p, s);
}

// ORT's PROBIT: sqrt(2) * erfinv(2v - 1), erfinv by Winitzki's approximation (a = 0.147), in
// float with ORT's constants.
inline mx::array ort_probit(const mx::array& v, mx::StreamOrDevice s) {
  const float pi = static_cast<float>(std::numbers::pi);
  const mx::array one(1.0f);
  const mx::array x = mx::subtract(mx::multiply(mx::array(2.0f), v, s), one, s);
  const mx::array sgn = mx::where(mx::less(x, mx::array(0.0f), s), mx::array(-1.0f), one, s);
  const mx::array lg = mx::log(mx::multiply(mx::subtract(one, x, s), mx::add(one, x, s), s), s);
  const mx::array a =
      mx::add(mx::array(2 / (pi * 0.147f)), mx::multiply(mx::array(0.5f), lg, s), s);
  const mx::array b = mx::multiply(mx::array(1 / 0.147f), lg, s);
  const mx::array v3 =
      mx::add(mx::negative(a, s), mx::sqrt(mx::subtract(mx::multiply(a, a, s), b, s), s), s);
  const mx::array erfinv = mx::multiply(sgn, mx::sqrt(v3, s), s);
  return mx::multiply(mx::array(static_cast<float>(std::numbers::sqrt2)), erfinv, s);
}

// Row softmax as ORT's ml kernels compute it (the maximum starts at -FLT_MAX).
inline mx::array ort_softmax(const mx::array& v, mx::StreamOrDevice s) {
  const mx::array m =
      mx::maximum(mx::max(v, 1, true, s), mx::array(-std::numeric_limits<float>::max()), s);
  const mx::array e = mx::exp(mx::subtract(v, m, s), s);
  return mx::divide(e, mx::sum(e, 1, true, s), s);
}

// SOFTMAX_ZERO: scores within 1e-7 of zero are scaled by exp(-max) and left out of the sum.
inline mx::array ort_softmax_zero(const mx::array& v, mx::StreamOrDevice s) {
  const mx::array m =
      mx::maximum(mx::max(v, 1, true, s), mx::array(-std::numeric_limits<float>::max()), s);
  const mx::array nz = mx::logical_or(mx::greater(v, mx::array(0.0000001f), s),
                                      mx::less(v, mx::array(-0.0000001f), s), s);
  const mx::array e = mx::where(nz, mx::exp(mx::subtract(v, m, s), s),
                                mx::multiply(v, mx::exp(mx::negative(m, s), s), s), s);
  const mx::array sum = mx::sum(mx::where(nz, e, mx::array(0.0f), s), 1, true, s);
  return mx::divide(e, sum, s);
}

// Scores [N, C] after ORT's batched post transform: with one column only PROBIT applies.
inline mx::array post_transform(const mx::array& scores, PostTransform pt, mx::StreamOrDevice s) {
  if (pt == PostTransform::kProbit) return ort_probit(scores, s);
  if (scores.shape(1) == 1) return scores;
  switch (pt) {
    case PostTransform::kLogistic:
      return ort_logistic(scores, s);
    case PostTransform::kSoftmax:
      return ort_softmax(scores, s);
    case PostTransform::kSoftmaxZero:
      return ort_softmax_zero(scores, s);
    default:
      return scores;
  }
}

// One score column [N, 1] widened to ORT's two binary columns: LOGISTIC gives [logistic(-s),
// logistic(s)]; otherwise [-s, s] for mixed-sign models (`mixed`), [1 - s, s] for the others.
inline mx::array binary_scores(const mx::array& s1, PostTransform pt, bool mixed,
                               mx::StreamOrDevice s) {
  if (pt == PostTransform::kLogistic)
    return mx::concatenate({ort_logistic(mx::negative(s1, s), s), ort_logistic(s1, s)}, 1, s);
  const mx::array first = mixed ? mx::negative(s1, s) : mx::subtract(mx::array(1.0f), s1, s);
  return mx::concatenate({first, s1}, 1, s);
}

// Index of the first maximum along `axis` (MLX's argmax refuses an empty array).
inline mx::array first_max(const mx::array& a, int axis, mx::StreamOrDevice s) {
  if (a.size() != 0) return mx::argmax(a, axis, false, s);
  mx::Shape shape = a.shape();
  shape.erase(shape.begin() + (axis < 0 ? axis + a.ndim() : axis));
  return mx::zeros(shape, mx::uint32, s);
}

// The [N, F] matrix ORT's linear kernels read: rank 1 is one row, rank 0 one feature.
inline mx::array as_batch(const TranslationContext& ctx, const mx::array& x) {
  if (x.ndim() == 0) return ctx.reshape(x, {1, 1});
  if (x.ndim() == 1) return ctx.reshape(x, {1, x.shape(0)});
  return x;
}

// Static feature count of input 0 as the linear kernels read it; -1 when unknown.
inline int64_t static_features(const ClaimContext& c) {
  const TensorInfo* in = c.input(0);
  if (!in || !in->has_shape) return -1;
  if (in->shape.empty()) return 1;
  return in->shape.size() == 1 ? in->shape[0] : in->shape[1];
}

// The first rows x cols values of a float list attribute as a [rows, cols] matrix (ORT reads
// that prefix; fewer values would be read past the end, so they raise).
inline mx::array weight_matrix(const NodeView& n, const char* attr, int rows, int cols) {
  const auto w = n.attr_floats(attr).value_or(std::vector<float>{});
  const int64_t need = checked_mul(rows, cols, "weight count");
  if (static_cast<int64_t>(w.size()) < need)
    throw std::runtime_error(std::string(attr) + " has " + std::to_string(w.size()) +
                             " values, fewer than " + std::to_string(rows) + " x " +
                             std::to_string(cols) + " features");
  return mx::array(w.begin(), {rows, cols}, mx::float32);
}

inline ClaimResult claim_weights(const ClaimContext& c, size_t count, int64_t rows) {
  const int64_t f = static_features(c);
  if (f >= 0)
    ORTMLX_REQUIRE(static_cast<int64_t>(count) >= rows * f,
                   "coefficients has " + std::to_string(count) + " values, fewer than " +
                       std::to_string(rows) + " x " + std::to_string(f) + " features");
  return ClaimResult::yes();
}

}  // namespace ortmlx::ops::ml
