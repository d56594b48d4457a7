// The library's only exported symbols: ORT's plugin entry points.
#include "ortmlx/engine/device/device_memory.h"
#include "ortmlx/plugin/factory.h"
#include "ortmlx/plugin/ort_api.h"

extern "C" {

__attribute__((visibility("default"))) OrtStatus* CreateEpFactories(
    const char* registered_name, const OrtApiBase* ort_api_base, const OrtLogger* default_logger,
    OrtEpFactory** factories, size_t max_factories, size_t* num_factories) {
  using namespace ortmlx::plugin;
  if (num_factories != nullptr) *num_factories = 0;  // on every path, failures included
  const OrtApi* api = ort_api_base->GetApi(ORT_API_VERSION);
  if (api == nullptr) return nullptr;  // cannot even create a status; ORT reports the failure
  g_ort = api;
  g_ep_api = api->GetEpApi();
  return guard("CreateEpFactories", [&] {
    if (num_factories == nullptr || factories == nullptr)
      throw OrtError(ORT_INVALID_ARGUMENT, "null factories output");
    if (max_factories < 1) throw OrtError(ORT_INVALID_ARGUMENT, "no room for the factory");
    // Before anything touches MLX: exact fp32 matmuls on CUDA unless the user opted in to TF32.
    ortmlx::device::init_precision_mode();
    factories[0] = new MlxEpFactory(registered_name, default_logger);
    *num_factories = 1;
  });
}

__attribute__((visibility("default"))) OrtStatus* ReleaseEpFactory(OrtEpFactory* factory) {
  ortmlx::plugin::MlxEpFactory::release_by_ort(static_cast<ortmlx::plugin::MlxEpFactory*>(factory));
  return nullptr;
}

}  // extern "C"
