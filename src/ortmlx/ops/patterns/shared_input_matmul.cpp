// The shared_input_matmul pattern (see patterns.h): MatMuls that read one input with constant
// weights (the Q, K and V projections of an attention layer) as one product.
//
//   y_i = MatMul(a, W_i), i = 1..n (n >= 2), W_i constant float32 [K, N_i] of one K
//   -> y = a @ concat(W_1..W_n, axis=-1); y_i = y[..., N_1 + .. + N_(i-1) : + N_i]
//
// The concatenated weight is derived from the weight constants once per plan
// (TranslationContext::derived_constant) and reused by every trace and run; the slices are views.
// Each output element is the same float32 dot product over K as the MatMul's own; a GEMM of another
// width may block it differently (last bits only, as ORT's own Q/K/V fusion).
//
// Where MatMul runs on MLX's own matmul only (GPU backends: three GEMM launches become one). On
// MLX's CPU backend float32 MatMul goes through OpenBLAS sgemm (ops/matmul_cpu.h), where the
// launches cost nothing to save and MatMul + bias takes these products (matmul_add); the internal
// switch ORTMLX_INTERNAL_CPU_MATMUL=mlx (MLX's own matmul on its CPU backend) turns it on there,
// which is how the CPU test suite exercises it.
#include <string>
#include <vector>

#include <cstdlib>

#include <mlx/ops.h>

#include "ortmlx/engine/options.h"
#include "ortmlx/ops/common.h"
#include "ortmlx/ops/matmul_cpu.h"
#include "ortmlx/ops/patterns/patterns_internal.h"

namespace ortmlx::ops::patterns::detail {

namespace {

// On by default (ONNXRUNTIME_EP_MLX_SHARED_INPUT_MATMUL=0 turns it off): on an H200 it took
// 4-18% off the EP's time a run on bert, distilbert, llama and a 12-layer encoder
// (bench/results/gpu_peer.md), although an output slice that goes straight into a Reshape costs a
// copy there and the separate weights are kept beside the concatenated one (Q/K/V weights twice).
// Only where MLX's own matmul runs float32 products on the default device (GPU backends, or MLX
// CPU with the internal switch).
bool enabled() {
  const char* flag = std::getenv("ONNXRUNTIME_EP_MLX_SHARED_INPUT_MATMUL");
  return (flag == nullptr || parse_flag(flag)) &&
         !use_blas_matmul(mx::default_device(), mx::float32);
}

// MatMul node i's constant weight when it is float32 of rank 2, and a is float32 of rank >= 2
// whose last axis (where known) is the weight's first.
const ConstTensor* weight_of(const PlanIndex& ix, size_t i) {
  const NodeDesc& n = ix.node(i);
  if (n.inputs.size() != 2 || n.input_infos.size() != 2 || n.outputs.size() != 1 ||
      n.outputs[0].empty())
    return nullptr;
  const TensorInfo& a = n.input_infos[0];
  if (a.dtype != ElemType::kFloat || a.rank() < 2) return nullptr;
  const ConstTensor* w = ix.constant_tensor(n.inputs[1]);
  if (!w || w->dtype != ElemType::kFloat || w->shape.size() != 2 || w->shape[1] <= 0 ||
      w->bytes.size() != static_cast<size_t>(w->numel()) * sizeof(float))
    return nullptr;
  if (a.shape.back() >= 0 && a.shape.back() != w->shape[0]) return nullptr;
  return w;
}

}  // namespace

std::optional<Match> match_shared_input_matmul(const PlanIndex& ix, size_t i) {
  if (!enabled()) return std::nullopt;
  const ConstTensor* first = weight_of(ix, i);
  if (!first) return std::nullopt;
  const std::string& a = ix.node(i).inputs[0];
  Match m;
  m.pattern = "shared_input_matmul";
  m.inputs = {a};  // then the weights, in the order of the outputs
  std::vector<int64_t> widths;
  for (size_t r : ix.readers(a)) {
    if (r < i || !ix.is(r, "MatMul") || ix.node(r).inputs[0] != a) continue;
    const ConstTensor* w = weight_of(ix, r);
    if (!w || w->shape[0] != first->shape[0]) continue;
    m.nodes.insert(r);
    m.outputs.push_back(ix.node(r).outputs[0]);
    m.inputs.push_back(ix.node(r).inputs[1]);
    widths.push_back(w->shape[1]);
  }
  if (m.nodes.size() < 2) return std::nullopt;
  // Anchored at the earliest: a reads before it, so the one node stays in topological order.
  m.last = i;
  m.at = i;
  m.attrs["widths"] = widths;
  return m;
}

bool shared_input_matmul_chain(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array a = ctx.input(n, 0);
  std::vector<mx::array> ws;
  std::string key = "shared_input_matmul";  // the weights' names: one key per group of weights
  for (size_t k = 1; k < n.inputs.size(); ++k) {
    if (!ctx.constant_input(n, k)) return false;
    ws.push_back(ctx.input(n, k));
    key += "#" + n.inputs[k];
  }
  if (ws.empty()) return false;
  const mx::array w = ctx.derived_constant(key, [&] { return mx::concatenate(ws, 1, s); });
  if (a.ndim() < 2 || a.dtype() != mx::float32 || w.ndim() != 2 || a.shape(-1) != w.shape(0))
    return false;
  const mx::array y = matmul_any(a, w, s);
  const auto widths = n.attr_ints("widths").value_or(std::vector<int64_t>{});
  mx::Shape start(y.ndim(), 0);
  mx::Shape stop = y.shape();
  int offset = 0;
  for (size_t k = 0; k < widths.size() && k < n.outputs.size(); ++k) {
    start.back() = offset;
    offset += checked_int(widths[k], "weight columns");
    stop.back() = offset;
    ctx.bind_output(n, k, mx::slice(y, start, stop, s));
  }
  ctx.mark_fast(n, "MatMuls of one input -> one matmul with the concatenated weights");
  return true;
}

}  // namespace ortmlx::ops::patterns::detail
