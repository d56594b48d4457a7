#include "ortmlx/ops/cuda_support.h"

#include <cstdlib>

#include "ortmlx/engine/options.h"
#include "ortmlx/ops/common.h"

#if ORTMLX_CUDA_KERNELS
#include <cuda_runtime_api.h>
#endif

namespace ortmlx::ops {

int cuda_compute_major() {
#if ORTMLX_CUDA_KERNELS
  static const int major = [] {
    int m = 0;
    return cudaDeviceGetAttribute(&m, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess ? m : 0;
  }();
  return major;
#else
  return 0;
#endif
}

bool cuda_sm90_device() {
  return cuda_compute_major() == 9;
}

bool kernel_enabled(const char* name) {
  const char* flag = std::getenv(name);
  return flag == nullptr || parse_flag(flag);
}

bool kernel_opted_in(const char* name) {
  const char* flag = std::getenv(name);
  return flag != nullptr && parse_flag(flag);
}

bool cuda_kernels_usable(mx::StreamOrDevice s) {
  return runs_on_gpu(s) && cuda_sm90_device();
}

}  // namespace ortmlx::ops
