// Host side of the NCHW -> NHWC kernels (kernels.cu): the cubin embedded by the CUDA flavour's
// build, launched as an MLX precompiled custom kernel on the node's stream.
#include "ortmlx/ops/conv/cuda/channels_last.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <mlx/fast.h>
#include <mlx/ops.h>

#include "ortmlx/ops/cuda_support.h"

#if ORTMLX_CUDA_KERNELS
ORTMLX_DECLARE_CUBIN(conv_cuda)  // generated: conv_cuda.cpp in the build folder
#endif

namespace ortmlx::ops {

namespace {
constexpr int64_t kMaxGrid = 65535;  // the grid's y and z extents (channel tiles, batch)
constexpr int64_t kFewChannels = 8;  // up to here a thread per pixel, beyond 32 x 32 tiles
}  // namespace

bool cuda_nchw_to_nhwc_applies(const mx::array& x, mx::StreamOrDevice s) {
  return kernel_enabled("ONNXRUNTIME_EP_MLX_CONV_NHWC_KERNEL") && x.ndim() == 4 &&
         x.dtype() == mx::float32 && x.size() > 0 &&
         static_cast<int64_t>(x.size()) <= std::numeric_limits<int>::max() &&
         x.shape(0) <= kMaxGrid && (x.shape(1) + 31) / 32 <= kMaxGrid && cuda_kernels_usable(s);
}

mx::array cuda_nchw_to_nhwc(const mx::array& x, mx::StreamOrDevice s) {
  if (!cuda_nchw_to_nhwc_applies(x, s))
    throw std::runtime_error("NCHW -> NHWC kernel: not for this input or device");
#if !ORTMLX_CUDA_KERNELS
  return x;  // unreachable: the kernels never apply without them
#else
  const int64_t b = x.shape(0), c = x.shape(1), hw = int64_t{x.shape(2)} * x.shape(3);
  const std::string& cubin = conv_cuda::cubin();
  const std::vector<mx::fast::ScalarArg> scalars = {static_cast<int>(b), static_cast<int>(c),
                                                    static_cast<int>(hw)};
  const mx::Shape out_shape = {x.shape(0), x.shape(2), x.shape(3), x.shape(1)};
  if (c <= kFewChannels) {
    constexpr int64_t kThreads = 256, kMaxThreads = kThreads * 4096;
    const int64_t threads = std::min(kMaxThreads, (b * hw + kThreads - 1) / kThreads * kThreads);
    return mx::fast::precompiled_cuda_kernel(
        std::string("ortmlx_nchw_to_nhwc_few_") + conv_cuda::kTag, cubin, {x}, {out_shape},
        {mx::float32}, scalars, {static_cast<int>(threads), 1, 1}, {kThreads, 1, 1}, 0,
        std::nullopt, /*ensure_row_contiguous=*/true, s)[0];
  }
  constexpr int kTileBytes = 32 * 33 * static_cast<int>(sizeof(float));
  const int64_t ctiles = (c + 31) / 32;
  return mx::fast::precompiled_cuda_kernel(
      std::string("ortmlx_nchw_to_nhwc_tiled_") + conv_cuda::kTag, cubin, {x}, {out_shape},
      {mx::float32}, scalars,
      {static_cast<int>((hw + 31) / 32 * 32), static_cast<int>(ctiles * 8), static_cast<int>(b)},
      {32, 8, 1}, kTileBytes, std::nullopt, /*ensure_row_contiguous=*/true, s)[0];
#endif
}

}  // namespace ortmlx::ops
