// What the hand-written CUDA kernels of the ops (sm_90 cubins embedded by the CUDA flavour,
// cmake/EmbedCudaKernels.cmake, launched as MLX precompiled kernels) need to know before they
// are chosen over MLX ops.
#pragma once

#include <cstddef>
#include <string>

#include <mlx/utils.h>

namespace ortmlx::ops {

namespace mx = mlx::core;

// The compute capability's major number of MLX's device (device 0, the one it uses) when this
// library is the CUDA flavour, else 0. Cached.
int cuda_compute_major();

// True when this library carries the kernels (the CUDA flavour) and MLX's device (device 0, the
// one it uses) is compute 9.x (H100, H200), the only code in them. Cached.
bool cuda_sm90_device();

// The stream runs on the GPU and cuda_sm90_device().
bool cuda_kernels_usable(mx::StreamOrDevice s);

// Whether the kernel the environment variable `name` switches is on: unless it holds a false flag
// (0, false, off), the way to compare a kernel of ours with the MLX ops it replaces. Read at each
// call: translators ask once per translation, so one process can hold sessions translated either
// way (bench/gpu_peer.py --ab).
bool kernel_enabled(const char* name);

// Whether an opt-in kernel or library path the environment variable `name` switches is on: only
// when it holds a true flag. Read at each call, like kernel_enabled.
bool kernel_opted_in(const char* name);

}  // namespace ortmlx::ops

// Declares what cmake/EmbedCudaKernels.cmake defines for a cubin without a suffix in namespace
// ortmlx::ops::NS: its bytes, their count and the tag its kernel names end with; and NS::cubin(),
// the bytes as MLX's precompiled kernels take them (made once).
#define ORTMLX_DECLARE_CUBIN(NS)                                                \
  namespace ortmlx::ops::NS {                                                   \
  extern const unsigned char kData[];                                           \
  extern const std::size_t kSize;                                               \
  extern const char* const kTag;                                                \
  inline const std::string& cubin() {                                           \
    static const std::string code(reinterpret_cast<const char*>(kData), kSize); \
    return code;                                                                \
  }                                                                             \
  }
