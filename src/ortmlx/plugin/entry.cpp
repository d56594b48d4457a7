// The library's only exported symbols: ORT's plugin entry points.
#include "ortmlx/engine/device/device_memory.h"
#include "ortmlx/plugin/factory.h"
#include "ortmlx/plugin/ort_api.h"

#include <cstdio>

namespace {

// The oldest ONNX Runtime this library serves: the plugin-EP behaviour it relies on (e.g.
// CreateDataTransfer called at registration without a null check) is what 1.30 does, and 1.30
// is the release it is tested with. The C API version of its headers is a second, necessary floor.
constexpr int kMinOrtMajor = 1;
constexpr int kMinOrtMinor = 30;

// True when `version` ("1.30.0", "1.31.0-dev") is at least kMinOrtMajor.kMinOrtMinor; a string
// that does not parse is left to the API-level check.
bool version_at_least_minimum(const char* version) {
  int major = 0, minor = 0;
  if (version == nullptr || std::sscanf(version, "%d.%d", &major, &minor) != 2) return true;
  return major > kMinOrtMajor || (major == kMinOrtMajor && minor >= kMinOrtMinor);
}

// Reports a refusal through the oldest OrtApi: CreateStatus is the first member of every
// version, so an ORT too old for our headers' API can still say why it was refused.
OrtStatus* refuse(const OrtApiBase* base, const OrtApi* api, const char* ort_version) {
  if (api == nullptr) api = base->GetApi(1);
  if (api == nullptr) return nullptr;
  char msg[320];
  std::snprintf(msg, sizeof msg,
                "ortmlx needs ONNX Runtime >= %d.%d (C API version %d); this process runs ONNX "
                "Runtime %s. Install onnxruntime (or onnxruntime-gpu) %d.%d or newer.",
                kMinOrtMajor, kMinOrtMinor, ORT_API_VERSION, ort_version ? ort_version : "unknown",
                kMinOrtMajor, kMinOrtMinor);
  return api->CreateStatus(ORT_NOT_IMPLEMENTED, msg);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) OrtStatus* CreateEpFactories(
    const char* registered_name, const OrtApiBase* ort_api_base, const OrtLogger* default_logger,
    OrtEpFactory** factories, size_t max_factories, size_t* num_factories) {
  using namespace ortmlx::plugin;
  if (num_factories != nullptr) *num_factories = 0;  // on every path, failures included
  if (ort_api_base == nullptr) return nullptr;
  const char* ort_version =
      ort_api_base->GetVersionString ? ort_api_base->GetVersionString() : nullptr;
  // nullptr when this ORT predates our headers' API version.
  const OrtApi* api = ort_api_base->GetApi(ORT_API_VERSION);
  if (api == nullptr || !version_at_least_minimum(ort_version))
    return refuse(ort_api_base, api, ort_version);
  g_ort = api;
  g_ep_api = api->GetEpApi();
  return guard("CreateEpFactories", [&] {
    if (num_factories == nullptr || factories == nullptr)
      throw OrtError(ORT_INVALID_ARGUMENT, "null factories output");
    if (max_factories < 1) throw OrtError(ORT_INVALID_ARGUMENT, "no room for the factory");
    // Before anything touches MLX: exact fp32 matmuls on CUDA unless the user opted in to TF32.
    ortmlx::device::init_precision_mode();
    ortmlx::device::init_launch_mode();
    factories[0] = new MlxEpFactory(registered_name, default_logger);
    *num_factories = 1;
  });
}

__attribute__((visibility("default"))) OrtStatus* ReleaseEpFactory(OrtEpFactory* factory) {
  ortmlx::plugin::MlxEpFactory::release_by_ort(static_cast<ortmlx::plugin::MlxEpFactory*>(factory));
  return nullptr;
}

}  // extern "C"
