// Vision family: CenterCropPad (opset 18+).
// ORT's CPU EP has no CenterCropPad kernel: it runs ONNX's function body (Pad to at least the
// target size, split evenly with the extra element on the right, then Slice the centre, the
// extra element again on the right; a negative size gives an empty axis). The target sizes
// decide the output shape, so they are read on the host (host_values.h).
#include <string>
#include <vector>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/host_values.h"
#include "ortmlx/ops/op_args.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

constexpr const char* kAnyType = "MLX-supported tensor types only (no float64, no strings)";

// ---------------------------------------------------------------- CenterCropPad

ClaimResult claim_center_crop_pad(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 2 && c.num_outputs() == 1, "expects 2 inputs and 1 output");
  auto r = refuse_unknown_attrs(c, {"axes"});
  if (!r.ok) return r;
  r = require_input_type(c, 0, mlx_supports, kAnyType);
  if (!r.ok) return r;
  // int64 only: ORT cannot expand the function body for int32 (its Max mixes the two).
  r = claim_index_list(c, 1, "shape");
  if (!r.ok) return r;
  const ElemType out = c.output_type(0);
  ORTMLX_REQUIRE(out == ElemType::kUndefined || out == c.input_type(0),
                 "output type differs from input type");
  const int64_t rank = c.input_rank(0);
  if (rank >= 0 && c.node().has_attr("axes")) {
    std::string why;
    ORTMLX_REQUIRE(normalize_axes(*c.node().attr_ints("axes"), rank, &why).has_value(), why);
  }
  return ClaimResult::yes();
}

void translate_center_crop_pad(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array x = ctx.input(n, 0);
  const int rank = static_cast<int>(x.ndim());
  std::vector<int> axes;
  if (n.has_attr("axes")) {
    axes = normalize_axes_or_throw(*n.attr_ints("axes"), rank);
  } else {
    for (int a = 0; a < rank; ++a) axes.push_back(a);
  }
  const std::vector<int64_t> target = host_ints(ctx, n, 1, "shape");
  if (target.size() != axes.size())
    throw std::runtime_error("shape holds " + std::to_string(target.size()) + " values for " +
                             std::to_string(axes.size()) + " axes");
  std::vector<std::pair<int, int>> pads(static_cast<size_t>(rank), {0, 0});
  bool pad = false;
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t d = x.shape(axes[i]), t = target[i];
    checked_int(t, "CenterCropPad target size");
    if (t > d) {
      const int64_t left = (t - d) / 2;
      pads[static_cast<size_t>(axes[i])] = {checked_int(left, "CenterCropPad pad"),
                                            checked_int(t - d - left, "CenterCropPad pad")};
      pad = true;
    }
  }
  if (pad) {
    std::vector<int> ax(static_cast<size_t>(rank));
    std::vector<int> lo, hi;
    for (int a = 0; a < rank; ++a) {
      ax[static_cast<size_t>(a)] = a;
      lo.push_back(pads[static_cast<size_t>(a)].first);
      hi.push_back(pads[static_cast<size_t>(a)].second);
    }
    x = mx::pad(x, ax, mx::Shape(lo.begin(), lo.end()), mx::Shape(hi.begin(), hi.end()),
                mx::zeros({}, x.dtype(), s), "constant", s);
  }
  mx::Shape start(static_cast<size_t>(rank), 0), stop = x.shape();
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t d = x.shape(axes[i]), t = target[i];
    if (t < 0) {
      // The body's Slice then ends before it starts (or, counted from the end, before the
      // start clamped to the dim): an empty axis whatever the negative size.
      start[static_cast<size_t>(axes[i])] = 0;
      stop[static_cast<size_t>(axes[i])] = 0;
      continue;
    }
    const int64_t first = (d - t) / 2;
    start[static_cast<size_t>(axes[i])] = checked_int(first, "CenterCropPad start");
    stop[static_cast<size_t>(axes[i])] = checked_int(first + t, "CenterCropPad stop");
  }
  ctx.bind_output(n, 0, mx::slice(x, start, stop, s));
}

}  // namespace

void register_vision_ops(OpRegistry& r) {
  r.add("", "CenterCropPad", 18, 1 << 30, claim_center_crop_pad, translate_center_crop_pad);
}

}  // namespace ortmlx
