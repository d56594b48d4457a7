// Device-resident I/O for GPU backends: the ORT-facing allocators (device memory for DEFAULT,
// pinned host memory for HOST_ACCESSIBLE) and the OrtDataTransferImpl that ORT uses to move
// tensors between host and the EP's GPU (session inputs/outputs, IOBinding, and the copies it
// inserts between EP and CPU-EP nodes). The memory itself comes from engine/device.
#pragma once

#include <memory>

#include "ortmlx/plugin/ort_api.h"

namespace ortmlx::plugin {

struct MemoryInfoDeleter {
  void operator()(OrtMemoryInfo* p) const { g_ort->ReleaseMemoryInfo(p); }
};
using MemoryInfoPtr = std::unique_ptr<OrtMemoryInfo, MemoryInfoDeleter>;

// The two memory infos the EP's GPU OrtEpDevice registers (created once per factory).
struct GpuMemoryInfos {
  MemoryInfoPtr device;  // OrtDeviceMemoryType_DEFAULT on the GPU
  MemoryInfoPtr pinned;  // OrtDeviceMemoryType_HOST_ACCESSIBLE (pinned host memory)
  static GpuMemoryInfos create();
};

// An OrtAllocator over engine/device memory; `pinned` selects host-accessible memory.
class GpuAllocator : public OrtAllocator {
 public:
  GpuAllocator(const OrtMemoryInfo* info, bool pinned);

 private:
  static void* ORT_API_CALL AllocImpl(OrtAllocator* self, size_t size) noexcept;
  static void ORT_API_CALL FreeImpl(OrtAllocator* self, void* p) noexcept;
  static const OrtMemoryInfo* ORT_API_CALL InfoImpl(const OrtAllocator* self) noexcept;

  const OrtMemoryInfo* info_;  // owned by the factory, which outlives its allocators
  bool pinned_;
};

// Copies between host memory and the EP's GPU (both directions) and within the GPU.
class GpuDataTransfer : public OrtDataTransferImpl {
 public:
  GpuDataTransfer();

 private:
  static void ORT_API_CALL ReleaseImpl(OrtDataTransferImpl* self) noexcept;
  static bool ORT_API_CALL CanCopyImpl(const OrtDataTransferImpl* self, const OrtMemoryDevice* src,
                                       const OrtMemoryDevice* dst) noexcept;
  static OrtStatus* ORT_API_CALL CopyTensorsImpl(OrtDataTransferImpl* self,
                                                 const OrtValue** src_tensors,
                                                 OrtValue** dst_tensors, OrtSyncStream** streams,
                                                 size_t num_tensors) noexcept;
};

// True when `value` is a tensor in the EP's GPU device memory (not host or pinned memory).
bool on_gpu(const OrtValue* value);

}  // namespace ortmlx::plugin
