// OrtNodeComputeInfo for one fused node: moves tensors between ORT and MLX around the Executor.
// Compute may be called from several ORT threads at once (IsConcurrentRunSupported = true):
// all MLX work of a call runs as one job on the MLX thread (engine/mlx_thread.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ortmlx/engine/executor.h"
#include "ortmlx/plugin/ort_api.h"

namespace ortmlx::plugin {

class MlxEp;

class MlxComputeInfo : public OrtNodeComputeInfo {
 public:
  // all_inputs: the fused node's inputs including constants, in case ORT feeds them anyway.
  MlxComputeInfo(MlxEp& ep, std::shared_ptr<Plan> plan, std::vector<std::string> all_inputs);
  // Destroys the executor (its compiled functions and MLX cache entries) on the MLX thread.
  ~MlxComputeInfo();

 private:
  static OrtStatus* ORT_API_CALL CreateStateImpl(OrtNodeComputeInfo* self,
                                                 OrtNodeComputeContext* ctx, void** state) noexcept;
  static OrtStatus* ORT_API_CALL ComputeImpl(OrtNodeComputeInfo* self, void* state,
                                             OrtKernelContext* kernel_context) noexcept;
  static void ORT_API_CALL ReleaseStateImpl(OrtNodeComputeInfo* self, void* state) noexcept;

  void compute(OrtKernelContext* kernel_context);

  MlxEp& ep_;
  std::unique_ptr<Executor> executor_;
  std::vector<std::string> all_inputs_;
};

}  // namespace ortmlx::plugin
