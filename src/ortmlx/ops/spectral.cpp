// Spectral family: HannWindow, HammingWindow, BlackmanWindow (opset 17).
//
// The windows are computed on the host, the way ORT's CPU kernel computes them (its
// window_functions.cc): the cosine-sum a0 - a1 cos(t i) + a2 cos(2 t i) in double, with
// t = 2 * 3.14159265 / N (ORT's truncated pi, N = size when periodic, size - 1 otherwise) and
// the coefficients rounded to float first, then one cast to the output type. Doing the same
// arithmetic gives ORT's values bit for bit (a symmetric window of size 1 divides by zero and
// is NaN there as here).
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/host_values.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

struct CosineSum {
  float a0, a1, a2;
};

// ORT's coefficients, as floats (the kernel declares them float).
constexpr CosineSum kHann{.5f, .5f, 0.f};
constexpr CosineSum kHamming{25.f / 46.f, 1.f - 25.f / 46.f, 0.f};
constexpr CosineSum kBlackman{.5f - .16f / 2.f, .5f, .16f / 2.f};

ClaimResult claim_window(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 1 && c.num_outputs() == 1, "expects 1 input and 1 output");
  auto r = refuse_unknown_attrs(c, {"output_datatype", "periodic"});
  if (!r.ok) return r;
  r = require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kInt32 || t == ElemType::kInt64; },
      "size must be int32 or int64");
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.input_rank(0) == 0 || c.input_rank(0) == 1, "size must be a scalar");
  const int64_t periodic = c.node().attr_int("periodic", 1);
  ORTMLX_REQUIRE(periodic == 0 || periodic == 1, "periodic must be 0 or 1");
  // ORT also writes integer and float64 windows; integers would be cast from a NaN (symmetric
  // size 1, undefined behaviour in C++) and float64 has no MLX dtype on every backend.
  const int64_t dt = c.node().attr_int("output_datatype", 1);
  ORTMLX_REQUIRE(dt == static_cast<int64_t>(ElemType::kFloat),
                 "output_datatype " + std::to_string(dt) + " is not implemented (float32 only)");
  return ClaimResult::yes();
}

TranslateFn translate_window(CosineSum w) {
  return [w](TranslationContext& ctx, const NodeDesc& n) {
    const int64_t size = host_int(ctx, n, 0, "size");
    if (size < 0) throw std::runtime_error("window size " + std::to_string(size) + " is negative");
    if (size > std::numeric_limits<int32_t>::max())
      throw std::runtime_error("window size " + std::to_string(size) + " exceeds MLX's int32 dims");
    const bool periodic = n.attr_int("periodic", 1) == 1;
    constexpr double kPi = 3.14159265;  // ORT's constant, not M_PI: the values follow from it
    const double tau = 2 * kPi;
    // ORT divides by a size_t: size - 1 of a symmetric window of size 0 never gets used.
    const double denominator = static_cast<double>(periodic ? size : size - 1);
    const double step = tau / denominator;
    std::vector<float> out(static_cast<size_t>(size));
    for (int64_t i = 0; i < size; ++i) {
      const double di = static_cast<double>(i);
      const double a2_term = w.a2 == 0 ? 0.0 : w.a2 * std::cos(2 * step * di);
      out[static_cast<size_t>(i)] = static_cast<float>(w.a0 - w.a1 * std::cos(step * di) + a2_term);
    }
    ctx.bind_output(n, 0, mx::array(out.begin(), {static_cast<int>(size)}, mx::float32));
  };
}

}  // namespace

void register_spectral_ops(OpRegistry& r) {
  r.add("", "HannWindow", 17, 1 << 30, claim_window, translate_window(kHann));
  r.add("", "HammingWindow", 17, 1 << 30, claim_window, translate_window(kHamming));
  r.add("", "BlackmanWindow", 17, 1 << 30, claim_window, translate_window(kBlackman));
}

}  // namespace ortmlx
