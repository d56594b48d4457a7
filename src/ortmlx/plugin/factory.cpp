#include "ortmlx/plugin/factory.h"

#include <memory>

#include "ortmlx/plugin/ep.h"

namespace ortmlx::plugin {

MlxEpFactory::MlxEpFactory(const char* registered_name, const OrtLogger* default_logger)
    : OrtEpFactory{},
      registered_name_(registered_name ? registered_name : kEpName),
      default_logger_(default_logger) {
  ort_version_supported = ORT_API_VERSION;
  GetName = GetNameImpl;
  GetVendor = GetVendorImpl;
  GetVendorId = GetVendorIdImpl;
  GetVersion = GetVersionImpl;
  GetSupportedDevices = GetSupportedDevicesImpl;
  CreateEp = CreateEpImpl;
  ReleaseEp = ReleaseEpImpl;
  ValidateCompiledModelCompatibilityInfo = ValidateCompatibilityImpl;
  CreateAllocator = CreateAllocatorImpl;
  ReleaseAllocator = ReleaseAllocatorImpl;
  // ORT 1.30 calls this without a null check: it must be set even though we have no transfer.
  CreateDataTransfer = CreateDataTransferImpl;
  IsStreamAware = IsStreamAwareImpl;
  CreateSyncStreamForDevice = CreateSyncStreamImpl;
  GetNumCustomOpDomains = GetNumCustomOpDomainsImpl;
  GetCustomOpDomains = GetCustomOpDomainsImpl;
}

// The EP name users select devices by is fixed, whatever name the library was registered under.
const char* MlxEpFactory::GetNameImpl(const OrtEpFactory*) noexcept {
  return kEpName;
}
const char* MlxEpFactory::GetVendorImpl(const OrtEpFactory*) noexcept {
  return kVendor;
}
uint32_t MlxEpFactory::GetVendorIdImpl(const OrtEpFactory*) noexcept {
  return 0;
}
const char* MlxEpFactory::GetVersionImpl(const OrtEpFactory*) noexcept {
  return ORTMLX_VERSION;
}

OrtStatus* MlxEpFactory::GetSupportedDevicesImpl(OrtEpFactory* self,
                                                 const OrtHardwareDevice* const* devices,
                                                 size_t num_devices, OrtEpDevice** ep_devices,
                                                 size_t max_ep_devices,
                                                 size_t* num_ep_devices) noexcept {
  return guard("GetSupportedDevices", [&] {
    *num_ep_devices = 0;
    // All EP I/O stays in CPU memory; MLX's default device decides where compute runs. So the EP
    // device sits on ORT's CPU hardware device (ORT's GPU discovery is fragile on headless hosts).
    for (size_t i = 0; i < num_devices && *num_ep_devices < max_ep_devices; ++i) {
      if (g_ort->HardwareDevice_Type(devices[i]) != OrtHardwareDeviceType_CPU) continue;
      OrtKeyValuePairs* raw_meta = nullptr;
      g_ort->CreateKeyValuePairs(&raw_meta);
      std::unique_ptr<OrtKeyValuePairs, KeyValuePairsDeleter> meta(raw_meta);
      g_ort->AddKeyValuePair(meta.get(), "ortmlx.version", ORTMLX_VERSION);
      OrtEpDevice* dev = nullptr;
      ORTMLX_CHECK(g_ep_api->CreateEpDevice(self, devices[i], meta.get(), nullptr, &dev));
      ep_devices[(*num_ep_devices)++] = dev;
      break;
    }
  });
}

OrtStatus* MlxEpFactory::CreateEpImpl(OrtEpFactory* self, const OrtHardwareDevice* const*,
                                      const OrtKeyValuePairs* const*, size_t,
                                      const OrtSessionOptions* session_options,
                                      const OrtLogger* logger, OrtEp** ep) noexcept {
  return guard("CreateEp", [&] {
    *ep = nullptr;
    auto* factory = static_cast<MlxEpFactory*>(self);
    *ep = new MlxEp(*factory, session_options, logger);
  });
}

void MlxEpFactory::ReleaseEpImpl(OrtEpFactory*, OrtEp* ep) noexcept {
  delete static_cast<MlxEp*>(ep);
}

OrtStatus* MlxEpFactory::ValidateCompatibilityImpl(OrtEpFactory*, const OrtHardwareDevice* const*,
                                                   size_t, const char*,
                                                   OrtCompiledModelCompatibility* out) noexcept {
  *out = OrtCompiledModelCompatibility_EP_NOT_APPLICABLE;
  return nullptr;
}

OrtStatus* MlxEpFactory::CreateAllocatorImpl(OrtEpFactory*, const OrtMemoryInfo*,
                                             const OrtKeyValuePairs*,
                                             OrtAllocator** allocator) noexcept {
  *allocator = nullptr;  // no device allocator: EP I/O lives in CPU memory
  return nullptr;
}

void MlxEpFactory::ReleaseAllocatorImpl(OrtEpFactory*, OrtAllocator*) noexcept {}

OrtStatus* MlxEpFactory::CreateDataTransferImpl(OrtEpFactory*, OrtDataTransferImpl** out) noexcept {
  *out = nullptr;
  return nullptr;
}

bool MlxEpFactory::IsStreamAwareImpl(const OrtEpFactory*) noexcept {
  return false;
}

OrtStatus* MlxEpFactory::CreateSyncStreamImpl(OrtEpFactory*, const OrtMemoryDevice*,
                                              const OrtKeyValuePairs*,
                                              OrtSyncStreamImpl** stream) noexcept {
  *stream = nullptr;
  return nullptr;
}

OrtStatus* MlxEpFactory::GetNumCustomOpDomainsImpl(OrtEpFactory*, size_t* num) noexcept {
  *num = 0;
  return nullptr;
}

OrtStatus* MlxEpFactory::GetCustomOpDomainsImpl(OrtEpFactory*, OrtCustomOpDomain**,
                                                size_t) noexcept {
  return nullptr;
}

}  // namespace ortmlx::plugin
