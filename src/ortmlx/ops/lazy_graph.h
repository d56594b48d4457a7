// Reading the lazy MLX graph a translator is handed: which primitive made an array, and the
// bias-add shape that hand-written kernels fold in (the projection's bias before a LayerNorm or a
// GELU), so they can read the operands instead of a sum MLX would write out first. By name:
// libmlx exports no RTTI for its primitives (no dynamic_cast; engine/layout.cpp does the same).
#pragma once

#include <optional>

#include <mlx/array.h>

namespace ortmlx::ops {

namespace mx = mlx::core;

// Whether `a` is the output of an MLX primitive named `primitive` ("Add", "Broadcast", ...).
bool made_by(const mx::array& a, const char* primitive);

// float32 with like's shape.
bool same_float_shape(const mx::array& a, const mx::array& like);

// The vector behind `a` when `a` is MLX's broadcast, to like's shape, of a float32 vector of like's
// last-axis size (1-D, or with leading 1s); else nullopt.
std::optional<mx::array> broadcast_vector(const mx::array& a, const mx::array& like);

// The array `a` broadcasts from: `a` itself when it is a float32 array of like's shape and not
// MLX's broadcast; the broadcast's float32 input when `a` is MLX's broadcast, to like's shape, of
// an array whose dims (right-aligned) are 1 or like's; else nullopt.
std::optional<mx::array> broadcast_source(const mx::array& a, const mx::array& like);

// a = m + bias (either operand order), m a float32 array of like's shape and bias a broadcast
// last-axis vector: the pair; else nullopt. Also through one Reshape of such a sum that keeps the
// last axis (m then comes back reshaped to like's shape: a view of the same rows).
struct BiasAdd {
  mx::array m;
  mx::array bias;
};
std::optional<BiasAdd> bias_add(const mx::array& a, const mx::array& like);

}  // namespace ortmlx::ops
