#include "ortmlx/plugin/device_io.h"

#include <string>

#include "ortmlx/engine/device/device_memory.h"

namespace ortmlx::plugin {

namespace {

bool is_our_gpu(const OrtMemoryDevice* md) {
  return md != nullptr && g_ep_api->MemoryDevice_GetDeviceType(md) == OrtMemoryInfoDeviceType_GPU &&
         g_ep_api->MemoryDevice_GetVendorId(md) == device::kNvidiaVendorId;
}

bool is_host(const OrtMemoryDevice* md) {
  return md != nullptr && g_ep_api->MemoryDevice_GetDeviceType(md) == OrtMemoryInfoDeviceType_CPU;
}

}  // namespace

GpuMemoryInfos GpuMemoryInfos::create() {
  GpuMemoryInfos infos;
  const int ordinal = device::gpu_ordinal();
  OrtMemoryInfo* raw = nullptr;
  ORTMLX_CHECK(g_ort->CreateMemoryInfo_V2(
      "MLX_GPU", OrtMemoryInfoDeviceType_GPU, device::kNvidiaVendorId, ordinal,
      OrtDeviceMemoryType_DEFAULT, 0, OrtDeviceAllocator, &raw));
  infos.device.reset(raw);
  raw = nullptr;
  ORTMLX_CHECK(g_ort->CreateMemoryInfo_V2(
      "MLX_GPU_PINNED", OrtMemoryInfoDeviceType_GPU, device::kNvidiaVendorId, ordinal,
      OrtDeviceMemoryType_HOST_ACCESSIBLE, 0, OrtDeviceAllocator, &raw));
  infos.pinned.reset(raw);
  return infos;
}

GpuAllocator::GpuAllocator(const OrtMemoryInfo* info, bool pinned)
    : OrtAllocator{}, info_(info), pinned_(pinned) {
  version = ORT_API_VERSION;
  Alloc = AllocImpl;
  Free = FreeImpl;
  Info = InfoImpl;
}

// Allocation failure returns nullptr: ORT turns it into a "Failed to allocate memory" error.
void* GpuAllocator::AllocImpl(OrtAllocator* self, size_t size) noexcept {
  auto* a = static_cast<GpuAllocator*>(self);
  try {
    return a->pinned_ ? device::alloc_pinned(size) : device::alloc_device(size);
  } catch (...) {
    return nullptr;
  }
}

void GpuAllocator::FreeImpl(OrtAllocator* self, void* p) noexcept {
  auto* a = static_cast<GpuAllocator*>(self);
  try {
    a->pinned_ ? device::free_pinned(p) : device::free_device(p);
  } catch (...) {
    // freeing never throws across the ABI
  }
}

const OrtMemoryInfo* GpuAllocator::InfoImpl(const OrtAllocator* self) noexcept {
  return static_cast<const GpuAllocator*>(self)->info_;
}

GpuDataTransfer::GpuDataTransfer() : OrtDataTransferImpl{} {
  ort_version_supported = ORT_API_VERSION;
  Release = ReleaseImpl;
  CanCopy = CanCopyImpl;
  CopyTensors = CopyTensorsImpl;
}

void GpuDataTransfer::ReleaseImpl(OrtDataTransferImpl* self) noexcept {
  delete static_cast<GpuDataTransfer*>(self);
}

bool GpuDataTransfer::CanCopyImpl(const OrtDataTransferImpl*, const OrtMemoryDevice* src,
                                  const OrtMemoryDevice* dst) noexcept {
  return (is_our_gpu(src) && (is_our_gpu(dst) || is_host(dst))) ||
         (is_host(src) && is_our_gpu(dst));
}

OrtStatus* GpuDataTransfer::CopyTensorsImpl(OrtDataTransferImpl*, const OrtValue** src_tensors,
                                            OrtValue** dst_tensors, OrtSyncStream**,
                                            size_t num_tensors) noexcept {
  return guard("CopyTensors", [&] {
    for (size_t i = 0; i < num_tensors; ++i) {
      size_t src_bytes = 0, dst_bytes = 0;
      ORTMLX_CHECK(g_ort->GetTensorSizeInBytes(src_tensors[i], &src_bytes));
      ORTMLX_CHECK(g_ort->GetTensorSizeInBytes(dst_tensors[i], &dst_bytes));
      if (src_bytes != dst_bytes)
        throw OrtError(ORT_INVALID_ARGUMENT, "tensor copy between sizes " +
                                                 std::to_string(src_bytes) + " and " +
                                                 std::to_string(dst_bytes) + " bytes");
      if (src_bytes == 0) continue;
      const void* src = nullptr;
      void* dst = nullptr;
      ORTMLX_CHECK(g_ort->GetTensorData(src_tensors[i], &src));
      ORTMLX_CHECK(g_ort->GetTensorMutableData(dst_tensors[i], &dst));
      device::copy_bytes(dst, src, src_bytes);
    }
  });
}

bool on_gpu(const OrtValue* value) {
  const OrtMemoryDevice* md = g_ep_api->Value_GetMemoryDevice(value);
  return is_our_gpu(md) && g_ep_api->MemoryDevice_GetMemoryType(md) == OrtDeviceMemoryType_DEFAULT;
}

}  // namespace ortmlx::plugin
