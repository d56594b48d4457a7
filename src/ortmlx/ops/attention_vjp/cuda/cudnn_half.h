// The cudnn_half AttentionVJP path (opt-in, option attention_vjp_half_cudnn): float16/bfloat16
// contracts through cuDNN's fused SDPA backward, which MLX's CUDA backend runs for its own
// fast::scaled_dot_product_attention. Faster than the exact paths by the half-precision tensor
// cores, and not exact: cuDNN rounds P and dS to the half type before its products (fp32
// accumulation), where the exact paths compute in float32 and round each gradient once
// (docs/ATTENTION_VJP.md, "cuDNN half mode").
#pragma once

#include <array>
#include <optional>

#include <mlx/array.h>
#include <mlx/utils.h>

#include "ortmlx/ops/attention_vjp/contract.h"
#include "ortmlx/ops/attention_vjp/paths.h"

namespace ortmlx::attention_vjp {

namespace mx = mlx::core;

// Whether the path takes the problem: a float16/bfloat16 contract on a GPU stream of the CUDA
// flavour with a compute 8.x or newer device (cuDNN's SDPA needs Ampere), Sq == Sk (cuDNN's
// causal mask is bottom-right; equal lengths make it the contract's top-left) a multiple of 128
// (MLX's fused SDPA backward takes no other length), D <= 128 and a multiple of 8 (cuDNN's head
// sizes), HQ a multiple of HK. Shapes are (B, H, S, D) lengths.
bool cudnn_half_supports(const Config& c, mx::Dtype io, int sq, int sk, mx::StreamOrDevice s);

// The pullback through cuDNN. t: q, k, v, [y], dy in (B, H, S, D) and the contract's half type
// (rank 3 inputs as the (B, H, S, D) view of their (B, S, H*D) rows), the mask as the translator
// holds it (an additive one in float32). Causal without a mask is cuDNN's causal flag; a mask
// (with causal folded in) one additive bias in the half type; fully masked rows give zeros
// (neutralise_dead_rows). The plain form hands cuDNN the given Y as its O, so delta is
// rowsum(dY * Y) as in the contract; the Recompute form its own forward's O. Returns {dQ, dK, dV}
// in (B, H, S, D) and the half type (all three are computed), or nullopt when MLX does not build
// its fused SDPA backward for the problem (the caller then keeps the exact paths).
std::optional<std::array<mx::array, 3>> cudnn_half(const Config& c, const Bhsd& t,
                                                   mx::StreamOrDevice s);

}  // namespace ortmlx::attention_vjp
