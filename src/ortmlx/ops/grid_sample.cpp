// GridSample (opsets 16-19 and 20+), float32, following ORT's CPU kernel (grid_sample.cc).
//
// Each output point's normalised grid coordinate is mapped to the image (align_corners:
// (g + 1) / 2 * (len - 1), else ((g + 1) * len - 1) / 2, in float32), then sampled from the
// pixels around it: nearest (rounded half to even, as std::nearbyint), linear (2 or 4 or 8
// pixels, weights x2 - x and x - x1 combined along x first, then y, then z, in ORT's order) or
// cubic (4x4 pixels, Keys' coefficients with alpha -0.75; 4-D only, as ORT). Padding is applied
// to each PIXEL index before it is read, as ORT's kernel does (not to the coordinate): zeros
// reads 0 outside the image, border clamps the index, reflection mirrors it at the borders
// (-0.5 and len - 0.5, or 0 and len - 1 with align_corners) with ORT's float32 arithmetic.
//
// Every tap is one gather from the image flattened per channel with one zero appended: an index
// outside the image under zeros padding reads that zero (so a NaN weight times it gives NaN, as
// in ORT). An empty spatial dim raises, as in ORT 1.30. ORT reads out of bounds for reflection
// with align_corners and a spatial dim of 1 (its mirror range is 0): refused.
#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/op_args.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

enum class Mode { kNearest, kLinear, kCubic };
enum class Padding { kZeros, kBorder, kReflection };

std::optional<Mode> parse_mode(const std::string& m, int since) {
  if (m == "nearest") return Mode::kNearest;
  if (m == (since >= 20 ? "linear" : "bilinear")) return Mode::kLinear;
  if (m == (since >= 20 ? "cubic" : "bicubic")) return Mode::kCubic;
  return std::nullopt;
}

std::optional<Padding> parse_padding(const std::string& p) {
  if (p == "zeros") return Padding::kZeros;
  if (p == "border") return Padding::kBorder;
  if (p == "reflection") return Padding::kReflection;
  return std::nullopt;
}

ClaimResult claim_grid_sample(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2 && c.num_outputs() == 1, "expects 2 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"align_corners", "mode", "padding_mode"});
  if (!r.ok) return r;
  const int since = c.node().since_version;
  for (size_t i = 0; i < 2; ++i) {
    r = require_input_type(
        c, i, [](ElemType t) { return t == ElemType::kFloat; },
        "float32 only (ORT's CPU EP has float32 and, from opset 20, float64)");
    if (!r.ok) return r;
  }
  const std::string mode_name = c.node().attr_string("mode", since >= 20 ? "linear" : "bilinear");
  const auto mode = parse_mode(mode_name, since);
  ORTMLX_REQUIRE(mode.has_value(), "mode '" + mode_name + "' is not one of opset " +
                                       std::to_string(since) + "'s modes");
  const std::string pad_name = c.node().attr_string("padding_mode", "zeros");
  const auto pad = parse_padding(pad_name);
  ORTMLX_REQUIRE(pad.has_value(), "padding_mode '" + pad_name + "' is unknown");
  const int64_t align = c.node().attr_int("align_corners", 0);
  ORTMLX_REQUIRE(align == 0 || align == 1, "align_corners must be 0 or 1");
  const int64_t rank = c.input_rank(0);
  if (since < 20) {
    ORTMLX_REQUIRE(rank == 4, "input must be 4-D (opset 16)");
  } else {
    ORTMLX_REQUIRE(rank == 4 || rank == 5,
                   "input must be 4-D or 5-D (ORT's CPU kernel has no other rank)");
  }
  ORTMLX_REQUIRE(rank == 4 || *mode != Mode::kCubic, "cubic mode is 4-D only (as ORT's kernel)");
  ORTMLX_REQUIRE(c.input_rank(1) < 0 || c.input_rank(1) == rank,
                 "grid rank must equal the input's");
  if (*pad == Padding::kReflection && align == 1) {
    // ORT's mirror range is 0 there and its kernel reads out of bounds.
    const TensorInfo* x = c.input(0);
    for (int64_t d = 2; d < rank; ++d)
      ORTMLX_REQUIRE(x->shape[static_cast<size_t>(d)] > 1,
                     "reflection with align_corners needs static spatial dims above 1 (ORT's "
                     "kernel reads out of bounds for a dim of 1)");
  }
  return ClaimResult::yes();
}

struct Axis {
  int64_t len;
  mx::array coord;  // image coordinate of each output point, [N, 1, P] float32
};

class Sampler {
 public:
  Sampler(const mx::array& flat, std::vector<Axis> axes, Padding pad, bool align,
          mx::StreamOrDevice s)
      : flat_(flat), axes_(std::move(axes)), pad_(pad), align_(align), s_(s) {}

  // Pixel values at integer indices (float32 arrays holding integers, [N, 1, P] each, in axis
  // order: x first), padding applied: [N, C, P].
  mx::array pixel(const std::vector<mx::array>& idx) const {
    std::optional<mx::array> flat_idx, valid;
    int64_t stride = 1;
    for (size_t k = 0; k < axes_.size(); ++k) {
      const int64_t len = axes_[k].len;
      mx::array i = idx[k];
      if (pad_ == Padding::kZeros) {
        const mx::array in = mx::logical_and(mx::greater_equal(i, f(0), s_),
                                             mx::less(i, f(static_cast<float>(len)), s_), s_);
        valid = valid ? mx::logical_and(*valid, in, s_) : in;
        i = mx::where(in, i, f(0), s_);
      } else if (pad_ == Padding::kBorder) {
        // ORT clamps the int64 index; a NaN or a value from 2^63 converts to INT64_MIN on x86
        // (clamped to 0): NaN >= 0 is false.
        const mx::array conv =
            mx::logical_and(mx::greater_equal(i, f(0), s_), mx::less(i, f(9.223372e18f), s_), s_);
        i = mx::minimum(mx::where(conv, i, f(0), s_), f(static_cast<float>(len - 1)), s_);
      } else {
        i = reflect(i, len);
      }
      const mx::array term = mx::multiply(mx::astype(i, mx::int32, s_),
                                          mx::array(checked_int(stride, "grid stride")), s_);
      flat_idx = flat_idx ? mx::add(*flat_idx, term, s_) : term;
      stride = checked_mul(stride, len, "image size");
    }
    if (valid) {
      // The zero appended after the image.
      flat_idx = mx::where(*valid, *flat_idx, mx::array(checked_int(stride, "image size")), s_);
    }
    return mx::take_along_axis(flat_, *flat_idx, 2, s_);
  }

 private:
  mx::array f(float v) const { return mx::array(v); }

  // ORT's GsReflect on an integer index held in float32, then truncated toward zero.
  mx::array reflect(const mx::array& v, int64_t len) const {
    const float lo = align_ ? 0.f : -0.5f;
    const float hi = align_ ? static_cast<float>(len) - 1.f : static_cast<float>(len) - 0.5f;
    const mx::array range = f(hi - lo);
    auto fold = [&](const mx::array& dx, const mx::array& even_base, const mx::array& odd_base,
                    bool even_adds) {
      const mx::array times = mx::floor(mx::divide(dx, range, s_), s_);  // dx >= 0: truncation
      const mx::array rest = mx::subtract(dx, mx::multiply(times, range, s_), s_);
      const mx::array even = mx::equal(mx::remainder(times, f(2), s_), f(0), s_);
      const mx::array from_even =
          even_adds ? mx::add(even_base, rest, s_) : mx::subtract(even_base, rest, s_);
      const mx::array from_odd =
          even_adds ? mx::subtract(odd_base, rest, s_) : mx::add(odd_base, rest, s_);
      return mx::where(even, from_even, from_odd, s_);
    };
    const mx::array below = fold(mx::subtract(f(lo), v, s_), f(lo), f(hi), true);
    const mx::array above = fold(mx::subtract(v, f(hi), s_), f(hi), f(lo), false);
    mx::array r = mx::where(mx::less(v, f(lo), s_), below,
                            mx::where(mx::greater(v, f(hi), s_), above, v, s_), s_);
    r = mx::astype(mx::astype(r, mx::int32, s_), mx::float32, s_);  // ORT's int64 cast
    // In range for every finite index (guards the gather against a NaN).
    return mx::clip(r, f(0), f(static_cast<float>(len - 1)), s_);
  }

  mx::array flat_;
  std::vector<Axis> axes_;
  Padding pad_;
  bool align_;
  mx::StreamOrDevice s_;
};

// Keys' cubic coefficients for a fraction t in [0, 1) (ORT's GsGetCubicCoeffs, in float32).
std::array<mx::array, 4> cubic_coeffs(const mx::array& t_in, mx::StreamOrDevice s) {
  const float a = -0.75f;
  auto f = [](float v) { return mx::array(v); };
  const mx::array t = mx::abs(t_in, s);
  auto outer = [&](const mx::array& u) {  // ((a u - 5a) u + 8a) u - 4a
    mx::array v = mx::subtract(mx::multiply(f(a), u, s), f(5 * a), s);
    v = mx::add(mx::multiply(v, u, s), f(8 * a), s);
    return mx::subtract(mx::multiply(v, u, s), f(4 * a), s);
  };
  auto inner = [&](const mx::array& u) {  // ((a + 2) u - (a + 3)) u u + 1
    mx::array v = mx::subtract(mx::multiply(f(a + 2), u, s), f(a + 3), s);
    return mx::add(mx::multiply(mx::multiply(v, u, s), u, s), f(1), s);
  };
  const mx::array one_minus = mx::subtract(f(1), t, s);
  return {outer(mx::add(t, f(1), s)), inner(t), inner(one_minus), outer(mx::subtract(f(2), t, s))};
}

void translate_grid_sample(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const mx::array grid = ctx.input(n, 1);
  const int rank = static_cast<int>(x.ndim());
  const int nd = rank - 2;
  if (rank != 4 && rank != 5) throw std::runtime_error("input must be 4-D or 5-D");
  if (static_cast<int>(grid.ndim()) != rank || grid.shape(-1) != nd)
    throw std::runtime_error("grid must be [N, (D_out,) H_out, W_out, " + std::to_string(nd) +
                             "] for a " + std::to_string(rank) + "-D input");
  if (grid.shape(0) != x.shape(0))
    throw std::runtime_error("grid batch " + std::to_string(grid.shape(0)) +
                             " does not match input batch " + std::to_string(x.shape(0)));
  const int since = n.since_version;
  const Mode mode = *parse_mode(n.attr_string("mode", since >= 20 ? "linear" : "bilinear"), since);
  const Padding pad = *parse_padding(n.attr_string("padding_mode", "zeros"));
  const bool align = n.attr_int("align_corners", 0) == 1;
  const int N = x.shape(0), C = x.shape(1);
  std::vector<int64_t> out_dims = {N, C};
  int64_t points = 1;
  for (int d = 1; d <= nd; ++d) {
    out_dims.push_back(grid.shape(d));
    points = checked_mul(points, grid.shape(d), "grid points");
  }
  const mx::Shape out_shape = checked_shape(out_dims, mx::float32);
  int64_t image = 1;
  for (int d = 2; d < rank; ++d) {
    if (x.shape(d) == 0)
      throw std::runtime_error("input spatial dimensions must be non-empty for sampling (dim " +
                               std::to_string(d) + " is 0)");
    if (pad == Padding::kReflection && align && x.shape(d) == 1)
      throw std::runtime_error("reflection with align_corners needs spatial dims above 1");
    image = checked_mul(image, x.shape(d), "image size");
  }
  if (N == 0 || C == 0 || points == 0) {
    ctx.bind_output(n, 0, mx::zeros(out_shape, mx::float32, s));
    return;
  }
  const int P = checked_int(points, "grid points");
  // [N, C, image + 1]: the image per channel, then one zero (read outside it under zeros).
  const mx::array flat =
      mx::concatenate({mx::reshape(x, {N, C, checked_int(image, "image size")}, s),
                       mx::zeros({N, C, 1}, x.dtype(), s)},
                      2, s);
  const mx::array g = mx::reshape(grid, {N, P, nd}, s);
  std::vector<Axis> axes;
  for (int k = 0; k < nd; ++k) {  // k = 0 is x (the last spatial dim)
    const int64_t len = x.shape(rank - 1 - k);
    const mx::array gk = mx::reshape(mx::take(g, k, 2, s), {N, 1, P}, s);
    const mx::array plus1 = mx::add(gk, mx::array(1.f), s);
    mx::array coord =
        align ? mx::multiply(mx::divide(plus1, mx::array(2.f), s),
                             mx::array(static_cast<float>(len - 1)), s)
              : mx::divide(mx::subtract(mx::multiply(plus1, mx::array(static_cast<float>(len)), s),
                                        mx::array(1.f), s),
                           mx::array(2.f), s);
    axes.push_back({len, coord});
  }
  const Sampler sampler(flat, axes, pad, align, s);
  mx::array y = mx::zeros({}, mx::float32, s);
  if (mode == Mode::kNearest) {
    std::vector<mx::array> idx;
    for (const Axis& a : axes) idx.push_back(mx::round(a.coord, 0, s));  // half to even
    y = sampler.pixel(idx);
  } else if (mode == Mode::kLinear) {
    std::vector<mx::array> lo, w_lo, w_hi;
    for (const Axis& a : axes) {
      const mx::array x1 = mx::floor(a.coord, s);
      lo.push_back(x1);
      w_lo.push_back(mx::subtract(mx::add(x1, mx::array(1.f), s), a.coord, s));  // x2 - x
      w_hi.push_back(mx::subtract(a.coord, x1, s));                              // x - x1
    }
    // corner(bits): bit k set takes x1 + 1 along axis k. Combined along x first, then y, z.
    auto corner = [&](unsigned bits) {
      std::vector<mx::array> idx;
      for (size_t k = 0; k < axes.size(); ++k)
        idx.push_back(bits >> k & 1u ? mx::add(lo[k], mx::array(1.f), s) : lo[k]);
      return sampler.pixel(idx);
    };
    std::vector<mx::array> level;
    for (unsigned bits = 0; bits < (1u << nd); ++bits) level.push_back(corner(bits));
    for (int k = 0; k < nd; ++k) {
      std::vector<mx::array> next;
      for (size_t i = 0; i < level.size(); i += 2)
        next.push_back(mx::add(mx::multiply(w_lo[static_cast<size_t>(k)], level[i], s),
                               mx::multiply(w_hi[static_cast<size_t>(k)], level[i + 1], s), s));
      level = std::move(next);
    }
    y = level[0];
  } else {
    // 4x4 pixels from floor - 1; row values with the x coefficients, then the y ones.
    const mx::array x0 = mx::subtract(mx::floor(axes[0].coord, s), mx::array(1.f), s);
    const mx::array y0 = mx::subtract(mx::floor(axes[1].coord, s), mx::array(1.f), s);
    const auto cx =
        cubic_coeffs(mx::subtract(mx::subtract(axes[0].coord, x0, s), mx::array(1.f), s), s);
    const auto cy =
        cubic_coeffs(mx::subtract(mx::subtract(axes[1].coord, y0, s), mx::array(1.f), s), s);
    std::optional<mx::array> acc;
    for (int h = 0; h < 4; ++h) {
      const mx::array row = mx::add(y0, mx::array(static_cast<float>(h)), s);
      std::optional<mx::array> v;
      for (int w = 0; w < 4; ++w) {
        const mx::array col = mx::add(x0, mx::array(static_cast<float>(w)), s);
        const mx::array term =
            mx::multiply(cx[static_cast<size_t>(w)], sampler.pixel({col, row}), s);
        v = v ? mx::add(*v, term, s) : term;
      }
      const mx::array term = mx::multiply(cy[static_cast<size_t>(h)], *v, s);
      acc = acc ? mx::add(*acc, term, s) : term;
    }
    y = *acc;
  }
  ctx.bind_output(n, 0, mx::reshape(y, out_shape, s));
}

}  // namespace

void register_grid_sample_ops(OpRegistry& r) {
  r.add("", "GridSample", 16, 19, claim_grid_sample, translate_grid_sample);
  r.add("", "GridSample", 20, 1 << 30, claim_grid_sample, translate_grid_sample);
}

}  // namespace ortmlx
