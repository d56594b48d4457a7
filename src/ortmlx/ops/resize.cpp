// Resampling and block rearrangement: Resize (nearest / linear / cubic, scales or sizes, constant
// or read on the host at run time; linear / cubic with antialias), the older Upsample 7-9 and
// Resize 10 (nearest / linear, asymmetric coordinates), DepthToSpace (DCR, CRD), SpaceToDepth.
//
// Resize is separable for every mode implemented here: each resized axis is interpolated on its
// own (nearest: one gather; linear: two gathers and weights; cubic: four). The source indices
// and weights depend only on the sizes, so they are computed on the host at translate time
// (a plan whose scales or sizes come from a runtime value is translated each run: eager),
// in float32 with the same formulas ORT uses (upsamplebase.h), so that nearest-mode ties and
// linear weights come out the same; rounding of the sums differs only by order.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/host_values.h"
#include "ortmlx/ops/op_args.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

// ---------------------------------------------------------------- Resize

// A constant 1-D tensor input with at least one element (an empty one counts as absent, as in
// models exported with scales = [] next to sizes).
const ConstTensor* nonempty_const(const ClaimContext& c, size_t i) {
  if (!c.has_input(i)) return nullptr;
  const ConstTensor* t = c.constant_input(i);
  return t && t->numel() > 0 ? t : nullptr;
}

// Resize's axes attribute (opset 18): scales/sizes list only those axes, the others keep their
// size. Spreads `v` over a rank-long vector, `keep` elsewhere (v as is without axes).
template <typename T>
std::vector<T> full_rank(const std::vector<T>& v, const std::vector<int>& axes, int64_t rank,
                         T keep) {
  if (axes.empty()) return v;
  std::vector<T> out(static_cast<size_t>(rank), keep);
  for (size_t i = 0; i < axes.size() && i < v.size(); ++i) out[static_cast<size_t>(axes[i])] = v[i];
  return out;
}

// ORT's checks of the scales it resizes by (upsamplebase.h ScalesValidation), for the modes
// implemented: every scale finite and positive; linear resamples 2-D and 3-D inputs, or 4-D/5-D
// ones whose outer two scales are 1 (or, 4-D, whose first and last are: ORT's channels-last
// path); cubic 2-D inputs, or 4-D ones with the same rule (channels-last: scales >= 1 unless
// antialiased). Why the scales are rejected, or "" when they are fine.
std::string resize_scales_problem(const std::vector<float>& scale, const std::string& mode,
                                  bool antialias) {
  for (float v : scale) {
    if (!std::isfinite(v)) return "Resize scale value must be finite";
    if (!(v > 0)) return "Resize scale value must be greater than 0";
  }
  const size_t r = scale.size();
  const bool outer_kept = r >= 2 && scale[0] == 1 && scale[1] == 1;
  const bool channels_last = r == 4 && scale[0] == 1 && scale[3] == 1;
  if (mode == "linear" &&
      !(r == 2 || r == 3 || ((r == 4 || r == 5) && outer_kept) || channels_last))
    return "'linear' mode resizes 2-D or 3-D inputs, or 4-D/5-D inputs whose outermost 2 scales "
           "are 1 (4-D: or whose first and last are)";
  if (mode == "cubic" && !(r == 2 || (r == 4 && outer_kept) ||
                           (channels_last && (antialias || (scale[1] >= 1 && scale[2] >= 1)))))
    return "'cubic' mode resizes 2-D inputs, or 4-D inputs whose outermost 2 scales are 1 (or "
           "whose first and last are, scales >= 1 without antialias)";
  return "";
}

void check_resize_scales(const std::vector<float>& scale, const std::string& mode, bool antialias) {
  const std::string why = resize_scales_problem(scale, mode, antialias);
  if (!why.empty()) throw std::runtime_error(why);
}

ClaimResult claim_resize(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 1 && c.num_inputs() <= 4 && c.num_outputs() == 1,
                 "expects 1 to 4 inputs and 1 output");
  auto r = refuse_unknown_attrs(
      c, {"antialias", "axes", "coordinate_transformation_mode", "cubic_coeff_a", "exclude_outside",
          "extrapolation_value", "keep_aspect_ratio_policy", "mode", "nearest_mode"});
  if (!r.ok) return r;
  const NodeView& n = c.node();
  const std::string mode = n.attr_string("mode", "nearest");
  ORTMLX_REQUIRE(mode == "nearest" || mode == "linear" || mode == "cubic",
                 "mode '" + mode + "' is unknown");
  if (mode == "nearest") {
    r = require_input_type(
        c, 0,
        [](ElemType t) {
          return is_float_type(t) || t == ElemType::kUInt8 || t == ElemType::kInt8 ||
                 t == ElemType::kInt32;
        },
        "nearest: float16/bfloat16/float32, uint8, int8 or int32");
  } else {
    // Half types are interpolated in float32 and rounded once (ORT's CPU EP runs float16
    // Resize through float32; bfloat16, which it has no kernel for, is tested against that).
    r = require_input_type(c, 0, is_float_type, "linear/cubic: float16/bfloat16/float32 only");
  }
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.output_type(0) == ElemType::kUndefined || c.output_type(0) == c.input_type(0),
                 "output type differs from X");
  // antialias exists from opset 18 (ORT reads it only there); ORT's CPU EP rejects it for
  // nearest at session creation.
  const bool antialias = n.attr_int("antialias", 0) != 0;
  if (antialias) {
    ORTMLX_REQUIRE(n.since_version >= 18, "antialias before opset 18");
    ORTMLX_REQUIRE(mode != "nearest", "antialias applies to linear and cubic only");
    ORTMLX_REQUIRE(c.input_type(0) == ElemType::kFloat, "antialias: float32 only");
  }
  std::vector<int> axes;
  if (n.has_attr("axes")) {
    ORTMLX_REQUIRE(n.since_version >= 18, "the axes attribute before opset 18");
    ORTMLX_REQUIRE(c.input_rank(0) >= 1, "X rank must be known");
    std::string why;
    auto a =
        normalize_axes(n.attr_ints("axes").value_or(std::vector<int64_t>{}), c.input_rank(0), &why);
    ORTMLX_REQUIRE(a, "axes: " + why);
    axes = *a;
  }
  const std::string ctm = n.attr_string("coordinate_transformation_mode", "half_pixel");
  ORTMLX_REQUIRE(ctm == "half_pixel" || ctm == "half_pixel_symmetric" ||
                     ctm == "pytorch_half_pixel" || ctm == "align_corners" || ctm == "asymmetric",
                 "coordinate_transformation_mode '" + ctm + "' is not implemented");
  // nearest + half_pixel_symmetric: ORT's rounding of tie coordinates could not be matched for
  // every scale (a scales = 0.6 case differs), so it stays on CPU.
  ORTMLX_REQUIRE(mode != "nearest" || ctm != "half_pixel_symmetric",
                 "nearest with half_pixel_symmetric is not implemented (tie rounding differs)");
  const std::string nm = n.attr_string("nearest_mode", "round_prefer_floor");
  ORTMLX_REQUIRE(mode != "nearest" || nm == "round_prefer_floor" || nm == "round_prefer_ceil" ||
                     nm == "floor" || nm == "ceil",
                 "nearest_mode '" + nm + "' is unknown");
  ORTMLX_REQUIRE(mode == "cubic" || antialias || n.attr_int("exclude_outside", 0) == 0,
                 "exclude_outside only applies to cubic (or to linear with antialias)");
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank >= 1, "X rank must be known");
  ORTMLX_REQUIRE(
      mode == "nearest" || (mode == "cubic" ? (rank == 2 || rank == 4) : (rank >= 2 && rank <= 5)),
      "mode '" + mode + "' with rank " + std::to_string(rank) + " is not implemented");
  // Scales (input 2) or sizes (input 3). Constants are checked here. A scales or sizes input fed
  // at run time (or computed in the graph) is read on the host when the plan is translated and
  // checked there as ORT checks it (a plan that reads a runtime value runs eagerly).
  const bool scales_runtime = c.has_input(2) && !c.input_is_constant(2);
  const bool sizes_runtime = c.has_input(3) && !c.input_is_constant(3);
  if (scales_runtime) {
    r = require_input_type(
        c, 2, [](ElemType t) { return t == ElemType::kFloat; }, "scales: float32");
    if (!r.ok) return r;
    ORTMLX_REQUIRE(c.input_rank(2) <= 1, "scales must be 1-D");
  }
  if (sizes_runtime) {
    r = require_input_type(
        c, 3, [](ElemType t) { return t == ElemType::kInt64; }, "sizes: int64");
    if (!r.ok) return r;
    ORTMLX_REQUIRE(c.input_rank(3) <= 1, "sizes must be 1-D");
    ORTMLX_REQUIRE(n.attr_string("keep_aspect_ratio_policy", "stretch") == "stretch",
                   "keep_aspect_ratio_policy other than stretch is not implemented");
  }
  // Which of the two applies, and whether the pair is valid, is decided by the values.
  if (scales_runtime || sizes_runtime) return ClaimResult::yes();
  // Both constant: exactly one of them non-empty (ORT also raises where sizes is an empty
  // tensor next to non-empty scales; translate_resize does the same at run time).
  const ConstTensor* scales = nonempty_const(c, 2);
  const ConstTensor* sizes = nonempty_const(c, 3);
  ORTMLX_REQUIRE((scales != nullptr) != (sizes != nullptr),
                 "exactly one of scales and sizes must be given");
  std::vector<double> sc;
  if (scales) {
    ORTMLX_REQUIRE(scales->dtype == ElemType::kFloat && scales->shape.size() == 1,
                   "scales must be a 1-D float32 tensor");
    sc = *scales->as_double();
    ORTMLX_REQUIRE(static_cast<int64_t>(sc.size()) ==
                       (axes.empty() ? rank : static_cast<int64_t>(axes.size())),
                   "scales length differs from X rank (or the axes count)");
    sc = full_rank(sc, axes, rank, 1.0);
    for (double v : sc) ORTMLX_REQUIRE(v > 0 && std::isfinite(v), "scales must be positive");
  } else {
    ORTMLX_REQUIRE(sizes->dtype == ElemType::kInt64 && sizes->shape.size() == 1,
                   "sizes must be a 1-D int64 tensor");
    ORTMLX_REQUIRE(sizes->numel() == (axes.empty() ? rank : static_cast<int64_t>(axes.size())),
                   "sizes length differs from X rank (or the axes count)");
    ORTMLX_REQUIRE(n.attr_string("keep_aspect_ratio_policy", "stretch") == "stretch",
                   "keep_aspect_ratio_policy other than stretch is not implemented");
    const std::vector<int64_t> sz = *sizes->as_int64();
    for (int64_t v : sz) {
      ORTMLX_REQUIRE(v >= 1, "sizes must be positive");
      ORTMLX_REQUIRE(v <= std::numeric_limits<int32_t>::max(),
                     "sizes value " + std::to_string(v) + " exceeds MLX's int32 dims");
    }
  }
  if (mode != "nearest") {
    // Which axes linear and cubic may resize is ORT's rule on the scales (given, or sizes over
    // static input dims); with dims unknown, the outer ones must be kept (checked again when run).
    const TensorInfo* xi = c.input(0);
    // -1: an axis left out of `axes`, which keeps its size.
    const std::vector<int64_t> sz_all = sizes
                                            ? full_rank(*sizes->as_int64(), axes, rank, int64_t{-1})
                                            : std::vector<int64_t>(static_cast<size_t>(rank), 0);
    const bool static_dims =
        xi && xi->has_shape &&
        std::all_of(xi->shape.begin(), xi->shape.end(), [](int64_t d) { return d > 0; });
    if (scales || static_dims) {
      std::vector<float> f(static_cast<size_t>(rank), 1.0f);
      for (int64_t i = 0; i < rank; ++i)
        f[i] = scales ? static_cast<float>(sc[i])
                      : (sz_all[i] == -1
                             ? 1.0f
                             : static_cast<float>(sz_all[i]) / static_cast<float>(xi->shape[i]));
      const std::string why = resize_scales_problem(f, mode, antialias);
      ORTMLX_REQUIRE(why.empty(), why);
    } else {
      const int64_t inner = mode == "cubic" ? 2 : (rank == 5 || rank == 3 ? 3 : 2);
      for (int64_t i = 0; i < rank - inner; ++i)
        ORTMLX_REQUIRE(sz_all[i] == -1, "mode '" + mode + "' only resizes the innermost " +
                                            std::to_string(inner) +
                                            " axes (outer sizes must be static and kept)");
    }
  }
  return ClaimResult::yes();
}

// ORT's get_original_coordinate, in float32.
float original_coordinate(const std::string& ctm, float x, float scale, float len_out, float len_in,
                          bool from_sizes) {
  if (ctm == "half_pixel") return (x + 0.5f) / scale - 0.5f;
  if (ctm == "half_pixel_symmetric") {
    const float adjustment = len_out / (scale * len_in);
    const float center = len_in / 2;
    const float offset = center * (1 - adjustment);
    // ORT adds the half pixel in double here.
    return static_cast<float>(offset + (static_cast<double>(x) + 0.5) / scale - 0.5);
  }
  if (ctm == "pytorch_half_pixel") return len_out > 1 ? (x + 0.5f) / scale - 0.5f : 0.0f;
  if (ctm == "align_corners") return len_out == 1 ? 0.0f : x * (len_in - 1) / (len_out - 1);
  // asymmetric. With sizes given, ORT 1.30 lands exactly on x * in / out (measured over
  // in 1..11, out 1..14 with every nearest_mode: ties such as 2 * 7 / 4 = 3.5 round as
  // exact halves, where x / float(out / in) would give 3.4999998).
  if (from_sizes) return x * len_in / len_out;
  return x / scale;
}

// `downsample`: the axis shrinks (scale < 1), which only the "simple" mode of Resize 10 and
// Upsample looks at.
int64_t nearest_pixel(const std::string& nm, float x, bool downsample) {
  if (nm == "simple")
    return downsample ? static_cast<int64_t>(std::ceil(x)) : static_cast<int64_t>(x);
  if (nm == "round_prefer_ceil") return static_cast<int64_t>(std::round(x));
  if (nm == "floor") return static_cast<int64_t>(std::floor(x));
  if (nm == "ceil") return static_cast<int64_t>(std::ceil(x));
  // round_prefer_floor: halves go down.
  if (x == static_cast<float>(static_cast<int64_t>(x)) + 0.5f)
    return static_cast<int64_t>(std::floor(x));
  return static_cast<int64_t>(std::round(x));
}

// Weights broadcast along `axis` of a rank-`rank` array.
mx::array along(const std::vector<float>& w, int axis, int rank) {
  mx::Shape sh(rank, 1);
  sh[axis] = static_cast<int>(w.size());
  return mx::array(w.begin(), sh, mx::float32);
}

mx::array gather(const mx::array& x, const std::vector<int32_t>& idx, int axis,
                 mx::StreamOrDevice s) {
  mx::array ia(idx.begin(), {static_cast<int>(idx.size())}, mx::int32);
  return mx::take(x, ia, axis, s);
}

// How a Resize node interpolates: its attributes, or the fixed choices of the older versions.
struct Interp {
  std::string mode, ctm, nm;
  float cubic_a = -0.75f;
  bool exclude = false;
};

Interp interp_of(const NodeDesc& n) {
  return {n.attr_string("mode", "nearest"),
          n.attr_string("coordinate_transformation_mode", "half_pixel"),
          n.attr_string("nearest_mode", "round_prefer_floor"),
          n.attr_float("cubic_coeff_a", -0.75f), n.attr_int("exclude_outside", 0) != 0};
}

// Interpolates one axis from size `in` to `out`.
mx::array resize_axis(const mx::array& x, int axis, int64_t in, int64_t out, float scale,
                      bool from_sizes, const Interp& p, mx::StreamOrDevice s) {
  const std::string& mode = p.mode;
  const std::string& ctm = p.ctm;
  const int rank = static_cast<int>(x.ndim());
  const float fin = static_cast<float>(in), fout = static_cast<float>(out);
  if (mode == "nearest") {
    std::vector<int32_t> idx(out);
    for (int64_t o = 0; o < out; ++o) {
      const float xo =
          original_coordinate(ctm, static_cast<float>(o), scale, fout, fin, from_sizes);
      const int64_t i = std::clamp<int64_t>(nearest_pixel(p.nm, xo, scale < 1), 0, in - 1);
      idx[o] = static_cast<int32_t>(i);
    }
    return gather(x, idx, axis, s);
  }
  if (mode == "linear") {
    std::vector<int32_t> i1(out), i2(out);
    std::vector<float> w1(out), w2(out);
    for (int64_t o = 0; o < out; ++o) {
      float xo = original_coordinate(ctm, static_cast<float>(o), scale, fout, fin, from_sizes);
      xo = std::max(0.0f, std::min(xo, fin - 1));
      const int64_t a = std::min(static_cast<int64_t>(xo), in - 1);
      const int64_t b = std::min(a + 1, in - 1);
      float d1 = std::fabs(xo - static_cast<float>(a)), d2 = std::fabs(xo - static_cast<float>(b));
      if (a == b) d1 = d2 = 0.5f;
      i1[o] = static_cast<int32_t>(a);
      i2[o] = static_cast<int32_t>(b);
      w1[o] = d2;  // weight of a
      w2[o] = d1;  // weight of b
    }
    return mx::add(mx::multiply(gather(x, i1, axis, s), along(w1, axis, rank), s),
                   mx::multiply(gather(x, i2, axis, s), along(w2, axis, rank), s), s);
  }
  // cubic: four taps at floor(x) - 1 .. floor(x) + 2, indices clamped to the edge; with
  // exclude_outside the taps outside the input get weight 0 and the rest are renormalised.
  const float A = p.cubic_a;
  const bool exclude = p.exclude;
  std::vector<std::vector<int32_t>> idx(4, std::vector<int32_t>(out));
  std::vector<std::vector<float>> w(4, std::vector<float>(out));
  for (int64_t o = 0; o < out; ++o) {
    const float xo = original_coordinate(ctm, static_cast<float>(o), scale, fout, fin, from_sizes);
    const float fl = std::floor(xo);
    const int64_t xi = static_cast<int64_t>(fl);
    const float t = xo - fl;
    float c[4];
    c[0] = ((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A;
    c[1] = ((A + 2) * t - (A + 3)) * t * t + 1;
    c[2] = ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1;
    c[3] = ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A;
    float total = 0;
    for (int j = 0; j < 4; ++j) {
      const int64_t p = xi - 1 + j;
      if (exclude && (p < 0 || p >= in)) c[j] = 0;
      total += c[j];
    }
    for (int j = 0; j < 4; ++j) {
      idx[j][o] = static_cast<int32_t>(std::clamp<int64_t>(xi - 1 + j, 0, in - 1));
      w[j][o] = exclude && total != 0 ? c[j] / total : c[j];
    }
  }
  mx::array y = mx::multiply(gather(x, idx[0], axis, s), along(w[0], axis, rank), s);
  for (int j = 1; j < 4; ++j)
    y = mx::add(y, mx::multiply(gather(x, idx[j], axis, s), along(w[j], axis, rank), s), s);
  return y;
}

// Antialiased interpolation of one axis (Resize 18+, antialias=1), as ORT's CPU EP computes it
// (upsample_antialias.h): each output pixel o has a centre c = coordinate(o) + 0.5 in input
// pixels; the filter (linear: triangle of radius 1, cubic: Keys with cubic_coeff_a, radius 2) is
// stretched by r = 1 / scale when shrinking (r >= 1; not when growing), so taps j with
// |j + 0.5 - c| < radius * max(r, 1) get the weight filter((j + 0.5 - c) / max(r, 1)), the
// window being capped at 2 * ceil(radius * max(r, 1)) + 1 taps. Taps outside the input are
// dropped (exclude_outside: not weighed at all) or weighed and their weights added to the edge
// pixel; the weights of a pixel are then divided by the sum of those weighed.
//
// Precision: the weights are computed in float32 with ORT's expressions in ORT's order, so they
// are ORT's bit for bit (barring a compiler contracting differently); the sums are float32 in
// both (ORT left to right over the window, here a reduction of the same terms), one pass per
// axis rounded to float32 in between, innermost axis first as ORT does. The results differ by a
// few float32 roundings of sums of at most the window's terms: every case of the tests (data in
// [-2, 2]) agrees with ORT within rtol = atol = 1e-6, the tests ask for 1e-5. Asymmetric
// coordinates are x / scale here even with sizes given (scale = out / in in float32): against
// ORT 1.30, x * in / out (what the plain modes match) is up to 3e-6 off.
//
// Applied as one gather of the taps (out x window indices, the unused ones pointing at an
// appended zero) and a weighted sum, so a non-finite input reaches only the pixels whose window
// holds it, as in ORT.
mx::array resize_axis_antialias(const mx::array& x, int axis, int64_t in, int64_t out, float scale,
                                const Interp& p, mx::StreamOrDevice s) {
  const bool cubic = p.mode == "cubic";
  const float A = p.cubic_a;
  const auto filter = [cubic, A](float t) {
    t = std::fabs(t);
    if (!cubic) return t < 1.0f ? 1.0f - t : 0.0f;
    if (t < 1.0f) return ((A + 2.0f) * t - (A + 3.0f)) * t * t + 1.0f;
    if (t < 2.0f) return (((t - 5.0f) * t + 8.0f) * t - 4.0f) * A;
    return 0.0f;
  };
  const float ratio = 1.0f / scale;  // input pixels per output pixel
  const float radius = cubic ? 2.0f : 1.0f;
  const float support = ratio >= 1.0f ? radius * ratio : radius;
  const float inv_ratio = ratio >= 1.0f ? 1.0f / ratio : 1.0f;
  const double window_d = std::ceil(static_cast<double>(support)) * 2 + 1;
  // One gathered copy of the axis per tap: refuse what could not be held anyway.
  if (!(window_d * static_cast<double>(out) < 0x1p31))
    throw std::runtime_error("antialias window of " + std::to_string(window_d) +
                             " taps is too large");
  const int64_t window = static_cast<int64_t>(window_d);
  const float fin = static_cast<float>(in), fout = static_cast<float>(out);
  std::vector<int32_t> idx(static_cast<size_t>(out * window), static_cast<int32_t>(in));
  std::vector<float> wts(static_cast<size_t>(out * window), 0.0f);
  std::vector<float> buf(static_cast<size_t>(window));
  for (int64_t o = 0; o < out; ++o) {
    const float center = 0.5f + (ratio == 1.0f ? static_cast<float>(o)
                                               : original_coordinate(p.ctm, static_cast<float>(o),
                                                                     scale, fout, fin, false));
    const int64_t lo_real = static_cast<int64_t>(std::floor(center - support + 0.5f));
    int64_t hi_real = static_cast<int64_t>(std::floor(center + support + 0.5f));
    hi_real = lo_real + std::clamp<int64_t>(hi_real - lo_real, 0, window);
    const int64_t lo_cut = std::clamp<int64_t>(lo_real, 0, in);
    const int64_t hi_cut = std::clamp<int64_t>(hi_real, 0, in);
    const int64_t lo = p.exclude ? lo_cut : lo_real;
    const int64_t count = (p.exclude ? hi_cut : hi_real) - lo;
    std::fill(buf.begin(), buf.end(), 0.0f);
    float total = 0.0f;
    for (int64_t j = 0; j < count; ++j) {
      const float w = filter((static_cast<float>(j + lo) - center + 0.5f) * inv_ratio);
      buf[j] = w;
      total += w;
    }
    if (!p.exclude && lo_cut < hi_cut) {
      // Fold the taps before the input onto pixel 0 and those past it onto pixel in - 1 (in
      // ORT's order of additions), then shift so that buf[0] is pixel lo_cut.
      const int64_t before = std::clamp<int64_t>(-lo, 0, count - 1);
      for (int64_t j = 0; j < before; ++j) buf[before] += buf[j];
      const int64_t after = std::clamp<int64_t>(count + lo - in, 0, count - 1);
      for (int64_t j = count - after; j < count; ++j) buf[count - after - 1] += buf[j];
      if (before > 0 || after > 0)
        for (int64_t j = 0; j < hi_cut - lo_cut; ++j) buf[j] = buf[j + before];
    }
    const float inv_total = total == 0.0f ? 1.0f : 1.0f / total;
    for (int64_t j = 0; j < hi_cut - lo_cut; ++j) {
      idx[o * window + j] = static_cast<int32_t>(lo_cut + j);
      wts[o * window + j] = buf[j] * inv_total;
    }
  }
  const int rank = static_cast<int>(x.ndim());
  const int w = static_cast<int>(window), n_out = static_cast<int>(out);
  mx::array padded = mx::pad(x, std::vector<int>{axis}, mx::Shape{0}, mx::Shape{1},
                             mx::array(0.0f, x.dtype()), "constant", s);
  mx::array taps = gather(padded, idx, axis, s);
  mx::Shape split = taps.shape();
  split[axis] = n_out;
  split.insert(split.begin() + axis + 1, w);
  taps = mx::reshape(taps, split, s);
  mx::Shape wsh(rank + 1, 1);
  wsh[axis] = n_out;
  wsh[axis + 1] = w;
  mx::array weights(wts.begin(), wsh, mx::float32);
  return mx::sum(mx::multiply(taps, weights, s), axis + 1, false, s);
}

void translate_resize(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  const int rank = static_cast<int>(x.ndim());
  const std::string mode = n.attr_string("mode", "nearest");
  const bool antialias = n.attr_int("antialias", 0) != 0;
  // As ORT's kernel: non-empty scales win, and then no sizes input may be given (not even an
  // empty one); otherwise sizes must be given and non-empty.
  const bool has_scales = n.inputs.size() > 2 && !n.inputs[2].empty();
  const bool has_sizes = n.inputs.size() > 3 && !n.inputs[3].empty();
  const std::vector<double> scales_v =
      has_scales ? host_doubles(ctx, n, 2, "scales") : std::vector<double>{};
  const bool from_scales = !scales_v.empty();
  if (from_scales && has_sizes)
    throw std::runtime_error(
        "only one of scales and sizes may be given (sizes is given, even "
        "if empty, next to non-empty scales)");
  const std::vector<int64_t> sizes_v =
      !from_scales && has_sizes ? host_ints(ctx, n, 3, "sizes") : std::vector<int64_t>{};
  if (!from_scales && sizes_v.empty())
    throw std::runtime_error("either scales or sizes must be given (non-empty)");
  std::vector<float> scale(rank);
  std::vector<int64_t> out(rank);
  std::vector<int> axes;
  if (n.has_attr("axes")) axes = normalize_axes_or_throw(*n.attr_ints("axes"), rank);
  const size_t listed = axes.empty() ? static_cast<size_t>(rank) : axes.size();
  if (from_scales) {
    if (scales_v.size() != listed)
      throw std::runtime_error("scales has " + std::to_string(scales_v.size()) +
                               " values; X rank (or the axes count) is " + std::to_string(listed));
    const std::vector<double> v = full_rank(scales_v, axes, rank, 1.0);
    for (int i = 0; i < rank; ++i) scale[i] = static_cast<float>(v[i]);
    check_resize_scales(scale, mode, antialias);
    for (int i = 0; i < rank; ++i) {
      // ORT: the output size is the float product, truncated. Checked before the cast, which
      // is undefined for a float beyond int64.
      const float size = scale[i] * static_cast<float>(x.shape(i));
      if (!(size < 0x1p31f))
        throw std::runtime_error("output dim " + std::to_string(size) +
                                 " exceeds MLX's int32 dims");
      out[i] = static_cast<int64_t>(size);
    }
  } else {
    if (sizes_v.size() != listed)
      throw std::runtime_error("sizes has " + std::to_string(sizes_v.size()) +
                               " values; X rank (or the axes count) is " + std::to_string(listed));
    if (n.attr_string("keep_aspect_ratio_policy", "stretch") != "stretch")
      throw std::runtime_error("keep_aspect_ratio_policy other than stretch is not implemented");
    out = full_rank(sizes_v, axes, rank, int64_t{-1});
    for (int i = 0; i < rank; ++i)
      if (out[i] == -1) out[i] = x.shape(i);
    // As ORT, per dim: nothing scales a zero dim to a non-zero one, even where another dim
    // makes the output empty anyway (e.g. (0, 1, 0, 1) to (0, 1, 1, 4)).
    for (int i = 0; i < rank; ++i)
      if (x.shape(i) == 0 && out[i] != 0)
        throw std::runtime_error("input dim " + std::to_string(i) +
                                 " is zero but the output dim is " + std::to_string(out[i]));
    // ORT derives the scales (an empty dim kept empty counts as 1) and checks them as given
    // ones: a non-empty dim sized to 0 has scale 0, an error.
    for (int i = 0; i < rank; ++i)
      scale[i] =
          x.shape(i) == 0 ? 1.0f : static_cast<float>(out[i]) / static_cast<float>(x.shape(i));
    check_resize_scales(scale, mode, antialias);
  }
  // The host index vectors below are sized by these dims, and MLX dims are int32.
  const mx::Shape out_shape = checked_shape(out);
  // As ORT: an empty output is fine (a scale rounding a dim down to 0), an empty input with a
  // non-empty output is an error (there is nothing to interpolate from).
  if (std::find(out.begin(), out.end(), 0) != out.end()) {
    ctx.bind_output(n, 0, mx::zeros(out_shape, x.dtype(), s));
    return;
  }
  if (x.size() == 0) throw std::runtime_error("input dim is zero but the output dim is not");
  const bool widen = mode != "nearest" && x.dtype() != mx::float32;
  const Interp interp = interp_of(n);
  mx::array y = widen ? mx::astype(x, mx::float32, s) : x;
  if (antialias) {
    // ORT filters the innermost axis first, then the next ones outwards, rounding each pass
    // to float32; an axis that keeps its size is copied.
    for (int i = rank - 1; i >= 0; --i) {
      if (out[i] == x.shape(i)) continue;
      y = resize_axis_antialias(y, i, x.shape(i), out[i], scale[i], interp, s);
    }
    ctx.bind_output(n, 0, widen ? mx::astype(y, x.dtype(), s) : y);
    return;
  }
  for (int i = 0; i < rank; ++i) {
    // An axis that keeps its size is left as is, as ORT does (measured: with scale 7/6 on a
    // size-5 axis the output is the input, not a shifted nearest/linear sampling).
    if (out[i] == x.shape(i)) continue;
    y = resize_axis(y, i, x.shape(i), out[i], scale[i], !from_scales, interp, s);
  }
  ctx.bind_output(n, 0, widen ? mx::astype(y, x.dtype(), s) : y);
}

// ---------------------------------------------------------------- Upsample 7-9, Resize 10

// The older resampling ops share one interpolation (ORT runs them through one kernel):
// asymmetric coordinates (x_in = x_out / scale, in float32), nearest truncates x_in (rounds up
// where the axis shrinks, which only Resize 10 allows), linear weights as in the later Resize.
// Scales come from the `scales` attribute (Upsample 7-8) or input 1 (Upsample 9, Resize 10),
// one per axis; the output dim is the float product scale * dim, truncated. An axis with scale 1
// is copied; any other axis is resampled, even where the product truncates back to its size.
enum class Legacy { kUpsampleAttr, kUpsampleInput, kResize10 };

// A float32 constant's values as float32.
std::vector<float> const_floats(const ConstTensor& t) {
  const std::vector<double> v = t.as_double().value_or(std::vector<double>{});
  return std::vector<float>(v.begin(), v.end());
}

// Why these scales are refused, or "" when they are fine (ORT's validation of the old ops).
std::string legacy_scales_problem(const std::vector<float>& sc, int64_t rank, bool is_resize,
                                  const std::string& mode) {
  if (rank >= 0 && static_cast<int64_t>(sc.size()) != rank)
    return "scales has " + std::to_string(sc.size()) + " values for an input of rank " +
           std::to_string(rank);
  for (float v : sc) {
    if (!std::isfinite(v)) return "scales must be finite";
    if (is_resize ? !(v > 0) : !(v >= 1))
      return is_resize ? "scales must be greater than 0" : "Upsample scales must be >= 1";
  }
  if (mode == "linear") {
    const size_t n = sc.size();
    const bool ok = n == 2 || n == 3 || ((n == 4 || n == 5) && sc[0] == 1 && sc[1] == 1);
    if (!ok)
      return "linear resamples 2-D and 3-D inputs, or 4-D/5-D inputs whose first two scales "
             "are 1";
  }
  return "";
}

ClaimResult claim_legacy(const ClaimContext& c, Legacy kind) {
  const bool attr_scales = kind == Legacy::kUpsampleAttr;
  ORTMLX_REQUIRE(c.num_inputs() == (attr_scales ? 1u : 2u) && c.num_outputs() == 1,
                 attr_scales ? "expects 1 input and 1 output" : "expects 2 inputs and 1 output");
  auto r =
      attr_scales ? refuse_unknown_attrs(c, {"mode", "scales"}) : refuse_unknown_attrs(c, {"mode"});
  if (!r.ok) return r;
  const std::string mode = c.node().attr_string("mode", "nearest");
  ORTMLX_REQUIRE(mode == "nearest" || mode == "linear",
                 "mode '" + mode + "' is not implemented (nearest, linear)");
  if (mode == "nearest") {
    r = require_input_type(
        c, 0,
        [](ElemType t) {
          return t == ElemType::kFloat || t == ElemType::kInt32 || t == ElemType::kInt8 ||
                 t == ElemType::kUInt8;
        },
        "nearest: float32, int32, int8 or uint8");
  } else {
    r = require_input_type(
        c, 0, [](ElemType t) { return t == ElemType::kFloat; }, "linear: float32 only");
  }
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.output_type(0) == ElemType::kUndefined || c.output_type(0) == c.input_type(0),
                 "output type differs from X");
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank != 0, "X must have rank >= 1");
  std::vector<float> sc;
  if (attr_scales) {
    auto v = c.node().attr_floats("scales");
    ORTMLX_REQUIRE(v.has_value(), "the scales attribute is required");
    sc = *v;
  } else {
    r = require_input_type(
        c, 1, [](ElemType t) { return t == ElemType::kFloat; }, "scales: float32");
    if (!r.ok) return r;
    ORTMLX_REQUIRE(c.input_rank(1) == 1 || c.input_rank(1) == -1, "scales must be 1-D");
    // Scales fed at run time are read on the host when translated (that plan runs eagerly)
    // and checked there.
    if (!c.input_is_constant(1)) return ClaimResult::yes();
    const ConstTensor* t = c.constant_input(1);
    ORTMLX_REQUIRE(t != nullptr, "scales data is not available at claim time");
    sc = const_floats(*t);
  }
  const std::string why = legacy_scales_problem(sc, rank, kind == Legacy::kResize10, mode);
  ORTMLX_REQUIRE(why.empty(), why);
  return ClaimResult::yes();
}

std::vector<float> legacy_scales(const TranslationContext& ctx, const NodeDesc& n) {
  if (n.has_attr("scales")) return n.attr_floats("scales").value_or(std::vector<float>{});
  const std::vector<double> v = host_doubles(ctx, n, 1, "scales");
  return std::vector<float>(v.begin(), v.end());
}

void translate_legacy(TranslationContext& ctx, const NodeDesc& n, Legacy kind) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const int rank = static_cast<int>(x.ndim());
  const std::vector<float> scale = legacy_scales(ctx, n);
  const std::string mode = n.attr_string("mode", "nearest");
  const std::string why = legacy_scales_problem(scale, rank, kind == Legacy::kResize10, mode);
  if (!why.empty()) throw std::runtime_error(why);
  std::vector<int64_t> out(static_cast<size_t>(rank));
  bool same = true;
  for (int i = 0; i < rank; ++i) {
    // The float product, truncated (checked first: the cast is undefined beyond int64).
    const float size = scale[i] * static_cast<float>(x.shape(i));
    if (!(size < 0x1p31f))
      throw std::runtime_error("output dim " + std::to_string(size) + " exceeds MLX's int32 dims");
    out[i] = static_cast<int64_t>(size);
    same = same && out[i] == x.shape(i);
  }
  const mx::Shape out_shape = checked_shape(out);
  if (std::find(out.begin(), out.end(), 0) != out.end()) {
    ctx.bind_output(n, 0, mx::zeros(out_shape, x.dtype(), s));
    return;
  }
  if (same) {
    ctx.bind_output(n, 0, x);
    return;
  }
  const Interp interp{mode, "asymmetric", "simple"};
  mx::array y = x;
  for (int i = 0; i < rank; ++i) {
    if (scale[i] == 1.0f) continue;
    y = resize_axis(y, i, x.shape(i), out[i], scale[i], false, interp, s);
  }
  ctx.bind_output(n, 0, y);
}

// ---------------------------------------------------------------- DepthToSpace, SpaceToDepth

ClaimResult claim_block(const ClaimContext& c, bool d2s) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r =
      d2s ? refuse_unknown_attrs(c, {"blocksize", "mode"}) : refuse_unknown_attrs(c, {"blocksize"});
  if (!r.ok) return r;
  r = require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kFloat || t == ElemType::kUInt8; },
      "float32 or uint8 only");
  if (!r.ok) return r;
  r = require_same_types(c);
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.input_rank(0) == 4, "input must be 4-D (N, C, H, W)");
  ORTMLX_REQUIRE(c.node().attr_int("blocksize", 0) >= 1, "blocksize must be given and positive");
  // The channel arithmetic uses blocksize^2: keep it within int32 (blocksize 65536 would make
  // it wrap to 0, a division by zero).
  r = require_int_range(c, "blocksize", 1, 46340);
  if (!r.ok) return r;
  if (d2s) {
    const std::string mode = c.node().attr_string("mode", "DCR");
    ORTMLX_REQUIRE(mode == "DCR" || mode == "CRD", "mode '" + mode + "' is not DCR or CRD");
  }
  return ClaimResult::yes();
}

void translate_depth_to_space(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  const int b = checked_int(n.attr_int("blocksize", 1), "blocksize");
  const int N = x.shape(0), C = x.shape(1), H = x.shape(2), W = x.shape(3);
  const int64_t bb = checked_mul(b, b, "blocksize^2");
  if (b < 1 || C % bb != 0) throw std::runtime_error("channels are not divisible by blocksize^2");
  const int c = static_cast<int>(C / bb);
  const int Hb = checked_int(checked_mul(H, b, "output height"), "output height");
  const int Wb = checked_int(checked_mul(W, b, "output width"), "output width");
  mx::array y = x;
  if (n.attr_string("mode", "DCR") == "DCR") {
    // (N, b, b, c, H, W) -> (N, c, H, b, W, b)
    y = mx::transpose(mx::reshape(x, {N, b, b, c, H, W}, s), {0, 3, 4, 1, 5, 2}, s);
  } else {
    // CRD: (N, c, b, b, H, W) -> (N, c, H, b, W, b)
    y = mx::transpose(mx::reshape(x, {N, c, b, b, H, W}, s), {0, 1, 4, 2, 5, 3}, s);
  }
  ctx.bind_output(n, 0, mx::reshape(y, {N, c, Hb, Wb}, s));
}

void translate_space_to_depth(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  const int b = checked_int(n.attr_int("blocksize", 1), "blocksize");
  const int N = x.shape(0), C = x.shape(1), H = x.shape(2), W = x.shape(3);
  const int Cbb = checked_int(checked_mul(C, checked_mul(b, b, "blocksize^2"), "output channels"),
                              "output channels");
  if (b < 1 || H % b != 0 || W % b != 0)
    throw std::runtime_error("height and width must be divisible by blocksize");
  // (N, C, H/b, b, W/b, b) -> (N, b, b, C, H/b, W/b)
  mx::array y = mx::transpose(mx::reshape(x, {N, C, H / b, b, W / b, b}, s), {0, 3, 5, 1, 2, 4}, s);
  ctx.bind_output(n, 0, mx::reshape(y, {N, Cbb, H / b, W / b}, s));
}

}  // namespace

void register_resize_ops(OpRegistry& r) {
  r.add("", "Resize", 13, 1 << 30, claim_resize, translate_resize);
  // Resize 11-12: roi and scales are required inputs (empty ones count as absent) and
  // tf_half_pixel_for_nn is one more coordinate mode (refused as unknown); ORT runs the same
  // kernel, so the same claim and translator serve.
  r.add("", "Resize", 11, 12, claim_resize, translate_resize);
  r.add(
      "", "Resize", 10, 10,
      [](const ClaimContext& c) { return claim_legacy(c, Legacy::kResize10); },
      [](TranslationContext& ctx, const NodeDesc& n) {
        translate_legacy(ctx, n, Legacy::kResize10);
      });
  r.add(
      "", "Upsample", 9, 9,
      [](const ClaimContext& c) { return claim_legacy(c, Legacy::kUpsampleInput); },
      [](TranslationContext& ctx, const NodeDesc& n) {
        translate_legacy(ctx, n, Legacy::kUpsampleInput);
      });
  r.add(
      "", "Upsample", 7, 8,
      [](const ClaimContext& c) { return claim_legacy(c, Legacy::kUpsampleAttr); },
      [](TranslationContext& ctx, const NodeDesc& n) {
        translate_legacy(ctx, n, Legacy::kUpsampleAttr);
      });
  r.add(
      "", "DepthToSpace", 13, 1 << 30, [](const ClaimContext& c) { return claim_block(c, true); },
      translate_depth_to_space);
  r.add(
      "", "SpaceToDepth", 13, 1 << 30, [](const ClaimContext& c) { return claim_block(c, false); },
      translate_space_to_depth);
  // Older versions: DepthToSpace 1-10 has no `mode` (DCR, the default), 11-12 no bfloat16;
  // SpaceToDepth 1-12 no bfloat16. The same claims; each its own entry.
  r.add(
      "", "DepthToSpace", 1, 12, [](const ClaimContext& c) { return claim_block(c, true); },
      translate_depth_to_space);
  r.add(
      "", "SpaceToDepth", 1, 12, [](const ClaimContext& c) { return claim_block(c, false); },
      translate_space_to_depth);
}

}  // namespace ortmlx
