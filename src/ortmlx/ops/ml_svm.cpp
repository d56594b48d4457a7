// ai.onnx.ml SVMRegressor and SVMClassifier (numeric labels), as ONNX Runtime's CPU kernels
// compute them. Two modes, chosen by the attributes: with support vectors (libsvm: a kernel
// matrix against the support vectors, then per-class-pair decision values and one-vs-one
// votes), or without (liblinear: a plain linear model). Kernels LINEAR, POLY, RBF and SIGMOID.
// The probability calibration (prob_a / prob_b, libsvm's iterative pairwise coupling) is refused.
#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/ml_common.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;
using namespace ortmlx::ops::ml;

enum class Kernel { kLinear, kPoly, kRbf, kSigmoid };

struct KernelParams {
  Kernel type = Kernel::kLinear;
  float gamma = 0.0f, coef0 = 0.0f, degree = 0.0f;
};

ClaimResult claim_kernel(const NodeView& n) {
  const std::string k = n.attr_string("kernel_type", "LINEAR");
  ORTMLX_REQUIRE(k == "LINEAR" || k == "POLY" || k == "RBF" || k == "SIGMOID",
                 "kernel_type '" + k + "' is not LINEAR, POLY, RBF or SIGMOID");
  ORTMLX_REQUIRE(n.has_attr("kernel_params"), "kernel_params is absent (ORT requires it)");
  const size_t np = n.attr_floats("kernel_params").value_or(std::vector<float>{}).size();
  ORTMLX_REQUIRE(np == 0 || np >= 3, "kernel_params needs gamma, coef0 and degree");
  ORTMLX_REQUIRE(n.has_attr("rho") && n.has_attr("coefficients"),
                 "rho or coefficients is absent (ORT requires both)");
  ORTMLX_REQUIRE(!n.attr_floats("coefficients").value_or(std::vector<float>{}).empty(),
                 "coefficients is empty (ORT refuses the node)");
  ORTMLX_REQUIRE(!n.attr_floats("rho").value_or(std::vector<float>{}).empty(),
                 "rho is empty (ORT reads its first value)");
  return ClaimResult::yes();
}

KernelParams read_kernel(const NodeView& n, bool with_vectors) {
  KernelParams p;
  const std::string k = n.attr_string("kernel_type", "LINEAR");
  // Without support vectors ORT always uses the linear kernel.
  if (with_vectors) {
    if (k == "POLY") p.type = Kernel::kPoly;
    if (k == "RBF") p.type = Kernel::kRbf;
    if (k == "SIGMOID") p.type = Kernel::kSigmoid;
  }
  const auto params = n.attr_floats("kernel_params").value_or(std::vector<float>{});
  if (params.size() >= 3) {
    p.gamma = params[0];
    p.coef0 = params[1];
    p.degree = params[2];
  }
  return p;
}

// [N, F] x [V, F] -> [N, V] through the kernel, with ORT's formulas.
mx::array kernel_matrix(const mx::array& x, const mx::array& v, const KernelParams& p,
                        mx::StreamOrDevice s) {
  if (p.type == Kernel::kRbf) {
    const mx::array d = mx::subtract(mx::expand_dims(x, 1, s), mx::expand_dims(v, 0, s), s);
    const mx::array sq = mx::sum(mx::multiply(d, d, s), 2, false, s);
    return mx::exp(mx::multiply(mx::array(-p.gamma), sq, s), s);
  }
  const mx::array dot = mx::matmul(x, mx::transpose(v, s), s);
  if (p.type == Kernel::kLinear) return dot;
  const mx::array lin = mx::add(mx::multiply(mx::array(p.gamma), dot, s), mx::array(p.coef0), s);
  if (p.type == Kernel::kSigmoid) return mx::tanh(lin, s);
  if (p.degree == 2.0f) return mx::multiply(lin, lin, s);
  if (p.degree == 3.0f) return mx::multiply(mx::multiply(lin, lin, s), lin, s);
  return mx::power(lin, mx::array(p.degree), s);
}

ClaimResult require_float_rank_1_2(const ClaimContext& c, bool ints_too) {
  ORTMLX_CLAIM_OK(require_input_type(
      c, 0,
      [ints_too](ElemType t) {
        return t == ElemType::kFloat ||
               (ints_too && (t == ElemType::kInt32 || t == ElemType::kInt64));
      },
      ints_too ? "float, int32 or int64 (ORT CPU's kernel types)"
               : "float only: ORT CPU's kernel"));
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank == -1 || rank == 1 || rank == 2, "input rank is not 1 or 2");
  return ClaimResult::yes();
}

// The input as [N, F] float, F checked against the model's feature count.
mx::array batch_input(const TranslationContext& ctx, const NodeDesc& n, int64_t features) {
  const mx::array x0 = ctx.input(n, 0);
  if (x0.ndim() != 1 && x0.ndim() != 2) throw std::runtime_error("input must be rank 1 or 2");
  const mx::array x = as_batch(ctx, mx::astype(x0, mx::float32, ctx.stream()));
  if (x.shape(1) != features)
    throw std::runtime_error("input has " + std::to_string(x.shape(1)) + " features, the model " +
                             std::to_string(features));
  return x;
}

// ---------------------------------------------------------------- SVMRegressor

ClaimResult claim_svm_regressor(const ClaimContext& c) {
  ORTMLX_CLAIM_OK(
      refuse_unknown_attrs(c, {"coefficients", "kernel_params", "kernel_type", "n_supports",
                               "one_class", "post_transform", "rho", "support_vectors"}));
  ORTMLX_CLAIM_OK(require_float_rank_1_2(c, false));
  const NodeView& n = c.node();
  ORTMLX_CLAIM_OK(claim_kernel(n));
  ORTMLX_REQUIRE(n.has_attr("n_supports"), "n_supports is absent (ORT requires it)");
  const int64_t v = n.attr_int("n_supports", 0);
  ORTMLX_REQUIRE(v >= 0 && v <= (1 << 24), "n_supports out of range");
  const size_t sv = n.attr_floats("support_vectors").value_or(std::vector<float>{}).size();
  const size_t coef = n.attr_floats("coefficients")->size();
  if (v > 0) {
    ORTMLX_REQUIRE(sv >= static_cast<size_t>(v), "fewer support vector values than n_supports");
    ORTMLX_REQUIRE(coef >= static_cast<size_t>(v), "fewer coefficients than support vectors");
  }
  return ClaimResult::yes();
}

void translate_svm_regressor(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const int v = checked_int(n.attr_int("n_supports", 0), "n_supports");
  const auto coef = n.attr_floats("coefficients").value_or(std::vector<float>{});
  const float rho = n.attr_floats("rho").value_or(std::vector<float>{0.0f}).at(0);
  mx::array y(0.0f);
  if (v > 0) {
    const auto sv = n.attr_floats("support_vectors").value_or(std::vector<float>{});
    const int f = static_cast<int>(sv.size() / v);
    const mx::array x = batch_input(ctx, n, f);
    const mx::array k =
        kernel_matrix(x, weight_matrix(n, "support_vectors", v, f), read_kernel(n, true), s);
    y = mx::matmul(k, weight_matrix(n, "coefficients", v, 1), s);
  } else {
    const int f = static_cast<int>(coef.size());
    const mx::array x = batch_input(ctx, n, f);
    y = mx::matmul(x, weight_matrix(n, "coefficients", f, 1), s);
  }
  // ORT ignores post_transform here.
  y = mx::add(y, mx::array(rho), s);
  if (n.attr_int("one_class", 0) != 0)
    y = mx::where(mx::greater(y, mx::array(0.0f), s), mx::array(1.0f), mx::array(-1.0f), s);
  ctx.bind_output(n, 0, y);
}

// ---------------------------------------------------------------- SVMClassifier

ClaimResult claim_svm_classifier(const ClaimContext& c) {
  ORTMLX_CLAIM_OK(refuse_unknown_attrs(
      c, {"classlabels_ints", "classlabels_strings", "coefficients", "kernel_params", "kernel_type",
          "post_transform", "prob_a", "prob_b", "rho", "support_vectors", "vectors_per_class"}));
  ORTMLX_CLAIM_OK(require_float_rank_1_2(c, true));
  const NodeView& n = c.node();
  ORTMLX_REQUIRE(!n.has_attr("classlabels_strings"), "string class labels are not supported");
  ORTMLX_REQUIRE(!n.has_attr("prob_a") && !n.has_attr("prob_b"),
                 "prob_a/prob_b calibration (libsvm's iterative pairwise coupling) is not "
                 "implemented");
  ORTMLX_CLAIM_OK(claim_kernel(n));
  ORTMLX_CLAIM_OK(claim_post_transform(n));
  const size_t classes = n.attr_ints("classlabels_ints").value_or(std::vector<int64_t>{}).size();
  ORTMLX_REQUIRE(classes >= 1 && classes < 65536, "classlabels_ints must hold 1 to 65535 labels");
  const auto per_class = n.attr_ints("vectors_per_class").value_or(std::vector<int64_t>{});
  int64_t vectors = 0;
  for (int64_t k : per_class) {
    ORTMLX_REQUIRE(k >= 0 && k <= (1 << 24), "vectors_per_class value out of range");
    vectors += k;
  }
  const size_t coef = n.attr_floats("coefficients")->size();
  const size_t rho = n.attr_floats("rho")->size();
  if (vectors > 0) {
    ORTMLX_REQUIRE(per_class.size() == classes, "vectors_per_class and class labels differ");
    ORTMLX_REQUIRE(classes >= 2, "a support-vector classifier needs two classes");
    ORTMLX_REQUIRE(coef >= (classes - 1) * static_cast<size_t>(vectors),
                   "fewer coefficients than (classes - 1) x support vectors");
    const size_t pairs = classes * (classes - 1) / 2;
    ORTMLX_REQUIRE(rho >= pairs, "fewer rho values than class pairs");
    // The translator lays out one weight row and two vote rows per class pair.
    ORTMLX_REQUIRE(pairs * (static_cast<size_t>(vectors) + 2 * classes) <= (size_t{1} << 26),
                   "too many class pairs x support vectors for the pairwise tables");
    const size_t sv = n.attr_floats("support_vectors").value_or(std::vector<float>{}).size();
    ORTMLX_REQUIRE(sv >= static_cast<size_t>(vectors), "fewer support vector values than vectors");
    if (classes == 2)
      ORTMLX_REQUIRE(parse_post_transform(n) != PostTransform::kProbit,
                     "PROBIT on a two-class support-vector classifier leaves ORT's second score "
                     "column unwritten");
  }
  return ClaimResult::yes();
}

// Labels of the first maximum of `weights` [N, C].
mx::array labels_of(const std::vector<int64_t>& labels, const mx::array& weights,
                    mx::StreamOrDevice s) {
  return mx::take(int64_vector(labels), first_max(weights, 1, s), s);
}

void translate_svm_linear(TranslationContext& ctx, const NodeDesc& n,
                          const std::vector<int64_t>& labels) {
  const auto s = ctx.stream();
  const int classes = static_cast<int>(labels.size());
  const auto coef = n.attr_floats("coefficients").value_or(std::vector<float>{});
  const int f = static_cast<int>(coef.size() / classes);
  const float rho = n.attr_floats("rho").value_or(std::vector<float>{0.0f}).at(0);
  const mx::array x = batch_input(ctx, n, f);
  const mx::array scores =
      mx::add(mx::matmul(x, mx::transpose(weight_matrix(n, "coefficients", classes, f), s), s),
              mx::array(rho), s);
  mx::array label = labels_of(labels, scores, s);
  if (classes == 2) {
    // ORT's binary rule on the top score: with all weights >= 0 the positive label needs 0.5,
    // otherwise any positive score.
    const bool positive = std::all_of(coef.begin(), coef.end(), [](float w) { return w >= 0; });
    const mx::array top = mx::max(scores, 1, false, s);
    const mx::array pos = positive ? mx::greater_equal(top, mx::array(0.5f), s)
                                   : mx::greater(top, mx::array(0.0f), s);
    label = mx::where(pos, mx::array(labels[1], mx::int64), label, s);
  }
  ctx.bind_output(n, 0, label);
  ctx.bind_output(n, 1, post_transform(scores, parse_post_transform(n), s));
}

void translate_svm_classifier(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const auto labels = n.attr_ints("classlabels_ints").value_or(std::vector<int64_t>{});
  const auto per_class = n.attr_ints("vectors_per_class").value_or(std::vector<int64_t>{});
  const int64_t total = std::accumulate(per_class.begin(), per_class.end(), int64_t{0});
  if (total == 0) return translate_svm_linear(ctx, n, labels);

  const int v = checked_int(total, "support vector count");
  const int classes = static_cast<int>(labels.size());
  const auto sv = n.attr_floats("support_vectors").value_or(std::vector<float>{});
  const auto coef = n.attr_floats("coefficients").value_or(std::vector<float>{});
  const auto rho = n.attr_floats("rho").value_or(std::vector<float>{});
  const int f = static_cast<int>(sv.size() / v);
  const mx::array x = batch_input(ctx, n, f);
  const mx::array k =
      kernel_matrix(x, weight_matrix(n, "support_vectors", v, f), read_kernel(n, true), s);

  // One row of weights per class pair (i, j), i < j: class i's vectors take coefficient row j-1,
  // class j's take row i (libsvm's layout); each pair votes for i when its value is positive.
  std::vector<int> start(classes, 0);
  for (int c = 1; c < classes; ++c) start[c] = start[c - 1] + static_cast<int>(per_class[c - 1]);
  const int pairs = classes * (classes - 1) / 2;  // bounded at claim with the tables below
  std::vector<float> w(static_cast<size_t>(pairs) * v, 0.0f);
  std::vector<float> vote_i(static_cast<size_t>(pairs) * classes, 0.0f), vote_j(vote_i);
  size_t p = 0;
  for (int i = 0; i < classes - 1; ++i) {
    for (int j = i + 1; j < classes; ++j, ++p) {
      for (int m = 0; m < per_class[i]; ++m)
        w[p * v + start[i] + m] = coef[static_cast<size_t>(j - 1) * v + start[i] + m];
      for (int m = 0; m < per_class[j]; ++m)
        w[p * v + start[j] + m] = coef[static_cast<size_t>(i) * v + start[j] + m];
      vote_i[p * classes + i] = 1.0f;
      vote_j[p * classes + j] = 1.0f;
    }
  }
  const mx::array wp(w.begin(), {pairs, v}, mx::float32);
  const mx::array rho_p(rho.begin(), {pairs}, mx::float32);
  const mx::array scores = mx::add(mx::matmul(k, mx::transpose(wp, s), s), rho_p, s);
  const mx::array win = mx::astype(mx::greater(scores, mx::array(0.0f), s), mx::float32, s);
  const mx::array votes =
      mx::add(mx::matmul(win, mx::array(vote_i.begin(), {pairs, classes}, mx::float32), s),
              mx::matmul(mx::subtract(mx::array(1.0f), win, s),
                         mx::array(vote_j.begin(), {pairs, classes}, mx::float32), s),
              s);
  ctx.bind_output(n, 0, labels_of(labels, votes, s));
  const PostTransform pt = parse_post_transform(n);
  if (classes == 2) {
    // One decision value, written with a second column (ORT's "mixed weights" form without a
    // transform).
    ctx.bind_output(n, 1, binary_scores(scores, pt, pt == PostTransform::kNone, s));
    return;
  }
  ctx.bind_output(n, 1, post_transform(scores, pt, s));
}

}  // namespace

void register_ml_svm_ops(OpRegistry& r) {
  r.add("ai.onnx.ml", "SVMRegressor", 1, 1 << 30, claim_svm_regressor, translate_svm_regressor);
  r.add("ai.onnx.ml", "SVMClassifier", 1, 1 << 30, claim_svm_classifier, translate_svm_classifier);
}

}  // namespace ortmlx
