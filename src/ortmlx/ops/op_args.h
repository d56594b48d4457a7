// Helpers for ops whose arguments (shapes, axes) come from constant inputs or int attributes:
// reading them, validating them, and turning them into MLX shapes/axes. Used by the shape and
// reduce families; header-only so each family stays one .cpp file.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "ortmlx/ops/common.h"

namespace ortmlx::ops {

// Values of a constant 1-D (or scalar) int64 tensor; nullopt for anything else. ONNX types the
// shape/axes inputs of Reshape, (Un)Squeeze and the Reduce ops as int64 only.
inline std::optional<std::vector<int64_t>> const_int64_list(const ConstTensor* t) {
  if (!t || t->dtype != ElemType::kInt64 || t->shape.size() > 1) return std::nullopt;
  return t->as_int64();
}

// Claim-time check of an int64 list given as input i: must be a constant initializer whose data
// is available. Returns the values or sets `why`.
inline std::optional<std::vector<int64_t>> claim_const_ints(const ClaimContext& c, size_t i,
                                                            const char* what, std::string* why) {
  if (!c.input_is_constant(i)) {
    *why = std::string(what) + " input is not a constant initializer";
    return std::nullopt;
  }
  const ConstTensor* t = c.constant_input(i);
  if (!t) {
    *why = std::string(what) + " input data is not available at claim time";
    return std::nullopt;
  }
  auto v = const_int64_list(t);
  if (!v) *why = std::string(what) + " input must be a 1-D int64 tensor";
  return v;
}

// Translate-time read of a constant int64 list input; throws when it is not one (the claim
// guarantees it is, so this only fires on an engine inconsistency).
inline std::vector<int64_t> translate_const_ints(const TranslationContext& ctx, const NodeDesc& n,
                                                 size_t i, const char* what) {
  auto v = const_int64_list(ctx.constant_input(n, i));
  if (!v) throw std::runtime_error(std::string(what) + " input is not a constant int64 tensor");
  return *v;
}

// Normalises axes against `rank` and checks they are in range and (unless allow_repeats, when
// repeats are dropped) unique; nullopt (with `why`) otherwise. Order is preserved.
inline std::optional<std::vector<int>> normalize_axes(const std::vector<int64_t>& axes,
                                                      int64_t rank, std::string* why,
                                                      bool allow_repeats = false) {
  std::vector<int> out;
  out.reserve(axes.size());
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) {
      *why = "axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank);
      return std::nullopt;
    }
    const int n = static_cast<int>(a < 0 ? a + rank : a);
    if (std::find(out.begin(), out.end(), n) != out.end()) {
      if (allow_repeats) continue;
      *why = "axis " + std::to_string(a) + " is repeated";
      return std::nullopt;
    }
    out.push_back(n);
  }
  return out;
}

// Same, throwing (for translators, where the live rank is known).
inline std::vector<int> normalize_axes_or_throw(const std::vector<int64_t>& axes, int64_t rank,
                                                bool allow_repeats = false) {
  std::string why;
  auto out = normalize_axes(axes, rank, &why, allow_repeats);
  if (!out) throw std::runtime_error(why);
  return *out;
}

// MLX shapes are int32: refuse dimensions that do not fit.
inline mx::Shape checked_shape(const std::vector<int64_t>& dims) {
  mx::Shape s;
  s.reserve(dims.size());
  for (int64_t d : dims) {
    if (d < 0 || d > std::numeric_limits<int32_t>::max())
      throw std::runtime_error("dimension " + std::to_string(d) +
                               (d < 0 ? " is negative" : " exceeds MLX's int32 dims"));
    s.push_back(static_cast<int32_t>(d));
  }
  return s;
}

// Same, for the shape of an output of dtype `dt`: also its byte size must fit int64 (MLX counts
// sizes in size_t: an overflowing product would wrap to a small allocation).
inline mx::Shape checked_shape(const std::vector<int64_t>& dims, mx::Dtype dt) {
  mx::Shape s = checked_shape(dims);
  int64_t bytes = static_cast<int64_t>(dt.size());
  for (int64_t d : dims) bytes = checked_mul(bytes, d, "output size in bytes");
  return s;
}

inline int64_t shape_product(const mx::Shape& s, size_t begin, size_t end) {
  int64_t p = 1;
  for (size_t i = begin; i < end; ++i) p *= s[i];
  return p;
}

}  // namespace ortmlx::ops
