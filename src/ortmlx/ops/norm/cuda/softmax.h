// Softmax of float32 rows over the last axis in one CUDA kernel (kernels.cu), with the attention
// scores' scale and additive mask folded in, for the CUDA flavour on sm_90. OPT-IN
// (ONNXRUNTIME_EP_MLX_SOFTMAX_KERNEL=1, read at each translation): on an H100 (2026-12-06, the
// same process timing both, bench/results/gpu_peer.md) the first version ran 4-36% slower than
// MLX's Multiply + softmax on every transformer of the benchmark. That version ran a block per
// row with three dependent passes over global memory (latency-bound at 2 elements a thread on
// 512-wide rows) and read the scale from a one-element device array in every block; now rows of
// up to 1024 take a warp each, read once into registers, and the scale is a kernel argument
// (not yet timed on a GPU).
#pragma once

#include <optional>

#include <mlx/array.h>
#include <mlx/utils.h>

namespace ortmlx::ops {

namespace mx = mlx::core;

// The softmax's input T in the graph's order: T = (x * scale | x / scale) + mask, each part
// optional; scale the value of a one-element float32 constant (an evaluated array: the kernel
// takes it as an argument, as MLX's fused kernels inline constant scalars), mask a float32 array
// that broadcasts to T's shape (as given, before MLX broadcast it).
struct SoftmaxScores {
  mx::array x;
  std::optional<float> scale;
  bool divides = false;
  std::optional<mx::array> mask;
};

// Whether the kernel runs the rows of float32 `t` (rank >= 1, the last axis) on `s`: the CUDA
// flavour on an sm_90 GPU stream, the kernel switched on, at most 2^31 - 1 elements.
bool cuda_softmax_applies(const mx::array& t, mx::StreamOrDevice s);

// T as the kernel takes it: when T is MLX's Add of a full array and a mask (full, or a broadcast
// of a smaller array whose broadcast the kernel can index), those two; where the full array is a
// Multiply by, or a Divide by, a broadcast one-element constant, its operand and that value.
// Otherwise T alone.
SoftmaxScores softmax_score_parts(const mx::array& t);

// softmax(T) over the last axis, T of `shape` (the shape of the array the parts came from).
mx::array cuda_softmax(const SoftmaxScores& t, const mx::Shape& shape, mx::StreamOrDevice s);

}  // namespace ortmlx::ops
