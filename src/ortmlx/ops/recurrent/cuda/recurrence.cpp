// Host side of the recurrence kernel (kernels.cu): the cubin embedded by the CUDA flavour's
// build, launched as an MLX precompiled custom kernel on the node's stream.
#include "ortmlx/ops/recurrent/cuda/recurrence.h"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <mlx/fast.h>
#include <mlx/ops.h>

#include "ortmlx/ops/cuda_support.h"

#if ORTMLX_CUDA_KERNELS
ORTMLX_DECLARE_CUBIN(recurrent_cuda)  // generated: recurrent_cuda.cpp in the build folder
#endif

namespace ortmlx::ops {

namespace {
constexpr int kMaxSharedBytes = 48 * 1024;  // without opting the kernel in to more
}  // namespace

bool cuda_recurrence_usable(int hidden, int gh, mx::StreamOrDevice s) {
  return kernel_enabled("ONNXRUNTIME_EP_MLX_RNN_KERNEL") && hidden > 0 && gh > 0 &&
         int64_t{3} * hidden + gh <= kMaxSharedBytes / 4 && cuda_kernels_usable(s);
}

RecurrenceOutputs cuda_recurrence(const RecurrenceInputs& in, mx::StreamOrDevice s) {
#if !ORTMLX_CUDA_KERNELS
  (void)in;
  (void)s;
  throw std::runtime_error("recurrence CUDA kernel: this build has no CUDA kernels");
#else
  const int T = in.xw.shape(0), B = in.xw.shape(1), GH = in.xw.shape(2), H = in.rt.shape(0);
  if (!cuda_recurrence_usable(H, GH, s)) throw std::runtime_error("recurrence kernel: unusable");
  const std::string& cubin = recurrent_cuda::cubin();
  const int threads = std::min(1024, (GH + 31) / 32 * 32);
  const mx::array rb_h = in.rb_h ? *in.rb_h : mx::zeros({1}, mx::float32, s);
  const std::vector<mx::fast::ScalarArg> scalars = {T,
                                                    B,
                                                    H,
                                                    in.gru ? 1 : 0,
                                                    in.reverse ? 1 : 0,
                                                    in.linear_before_reset ? 1 : 0,
                                                    in.rb_h ? 1 : 0,
                                                    in.bound,
                                                    in.nan_to_bound ? 1 : 0};
  std::vector<mx::array> outs = mx::fast::precompiled_cuda_kernel(
      std::string("ortmlx_recurrence_") + recurrent_cuda::kTag, cubin,
      {in.xw, in.rt, in.h0, in.c0, rb_h}, {{T, B, H}, {B, H}, {B, H}},
      {mx::float32, mx::float32, mx::float32}, scalars, {B * threads, 1, 1}, {threads, 1, 1},
      static_cast<int>(sizeof(float)) * (3 * H + GH), std::nullopt, /*ensure_row_contiguous=*/true,
      s);
  return {outs[0], outs[1], outs[2]};
#endif
}

}  // namespace ortmlx::ops
