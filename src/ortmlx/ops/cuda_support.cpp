#include "ortmlx/ops/cuda_support.h"

#include <cstdlib>

#include "ortmlx/engine/options.h"
#include "ortmlx/ops/common.h"

#if ORTMLX_CUDA_KERNELS
#include <cuda_runtime_api.h>
#endif

namespace ortmlx::ops {

bool cuda_sm90_device() {
#if ORTMLX_CUDA_KERNELS
  static const bool ok = [] {
    int major = 0;
    return cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) == cudaSuccess &&
           major == 9;
  }();
  return ok;
#else
  return false;
#endif
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
