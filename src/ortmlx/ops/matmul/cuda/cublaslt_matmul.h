// float32 matrix products through cuBLASLt with a plan kept per shape (the CUDA flavour), as an
// MLX primitive of the plan's graph. Why: MLX's CUDA matmul builds a cuBLASLt descriptor, four
// matrix layouts and a heuristic query on every evaluation and runs the heuristic's first
// algorithm, which for inference-sized products is often split over K (a second kernel that sums
// the parts). Inference subgraphs of a few hundred nodes are bound by host time per kernel on the
// GPU, and a transformer layer runs a dozen products. Here each shape's descriptors are made once
// and its algorithm is the fastest of cuBLASLt's candidates, timed warm on the first run (what
// ORT's CUDA EP gets from cuBLAS); a bias vector rides in the product's epilogue. Exact fp32
// (CUBLAS_COMPUTE_32F) unless the process runs in TF32 mode (device::tf32_enabled()).
// Opt-in: on an H100 it ran no faster than MLX's matmul in the same process (better on two small
// BERTs, worse on the batch-8 encoder and whisper_encoder: bench/results/gpu_peer.md), so the
// per-call host work it removes is not what bounds those runs.
#pragma once

#include <optional>

#include <mlx/array.h>
#include <mlx/utils.h>

namespace ortmlx::ops {

namespace mx = mlx::core;

// Whether y = alpha * a @ b (+ bias) can take cuBLASLt on `s`: the CUDA flavour on a GPU stream
// with cuBLASLt loaded in the process, MLX's CUDA graphs off (the workspace is released in stream
// order, as for the cuDNN convolutions), float32 a [..., M, K] and b [..., K, N] of rank >= 2
// whose batch dims are each either all 1 or the whole broadcast batch, M > 1 and N > 1 (single
// rows and columns keep MLX's matrix-vector kernel), K > 0, nothing past 2^31 elements, bias
// (when given) a float32 vector of N, a shape cuBLASLt did not fail on before in this process,
// and ONNXRUNTIME_EP_MLX_CUBLASLT_MATMUL set to a true flag (opt-in; read at each translation).
bool cublaslt_matmul_applies(const mx::array& a, const mx::array& b,
                             const std::optional<mx::array>& bias, mx::StreamOrDevice s);

// y [batch..., M, N] = alpha * a @ b (+ bias on every row), numpy.matmul batching. Operands that
// are neither row-contiguous (nor, for 2-D ones, column-contiguous: transposed weights) are copied
// first. The first evaluation of a shape times cuBLASLt's candidate algorithms (a host
// synchronisation); later ones only launch.
mx::array cublaslt_matmul(const mx::array& a, const mx::array& b, mx::StreamOrDevice s,
                          float alpha = 1.f, const std::optional<mx::array>& bias = std::nullopt);

}  // namespace ortmlx::ops
