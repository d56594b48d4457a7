// Backend-neutral process facts: MLX's backend, and the fp32 matmul precision (see
// device_memory.h). MLX's CPU backend ignores MLX_ENABLE_TF32, so setting it there is harmless.
#include <atomic>
#include <cstdlib>

#include <mlx/device.h>

#include "ortmlx/engine/device/device_memory.h"
#include "ortmlx/engine/options.h"

namespace ortmlx::device {

namespace {
std::atomic<bool> g_tf32{false};
std::atomic<bool> g_cuda_graphs{true};
}  // namespace

void init_precision_mode() {
  bool tf32 = false;
  if (const char* ours = std::getenv("ONNXRUNTIME_EP_MLX_TF32")) {
    tf32 = parse_flag(ours);
    ::setenv("MLX_ENABLE_TF32", tf32 ? "1" : "0", 1);
  } else if (const char* mlx = std::getenv("MLX_ENABLE_TF32")) {
    tf32 = parse_flag(mlx);  // the user set MLX's own variable: keep it
  } else {
    ::setenv("MLX_ENABLE_TF32", "0", 1);
  }
  g_tf32 = tf32;
}

void init_launch_mode() {
  // MLX's CUDA backend captures each kernel launch into a CUDA graph, then instantiates or
  // updates and launches that graph every ~20 ops. For inference-sized subgraphs that host work
  // costs more than the launches it saves: on an H200, bert ran at 1.32 ms per run with graphs
  // and 0.80 ms without (bench/results/gpu_profile.md). So the EP turns them off unless the user
  // asks (ONNXRUNTIME_EP_MLX_CUDA_GRAPHS) or set MLX's own variable. MLX reads it once.
  bool graphs = false;
  if (const char* ours = std::getenv("ONNXRUNTIME_EP_MLX_CUDA_GRAPHS")) {
    graphs = parse_flag(ours);
    ::setenv("MLX_USE_CUDA_GRAPHS", graphs ? "1" : "0", 1);
  } else if (const char* mlx = std::getenv("MLX_USE_CUDA_GRAPHS")) {
    graphs = parse_flag(mlx);
  } else {
    ::setenv("MLX_USE_CUDA_GRAPHS", "0", 1);
  }
  g_cuda_graphs = graphs;
}

bool cuda_graphs_enabled() {
  return g_cuda_graphs.load();
}

bool tf32_enabled() {
  return g_tf32.load();
}

const char* mlx_backend() {
  return mlx::core::default_device() == mlx::core::Device::gpu ? "gpu" : "cpu";
}

}  // namespace ortmlx::device
