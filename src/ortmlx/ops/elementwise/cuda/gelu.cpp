// Host side of the one-pass GELU kernel (kernels.cu): the cubin embedded by the CUDA flavour's
// build, launched as an MLX precompiled custom kernel on the node's stream, so its output is an
// ordinary lazy array of the plan's graph.
#include "ortmlx/ops/elementwise/cuda/gelu.h"
#include "ortmlx/ops/cuda_support.h"
#include "ortmlx/ops/lazy_graph.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <mlx/fast.h>
#include <mlx/ops.h>

#if ORTMLX_CUDA_KERNELS
ORTMLX_DECLARE_CUBIN(elementwise_cuda)  // generated: elementwise_cuda.cpp in the build folder
#endif

namespace ortmlx::ops {

bool cuda_gelu_supports(size_t elements, mx::StreamOrDevice s) {
  return elements > 0 && elements <= static_cast<size_t>(std::numeric_limits<int>::max()) &&
         cuda_kernels_usable(s);
}

#if ORTMLX_CUDA_KERNELS
namespace {
// Folding the projection's bias in: on unless ONNXRUNTIME_EP_MLX_GELU_BIAS_KERNEL=0, read at each
// translation (bench/gpu_peer.py --ab compares both in one process).
bool bias_fold_enabled() {
  return kernel_enabled("ONNXRUNTIME_EP_MLX_GELU_BIAS_KERNEL");
}
}  // namespace
#endif

mx::array cuda_gelu(const mx::array& x, const GeluForm& form, mx::StreamOrDevice s) {
#if !ORTMLX_CUDA_KERNELS
  (void)x;
  (void)form;
  (void)s;
  throw std::runtime_error("GELU CUDA kernel: this build has no CUDA kernels (CUDA flavour only)");
#else
  if (x.dtype() != mx::float32 || !cuda_gelu_supports(x.size(), s))
    throw std::runtime_error("GELU CUDA kernel: unsupported input");
  // x = m + bias (a matmul's bias, broadcast over the last axis): the kernel adds it itself.
  std::optional<BiasAdd> folded;
  if (bias_fold_enabled() && x.ndim() >= 1) folded = bias_add(x, x);
  const mx::array& m = folded ? folded->m : x;
  const mx::array& bias = folded ? folded->bias : x;  // x: a stand-in the kernel never reads
  const int cols = folded ? x.shape(-1) : 0;
  constexpr int kThreads = 256;
  constexpr int64_t kMaxThreads = int64_t{kThreads} * 2048;  // grid-stride beyond
  const auto n = static_cast<int64_t>(x.size());
  const int64_t threads = std::min(kMaxThreads, ((n + 3) / 4 + kThreads - 1) / kThreads * kThreads);
  const std::vector<mx::fast::ScalarArg> scalars = {static_cast<int>(n),
                                                    cols,
                                                    form.tanh_form ? 1 : 0,
                                                    form.divide ? 1 : 0,
                                                    form.half_first ? 1 : 0,
                                                    form.c,
                                                    form.alpha,
                                                    form.k,
                                                    form.half};
  return mx::fast::precompiled_cuda_kernel(
      std::string("ortmlx_gelu_") + elementwise_cuda::kTag, elementwise_cuda::cubin(), {m, bias},
      {x.shape()}, {mx::float32}, scalars, {static_cast<int>(threads), 1, 1}, {kThreads, 1, 1}, 0,
      std::nullopt,
      /*ensure_row_contiguous=*/true, s)[0];
#endif
}

}  // namespace ortmlx::ops
