#include "ortmlx/plugin/compute.h"

#include <chrono>
#include <cstring>

#include <mlx/allocator.h>
#include <mlx/ops.h>

#include "ortmlx/engine/dtype.h"
#include "ortmlx/plugin/ep.h"

namespace ortmlx::plugin {

namespace mx = mlx::core;

namespace {

// Copies an ORT tensor into a new MLX array (ORT's buffer is only valid during Compute).
mx::array to_mlx(const OrtValue* value, const std::string& name) {
  OrtTensorTypeAndShapeInfo* raw = nullptr;
  ORTMLX_CHECK(g_ort->GetTensorTypeAndShape(value, &raw));
  std::unique_ptr<OrtTensorTypeAndShapeInfo, TensorInfoDeleter> tsi(raw);
  ONNXTensorElementDataType et{};
  ORTMLX_CHECK(g_ort->GetTensorElementType(tsi.get(), &et));
  size_t rank = 0;
  ORTMLX_CHECK(g_ort->GetDimensionsCount(tsi.get(), &rank));
  std::vector<int64_t> dims(rank);
  if (rank) ORTMLX_CHECK(g_ort->GetDimensions(tsi.get(), dims.data(), rank));
  const ElemType type = static_cast<ElemType>(et);
  auto dtype = to_mlx_dtype(type);
  if (!dtype)
    throw OrtError(ORT_INVALID_ARGUMENT,
                   "input '" + name + "' has unsupported type " + elem_type_name(type));
  mx::Shape shape;
  size_t numel = 1;
  for (int64_t d : dims) {
    if (d > std::numeric_limits<int32_t>::max())
      throw OrtError(ORT_INVALID_ARGUMENT, "input '" + name + "' has a dimension beyond int32");
    shape.push_back(static_cast<int32_t>(d));
    numel *= static_cast<size_t>(d);
  }
  const size_t bytes = numel * elem_type_size(type);
  if (bytes == 0) return mx::zeros(shape, *dtype);
  const void* data = nullptr;
  ORTMLX_CHECK(g_ort->GetTensorData(value, &data));
  mx::array a(mx::allocator::malloc(bytes), shape, *dtype);
  std::memcpy(a.data<uint8_t>(), data, bytes);
  return a;
}

void to_ort(const mx::array& a, OrtKernelContext* ctx, size_t index) {
  std::vector<int64_t> dims(a.shape().begin(), a.shape().end());
  OrtValue* out = nullptr;
  ORTMLX_CHECK(g_ort->KernelContext_GetOutput(ctx, index, dims.data(), dims.size(), &out));
  const size_t bytes = a.nbytes();
  if (bytes == 0) return;
  void* dst = nullptr;
  ORTMLX_CHECK(g_ort->GetTensorMutableData(out, &dst));
  std::memcpy(dst, a.data<uint8_t>(), bytes);
}

}  // namespace

MlxComputeInfo::MlxComputeInfo(MlxEp& ep, std::shared_ptr<Plan> plan,
                               std::vector<std::string> all_inputs)
    : OrtNodeComputeInfo{}, ep_(ep), executor_(std::move(plan)),
      all_inputs_(std::move(all_inputs)) {
  ort_version_supported = ORT_API_VERSION;
  CreateState = CreateStateImpl;
  Compute = ComputeImpl;
  ReleaseState = ReleaseStateImpl;
}

OrtStatus* MlxComputeInfo::CreateStateImpl(OrtNodeComputeInfo* self, OrtNodeComputeContext*,
                                           void** state) noexcept {
  *state = self;
  return nullptr;
}

void MlxComputeInfo::ReleaseStateImpl(OrtNodeComputeInfo*, void*) noexcept {}

OrtStatus* MlxComputeInfo::ComputeImpl(OrtNodeComputeInfo* self, void*,
                                       OrtKernelContext* kernel_context) noexcept {
  auto* info = static_cast<MlxComputeInfo*>(self);
  const std::string where = "Compute of fused node " + info->executor_.plan().name;
  return guard(where.c_str(), [&] { info->compute(kernel_context); });
}

void MlxComputeInfo::compute(OrtKernelContext* kernel_context) {
  const auto start = std::chrono::steady_clock::now();
  const Plan& plan = executor_.plan();
  size_t n_in = 0;
  ORTMLX_CHECK(g_ort->KernelContext_GetInputCount(kernel_context, &n_in));
  // ORT drops constant initializers from the fused node's inputs; accept either layout.
  const bool with_constants = n_in == all_inputs_.size() && n_in != plan.input_names.size();
  if (n_in != plan.input_names.size() && !with_constants)
    throw OrtError(ORT_FAIL, "expected " + std::to_string(plan.input_names.size()) +
                                 " inputs, ORT passed " + std::to_string(n_in));
  {
    std::lock_guard<std::mutex> lock(mlx_mutex());
    std::vector<mx::array> inputs;
    inputs.reserve(plan.input_names.size());
    for (size_t i = 0; i < n_in; ++i) {
      const std::string& name = with_constants ? all_inputs_[i] : plan.input_names[i];
      if (with_constants && plan.constant_arrays.count(name)) continue;
      const OrtValue* value = nullptr;
      ORTMLX_CHECK(g_ort->KernelContext_GetInput(kernel_context, i, &value));
      if (value == nullptr) throw OrtError(ORT_FAIL, "input '" + name + "' is missing");
      inputs.push_back(to_mlx(value, name));
    }
    RunResult result = executor_.run(inputs);
    for (size_t i = 0; i < result.outputs.size(); ++i) to_ort(result.outputs[i], kernel_context, i);
    for (const auto& mark : result.marks) ep_.report().record_path(mark.label, mark.fast);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ep_.report().record_compute(plan.name, seconds);
  ep_.flush_report();
}

}  // namespace ortmlx::plugin
