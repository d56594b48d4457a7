// float32 matrix products on MLX's CPU backend through OpenBLAS.
//
// The PyPI mlx-cpu wheel links the reference BLAS, so mx::matmul on the CPU stream runs an
// unblocked triple loop (measured in bench/results/matmul_cpu.md). The project already ships
// OpenBLAS (the scipy-openblas32 wheel, symbols prefixed scipy_); MatMul, Gemm and Einsum build
// their float32 products with blas_matmul() on the CPU stream, a custom MLX primitive whose
// eval_cpu calls scipy_cblas_sgemm. GPU backends keep mx::matmul.
//
// A/B switch (internal, for bench/matmul_cpu.py): ORTMLX_INTERNAL_CPU_MATMUL=mlx makes
// use_blas_matmul() false, i.e. MLX's own matmul everywhere. Read when a node is translated
// (compiled functions keep what they traced with).
#pragma once

#include <optional>

#include <mlx/array.h>
#include <mlx/stream.h>
#include <mlx/utils.h>

namespace ortmlx::ops {

// Whether a product of `dtype` on stream `s` goes through blas_matmul(): float32 on the CPU
// backend, unless the A/B switch above says "mlx".
bool use_blas_matmul(mlx::core::StreamOrDevice s, mlx::core::Dtype dtype);

// y[..., M, N] = alpha * a[..., M, K] b[..., K, N] (+ beta * c), numpy.matmul batching (leading
// dims broadcast), a and b of rank >= 2, float32. Operands are read through their strides: views
// such as transposes of the last two axes reach sgemm as CblasTrans without a copy. c, when
// given, must broadcast to y's shape; it is used only when beta != 0 (BLAS never reads C then).
// alpha == 0 is the caller's business: BLAS skips the product then, so NaN/Inf of a and b would
// not propagate (Gemm multiplies explicitly). Stream `s` must be a CPU stream.
mlx::core::array blas_matmul(const mlx::core::array& a, const mlx::core::array& b,
                             mlx::core::StreamOrDevice s, float alpha = 1.f,
                             const std::optional<mlx::core::array>& c = std::nullopt,
                             float beta = 0.f);

// mx::matmul, or blas_matmul() where use_blas_matmul() says so (a, b of rank >= 2, same dtype), or
// on the GPU cublaslt_matmul() where it applies (matmul/cuda/cublaslt_matmul.h).
mlx::core::array matmul_any(const mlx::core::array& a, const mlx::core::array& b,
                            mlx::core::StreamOrDevice s);

}  // namespace ortmlx::ops
