// RoiAlign (opsets 10-15 and 16+), float32, following ORT's CPU kernel (roialign.cc).
//
// Per region of interest (scaled by spatial_scale; opset 16's default half_pixel mode shifts it
// by -0.5 and leaves a malformed region as it is, output_half_pixel and opset 10 make it at
// least 1x1), each of the output_height x output_width bins takes a grid of sampling_ratio^2
// points (0: ceil(region size / bins) per axis, so per region), each a bilinear sample of 4
// pixels (a point past [-1, size] samples nothing: its weights are 0; below 0 it is clamped to 0,
// at the last row/column to it). avg averages the samples; max takes, per sample, the largest of
// the 4 WEIGHTED pixels and the largest of those over the bin: ORT's kernel does so (its own
// log says this summation is wrong), and the EP matches ORT, not the ONNX reference, which
// takes the max of the interpolated values. A region without samples gives 0.
//
// The sample positions and weights depend on the region values (and on them the sample count
// when sampling_ratio is 0), so the regions and batch indices are read on the host each run and
// every position and weight computed in float32 with ORT's operations and order; the device
// gathers the pixels (one gather of 4 rows per sample point) and combines them in ORT's order.
// A batch index outside [0, N) or a region value that is not finite raises as in ORT; a NaN
// sample point (an infinite or overflowing spatial_scale) has NaN weights, as ORT's. Reading the
// regions on the host makes a plan with runtime regions run eagerly.
// NaN pixels: ORT's std::max keeps its first argument when the comparison fails; MLX's maximum
// propagates the NaN.
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
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

// Host-built sample points beyond this many (regions x bins x points) are refused at run time:
// an adaptive grid of a huge region would otherwise build an unbounded host table.
constexpr int64_t kMaxSamplePoints = int64_t{1} << 26;

bool half_pixel(const NodeView& n) {
  return n.since_version >= 16 &&
         n.attr_string("coordinate_transformation_mode", "half_pixel") == "half_pixel";
}

ClaimResult claim_roi_align(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 3 && c.num_outputs() == 1, "expects 3 inputs and 1 output");
  const bool v16 = c.node().since_version >= 16;
  auto r = v16 ? refuse_unknown_attrs(c, {"coordinate_transformation_mode", "mode", "output_height",
                                          "output_width", "sampling_ratio", "spatial_scale"})
               : refuse_unknown_attrs(c, {"mode", "output_height", "output_width", "sampling_ratio",
                                          "spatial_scale"});
  if (!r.ok) return r;
  for (size_t i = 0; i < 2; ++i) {
    r = require_input_type(
        c, i, [](ElemType t) { return t == ElemType::kFloat; },
        "float32 only (ORT's CPU EP also has float64)");
    if (!r.ok) return r;
  }
  r = require_input_type(
      c, 2, [](ElemType t) { return t == ElemType::kInt64; }, "batch_indices must be int64");
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.input_rank(0) == 4, "X must be 4-D");
  ORTMLX_REQUIRE(c.input_rank(1) < 0 || c.input_rank(1) == 2, "rois must be 2-D");
  ORTMLX_REQUIRE(c.input_rank(2) < 0 || c.input_rank(2) == 1, "batch_indices must be 1-D");
  const std::string mode = c.node().attr_string("mode", "avg");
  ORTMLX_REQUIRE(mode == "avg" || mode == "max", "mode must be avg or max");
  if (v16) {
    const std::string ctm = c.node().attr_string("coordinate_transformation_mode", "half_pixel");
    ORTMLX_REQUIRE(ctm == "half_pixel" || ctm == "output_half_pixel",
                   "coordinate_transformation_mode must be half_pixel or output_half_pixel");
  }
  r = require_int_range(c, "output_height", 0, std::numeric_limits<int32_t>::max());
  if (!r.ok) return r;
  r = require_int_range(c, "output_width", 0, std::numeric_limits<int32_t>::max());
  if (!r.ok) return r;
  r = require_int_range(c, "sampling_ratio", 0, std::numeric_limits<int32_t>::max());
  if (!r.ok) return r;
  return ClaimResult::yes();
}

// One bilinear sample point of ORT's pre-calculation: 4 flat pixel positions and weights.
struct Sample {
  int32_t pos[4] = {0, 0, 0, 0};
  float w[4] = {0.f, 0.f, 0.f, 0.f};
};

// ORT's sample at (y, x) of an image of height x width, in float32.
Sample bilinear_sample(float y, float x, int64_t height, int64_t width) {
  Sample smp;
  if (y < -1.0 || y > static_cast<float>(height) || x < -1.0 || x > static_cast<float>(width))
    return smp;  // outside: weights 0 at position 0
  // A NaN coordinate the check above lets through (an infinite or overflowing scale times a
  // finite region) gives ORT NaN weights (its index from the NaN is undefined behaviour): NaN
  // weights at position 0 here.
  if (std::isnan(y) || std::isnan(x)) {
    for (float& w : smp.w) w = std::numeric_limits<float>::quiet_NaN();
    return smp;
  }
  if (y <= 0) y = 0;
  if (x <= 0) x = 0;
  auto y_low = static_cast<int64_t>(y);
  auto x_low = static_cast<int64_t>(x);
  int64_t y_high = y_low + 1, x_high = x_low + 1;
  if (y_low >= height - 1) {
    y_high = y_low = height - 1;
    y = static_cast<float>(y_low);
  }
  if (x_low >= width - 1) {
    x_high = x_low = width - 1;
    x = static_cast<float>(x_low);
  }
  const float ly = y - static_cast<float>(y_low), lx = x - static_cast<float>(x_low);
  const float hy = 1.f - ly, hx = 1.f - lx;
  smp.w[0] = hy * hx;
  smp.w[1] = hy * lx;
  smp.w[2] = ly * hx;
  smp.w[3] = ly * lx;
  smp.pos[0] = static_cast<int32_t>(y_low * width + x_low);
  smp.pos[1] = static_cast<int32_t>(y_low * width + x_high);
  smp.pos[2] = static_cast<int32_t>(y_high * width + x_low);
  smp.pos[3] = static_cast<int32_t>(y_high * width + x_high);
  return smp;
}

// ORT's adaptive grid size: int64 of a float ceil (x86 turns NaN, infinities and values past
// int64 into INT64_MIN: no samples).
int64_t adaptive_grid(float extent, int64_t bins) {
  const float v = std::ceil(extent / static_cast<float>(bins));
  if (!(v > -9.2e18f && v < 9.2e18f)) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(v);
}

void translate_roi_align(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  if (x.ndim() != 4) throw std::runtime_error("X must be 4-D");
  const int64_t N = x.shape(0), C = x.shape(1), H = x.shape(2), W = x.shape(3);
  mx::array rois_a = host_array(ctx, n, 1, "rois");
  const std::vector<int64_t> batch = host_ints(ctx, n, 2, "batch_indices");
  if (rois_a.ndim() != 2) throw std::runtime_error("Number of dimensions for rois should be 2");
  if (rois_a.shape(1) != 4) throw std::runtime_error("Second dimension for rois should be 4");
  const int64_t R = rois_a.shape(0);
  if (static_cast<int64_t>(batch.size()) != R)
    throw std::runtime_error("First dimension (num_rois) of batch_indices and rois don't match");
  for (int64_t i = 0; i < R; ++i)
    if (batch[static_cast<size_t>(i)] < 0 || batch[static_cast<size_t>(i)] >= N)
      throw std::runtime_error(
          "batch_indices value " + std::to_string(batch[static_cast<size_t>(i)]) + " at index " +
          std::to_string(i) + " is out of range [0, " + std::to_string(N) + ")");
  rois_a = mx::astype(mx::contiguous(rois_a), mx::float32);
  mx::eval(rois_a);
  const float* rois = rois_a.data<float>();
  for (size_t i = 0; i < rois_a.size(); ++i)
    if (!std::isfinite(rois[i])) throw std::runtime_error("All 'rois' values must be finite");
  const int64_t PH = n.attr_int("output_height", 1), PW = n.attr_int("output_width", 1);
  const int64_t ratio = n.attr_int("sampling_ratio", 0);
  const float scale = n.attr_float("spatial_scale", 1.f);
  const bool half = half_pixel(n);
  const bool max_mode = n.attr_string("mode", "avg") == "max";
  const mx::Shape out_shape = checked_shape({R, C, PH, PW}, mx::float32);
  const int64_t bins = checked_mul(PH, PW, "bins");
  const int64_t M = checked_mul(R, bins, "regions x bins");
  if (M == 0) {
    ctx.bind_output(n, 0, mx::zeros(out_shape, mx::float32, s));
    return;
  }
  // No channels still means a sample table per region for ORT (it fails to allocate one for
  // 2^31 bins, and its size overflows for a sampling_ratio of 2^31 - 1): the bounds below apply
  // before the empty result is returned.
  if (C == 0 && M > kMaxSamplePoints)
    throw std::runtime_error("RoiAlign needs more than 2^26 sample points");
  if (C > 0) {
    if (H == 0 || W == 0) throw std::runtime_error("X must have a non-empty image");
    checked_int(checked_mul(checked_mul(N, H, "N*H"), W, "N*H*W"), "N*H*W");
  }

  // Per region: grid size, bin sizes and start, as ORT computes them.
  struct Region {
    int64_t gh, gw;
    float sh, sw, bh, bw;
  };
  std::vector<Region> regions(static_cast<size_t>(R));
  int64_t max_points = 0;
  const float offset = half ? 0.5f : 0.f;
  for (int64_t i = 0; i < R; ++i) {
    const float* roi = rois + 4 * i;
    Region& g = regions[static_cast<size_t>(i)];
    g.sw = roi[0] * scale - offset;
    g.sh = roi[1] * scale - offset;
    float rw = roi[2] * scale - offset - g.sw, rh = roi[3] * scale - offset - g.sh;
    if (!half) {  // malformed regions forced to 1x1
      rw = std::max(rw, 1.f);
      rh = std::max(rh, 1.f);
    }
    g.bh = rh / static_cast<float>(PH);
    g.bw = rw / static_cast<float>(PW);
    g.gh = ratio > 0 ? ratio : adaptive_grid(rh, PH);
    g.gw = ratio > 0 ? ratio : adaptive_grid(rw, PW);
    if (g.gh <= 0 || g.gw <= 0) {
      g.gh = g.gw = 0;  // no samples: 0
      continue;
    }
    if (g.gh > kMaxSamplePoints || g.gw > kMaxSamplePoints || g.gh * g.gw > kMaxSamplePoints)
      throw std::runtime_error("the sampling grid of region " + std::to_string(i) +
                               " is too large");
    max_points = std::max(max_points, g.gh * g.gw);
  }
  if (checked_mul(max_points, M, "sample points") > kMaxSamplePoints)
    throw std::runtime_error("RoiAlign needs more than 2^26 sample points");
  if (C == 0) {
    ctx.bind_output(n, 0, mx::zeros(out_shape, mx::float32, s));
    return;
  }

  const int Mi = checked_int(M, "regions x bins"), Ci = checked_int(C, "channels");
  const int64_t hw = H * W;
  // Rows of [N * H * W, C]: a pixel's channels.
  const mx::array table =
      mx::reshape(mx::transpose(x, {0, 2, 3, 1}, s), {checked_int(N * hw, "N*H*W"), Ci}, s);
  std::vector<float> count(static_cast<size_t>(M));
  for (int64_t i = 0; i < R; ++i) {
    const Region& g = regions[static_cast<size_t>(i)];
    for (int64_t b = 0; b < bins; ++b)
      count[static_cast<size_t>(i * bins + b)] =
          static_cast<float>(std::max<int64_t>(g.gh * g.gw, 1));
  }
  std::optional<mx::array> acc;
  for (int64_t p = 0; p < max_points; ++p) {
    std::vector<int32_t> rows(static_cast<size_t>(4 * M));
    std::vector<float> weights(static_cast<size_t>(4 * M));
    std::vector<uint8_t> active(static_cast<size_t>(M), 0);
    bool all_active = true;
    for (int64_t i = 0; i < R; ++i) {
      const Region& g = regions[static_cast<size_t>(i)];
      const int64_t base = batch[static_cast<size_t>(i)] * hw;
      for (int64_t ph = 0; ph < PH; ++ph) {
        for (int64_t pw = 0; pw < PW; ++pw) {
          const auto m = static_cast<size_t>((i * PH + ph) * PW + pw);
          if (p >= g.gh * g.gw) {
            all_active = false;
            continue;
          }
          active[m] = 1;
          const int64_t iy = p / g.gw, ix = p % g.gw;
          const float yy = g.sh + static_cast<float>(ph) * g.bh +
                           (static_cast<float>(iy) + .5f) * g.bh / static_cast<float>(g.gh);
          const float xx = g.sw + static_cast<float>(pw) * g.bw +
                           (static_cast<float>(ix) + .5f) * g.bw / static_cast<float>(g.gw);
          const Sample smp = bilinear_sample(yy, xx, H, W);
          for (size_t k = 0; k < 4; ++k) {
            rows[k * static_cast<size_t>(M) + m] = static_cast<int32_t>(base + smp.pos[k]);
            weights[k * static_cast<size_t>(M) + m] = smp.w[k];
          }
        }
      }
    }
    const mx::array idx = mx::array(rows.begin(), {4 * Mi}, mx::int32);
    const mx::array px = mx::reshape(mx::take(table, idx, 0, s), {4, Mi, Ci}, s);
    const mx::array w = mx::array(weights.begin(), {4, Mi, 1}, mx::float32);
    const mx::array terms = mx::multiply(w, px, s);
    auto term = [&](int k) { return mx::take(terms, k, 0, s); };
    mx::array val =
        max_mode
            ? mx::maximum(mx::maximum(mx::maximum(term(0), term(1), s), term(2), s), term(3), s)
            : mx::add(mx::add(mx::add(term(0), term(1), s), term(2), s), term(3), s);
    if (acc) val = max_mode ? mx::maximum(*acc, val, s) : mx::add(*acc, val, s);
    if (!all_active) {
      const mx::array on = mx::array(active.begin(), {Mi, 1}, mx::bool_);
      val = mx::where(on, val, acc ? *acc : mx::zeros({Mi, Ci}, mx::float32, s), s);
    }
    acc = val;
  }
  mx::array y = acc ? *acc : mx::zeros({Mi, Ci}, mx::float32, s);
  if (!max_mode) y = mx::divide(y, mx::array(count.begin(), {Mi, 1}, mx::float32), s);
  y = mx::reshape(y,
                  {checked_int(R, "regions"), checked_int(PH, "output_height"),
                   checked_int(PW, "output_width"), Ci},
                  s);
  ctx.bind_output(n, 0, mx::transpose(y, {0, 3, 1, 2}, s));
}

}  // namespace

void register_roi_align_ops(OpRegistry& r) {
  r.add("", "RoiAlign", 10, 15, claim_roi_align, translate_roi_align);
  r.add("", "RoiAlign", 16, 1 << 30, claim_roi_align, translate_roi_align);
}

}  // namespace ortmlx
