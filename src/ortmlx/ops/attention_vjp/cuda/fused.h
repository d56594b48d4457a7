// The cuda_fused AttentionVJP path: fused CUDA kernels (kernels.cu) launched through MLX's
// precompiled custom kernels. Built into the CUDA flavour only; elsewhere it reports itself
// unavailable and the translator keeps the MLX-op paths.
#pragma once

#include <vector>

#include <mlx/array.h>
#include <mlx/stream.h>
#include <mlx/utils.h>

#include "ortmlx/ops/attention_vjp/contract.h"

namespace ortmlx::attention_vjp {

namespace mx = mlx::core;

// True when this library carries the CUDA kernels (the CUDA flavour) and MLX's GPU is one they
// were built for (sm_90: H100, H200).
bool cuda_fused_available();

// Whether the kernels take this problem (available, non-empty, B * HQ within the grid's y limit).
bool cuda_fused_supports(const Config& c, int b, int sq, int sk);

// The pullback on a CUDA stream. inputs: Q, K, V, [Y], dY, Mask in their ORIGINAL layout (rank 3
// or 4; the kernels read rank 3 rows with a stride), as the translator receives them. Returns the
// requested gradients in the order of c.outputs, shaped like their inputs. Three passes: row
// statistics (lse, delta; Y recomputed for the Recompute form), dQ by query tiles, dK/dV by key
// tiles (GQA groups summed in the kernel, no atomics). O(S) extra memory.
// inputs_are_tf32_values: the float32 inputs were widened from float16 or bfloat16 (every such
// value is a TF32 value), which lets the fp32-accurate products skip their zero terms.
std::vector<mx::array> cuda_fused(const Config& c, const std::vector<mx::array>& inputs,
                                  mx::StreamOrDevice s, bool inputs_are_tf32_values = false);

}  // namespace ortmlx::attention_vjp
