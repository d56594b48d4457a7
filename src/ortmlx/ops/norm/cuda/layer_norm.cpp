// Host side of the one-kernel LayerNorm (kernels.cu): the cubin embedded by the CUDA flavour's
// build, launched as an MLX precompiled custom kernel on the node's stream.
#include "ortmlx/ops/norm/cuda/layer_norm.h"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <mlx/fast.h>
#include <mlx/ops.h>

#include "ortmlx/ops/cuda_support.h"
#include "ortmlx/ops/lazy_graph.h"

#if ORTMLX_CUDA_KERNELS
ORTMLX_DECLARE_CUBIN(norm_cuda)  // generated: norm_cuda.cpp in the build folder
#endif

namespace ortmlx::ops {

namespace {

// Threads per row's block: the row's width rounded up to whole warps, at most 256.
int row_threads(int cols) {
  return std::clamp((cols + 31) / 32 * 32, 32, 256);
}

}  // namespace

bool cuda_layer_norm_applies(const mx::array& x, mx::StreamOrDevice s) {
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  if (!kernel_enabled("ONNXRUNTIME_EP_MLX_LAYER_NORM_KERNEL") || x.dtype() != mx::float32 ||
      x.ndim() < 1 || x.size() == 0 || static_cast<int64_t>(x.size()) > kMaxInt)
    return false;
  const int cols = x.shape(-1);
  const int64_t rows = static_cast<int64_t>(x.size()) / cols;
  return rows * row_threads(cols) <= kMaxInt && cuda_kernels_usable(s);  // the grid's threads
}

LayerNormSum layer_norm_sum_parts(const mx::array& x) {
  if (!made_by(x, "Add") || x.inputs().size() != 2) return {x, std::nullopt, std::nullopt};
  const mx::array &p = x.inputs()[0], &q = x.inputs()[1];
  if (!same_float_shape(p, x) || !same_float_shape(q, x) || broadcast_vector(p, x) ||
      broadcast_vector(q, x))
    return {x, std::nullopt, std::nullopt};
  // (m + bias) + r; r + (m + bias) is the same float32 sum (one addition, commutative).
  if (auto mb = bias_add(p, x)) return {mb->m, mb->bias, q};
  if (auto mb = bias_add(q, x)) return {mb->m, mb->bias, p};
  return {p, std::nullopt, q};
}

LayerNormResult cuda_layer_norm(const LayerNormSum& x, const std::optional<mx::array>& gamma,
                                const std::optional<mx::array>& beta, float eps,
                                mx::StreamOrDevice s) {
  if (!cuda_layer_norm_applies(x.m, s))
    throw std::runtime_error("LayerNorm CUDA kernel: not for this input or device");
#if !ORTMLX_CUDA_KERNELS
  (void)gamma;
  (void)beta;
  (void)eps;
  throw std::runtime_error("LayerNorm CUDA kernel: this build has no CUDA kernels");
#else
  const int cols = x.m.shape(-1);
  const int rows = static_cast<int>(x.m.size() / static_cast<size_t>(cols));
  auto vector_ok = [&](const std::optional<mx::array>& v) {
    return !v || (v->dtype() == mx::float32 && static_cast<int64_t>(v->size()) == cols);
  };
  if (!vector_ok(gamma) || !vector_ok(beta) || !vector_ok(x.bias) ||
      (x.residual && x.residual->shape() != x.m.shape()))
    throw std::runtime_error("LayerNorm CUDA kernel: operands do not fit the rows");
  // Absent operands: m stands in (the kernel never reads them: its flags say so; no extra array).
  const mx::array& none = x.m;
  const int flags = (x.residual ? 1 : 0) | (x.bias ? 2 : 0) | (gamma ? 4 : 0) | (beta ? 8 : 0) |
                    (x.residual ? 16 : 0);
  const int threads = row_threads(cols);
  const std::vector<mx::fast::ScalarArg> scalars = {rows, cols, flags, eps};
  const mx::Shape sum_shape = x.residual ? x.m.shape() : mx::Shape{1};
  auto outs = mx::fast::precompiled_cuda_kernel(
      std::string("ortmlx_layer_norm_") + norm_cuda::kTag, norm_cuda::cubin(),
      {x.m, x.residual.value_or(none), x.bias.value_or(none), gamma.value_or(none),
       beta.value_or(none)},
      {x.m.shape(), sum_shape}, {mx::float32, mx::float32}, scalars, {rows * threads, 1, 1},
      {threads, 1, 1}, 32 * static_cast<int>(sizeof(float)), std::nullopt,
      /*ensure_row_contiguous=*/true, s);
  LayerNormResult r{outs[0], std::nullopt};
  if (x.residual) r.sum = outs[1];
  return r;
#endif
}

}  // namespace ortmlx::ops
