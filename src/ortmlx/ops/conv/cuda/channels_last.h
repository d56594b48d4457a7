// NCHW -> NHWC as one CUDA kernel (kernels.cu) instead of MLX's general strided copy, for the
// input of a convolution on the CUDA flavour's sm_90 devices.
#pragma once

#include <mlx/array.h>
#include <mlx/utils.h>

namespace ortmlx::ops {

namespace mx = mlx::core;

// Whether the kernels take x: (N, C, H, W) float32, non-empty, within the grid's limits, on a GPU
// stream of an sm_90 device, unless ONNXRUNTIME_EP_MLX_CONV_NHWC_KERNEL=0. Otherwise the caller
// transposes with MLX.
bool cuda_nchw_to_nhwc_applies(const mx::array& x, mx::StreamOrDevice s);

// x as a row-contiguous (N, H, W, C) array, where cuda_nchw_to_nhwc_applies(x, s).
mx::array cuda_nchw_to_nhwc(const mx::array& x, mx::StreamOrDevice s);

}  // namespace ortmlx::ops
