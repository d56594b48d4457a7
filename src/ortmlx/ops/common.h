// Claim and translation helpers shared by the op families.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <mlx/ops.h>

#include "ortmlx/engine/dtype.h"
#include "ortmlx/engine/plan.h"
#include "ortmlx/engine/translation_context.h"
#include "ortmlx/registry/registry.h"

namespace ortmlx::ops {

namespace mx = mlx::core;

inline bool type_in(ElemType t, std::initializer_list<ElemType> allowed) {
  for (ElemType a : allowed)
    if (a == t) return true;
  return false;
}

inline std::string type_str(ElemType t) {
  return elem_type_name(t);
}

// Refuses unless input i exists and has a known, MLX-supported type satisfying `pred`.
template <typename Pred>
ClaimResult require_input_type(const ClaimContext& c, size_t i, Pred pred, const char* what) {
  if (!c.has_input(i)) return ClaimResult::no("input " + std::to_string(i) + " is absent");
  const ElemType t = c.input_type(i);
  if (t == ElemType::kUndefined)
    return ClaimResult::no("input " + std::to_string(i) + " has no known tensor type");
  if (!pred(t))
    return ClaimResult::no("input " + std::to_string(i) + " type " + type_str(t) +
                           " not supported (" + what + ")");
  return ClaimResult::yes();
}

// All inputs (and output 0, when known) share one type.
ClaimResult require_same_types(const ClaimContext& c);

// Refuses when an attribute is present that the translator does not implement.
ClaimResult refuse_unknown_attrs(const ClaimContext& c, std::initializer_list<const char*> known);

// A per-spatial-dim int list attribute (Conv/pool kernel_shape, strides, pads...): `fallback`
// repeated nd * mult times when absent; nullopt when its length is not nd * mult.
std::optional<std::vector<int64_t>> spatial_attr(const NodeView& n, const char* name, size_t nd,
                                                 int64_t fallback, size_t mult = 1);

// True when MLX runs on a GPU backend (CUDA or Metal): claims that depend on what a backend's
// kernels implement (e.g. 64-bit scatters) ask it.
inline bool gpu_backend() {
  return mx::default_device() == mx::Device::gpu;
}

// Whether stream `s` (a node's: the EP may put a node on the CPU backend in a GPU process) runs
// on MLX's CPU or GPU backend: kernels of ours exist for one of them.
inline bool runs_on_cpu(mx::StreamOrDevice s) {
  return mx::to_stream(s).device.type == mx::Device::cpu;
}
inline bool runs_on_gpu(mx::StreamOrDevice s) {
  return mx::to_stream(s).device.type == mx::Device::gpu;
}

// e^x over float32's whole range. MLX's CPU backend returns inf for x > 88 (its vector exp
// clamps there) where e^x stays finite up to ln(FLT_MAX) = 88.72: there this takes exp(x/2)^2
// (x/2 exact; about twice exp's rounding error). GPU backends' exp is used as it is.
mx::array exp_full_range(const mx::array& x, mx::StreamOrDevice s = {});

// Checked int64 arithmetic. ONNX attributes and shape values are int64; MLX dims and most MLX op
// arguments are int32. A value narrowed with a plain cast wraps (2^32 becomes 0, a divisor that
// crashes; 2^32 + 1 becomes 1, a silently different model), so every narrowing and every product
// or sum of shape values goes through these: they throw std::runtime_error naming `what` instead.
int checked_int(int64_t v, const char* what);
int64_t checked_mul(int64_t a, int64_t b, const char* what);
int64_t checked_add(int64_t a, int64_t b, const char* what);

// Claim side of the same: refuses when attribute `name` (an int, or every value of an ints
// attribute) is present and outside [lo, hi].
ClaimResult require_int_range(const ClaimContext& c, const char* name, int64_t lo, int64_t hi);

inline mx::Shape to_shape(const std::vector<int64_t>& v) {
  return mx::Shape(v.begin(), v.end());
}

}  // namespace ortmlx::ops
