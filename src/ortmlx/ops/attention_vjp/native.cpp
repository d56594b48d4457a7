// The native AttentionVJP path (Recompute form without an explicit dense limit): recompute the
// forward with MLX's fused SDPA and differentiate it with mx::vjp.
//
// Conventions bridged here:
//  - MLX's "causal" mode is bottom-right aligned; ours is top-left. We never use the mode: causal
//    and the mask are folded into one explicit additive bias (additive_bias).
//  - A row whose keys are all masked must give zeros. SDPA would give NaN (softmax of -inf), and
//    NaN in one row's P poisons every key of dK/dV. Such rows get a zero bias (an ordinary softmax)
//    and a zero incoming gradient: with dY = 0 the row contributes exactly nothing to dQ, dK, dV
//    (dP = 0, delta = 0, P^T dY = 0), which is the contract's answer.
#include <mlx/fast.h>
#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "ortmlx/ops/attention_vjp/paths.h"

namespace ortmlx::attention_vjp {

std::array<mx::array, 3> native_sdpa(const Config& c, const Bhsd& t, mx::StreamOrDevice s) {
  const int sq = t.q.shape(2), sk = t.k.shape(2);
  std::optional<mx::array> bias = additive_bias(c, t.mask, sq, sk, s);
  mx::array dy = t.dy;
  if (bias && c.mask != 0) {
    // Causal alone never empties a row (top-left: key 0 is always visible); a mask can.
    mx::array dead = mx::all(mx::isneginf(*bias, s), -1, true, s);  // (Bm, Hm, Sq|1, 1)
    bias = mx::where(dead, mx::array(0.f), *bias, s);
    dy = mx::where(dead, mx::array(0.f), dy, s);
  }
  const float scale = c.scale;
  auto forward = [bias, scale, s](const std::vector<mx::array>& in) -> std::vector<mx::array> {
    return {mx::fast::scaled_dot_product_attention(in[0], in[1], in[2], scale, bias ? "array" : "",
                                                   bias, std::nullopt, false, s)};
  };
  const std::vector<mx::array> grads = mx::vjp(forward, {t.q, t.k, t.v}, {dy}).second;
  return {grads[0], grads[1], grads[2]};
}

}  // namespace ortmlx::attention_vjp
