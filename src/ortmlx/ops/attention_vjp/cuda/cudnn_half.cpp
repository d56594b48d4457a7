// The cudnn_half AttentionVJP path: cuDNN's fused SDPA forward (for the log-sum-exp) and backward,
// as MLX's CUDA backend runs them for mx::fast::scaled_dot_product_attention under mx::vjp
// (MLX's primitives ScaledDotProductAttention with output_logsumexp, whose eval_gpu is cuDNN's
// sdpa with generated stats, and ScaledDotProductAttentionVJP, cuDNN's sdpa_backward).
//
// MLX exports neither primitive class from libmlx (no vtable to construct one here), so the path
// takes them from a graph MLX builds itself: mx::vjp of the fast SDPA on the node's tensors. That
// graph is a template, never evaluated: its primal inputs are the tracer copies mx::vjp makes,
// and its O is MLX's own forward output. The path builds two nodes of its own with the same
// primitive objects (as mx::compile does when it replaces tracers): the forward on Q, K, V and
// the bias, and the backward on Q, K, V, the bias, O, the forward's statistics and dY, where O is
// the contract's given Y in the plain form (cuDNN's delta is rowsum(dO * O), the contract's
// rowsum(dY * Y)) and the forward's O in the Recompute form. Where MLX does not build the fused
// primitives for the problem (its own conditions, e.g. MLX_CUDA_USE_CUDNN_SDPA=0), the template
// shows it and the translator keeps the exact paths.
//
// cuDNN's conventions bridged here:
//  - Causal without a mask is cuDNN's causal flag, bottom-right aligned: the contract's top-left
//    because the gate asks Sq == Sk. With a mask, causal is folded into one additive bias.
//  - Masks become one additive bias in the half type (additive_bias: hidden keys -inf), of shape
//    (1 or B, 1 or HQ, Sq, Sk): rows and keys materialised and contiguous, batch and heads
//    broadcast by size-1 axes, the bias shapes cuDNN's SDPA takes.
//  - Fully masked rows would give NaN (cuDNN's softmax of -inf): neutralise_dead_rows gives them
//    a zero bias and a zero dY, so they contribute nothing, the contract's zeros.
//  - Layouts: MLX's cache of cuDNN backward graphs is keyed by Q, K and V's strides only, not by
//    O's and dO's, so Q, K, V, O and dY get one layout per rank (canonical): no stale graph can
//    read another call's O or dO with the wrong strides. The statistics are cuDNN's own packed
//    (B, HQ, Sq, 1) float32 output, the layout its backward kernels assume.
#include "ortmlx/ops/attention_vjp/cuda/cudnn_half.h"

#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include <mlx/fast.h>
#include <mlx/ops.h>
#include <mlx/primitives.h>
#include <mlx/transforms.h>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/cuda_support.h"

namespace ortmlx::attention_vjp {

namespace {

// MLX's ScaledDotProductAttentionVJP::use_fallback: its fused backward wants Sq a multiple of
// 128 (cuDNN would add a padding mask otherwise).
constexpr int kBackwardRows = 128;
// cuDNN's SDPA head sizes (MLX's supports_sdpa_cudnn): a multiple of 8, at most 128.
constexpr int kMaxHeadSize = 128;
// cuDNN's SDPA needs Ampere or newer.
constexpr int kMinComputeMajor = 8;

bool made_by(const mx::array& a, std::string_view primitive) {
  return a.has_primitive() && std::string_view(a.primitive().name()) == primitive;
}

// Row-contiguous (B, H, S, D) for rank 4; for rank 3 the (B, H, S, D) view of row-contiguous
// (B, S, H, D) rows, what the inputs are. A copy only where a tensor is not in that layout
// (e.g. dY after neutralise_dead_rows, an elementwise result).
mx::array canonical(const Config& c, const mx::array& a, mx::StreamOrDevice s) {
  if (c.rank == 4) return mx::contiguous(a, false, s);
  return mx::swapaxes(mx::contiguous(mx::swapaxes(a, 1, 2, s), false, s), 1, 2, s);
}

}  // namespace

bool cudnn_half_supports(const Config& c, mx::Dtype io, int sq, int sk, mx::StreamOrDevice s) {
  return (io == mx::float16 || io == mx::bfloat16) && ops::runs_on_gpu(s) &&
         ops::cuda_compute_major() >= kMinComputeMajor && sq == sk && sq % kBackwardRows == 0 &&
         c.d % 8 == 0 && c.d <= kMaxHeadSize && c.hk > 0 && c.hq % c.hk == 0;
}

std::optional<std::array<mx::array, 3>> cudnn_half(const Config& c, const Bhsd& t,
                                                   mx::StreamOrDevice s) {
  const mx::Dtype io = t.q.dtype();
  const int sq = t.q.shape(2), sk = t.k.shape(2);
  std::optional<mx::array> bias;
  mx::array dy = t.dy;
  if (c.mask != 0) {
    std::optional<mx::array> f32 = additive_bias(c, t.mask, sq, sk, s);  // (Bm, Hm, Sq|1, Sk|1)
    if (f32) {
      std::tie(f32, dy) = neutralise_dead_rows(c, *f32, dy, s);
      const int bm = f32->shape(0), hm = f32->shape(1);
      // Size-1 batch and head axes are cuDNN's own broadcast of a bias; rows and keys in full.
      bias =
          mx::contiguous(mx::broadcast_to(mx::astype(*f32, io, s), {bm, hm, sq, sk}, s), false, s);
    }
  }
  const mx::array q = canonical(c, t.q, s), k = canonical(c, t.k, s), v = canonical(c, t.v, s);
  dy = canonical(c, dy, s);

  // The template: MLX's own graph of the fused forward and backward for these tensors.
  const std::string mode = bias ? "array" : c.causal ? "causal" : "";
  const float scale = c.scale;
  auto forward = [&](const std::vector<mx::array>& p) {
    return std::vector<mx::array>{mx::fast::scaled_dot_product_attention(
        p[0], p[1], p[2], scale, mode, bias, std::nullopt, /*force_fused=*/false, s)};
  };
  const std::vector<mx::array> traced = mx::vjp(forward, {q, k, v}, {dy}).second;
  // Backward inputs: Q, K, V, [bias], O, statistics, dO; forward outputs: O, statistics.
  const size_t primals = bias ? 4 : 3;
  const mx::array& backward = traced[0];
  if (!made_by(backward, "ScaledDotProductAttentionVJP") ||
      backward.inputs().size() != primals + 3 || backward.outputs().size() != 3)
    return std::nullopt;
  const mx::array& stats = backward.inputs()[primals + 1];
  if (!made_by(stats, "ScaledDotProductAttention") || stats.inputs().size() != primals ||
      stats.dtype() != mx::float32)
    return std::nullopt;
  const std::vector<mx::array> forward_outputs = stats.outputs();
  if (forward_outputs.size() != 2 || forward_outputs[1].id() != stats.id()) return std::nullopt;

  std::vector<mx::array> inputs = {q, k, v};
  if (bias) inputs.push_back(*bias);
  const std::vector<mx::array> fwd =
      mx::array::make_arrays({forward_outputs[0].shape(), stats.shape()}, {io, mx::float32},
                             stats.primitive_ptr(), inputs);
  inputs.push_back(t.y ? canonical(c, *t.y, s) : fwd[0]);
  inputs.push_back(fwd[1]);
  inputs.push_back(dy);
  const std::vector<mx::array> grads = mx::array::make_arrays(
      {q.shape(), k.shape(), v.shape()}, {io, io, io}, backward.primitive_ptr(), inputs);
  return std::array<mx::array, 3>{grads[0], grads[1], grads[2]};
}

}  // namespace ortmlx::attention_vjp
