// LayerNorm of float32 rows in one CUDA kernel (kernels.cu), with the residual Add that feeds it
// folded in: the fast LayerNorm path of the CUDA flavour on sm_90
// (ONNXRUNTIME_EP_MLX_LAYER_NORM_KERNEL=0 keeps MLX's fast path).
#pragma once

#include <optional>

#include <mlx/array.h>
#include <mlx/utils.h>

namespace ortmlx::ops {

namespace mx = mlx::core;

// X's parts, in the graph's order: X = (m + bias) + residual, bias a vector over the last axis
// added to m first, either part absent.
struct LayerNormSum {
  mx::array m;
  std::optional<mx::array> bias;
  std::optional<mx::array> residual;
};

// Whether the kernel runs rows of float32 `x` (rank >= 1, the last axis normalised) on `s`: the
// CUDA flavour on an sm_90 GPU stream, the kernel not switched off, at most 2^31 - 1 elements.
bool cuda_layer_norm_applies(const mx::array& x, mx::StreamOrDevice s);

// X as the kernel takes it: when X is MLX's Add of two arrays of its shape (the residual Add of
// the graph), those two, and where one of them is itself an Add of a full array and a broadcast
// last-axis vector (a bias), that array and the vector. Otherwise X alone.
LayerNormSum layer_norm_sum_parts(const mx::array& x);

struct LayerNormResult {
  mx::array y;
  std::optional<mx::array> sum;  // X as computed by the kernel, when it had a residual to add
};

// y = LayerNorm(X) over the last axis on rows shifted by their first element (as
// patterns::shifted_fast_layer_norm), gamma and beta optional vectors of the last axis's size.
LayerNormResult cuda_layer_norm(const LayerNormSum& x, const std::optional<mx::array>& gamma,
                                const std::optional<mx::array>& beta, float eps,
                                mx::StreamOrDevice s);

}  // namespace ortmlx::ops
