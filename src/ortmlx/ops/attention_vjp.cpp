// pkg.onnax AttentionVJP family: the pullback of scaled-dot-product attention, recognised by the
// name of an onnax model-local function (docs/ATTENTION_VJP.md). Claim: contract.cpp.
// Paths: attention_vjp/dense.cpp (MLX GEMMs), tiled_cpu.cpp (fused CPU kernel, also used for the
// dense path on the CPU backend), cuda/ (fused CUDA kernels: beyond the dense budget on the CUDA
// backend when attention_vjp_tiled=kernel asks), blocked.cpp (MLX ops by query blocks: beyond the
// dense budget on GPU backends, or forced), native.cpp (vjp of MLX's fused SDPA),
// cuda/cudnn_half.cpp (float16/bfloat16 through cuDNN's fused SDPA backward: opt-in).
#include <stdexcept>
#include <string>

#include <mlx/utils.h>

#include "ortmlx/ops/attention_vjp/contract.h"
#include "ortmlx/ops/attention_vjp/cuda/cudnn_half.h"
#include "ortmlx/ops/attention_vjp/cuda/fused.h"
#include "ortmlx/ops/attention_vjp/paths.h"
#include "ortmlx/ops/common.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::attention_vjp;
namespace mx = mlx::core;

std::string shape_str(const mx::Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + ")";
}

const char* kInputNames[] = {"Q", "K", "V", "Y", "dY"};

// Name of tensor input i (Recompute has no Y).
const char* input_name(const Config& c, size_t i) {
  return c.recompute && i >= 3 ? kInputNames[i + 1] : kInputNames[i];
}

// Checks one tensor input's live rank, dtype (`io`, every tensor's), head count and head size.
void check_tensor(const Config& c, size_t i, const mx::array& a, mx::Dtype io) {
  const int heads = c.heads_of_input(static_cast<int>(i));
  const bool ok =
      a.dtype() == io && a.ndim() == static_cast<size_t>(c.rank) &&
      (c.rank == 4 ? a.shape(1) == heads && a.shape(3) == c.d : a.shape(2) == heads * c.d);
  if (!ok)
    throw std::runtime_error(
        std::string("AttentionVJP input ") + input_name(c, i) + " has shape " +
        shape_str(a.shape()) + "; expected " + ops::type_str(from_mlx_dtype(io)) + " " +
        (c.rank == 4 ? "(B, " + std::to_string(heads) + ", S, " + std::to_string(c.d) + ")"
                     : "(B, S, " + std::to_string(heads * c.d) + ")"));
}

// (B, S, H*D) -> (B, H, S, D); rank 4 passes through.
mx::array to_bhsd(const Config& c, const mx::array& a, int heads, mx::StreamOrDevice s) {
  if (c.rank == 4) return a;
  return mx::transpose(mx::reshape(a, {a.shape(0), a.shape(1), heads, c.d}, s), {0, 2, 1, 3}, s);
}

mx::array from_bhsd(const Config& c, const mx::array& a, const mx::Shape& like,
                    mx::StreamOrDevice s) {
  if (c.rank == 4) return a;
  return mx::reshape(mx::transpose(a, {0, 2, 1, 3}, s), like, s);
}

void translate(TranslationContext& ctx, const NodeDesc& node) {
  const auto parsed = Config::parse(node.op_type);
  if (!parsed) throw std::runtime_error("invalid AttentionVJP contract '" + node.op_type + "'");
  const Config& c = *parsed;
  const size_t tensors = static_cast<size_t>(c.tensor_inputs());
  if (node.inputs.size() != tensors + 1 || node.outputs.size() != c.outputs.size())
    throw std::runtime_error("AttentionVJP interface mismatch");
  const mx::StreamOrDevice s = ctx.stream();

  std::vector<mx::array> in;
  for (size_t i = 0; i <= tensors; ++i) in.push_back(ctx.input(node, i));
  // float16/bfloat16 contracts run the float32 paths on their inputs made float32 (exact) and
  // round the gradients to the input type once, at the end: float32 accumulation throughout.
  const mx::Dtype io = in[0].dtype();
  if (io != mx::float32 && io != mx::float16 && io != mx::bfloat16)
    throw std::runtime_error("AttentionVJP input Q has type " + ops::type_str(from_mlx_dtype(io)) +
                             "; expected float32, float16 or bfloat16");
  for (size_t i = 0; i < tensors; ++i) check_tensor(c, i, in[i], io);
  if (c.mask == 2 ? in[tensors].dtype() != io : in[tensors].dtype() != mx::bool_)
    throw std::runtime_error("AttentionVJP mask type mismatch");
  const std::vector<mx::array> in_io = in;  // the tensors in their own type (cudnn_half)
  if (io != mx::float32)
    for (size_t i = 0; i < tensors + (c.mask == 2 ? 1 : 0); ++i)
      in[i] = mx::astype(in[i], mx::float32, ctx.stream());
  const mx::array& q = in[0];
  const mx::array& k = in[1];
  const mx::array& mask = in[tensors];
  if (mask.ndim() < 1 || mask.ndim() > 4)
    throw std::runtime_error("AttentionVJP mask rank must be 1..4, got " + shape_str(mask.shape()));

  const int b = q.shape(0);
  const int sq = c.rank == 4 ? q.shape(2) : q.shape(1);
  const int sk = c.rank == 4 ? k.shape(2) : k.shape(1);
  // Mask broadcast (its last axis may have any width: keys beyond a narrow mask are masked, a
  // wide one is sliced), checked before the empty-shape shortcut: the body's mask Add raises on
  // an unbroadcastable mask even when B, Sq or Sk is 0. Mask kind 0 never reads the mask (the
  // body and every path ignore it), so its shape is not checked.
  const int target[4] = {b, c.hq, sq, sk};
  const int mrank = static_cast<int>(mask.ndim());
  for (int axis = 0; c.mask != 0 && axis < mrank; ++axis) {
    const int size = mask.shape(axis);
    if (size != 1 && size != target[4 - mrank + axis] && axis + 1 != mrank)
      throw std::runtime_error("AttentionVJP incompatible mask broadcast: mask " +
                               shape_str(mask.shape()) +
                               " against (B, HQ, Sq, Sk) = " + shape_str({b, c.hq, sq, sk}));
  }
  if (b == 0 || sq == 0 || sk == 0) {
    // Every requested gradient is zeros of its input's shape (nothing to attend, or no one).
    for (size_t i = 0; i < c.outputs.size(); ++i)
      ctx.bind(node.outputs[i], ctx.zeros(in[static_cast<size_t>(c.outputs[i])].shape(), io));
    return;
  }

  // Live shapes: Y and dY like Q, V like K, same batch.
  for (size_t i = 3; i < tensors; ++i)
    if (in[i].shape() != q.shape())
      throw std::runtime_error(std::string("AttentionVJP incompatible live tensor shapes: ") +
                               input_name(c, i) + " " + shape_str(in[i].shape()) +
                               " must equal Q " + shape_str(q.shape()));
  if (in[2].shape() != k.shape() || k.shape(0) != b)
    throw std::runtime_error("AttentionVJP incompatible live tensor shapes: Q " +
                             shape_str(q.shape()) + ", K " + shape_str(k.shape()) + ", V " +
                             shape_str(in[2].shape()));

  const auto explicit_limit = ctx.options().attention_vjp_dense_limit_bytes;
  const bool dense = use_dense(c, {b, c.hq, sq, c.d}, {b, c.hk, sk, c.d}, explicit_limit);
  // The fused CPU kernel runs only on MLX's CPU backend; the attention_vjp_mlx_ops test option
  // makes the CPU backend take the GPU backends' MLX-op paths instead.
  const bool on_cpu = ops::runs_on_cpu(s) && !ctx.options().attention_vjp_mlx_ops;
  // The fused CUDA kernels: a GPU stream of the CUDA flavour (its only GPU backend) on an sm_90
  // device, unless attention_vjp_mlx_ops asks for the MLX-op paths. The default beyond the dense
  // limit there: on an H100 they ran 1.1x-3.0x faster than the blocked MLX-op path on the plain
  // form, with 1/2 to 1/8 of its memory (bench/results/gpu_attention_vjp.md).
  const bool cuda = ops::runs_on_gpu(s) && !ctx.options().attention_vjp_mlx_ops &&
                    cuda_fused_supports(c, b, sq, sk);

  // The fused CPU kernel's instruction set (option cpu_isa; checked against the CPU when read).
  auto kernel_isa = [&] {
    switch (ctx.options().resolved_cpu_isa()) {
      case EpOptions::CpuIsa::kAvx512:
        return Isa::kAvx512;
      case EpOptions::CpuIsa::kAvx2:
        return Isa::kAvx2;
      default:
        return Isa::kPortable;
    }
  };

  std::vector<mx::array> results;  // in the order of c.outputs, original layout
  auto bind_bhsd = [&](const std::array<mx::array, 3>& grads) {
    for (int o : c.outputs)
      results.push_back(
          from_bhsd(c, grads[static_cast<size_t>(o)], in[static_cast<size_t>(o)].shape(), s));
  };
  auto bhsd_of = [&](const std::vector<mx::array>& x) {
    Bhsd t{to_bhsd(c, x[0], c.hq, s),           to_bhsd(c, x[1], c.hk, s),
           to_bhsd(c, x[2], c.hk, s),           std::nullopt,
           to_bhsd(c, x[tensors - 1], c.hq, s), mask};
    if (!c.recompute) t.y = to_bhsd(c, x[3], c.hq, s);
    return t;
  };
  auto bhsd_inputs = [&]() { return bhsd_of(in); };

  // Beyond the dense budget: the fused CPU kernel on MLX's CPU backend, the fused CUDA kernels on
  // the CUDA backend with an sm_90 GPU, MLX ops by query blocks on other GPU backends; or what
  // the option attention_vjp_tiled forces (kernel: the backend's fused kernel; blocked: MLX ops
  // on any backend).
  using Tiled = EpOptions::AttentionVjpTiled;
  const Tiled tiled_mode = ctx.options().attention_vjp_tiled;
  const bool blocked =
      tiled_mode == Tiled::kBlocked || (tiled_mode == Tiled::kAuto && !on_cpu && !cuda);
  auto run_tiled = [&] {
    if (!blocked && cuda) {
      results = cuda_fused(c, in, s, /*inputs_are_tf32_values=*/io != mx::float32);
      ctx.mark_fast(node, kCudaFusedLabel);
      return;
    }
    if (blocked) {
      // Block rows from the dense limit: with it set, a block's score tile stays within it.
      const uint64_t budget = explicit_limit.value_or(kDefaultDenseLimitBytes);
      bind_bhsd(blocked_mlx(c, bhsd_inputs(), s, blocked_rows(c, b, sq, sk, budget)));
      ctx.mark_fast(node, kBlockedLabel);
      return;
    }
    if (!on_cpu)
      throw std::runtime_error(
          "AttentionVJP beyond the dense limit: attention_vjp_tiled=kernel asks for a fused "
          "kernel, and this backend has none for this problem (fused kernels: MLX's CPU "
          "backend, and the CUDA backend on sm_90 GPUs with B * HQ <= 65535; "
          "attention_vjp_mlx_ops turns both off); use attention_vjp_tiled=auto or blocked");
    results = cpu_kernel(c, in, s, 0, false, kernel_isa());
    ctx.mark_fast(node, kTiledLabel);
  };

  // The seed sends the Recompute form without a limit to the native SDPA vjp. On MLX's CPU
  // backend that runs on reference-BLAS matmuls with O(S^2) memory, so by default (option
  // attention_vjp_native = auto) the CPU backend runs the fused kernel instead, which recomputes
  // Y per panel; the path then follows the default byte budget, as for the plain form.
  // GPU backends keep native (dense MLX ops there, native.cpp, O(S^2) memory): on an H100 it ran
  // faster than the fused CUDA kernels on the Recompute form without a mask (24.5 vs 38.9 ms at
  // (2, 16, 16, 4096, 128)), slower when causal (25.9 vs 23.1 ms); native off takes the path
  // the default budget picks, the fused kernels beyond it on sm_90.
  const bool native_requested = c.recompute && dense && !explicit_limit;
  const bool native = native_requested && ctx.options().attention_vjp_native.value_or(!on_cpu);
  Config plain = c;  // the default byte budget, as for the plain form
  plain.recompute = false;
  const bool within_default =
      use_dense(plain, {b, c.hq, sq, c.d}, {b, c.hk, sk, c.d}, std::nullopt);
  // Opt-in, ahead of every other path where it takes the problem (any size: cuDNN's kernels
  // keep O(S) memory): float16/bfloat16 through cuDNN's fused SDPA backward on the CUDA backend.
  std::optional<std::array<mx::array, 3>> half;
  if (ctx.options().attention_vjp_half_cudnn && !ctx.options().attention_vjp_mlx_ops &&
      cudnn_half_supports(c, io, sq, sk, s))
    half = cudnn_half(c, bhsd_of(in_io), s);
  if (half) {
    bind_bhsd(*half);
    ctx.mark_fast(node, kCudnnHalfLabel);
  } else if (native) {
    bind_bhsd(native_sdpa(c, bhsd_inputs(), s, /*mlx_ops=*/!on_cpu));
    ctx.mark_fast(node, kNativeLabel);
  } else if (dense && (!native_requested || within_default)) {
    // On the CPU backend MLX's own matmul is slow (reference BLAS): the fused kernel is faster
    // than any materialised form there, so the dense path runs it too.
    if (on_cpu)
      results = cpu_kernel(c, in, s, 0, false, kernel_isa());
    else
      bind_bhsd(dense_mlx(c, bhsd_inputs(), s));
    ctx.mark_fast(node, kDenseLabel);
  } else {
    run_tiled();
  }
  for (size_t i = 0; i < c.outputs.size(); ++i)
    ctx.bind(node.outputs[i], io == mx::float32 ? results[i] : mx::astype(results[i], io, s));
}

}  // namespace

void register_attention_vjp_ops(OpRegistry& r) {
  OpEntry e;
  e.domain = "pkg.onnax";
  e.op_type = "AttentionVJP";  // prefix: AttentionVJP_... and AttentionVJPRecompute_...
  e.by_prefix = true;
  e.min_opset = 1;
  e.max_opset = 1;
  e.claim = attention_vjp::claim;
  e.translate = translate;
  // Shape-keyed: the dense/tiled choice and the fused kernels' tiles, work split and output
  // shapes depend on concrete B, Sq and Sk (custom kernels have no shapeless output_shapes).
  e.shape_keyed = true;
  // The fused CPU kernel beats ORT CPU running the body with AVX-512 (bench/results/
  // attention_vjp.md); not yet shown with AVX2 + FMA or the portable code (cpu_isa_beats_ort_cpu).
  e.cpu_default = true;
  e.cpu_default_needs_fast_isa = true;
  r.add(std::move(e));
}

}  // namespace ortmlx
