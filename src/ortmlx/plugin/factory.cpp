#include "ortmlx/plugin/factory.h"

#include <memory>

#include "ortmlx/engine/device/device_memory.h"
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
  if (device::gpu_io_available()) gpu_ = GpuMemoryInfos::create();
}

MlxEpFactory::~MlxEpFactory() {
  if (own_gpu_device_) g_ep_api->ReleaseHardwareDevice(own_gpu_device_);
}

void MlxEpFactory::add_gpu_device(const OrtHardwareDevice* const* devices, size_t num_devices,
                                  OrtEpDevice** ep_devices, size_t max_ep_devices,
                                  size_t* num_ep_devices) {
  if (*num_ep_devices >= max_ep_devices) return;
  const OrtHardwareDevice* hw = nullptr;
  for (size_t i = 0; i < num_devices && !hw; ++i)
    if (g_ort->HardwareDevice_Type(devices[i]) == OrtHardwareDeviceType_GPU &&
        g_ort->HardwareDevice_VendorId(devices[i]) == device::kNvidiaVendorId)
      hw = devices[i];
  if (!hw) {
    // ORT's device discovery lists no GPU on some hosts (headless, containers): create one.
    if (!own_gpu_device_) {
      OrtKeyValuePairs* raw_meta = nullptr;
      g_ort->CreateKeyValuePairs(&raw_meta);
      std::unique_ptr<OrtKeyValuePairs, KeyValuePairsDeleter> meta(raw_meta);
      g_ort->AddKeyValuePair(meta.get(), "Description", device::gpu_name());
      ORTMLX_CHECK(g_ep_api->CreateHardwareDevice(
          OrtHardwareDeviceType_GPU, device::kNvidiaVendorId,
          static_cast<uint32_t>(device::gpu_ordinal()), "NVIDIA", meta.get(), &own_gpu_device_));
    }
    hw = own_gpu_device_;
  }
  OrtKeyValuePairs* raw_meta = nullptr;
  g_ort->CreateKeyValuePairs(&raw_meta);
  std::unique_ptr<OrtKeyValuePairs, KeyValuePairsDeleter> meta(raw_meta);
  g_ort->AddKeyValuePair(meta.get(), "ortmlx.version", ORTMLX_VERSION);
  g_ort->AddKeyValuePair(meta.get(), "ortmlx.backend", "gpu");
  OrtEpDevice* dev = nullptr;
  ORTMLX_CHECK(g_ep_api->CreateEpDevice(this, hw, meta.get(), nullptr, &dev));
  ORTMLX_CHECK(g_ep_api->EpDevice_AddAllocatorInfo(dev, gpu_->device.get()));
  ORTMLX_CHECK(g_ep_api->EpDevice_AddAllocatorInfo(dev, gpu_->pinned.get()));
  ep_devices[(*num_ep_devices)++] = dev;
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
    auto* factory = static_cast<MlxEpFactory*>(self);
    if (factory->gpu_) {
      factory->add_gpu_device(devices, num_devices, ep_devices, max_ep_devices, num_ep_devices);
      return;
    }
    // Without GPU I/O, EP I/O stays in CPU memory and MLX's default device decides where compute
    // runs: the EP device sits on ORT's CPU hardware device.
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
    factory->refs_.fetch_add(1);
  });
}

void MlxEpFactory::ReleaseEpImpl(OrtEpFactory* self, OrtEp* ep) noexcept {
  delete static_cast<MlxEp*>(ep);
  static_cast<MlxEpFactory*>(self)->unref();
}

OrtStatus* MlxEpFactory::ValidateCompatibilityImpl(OrtEpFactory*, const OrtHardwareDevice* const*,
                                                   size_t, const char*,
                                                   OrtCompiledModelCompatibility* out) noexcept {
  *out = OrtCompiledModelCompatibility_EP_NOT_APPLICABLE;
  return nullptr;
}

OrtStatus* MlxEpFactory::CreateAllocatorImpl(OrtEpFactory* self, const OrtMemoryInfo* memory_info,
                                             const OrtKeyValuePairs*,
                                             OrtAllocator** allocator) noexcept {
  return guard("CreateAllocator", [&] {
    *allocator = nullptr;  // without GPU I/O, EP I/O lives in ORT's CPU memory
    const GpuMemoryInfos* gpu = static_cast<MlxEpFactory*>(self)->gpu();
    if (!gpu || !memory_info) return;
    // ORT asks for the memory infos registered on our OrtEpDevice: tell them apart by type.
    OrtMemoryInfoDeviceType type{};
    g_ort->MemoryInfoGetDeviceType(memory_info, &type);
    if (type == OrtMemoryInfoDeviceType_GPU) {
      const bool pinned =
          g_ort->MemoryInfoGetDeviceMemType(memory_info) == OrtDeviceMemoryType_HOST_ACCESSIBLE;
      *allocator = new GpuAllocator(pinned ? gpu->pinned.get() : gpu->device.get(), pinned);
      return;
    }
    throw OrtError(ORT_INVALID_ARGUMENT, "no allocator for this memory info");
  });
}

void MlxEpFactory::ReleaseAllocatorImpl(OrtEpFactory*, OrtAllocator* allocator) noexcept {
  delete static_cast<GpuAllocator*>(allocator);
}

OrtStatus* MlxEpFactory::CreateDataTransferImpl(OrtEpFactory* self,
                                                OrtDataTransferImpl** out) noexcept {
  return guard("CreateDataTransfer", [&] {
    *out = static_cast<MlxEpFactory*>(self)->gpu() ? new GpuDataTransfer() : nullptr;
  });
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
