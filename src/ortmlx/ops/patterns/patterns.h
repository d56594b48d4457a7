// The pattern pass: recognises the chains that exporters write for common layers (LayerNorm,
// RMSNorm, GELU, softmax attention, MatMul + bias) inside a fused subgraph and replaces each by one
// pattern node, translated as one MLX op (mx::fast::layer_norm / rms_norm /
// scaled_dot_product_attention: one kernel on GPU backends) instead of 4-10 ops. One pattern has
// several results: MatMuls of one input with constant 2-D weights (the Q/K/V projections) become
// one GEMM with the weights concatenated once per plan (a derived constant, at the first
// trace), its outputs slices of the product's last axis (shared_input_matmul.cpp; opt-in, GPU
// backends only, where MatMul is MLX's own matmul). Where the fast form does not apply to the
// concrete shapes, the pattern node translates the chain's original nodes (exactly today's path).
//
// It runs once per fused node at Compile, after the report recorded the fused node's ONNX nodes
// (so the report still lists what ORT assigned) and before the first trace. A chain is replaced
// only when it matches exactly: every interior value is consumed inside the chain only (never a
// fused output), the reductions are over the last axis with keepdims, the constants are scalars
// of the expected values, and the data is float32. Anything else is left to the op-by-op path.
// Pattern nodes carry the name and outputs of the chain's last node (shared_input_matmul: the
// name of the earliest MatMul, at whose position it goes, and every MatMul's output), so messages
// and the report's `paths` name a real node; `ortmlx.pattern` is their domain (never an ONNX
// domain).
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>

#include <mlx/array.h>
#include <mlx/utils.h>

#include "ortmlx/engine/options.h"
#include "ortmlx/engine/plan.h"

namespace ortmlx {
class TranslationContext;
}

namespace ortmlx::ops::patterns {

inline constexpr const char* kDomain = "ortmlx.pattern";

// Whether the pass rewrites chains (fast_patterns auto or on).
bool chains_enabled(const EpOptions& options);
// Whether LayerNormalization nodes take mx::fast::layer_norm: fast_patterns=1 anywhere, auto on
// GPU backends only (on MLX's CPU backend the fast op is the same ops composed, and the op's own
// translator also keeps rows beyond ~1e19 from overflowing).
bool fast_layer_norm_op_enabled(const EpOptions& options);

// mx::fast::layer_norm over the last axis of float32 x, on rows shifted by their first element
// first. LayerNorm is shift-invariant, and the shift keeps the fused kernel's plain float32 mean
// from losing the spread of rows far from zero (a row near 1000 with spread 0.1 lost 1e-2
// absolute unshifted, like ORT's CPU kernel; 5e-7 shifted). One elementwise op more.
mlx::core::array shifted_fast_layer_norm(const mlx::core::array& x,
                                         const std::optional<mlx::core::array>& w,
                                         const std::optional<mlx::core::array>& b, float eps,
                                         mlx::core::StreamOrDevice s);

// Output 0 of node n, the fast LayerNorm of its input 0 (x, float32, the last axis; w and b
// optional vectors): on sm_90 GPUs (unless ONNXRUNTIME_EP_MLX_LAYER_NORM_KERNEL=0), one
// CUDA kernel of ours (ops/norm/cuda/layer_norm.h) that also computes the residual Add producing
// x, whose output name is then bound to the kernel's sum (the same float32 values) so the graph's
// other readers of that sum take it from there; else shifted_fast_layer_norm. Marks the path
// taken (`mlx_path` for the latter).
void bind_fast_layer_norm(TranslationContext& ctx, const NodeDesc& n, const mlx::core::array& x,
                          const std::optional<mlx::core::array>& w,
                          const std::optional<mlx::core::array>& b, float eps,
                          const char* mlx_path);

// Rewrites plan.nodes in place; returns the number of chains replaced, by pattern name
// ("layer_norm", "rms_norm", "gelu_erf", "gelu_tanh", "attention", "matmul_add",
// "shared_input_matmul").
std::map<std::string, size_t> apply(Plan& plan);

}  // namespace ortmlx::ops::patterns
