// The time loop of one direction of LSTM or GRU as one CUDA kernel (kernels.cu), for the CUDA
// flavour on sm_90 devices (on unless ONNXRUNTIME_EP_MLX_RNN_KERNEL=0).
// Elsewhere it reports itself unavailable and ops/recurrent.cpp unrolls the loop into MLX ops.
#pragma once

#include <optional>

#include <mlx/array.h>
#include <mlx/utils.h>

namespace ortmlx::ops {

namespace mx = mlx::core;

struct RecurrenceInputs {
  bool gru = false;                  // else LSTM
  bool reverse = false;              // the direction runs from the last step to the first
  bool linear_before_reset = false;  // GRU
  mx::array xw;                      // (T, B, G*H) gate inputs X W^T with the folded biases
  mx::array rt;                      // (H, G*H) R^T
  mx::array h0, c0;                  // (B, H) initial states (c0 unused by GRU)
  std::optional<mx::array> rb_h;     // (H) GRU's recurrent h bias under linear_before_reset
  float bound = 0.f;                 // every gate input clamped to [-bound, bound]
  bool nan_to_bound = false;         // and NaN turned into +bound
};

struct RecurrenceOutputs {
  mx::array y;       // (T, B, H)
  mx::array h_last;  // (B, H)
  mx::array c_last;  // (B, H), LSTM
};

// Whether the kernel can run a direction of hidden size `hidden` (gate width `gh`) on stream s:
// opted in, the CUDA flavour, a GPU stream, an sm_90 device, the state in 48 KB of shared memory.
bool cuda_recurrence_usable(int hidden, int gh, mx::StreamOrDevice s);

RecurrenceOutputs cuda_recurrence(const RecurrenceInputs& in, mx::StreamOrDevice s);

}  // namespace ortmlx::ops
