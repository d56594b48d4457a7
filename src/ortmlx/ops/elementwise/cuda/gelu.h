// GELU as one CUDA kernel (kernels.cu) where MLX would split the chain into several: the CUDA
// flavour on an sm_90 device. Elsewhere it reports itself unavailable and callers keep MLX ops.
#pragma once

#include <cmath>
#include <cstddef>

#include <mlx/array.h>
#include <mlx/utils.h>

namespace ortmlx::ops {

namespace mx = mlx::core;

// The report's path label of the Gelu ops (ONNX, com.microsoft) when they take the kernel.
inline constexpr const char* kGeluCudaPath = "Gelu -> one CUDA kernel";

// The arithmetic of a GELU chain as the ONNX graph writes it (see kernels.cu).
struct GeluForm {
  bool tanh_form = false;
  bool divide = false;     // erf form: x / c, else x * c
  bool half_first = true;  // y = (x * half) * a, else (x * a) * half
  // The defaults are ONNX Gelu's constants, which ops::gelu's MLX-op path reads from here too.
  float c = static_cast<float>(M_SQRT1_2);
  float alpha = 0.044715f;
  float k = std::sqrt(2.0f / static_cast<float>(M_PI));
  float half = 0.5f;
};

// Whether a float32 tensor of `elements` elements on the stream s can take the kernel: the CUDA
// flavour, a GPU stream, an sm_90 device, 1 to 2^31 - 1 elements.
bool cuda_gelu_supports(size_t elements, mx::StreamOrDevice s);

// y = GELU(x) in one kernel; x float32 (made row-contiguous first when it is not).
mx::array cuda_gelu(const mx::array& x, const GeluForm& form, mx::StreamOrDevice s);

}  // namespace ortmlx::ops
