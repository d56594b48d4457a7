// Row-normalisation kernels shared by the standard (norm.cpp) and contrib (contrib_norm.cpp)
// normalisation ops. Inputs are float32 arrays; `axes` are the trailing normalised axes.
#pragma once

#include <vector>

#include <mlx/ops.h>

#include "ortmlx/registry/registry.h"

namespace ortmlx::ops {

struct NormRows {
  mlx::core::array y;        // normalised rows (before scale/bias), float32
  mlx::core::array mean;     // row mean (LayerNorm only; zeros shape for RMS), keepdims
  mlx::core::array inv_std;  // 1 / sqrt(var + eps) (LayerNorm) or 1 / sqrt(mean(x^2) + eps)
};

// Two-pass LayerNorm statistics on pivot-shifted, magnitude-scaled rows (see norm.cpp).
NormRows layer_norm_rows(const mlx::core::array& xf, const std::vector<int>& axes, float eps,
                         mlx::core::StreamOrDevice s);
// RMS normalisation (x / sqrt(mean(x^2) + eps)), huge rows scaled first so x^2 never overflows.
NormRows rms_norm_rows(const mlx::core::array& xf, const std::vector<int>& axes, float eps,
                       mlx::core::StreamOrDevice s);

// Claim check shared by the row normalisations: the `axis` attribute (default -1) lies within the
// input's static rank, when that is known.
ClaimResult require_norm_axis(const ClaimContext& c);
// The normalised axes: `axis` (already non-negative) through the last of `rank`.
std::vector<int> trailing_axes(int axis, int rank);

// Throws unless `p` broadcasts unidirectionally to `x` (right-aligned dims equal or 1).
void check_unidirectional(const mlx::core::array& p, const mlx::core::array& x, const char* what);

}  // namespace ortmlx::ops
