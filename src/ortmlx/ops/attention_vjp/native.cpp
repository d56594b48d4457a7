// The native AttentionVJP path (Recompute form without an explicit dense limit).
//
// GPU backends (and the attention_vjp_mlx_ops test option): dense_mlx. Differentiating MLX's SDPA
// cannot follow the reference for non-finite inputs (it adds -inf to NaN scores, turns a row with
// a NaN score into NaN instead of zeros, and forms delta as sum(P * dP)), and being exact needs
// the score tile (a row is dead or not depending on the signs of Q.K for each key), which the
// SDPA vjp does not expose; computing it in addition would be a second dense pass. It is not
// needed: for float32 under mx::vjp, MLX runs SDPA as its unfused fallback (matmul, softmax,
// matmul: the CUDA fused kernels are float16/bfloat16 or inference-only), whose vjp materialises
// the same (B, HQ, Sq, Sk) tiles and runs the same six GEMMs as dense_mlx. dense_mlx forms delta
// from rowsum(dY * Y) (O(S x D)) where the softmax vjp takes sum(P * dP) over the tile.
//
// MLX's CPU backend, by default: recompute the forward with MLX's fused SDPA and differentiate
// it with mx::vjp, as follows.
// Conventions bridged here:
//  - MLX's "causal" mode is bottom-right aligned; ours is top-left. We never use the mode: causal
//    and the mask are folded into one explicit additive bias (additive_bias).
//  - A row whose keys are all masked must give zeros. SDPA would give NaN (softmax of -inf), and
//    NaN in one row's P poisons every key of dK/dV. Such rows get a zero bias (an ordinary softmax)
//    and a zero incoming gradient: with dY = 0 the row contributes exactly nothing to dQ, dK, dV
//    (dP = 0, delta = 0, P^T dY = 0), which is the contract's answer. The float64 reference also
//    treats a row as dead when a visible score is NaN or +Inf (its row maximum is not finite): with
//    finite Q and K that comes from the additive mask, so such mask rows are dead rows here too.
//  - NaN or Inf in Q, K, V or dY: the reference's products run over every (query, key) pair, so a
//    non-finite value reaches gradients through masked pairs (0 * NaN), and MLX's softmax vjp uses
//    another formula for delta (sum(P * dP), not rowsum(dY * Y)). On the CPU backend those inputs
//    take the fused CPU kernel's answer instead, which follows the reference exactly; the kernel
//    runs in a mode that only computes when it finds a non-finite input (else it writes zeros).
#include <tuple>

#include <mlx/fast.h>
#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "ortmlx/ops/attention_vjp/paths.h"

namespace ortmlx::attention_vjp {

std::array<mx::array, 3> native_sdpa(const Config& c, const Bhsd& t, mx::StreamOrDevice s,
                                     bool mlx_ops) {
  if (mlx_ops) return dense_mlx(c, t, s);
  const int sq = t.q.shape(2), sk = t.k.shape(2);
  std::optional<mx::array> bias = additive_bias(c, t.mask, sq, sk, s);
  mx::array dy = t.dy;
  if (bias) std::tie(bias, dy) = neutralise_dead_rows(c, *bias, dy, s);
  const float scale = c.scale;
  auto forward = [bias, scale, s](const std::vector<mx::array>& in) -> std::vector<mx::array> {
    return {mx::fast::scaled_dot_product_attention(in[0], in[1], in[2], scale, bias ? "array" : "",
                                                   bias, std::nullopt, false, s)};
  };
  const std::vector<mx::array> grads = mx::vjp(forward, {t.q, t.k, t.v}, {dy}).second;
  std::array<mx::array, 3> out = {grads[0], grads[1], grads[2]};

  // Non-finite inputs: the CPU kernel's answer (inputs in (B, H, S, D), so as a rank-4 contract).
  Config c4 = c;
  c4.rank = 4;
  const std::vector<mx::array> exact = cpu_kernel(c4, {t.q, t.k, t.v, t.dy, t.mask}, s,
                                                  /*panel_rows=*/0, /*nonfinite_only=*/true);
  mx::array finite = mx::array(true);
  for (const mx::array* x : {&t.q, &t.k, &t.v, &t.dy})
    finite = mx::logical_and(finite, mx::all(mx::isfinite(*x, s), s), s);
  for (size_t i = 0; i < c.outputs.size(); ++i) {
    const auto o = static_cast<size_t>(c.outputs[i]);
    out[o] = mx::where(finite, out[o], exact[i], s);
  }
  return out;
}

}  // namespace ortmlx::attention_vjp
