// Math shared between the elementwise and activation families (ONNX and com.microsoft Gelu).
#pragma once

#include <mlx/ops.h>

namespace ortmlx::ops {

// erf with float32 relative accuracy near 0 (mx::erf alone is only absolutely accurate there).
mlx::core::array erf_accurate(const mlx::core::array& x, mlx::core::StreamOrDevice s);

// Gelu (erf form, or the tanh approximation), computed in float32 for half types, cast back; one
// CUDA kernel where the build and device have it (elementwise/cuda/gelu.h), else MLX ops.
mlx::core::array gelu(const mlx::core::array& x, bool tanh_approx, mlx::core::StreamOrDevice s);

}  // namespace ortmlx::ops
