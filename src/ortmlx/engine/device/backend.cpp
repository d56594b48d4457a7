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
}

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

bool tf32_enabled() {
  return g_tf32.load();
}

const char* mlx_backend() {
  return mlx::core::default_device() == mlx::core::Device::gpu ? "gpu" : "cpu";
}

}  // namespace ortmlx::device
