// NCHW -> NHWC as one CUDA kernel (kernels.cu) instead of MLX's general strided copy, for the
// input of a convolution on the CUDA flavour's sm_90 devices.
#pragma once

#include <optional>

#include <mlx/array.h>
#include <mlx/utils.h>

namespace ortmlx::ops {

namespace mx = mlx::core;

// x (N, C, H, W) float32 as a row-contiguous (N, H, W, C) array, or nullopt where the kernels do
// not apply (another rank or type, not a GPU stream or not sm_90, sizes past the grid's limits,
// or ONNXRUNTIME_EP_MLX_CONV_NHWC_KERNEL unset: opt-in until they have run on a GPU): the caller
// then transposes with MLX.
std::optional<mx::array> cuda_nchw_to_nhwc(const mx::array& x, mx::StreamOrDevice s);

}  // namespace ortmlx::ops
