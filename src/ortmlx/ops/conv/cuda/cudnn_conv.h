// Conv through cuDNN's convolution API on NCHW tensors (the CUDA flavour), as an MLX primitive of
// the plan's graph. Why: MLX's convolutions take channels-last tensors only, so an ONNX CNN pays a
// transpose at each subgraph edge, and the engines cuDNN's heuristics pick under MLX compute NCHW
// anyway, converting NHWC <-> NCHW around every call; its heuristics also take FFT engines where
// timing every algorithm finds faster ones. Here the tensors stay in ONNX's layout and each
// convolution shape runs the algorithm found fastest by timing all that cuDNN offers for it, once
// per shape and process (what ORT's CUDA EP does by default). Exact fp32 unless the process runs
// in TF32 mode (device::tf32_enabled()): FMA math only, no tensor-core TF32.
#pragma once

#include <vector>

#include <mlx/array.h>
#include <mlx/utils.h>

namespace ortmlx::ops {

namespace mx = mlx::core;

struct CudnnConvGeometry {
  std::vector<int> pads;  // one per spatial axis, applied at both ends
  std::vector<int> strides;
  std::vector<int> dilations;
  int groups = 1;
};

// Convolutions below this many FLOPs keep MLX's convolutions: measured on an H100 (2026-12-06,
// bench/results/gpu_peer.md), cuDNN in NCHW ran ResNet-18 at batch 32 (every layer >= 7 GFLOP)
// 1.2-1.3x faster than MLX's path, but small-batch CNNs of the corpus (layers of 1-30 MFLOP)
// slower: their run is launch-bound and cuDNN's legacy calls cost more host time per
// convolution. CNN layers keep their FLOPs nearly constant from stage to stage, so a model
// rarely switches layouts between its convolutions. ONNXRUNTIME_EP_MLX_CUDNN_CONV_MIN_FLOPS sets
// it (default 2^28, read at each translation; 0 sends every convolution to cuDNN).
double cudnn_conv_min_flops();

// Whether X (N, C, spatial...) and W (M, C/groups, kernel...), both float32 of rank 4 or 5, with
// the output shape `out_shape` can take cuDNN on `s`: the CUDA flavour on a GPU stream, cuDNN's
// library loaded in the process, MLX's CUDA graphs off (the EP's default: a graph launched later
// than the workspace's stream-ordered release would read freed memory), no tensor empty or past
// 2^31 elements, at least cudnn_conv_min_flops(), not a shape and geometry cuDNN failed to run
// before in this process (its error then failed that run; the rerun and later translations keep
// MLX's convolution), and ONNXRUNTIME_EP_MLX_CUDNN_CONV not a false flag (0 keeps MLX's).
bool cudnn_conv_applies(const mx::array& x, const mx::array& w, const CudnnConvGeometry& g,
                        const mx::Shape& out_shape, mx::StreamOrDevice s);

// Y (N, M, out...) = the cross-correlation of X with W under `g`, `out_shape` the caller's checked
// output shape. X and W are made row-contiguous first (no copy when they are). The first
// evaluation of a shape times cuDNN's algorithms (a host synchronisation); later ones only launch.
mx::array cudnn_conv(const mx::array& x, const mx::array& w, const CudnnConvGeometry& g,
                     const mx::Shape& out_shape, mx::StreamOrDevice s);

}  // namespace ortmlx::ops
