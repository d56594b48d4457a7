// OrtEpFactory for MLXExecutionProvider. One factory per loaded library, shared by all sessions.
#pragma once

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "ortmlx/plugin/device_io.h"
#include "ortmlx/plugin/ort_api.h"

namespace ortmlx::plugin {

inline constexpr const char* kEpName = "MLXExecutionProvider";
inline constexpr const char* kVendor = "ortmlx";

class MlxEpFactory : public OrtEpFactory {
 public:
  MlxEpFactory(const char* registered_name, const OrtLogger* default_logger);
  ~MlxEpFactory();

  const std::string& registered_name() const { return registered_name_; }
  // Set when EP I/O lives on the GPU (CUDA flavour with a usable GPU): the EP's OrtEpDevice is
  // then that GPU, with device and pinned allocators and a data transfer.
  const GpuMemoryInfos* gpu() const { return gpu_ ? &*gpu_ : nullptr; }

  // ORT's ReleaseEpFactory. ORT forbids unregistering the library while a session still holds
  // one of its EPs, but a host process can do it; a crash there is worse than keeping the
  // factory alive: ORT's handle and every live EP hold a reference, and the last one deletes the
  // factory (the library is linked with -z nodelete, so its code also stays mapped).
  static void release_by_ort(MlxEpFactory* factory) { factory->unref(); }

 private:
  void unref() {
    if (refs_.fetch_sub(1) == 1) delete this;
  }

  static const char* ORT_API_CALL GetNameImpl(const OrtEpFactory* self) noexcept;
  static const char* ORT_API_CALL GetVendorImpl(const OrtEpFactory* self) noexcept;
  static uint32_t ORT_API_CALL GetVendorIdImpl(const OrtEpFactory* self) noexcept;
  static const char* ORT_API_CALL GetVersionImpl(const OrtEpFactory* self) noexcept;
  static OrtStatus* ORT_API_CALL GetSupportedDevicesImpl(
      OrtEpFactory* self, const OrtHardwareDevice* const* devices, size_t num_devices,
      OrtEpDevice** ep_devices, size_t max_ep_devices, size_t* num_ep_devices) noexcept;
  static OrtStatus* ORT_API_CALL CreateEpImpl(OrtEpFactory* self,
                                              const OrtHardwareDevice* const* devices,
                                              const OrtKeyValuePairs* const* ep_metadata,
                                              size_t num_devices,
                                              const OrtSessionOptions* session_options,
                                              const OrtLogger* logger, OrtEp** ep) noexcept;
  static void ORT_API_CALL ReleaseEpImpl(OrtEpFactory* self, OrtEp* ep) noexcept;
  static OrtStatus* ORT_API_CALL ValidateCompatibilityImpl(
      OrtEpFactory* self, const OrtHardwareDevice* const* devices, size_t num_devices,
      const char* compatibility_info, OrtCompiledModelCompatibility* out) noexcept;
  static OrtStatus* ORT_API_CALL CreateAllocatorImpl(OrtEpFactory* self,
                                                     const OrtMemoryInfo* memory_info,
                                                     const OrtKeyValuePairs* options,
                                                     OrtAllocator** allocator) noexcept;
  static void ORT_API_CALL ReleaseAllocatorImpl(OrtEpFactory* self,
                                                OrtAllocator* allocator) noexcept;
  static OrtStatus* ORT_API_CALL CreateDataTransferImpl(OrtEpFactory* self,
                                                        OrtDataTransferImpl** out) noexcept;
  static bool ORT_API_CALL IsStreamAwareImpl(const OrtEpFactory* self) noexcept;
  static OrtStatus* ORT_API_CALL CreateSyncStreamImpl(OrtEpFactory* self,
                                                      const OrtMemoryDevice* memory_device,
                                                      const OrtKeyValuePairs* options,
                                                      OrtSyncStreamImpl** stream) noexcept;
  static OrtStatus* ORT_API_CALL GetNumCustomOpDomainsImpl(OrtEpFactory* self,
                                                           size_t* num) noexcept;
  static OrtStatus* ORT_API_CALL GetCustomOpDomainsImpl(OrtEpFactory* self,
                                                        OrtCustomOpDomain** domains,
                                                        size_t num) noexcept;

  // Adds the GPU OrtEpDevice (ORT's NVIDIA hardware device, or one the EP creates).
  void add_gpu_device(const OrtHardwareDevice* const* devices, size_t num_devices,
                      OrtEpDevice** ep_devices, size_t max_ep_devices, size_t* num_ep_devices);

  std::string registered_name_;
  const OrtLogger* default_logger_;
  std::optional<GpuMemoryInfos> gpu_;
  OrtHardwareDevice* own_gpu_device_ = nullptr;  // created by the EP when ORT lists no GPU
  std::atomic<size_t> refs_{1};                  // ORT's handle + live EPs (release_by_ort)
};

}  // namespace ortmlx::plugin
