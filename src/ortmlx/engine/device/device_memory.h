// GPU memory for the EP's device-resident I/O: what the plugin's ORT allocators and data
// transfer (src/ortmlx/plugin/device_io.*) call, and how Compute moves device tensors in and out
// of MLX. Backend-specific: device/cuda.cpp in the CUDA flavour, device/none.cpp elsewhere (every
// call but gpu_io_available() then throws).
//
// Why copies and not zero-copy wrapping: MLX 0.32's CUDA allocator moves a buffer to unified
// memory (and frees the device memory) whenever host code touches it (Buffer::raw_ptr), so an
// MLX array wrapping ORT's buffer could free memory that ORT still owns. Each device input is
// copied once device-to-device into an MLX-owned buffer, and each output is copied once into
// ORT's buffer: ~4 TB/s on an H200, measured in the trace ("mlx.copy" spans).
#pragma once

#include <cstddef>
#include <vector>

#include <mlx/array.h>

namespace ortmlx::device {

// PCI vendor id of the GPU the EP's OrtEpDevice sits on (NVIDIA in the CUDA flavour).
inline constexpr unsigned kNvidiaVendorId = 0x10DE;

// True when this build can keep EP I/O on a GPU and MLX's default device is that GPU.
bool gpu_io_available();
// The CUDA device ordinal MLX runs on (0), and its name for diagnostics ("" when none).
int gpu_ordinal();
const char* gpu_name();

// Device memory for ORT's DEFAULT allocator (freed blocks are kept for the next run's outputs:
// block_cache.h); pinned host memory for its HOST_ACCESSIBLE one. Allocation failure returns
// nullptr (ORT reports it); free(nullptr) is a no-op.
void* alloc_device(size_t bytes);
void free_device(void* p);
void* alloc_pinned(size_t bytes);
void free_pinned(void* p);

// Device memory that a new allocation could still get: free memory plus what the default memory
// pool (MLX's and ours) holds reserved but unused. 0 = unknown (no GPU backend). For the memory
// guard (engine/executor.h), which adds MLX's own cache.
size_t device_free_bytes();

// Synchronous copy between any two of host, pinned and device memory (the data transfer).
void copy_bytes(void* dst, const void* src, size_t bytes);

// Device inputs in two steps, so that a Compute with several inputs copies them with one call and
// one wait: new_device_array() returns an MLX array over an uninitialised device block (taken
// from the default pool in MLX's stream order; no kernel runs); upload() copies each source into
// its array on MLX's own stream, batched, and waits once. With `wait` false it leaves the wait to
// wait_uploads(), which a run calls before anything may read an input on the host (a graph
// replay reads nothing there: its launch is queued behind the copies on the same stream).
struct Upload {
  mlx::core::array dst;
  const void* src;  // device pointer, dst.nbytes() bytes
};
mlx::core::array new_device_array(const mlx::core::Shape& shape, mlx::core::Dtype dtype);
// The buffer behind new_device_array, for the EP's own MLX primitives (their outputs and
// workspaces): `bytes` from the default pool, taken in the order of the CUDA stream `stream`
// (a cudaStream_t) and given back in that order when MLX drops the buffer.
mlx::core::allocator::Data device_block(size_t bytes, void* stream);
// The device address of an evaluated MLX array's data, and of a block from device_block.
const void* device_address(const mlx::core::array& a);
void* device_address(const mlx::core::allocator::Data& block);
void upload(const std::vector<Upload>& uploads, bool wait = true);
void wait_uploads();
// Copies an evaluated, row-contiguous array into device memory at `dst` (a.nbytes() bytes).
void to_device(const mlx::core::array& a, void* dst);
// Several such copies (a Compute's device outputs), queued as one batch, with one synchronisation.
struct CopyOut {
  mlx::core::array src;
  void* dst;             // device memory, src.nbytes() bytes
  bool to_host = false;  // dst is host memory instead (copied on its own, in the same wait)
};
void copy_out(const std::vector<CopyOut>& copies);

}  // namespace ortmlx::device

namespace ortmlx::device {

// MLX runs fp32 matmuls in TF32 on CUDA unless MLX_ENABLE_TF32=0 is set before its first matmul,
// and reads the variable once per process. Called when the library is loaded (CreateEpFactories):
// exact fp32 unless ONNXRUNTIME_EP_MLX_TF32 opts in; an explicit MLX_ENABLE_TF32 is respected.
void init_precision_mode();
// The process-wide mode decided by init_precision_mode().
bool tf32_enabled();
// MLX's CUDA backend batches kernel launches into CUDA graphs unless MLX_USE_CUDA_GRAPHS=0, read
// once per process. Called with init_precision_mode: off unless ONNXRUNTIME_EP_MLX_CUDA_GRAPHS
// opts in (an explicit MLX_USE_CUDA_GRAPHS is respected); see backend.cpp for why.
void init_launch_mode();
bool cuda_graphs_enabled();
// MLX's default device: "gpu" (CUDA or Metal) or "cpu".
const char* mlx_backend();

}  // namespace ortmlx::device
