// Normalisation family: LayerNormalization (opset 17), RMSNormalization (opset 23), Softmax,
// LogSoftmax and Hardmax (all opsets). The row kernels are shared with contrib_norm.cpp
// (norm_kernels.h).
//
// LayerNormalization is composed from MLX ops in float32 with the two-pass variance of the ONNX
// function body (mean, then mean of squared deviations), on pivot-shifted rows (see below).
// mx::fast::layer_norm is used only where the pattern option allows it (GPU backends by default:
// one kernel there; ops/patterns), on pivot-shifted rows, for the last axis with 1-D weights:
// its plain float32 statistics lose the spread of rows with a large mean unshifted.
//
// Rows with huge values are divided by their largest magnitude first (and the statistics scaled
// back): squared deviations of values beyond ~1e19 overflow float32, which made the variance Inf
// or (through an overflowing row sum) the mean and every output NaN. ORT's CPU kernel overflows
// too and returns 0 for such rows (a float64 computation gives finite normalised values: see
// tests/ops/test_norm.py::test_layer_norm_huge_rows_match_float64); ours match float64 there.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <mlx/fast.h>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/norm/cuda/softmax.h"
#include "ortmlx/ops/norm_kernels.h"
#include "ortmlx/ops/op_args.h"
#include "ortmlx/ops/ops.h"
#include "ortmlx/ops/patterns/patterns.h"

namespace ortmlx {
namespace ops {

// Scale and B broadcast unidirectionally to X (right-aligned dims equal or 1).
void check_unidirectional(const mx::array& p, const mx::array& x, const char* what) {
  bool ok = p.ndim() <= x.ndim();
  for (int i = 1; ok && i <= static_cast<int>(p.ndim()); ++i)
    ok = p.shape(-i) == 1 || p.shape(-i) == x.shape(-i);
  if (!ok) throw std::runtime_error(std::string(what) + " is not broadcastable to X");
}

ClaimResult require_norm_axis(const ClaimContext& c) {
  const int64_t rank = c.input_rank(0);
  const int64_t axis = c.node().attr_int("axis", -1);
  ORTMLX_REQUIRE(
      rank < 0 || (axis >= -rank && axis < rank),
      "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return ClaimResult::yes();
}

std::vector<int> trailing_axes(int axis, int rank) {
  std::vector<int> axes;
  for (int i = axis; i < rank; ++i) axes.push_back(i);
  return axes;
}

NormRows layer_norm_rows(const mx::array& x_in, const std::vector<int>& axes, float eps,
                         mx::StreamOrDevice s) {
  mx::array xf = x_in;
  const int rank = static_cast<int>(xf.ndim());
  // Rows whose largest magnitude m exceeds 2^40 are divided by it (others by 1, which is exact):
  // below 2^40 no sum of squared deviations overflows float32 for any row length MLX can hold
  // (16 * 2^80 * 2^31 < FLT_MAX). The normalised output is scale-free apart from epsilon, which
  // scales by 1/m^2 (kept above 0 so a constant row still gives 0, not 0 * Inf); the mean scales
  // by m. Rows holding Inf or NaN are left alone (m = 1): they propagate as before.
  const mx::array amax = mx::max(mx::abs(xf, s), axes, /*keepdims=*/true, s);
  const mx::array big =
      mx::logical_and(mx::greater(amax, mx::array(0x1p40f), s), mx::isfinite(amax, s), s);
  const mx::array m = mx::where(big, amax, mx::array(1.0f), s);
  xf = mx::divide(xf, m, s);
  const float eps_floor = eps > 0.f ? std::numeric_limits<float>::denorm_min() : 0.f;
  const mx::array eps_n = mx::where(
      big, mx::maximum(mx::divide(mx::divide(mx::array(eps), m, s), m, s), mx::array(eps_floor), s),
      mx::array(eps), s);
  // Shift each row by one of its own elements before averaging: for rows with a large mean and a
  // small spread the float32 sum of raw values loses the spread, the sum of shifted values does
  // not (x - pivot is exact when both are close). Mathematically a no-op.
  mx::Shape stop = xf.shape();
  for (int a : axes) stop[a] = std::min(stop[a], 1);
  mx::array pivot = mx::slice(xf, mx::Shape(rank, 0), stop, s);
  // A non-finite pivot would turn every shifted value into NaN (Inf - Inf) and hide a row mean of
  // +-Inf; such rows are not shifted (their outputs are NaN anyway, their mean stays the float64
  // one: Inf for one Inf, NaN for mixed signs or NaN).
  pivot = mx::where(mx::isfinite(pivot, s), pivot, mx::array(0.0f), s);
  mx::array xs = mx::subtract(xf, pivot, s);
  mx::array mean_s = mx::mean(xs, axes, /*keepdims=*/true, s);
  mx::array d = mx::subtract(xs, mean_s, s);
  mx::array mean = mx::multiply(mx::add(pivot, mean_s, s), m, s);
  mx::array var = mx::mean(mx::square(d, s), axes, /*keepdims=*/true, s);
  mx::array inv_std_n = mx::reciprocal(mx::sqrt(mx::add(var, eps_n, s), s), s);
  // InvStdDev = 1 / sqrt(var * m^2 + eps) for scaled rows; where var * m^2 overflows, epsilon is
  // negligible and it is inv_std_n / m (computed so, a constant row would get 1 / sqrt(eps/m^2)/m
  // with eps/m^2 rounded to the smallest subnormal, instead of 1 / sqrt(eps)).
  const mx::array var_unscaled =
      mx::add(mx::multiply(mx::multiply(var, m, s), m, s), mx::array(eps), s);
  mx::array inv_std = mx::where(
      big,
      mx::where(mx::isfinite(var_unscaled, s), mx::reciprocal(mx::sqrt(var_unscaled, s), s),
                mx::divide(inv_std_n, m, s), s),
      inv_std_n, s);
  return {mx::multiply(d, inv_std_n, s), mean, inv_std};
}

NormRows rms_norm_rows(const mx::array& xf, const std::vector<int>& axes, float eps,
                       mx::StreamOrDevice s) {
  // Rows whose largest magnitude m exceeds 2^40 are divided by it first (x^2 of values beyond
  // ~1.8e19 overflows float32); the result is scale-free apart from epsilon, which scales by
  // 1/m^2. After scaling the row's mean square is at least 1/n, so eps/m^2 underflowing is
  // harmless.
  const mx::array amax = mx::max(mx::abs(xf, s), axes, /*keepdims=*/true, s);
  const mx::array big =
      mx::logical_and(mx::greater(amax, mx::array(0x1p40f), s), mx::isfinite(amax, s), s);
  const mx::array m = mx::where(big, amax, mx::array(1.0f), s);
  const mx::array xs = mx::divide(xf, m, s);
  const mx::array eps_n = mx::divide(mx::divide(mx::array(eps), m, s), m, s);
  const mx::array ms = mx::mean(mx::square(xs, s), axes, /*keepdims=*/true, s);
  const mx::array inv_n = mx::rsqrt(mx::add(ms, eps_n, s), s);
  return {mx::multiply(xs, inv_n, s), mx::zeros_like(ms, s), mx::divide(inv_n, m, s)};
}

}  // namespace ops

namespace {

using namespace ortmlx::ops;

// ---------------------------------------------------------------- LayerNormalization

ClaimResult claim_layer_norm(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2 || c.num_inputs() == 3, "expects 2 or 3 inputs (X, Scale, B)");
  ORTMLX_REQUIRE(c.num_outputs() >= 1 && c.num_outputs() <= 3, "expects 1 to 3 outputs");
  auto r = refuse_unknown_attrs(c, {"axis", "epsilon", "stash_type"});
  if (!r.ok) return r;
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (i == 2 && !c.has_input(2)) continue;
    r = require_input_type(c, i, is_float_type, "float16/bfloat16/float32 only");
    if (!r.ok) return r;
  }
  r = require_same_types(c);
  if (!r.ok) return r;
  // stash_type=1 computes in float32. Other stash types differ only for half inputs.
  const int64_t stash = c.node().attr_int("stash_type", 1);
  ORTMLX_REQUIRE(
      stash == 1 || c.input_type(0) == ElemType::kFloat,
      "stash_type " + std::to_string(stash) + " with a half-precision input is not implemented");
  // Mean and InvStdDev are float32 (the stash type).
  for (size_t i = 1; i < c.num_outputs(); ++i) {
    const ElemType t = c.output_type(i);
    ORTMLX_REQUIRE(t == ElemType::kUndefined || t == ElemType::kFloat,
                   "output " + std::to_string(i) + " type " + type_str(t) + " is not float32");
  }
  return require_norm_axis(c);
}

void translate_layer_norm(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  mx::array scale = ctx.input(n, 1);
  const int rank = static_cast<int>(x.ndim());
  const int axis = normalize_axis(n.attr_int("axis", -1), rank);
  const std::vector<int> axes = trailing_axes(axis, rank);
  const float eps = n.attr_float("epsilon", 1e-5f);
  for (int a : axes)
    if (x.shape(a) == 0)
      throw std::runtime_error(
          "LayerNormalization: X.shape[axis:] has no elements (ORT's CPU "
          "kernel rejects this too)");

  // MLX's fused kernel (one kernel on GPU backends, two-pass float32 statistics) on pivot-shifted
  // rows: for float32 rows over the last axis with vector scale/shift, when only Y is asked for.
  // Rows whose spread exceeds ~1e19 overflow there, as in ORT's CPU and CUDA kernels;
  // fast_patterns=0 keeps the guarded path.
  const bool want_stats = (n.outputs.size() > 1 && !n.outputs[1].empty()) ||
                          (n.outputs.size() > 2 && !n.outputs[2].empty());
  const bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
  auto last_axis_vector = [&](const mx::array& p) {
    return p.dtype() == mx::float32 && p.ndim() == 1 && p.shape(0) == x.shape(-1);
  };
  if (patterns::fast_layer_norm_op_enabled(ctx.options()) && !want_stats &&
      x.dtype() == mx::float32 && axis == rank - 1 && last_axis_vector(scale) &&
      (!has_bias || last_axis_vector(ctx.input(n, 2)))) {
    std::optional<mx::array> b;
    if (has_bias) b = ctx.input(n, 2);
    patterns::bind_fast_layer_norm(ctx, n, x, scale, b, eps,
                                   "LayerNormalization -> mlx::fast::layer_norm");
    return;
  }

  const mx::Dtype dt = x.dtype();
  auto f32 = [&](const mx::array& a) {
    return a.dtype() == mx::float32 ? a : mx::astype(a, mx::float32, s);
  };
  mx::array xf = f32(x);
  NormRows st = layer_norm_rows(xf, axes, eps, s);
  // Scale and shift in float32 as ORT's CPU kernel does, rounding to X's type once at the end.
  check_unidirectional(scale, x, "Scale");
  mx::array y = mx::multiply(st.y, f32(scale), s);
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) {
    mx::array b = ctx.input(n, 2);
    check_unidirectional(b, x, "B");
    y = mx::add(y, f32(b), s);
  }
  ctx.bind_output(n, 0, y.dtype() == dt ? y : mx::astype(y, dt, s));
  ctx.bind_output(n, 1, st.mean);
  ctx.bind_output(n, 2, st.inv_std);
}

// ---------------------------------------------------------------- Softmax

ClaimResult claim_softmax(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input");
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  auto r = refuse_unknown_attrs(c, {"axis"});
  if (!r.ok) return r;
  r = require_input_type(c, 0, is_float_type, "float16/bfloat16/float32 only");
  if (!r.ok) return r;
  r = require_same_types(c);
  if (!r.ok) return r;
  const bool old_form = c.node().since_version < 13;
  const int64_t rank = c.input_rank(0);
  const int64_t axis = c.node().attr_int("axis", old_form ? 1 : -1);
  ORTMLX_REQUIRE(
      rank < 0 || (axis >= -rank && axis < rank),
      "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return ClaimResult::yes();
}

// Opset 13+: (log-)softmax along `axis`. Opsets 1-12: the input is coerced to 2-D at `axis`
// ([0, axis) and [axis, rank) flattened) and it runs over the second dimension.
// Softmax: precise=true accumulates half inputs in float32 (max-subtracted, numerically stable).
// LogSoftmax: (x - max) - log(sum(exp(x - max))) in float32, rounded once to X's type. A row max
// of +-Inf is subtracted as well, which makes the whole row NaN, as in ORT's CPU kernel.
mx::array log_softmax_f32(const mx::array& x, int axis, mx::StreamOrDevice s) {
  const mx::array xf = x.dtype() == mx::float32 ? x : mx::astype(x, mx::float32, s);
  const mx::array m = mx::max(xf, {axis}, /*keepdims=*/true, s);
  const mx::array sh = mx::subtract(xf, m, s);
  const mx::array lse = mx::log(mx::sum(mx::exp(sh, s), {axis}, /*keepdims=*/true, s), s);
  const mx::array y = mx::subtract(sh, lse, s);
  return y.dtype() == x.dtype() ? y : mx::astype(y, x.dtype(), s);
}

template <bool kLog>
void translate_softmax(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  const bool old_form = n.since_version < 13;
  const int rank = static_cast<int>(x.ndim());
  const int axis = normalize_axis(n.attr_int("axis", old_form ? 1 : -1), rank);
  auto run = [&](const mx::array& a, int ax) {
    return kLog ? log_softmax_f32(a, ax, s) : mx::softmax(a, {ax}, /*precise=*/true, s);
  };
  if (x.size() == 0) {  // MLX cannot reduce an empty axis; there is nothing to compute
    ctx.bind_output(n, 0, x);
    return;
  }
  if (!old_form) {
    // The rows in one CUDA kernel, the scores' scale and mask read off the graph (CUDA flavour).
    if (!kLog && axis == rank - 1 && cuda_softmax_applies(x, s)) {
      ctx.bind_output(n, 0, cuda_softmax(softmax_score_parts(x), x.shape(), s));
      ctx.mark_fast(n, "Softmax rows in one CUDA kernel (the scores' scale and mask folded in)");
      return;
    }
    ctx.bind_output(n, 0, run(x, axis));
    return;
  }
  int64_t rows = 1, cols = 1;
  for (int i = 0; i < rank; ++i) (i < axis ? rows : cols) *= x.shape(i);
  constexpr int64_t kMaxDim = 0x7fffffff;  // MLX shapes are int32
  if (rows > kMaxDim || cols > kMaxDim)
    throw std::runtime_error("Softmax 2-D view exceeds int32 dims");
  mx::array x2 = mx::reshape(x, {static_cast<int32_t>(rows), static_cast<int32_t>(cols)}, s);
  ctx.bind_output(n, 0, mx::reshape(run(x2, 1), x.shape(), s));
}

// ---------------------------------------------------------------- Hardmax

// float32 only (ORT's only kernel). Opsets 1-12 coerce to 2-D at `axis` (default 1) as Softmax
// does; 13+ run along `axis` (default -1).
ClaimResult claim_hardmax(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = refuse_unknown_attrs(c, {"axis"});
  if (!r.ok) return r;
  r = require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kFloat; }, "float32 only (ORT's kernel)");
  if (!r.ok) return r;
  r = require_same_types(c);
  if (!r.ok) return r;
  const bool old_form = c.node().since_version < 13;
  const int64_t rank = c.input_rank(0);
  const int64_t axis = c.node().attr_int("axis", old_form ? 1 : -1);
  ORTMLX_REQUIRE(
      rank < 0 || (axis >= -rank && axis < rank),
      "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return ClaimResult::yes();
}

// 1 at the first position of each row equal to the row's maximum, 0 elsewhere, as ORT's kernel
// (a row whose maximum is NaN has no such position: all zeros).
mx::array hardmax_rows(const mx::array& x, int axis, mx::StreamOrDevice s) {
  const int d = x.shape(axis);
  mx::Shape along(x.ndim(), 1);
  along[static_cast<size_t>(axis)] = d;
  const mx::array pos = mx::reshape(mx::arange(0, d, mx::int32, s), along, s);
  const mx::array m = mx::max(x, {axis}, /*keepdims=*/true, s);
  const mx::array at = mx::where(mx::equal(x, m, s), pos, mx::array(d, mx::int32), s);
  const mx::array first = mx::min(at, {axis}, /*keepdims=*/true, s);
  return mx::astype(mx::equal(pos, first, s), x.dtype(), s);
}

void translate_hardmax(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const bool old_form = n.since_version < 13;
  const int rank = static_cast<int>(x.ndim());
  const int axis = normalize_axis(n.attr_int("axis", old_form ? 1 : -1), rank);
  if (x.size() == 0) {
    ctx.bind_output(n, 0, x);
    return;
  }
  if (!old_form) {
    ctx.bind_output(n, 0, hardmax_rows(x, axis, s));
    return;
  }
  int64_t rows = 1, cols = 1;
  for (int i = 0; i < rank; ++i) (i < axis ? rows : cols) *= x.shape(i);
  const mx::array x2 = mx::reshape(x, checked_shape({rows, cols}), s);
  ctx.bind_output(n, 0, mx::reshape(hardmax_rows(x2, 1, s), x.shape(), s));
}

// ---------------------------------------------------------------- RMSNormalization

// Opset 23: Y = X / sqrt(mean(X^2 over [axis, rank)) + epsilon) * scale, computed in float32
// (stash_type 1), Y rounded to X's type. Scale broadcasts unidirectionally to X.
ClaimResult claim_rms_norm(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2, "expects 2 inputs (X, scale)");
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  auto r = refuse_unknown_attrs(c, {"axis", "epsilon", "stash_type"});
  if (!r.ok) return r;
  for (size_t i = 0; i < 2; ++i) {
    r = require_input_type(c, i, is_float_type, "float16/bfloat16/float32 only");
    if (!r.ok) return r;
  }
  r = require_same_types(c);
  if (!r.ok) return r;
  const int64_t stash = c.node().attr_int("stash_type", 1);
  ORTMLX_REQUIRE(
      stash == 1 || c.input_type(0) == ElemType::kFloat,
      "stash_type " + std::to_string(stash) + " with a half-precision input is not implemented");
  return require_norm_axis(c);
}

void translate_rms_norm(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  mx::array scale = ctx.input(n, 1);
  const int rank = static_cast<int>(x.ndim());
  const int axis = normalize_axis(n.attr_int("axis", -1), rank);
  const std::vector<int> axes = trailing_axes(axis, rank);
  check_unidirectional(scale, x, "scale");
  for (int a : axes)
    if (x.shape(a) == 0)
      throw std::runtime_error(
          "RMSNormalization: X.shape[axis:] has no elements (ORT's CPU "
          "kernel rejects this too)");
  auto f32 = [&](const mx::array& a) {
    return a.dtype() == mx::float32 ? a : mx::astype(a, mx::float32, s);
  };
  if (x.size() == 0) {
    ctx.bind_output(n, 0, x);
    return;
  }
  NormRows st = rms_norm_rows(f32(x), axes, n.attr_float("epsilon", 1e-5f), s);
  mx::array y = mx::multiply(st.y, f32(scale), s);
  ctx.bind_output(n, 0, y.dtype() == x.dtype() ? y : mx::astype(y, x.dtype(), s));
}

}  // namespace

void register_norm_ops(OpRegistry& r) {
  r.add("", "LayerNormalization", 17, 1 << 30, claim_layer_norm, translate_layer_norm);
  r.add("", "Softmax", 1, 1 << 30, claim_softmax, translate_softmax<false>);
  r.add("", "LogSoftmax", 1, 1 << 30, claim_softmax, translate_softmax<true>);
  // Three schema versions: 11 admits negative axes; 13 moves from 2-D coercion to one axis.
  r.add("", "Hardmax", 1, 10, claim_hardmax, translate_hardmax);
  r.add("", "Hardmax", 11, 12, claim_hardmax, translate_hardmax);
  r.add("", "Hardmax", 13, 1 << 30, claim_hardmax, translate_hardmax);
  r.add("", "RMSNormalization", 23, 1 << 30, claim_rms_norm, translate_rms_norm);
}

}  // namespace ortmlx
