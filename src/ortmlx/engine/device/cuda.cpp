// Device-resident I/O on MLX's CUDA backend (the CUDA flavour only; see device_memory.h).
#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <mlx/backend/cuda/allocator.h>
#include <mlx/backend/cuda/device.h>
#include <mlx/device.h>
#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "ortmlx/engine/device/block_cache.h"
#include "ortmlx/engine/device/device_memory.h"

namespace ortmlx::device {

namespace mx = mlx::core;

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(std::string("CUDA ") + what + " failed: " + cudaGetErrorString(err));
}

// One non-blocking stream for the EP's own copies; every copy is synchronous for its caller.
cudaStream_t copy_stream() {
  static cudaStream_t stream = [] {
    cudaStream_t s = nullptr;
    check(cudaSetDevice(gpu_ordinal()), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    return s;
  }();
  return stream;
}

// The device address of an evaluated MLX array (MLX's own gpu_ptr, which is not exported).
// Reading the buffer struct never migrates it, unlike array::data().
const void* device_address(const mx::array& a) {
  auto* buf = static_cast<const mx::cu::CudaBuffer*>(a.buffer().ptr());
  if (buf == nullptr || buf->data == nullptr) throw std::runtime_error("array has no buffer");
  return static_cast<const char*>(buf->data) + a.offset();  // offset() is in bytes
}

// Free device memory, counting what the default pool holds reserved but unused.
size_t pool_free_bytes() {
  size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  // MLX allocates from the device's default pool and keeps freed memory reserved there;
  // cudaMemGetInfo counts that memory as used although any allocation from the pool can reuse it.
  cudaMemPool_t pool = nullptr;
  std::uint64_t reserved = 0, used = 0;
  if (cudaDeviceGetDefaultMemPool(&pool, gpu_ordinal()) == cudaSuccess &&
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess &&
      cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess &&
      reserved > used)
    free_bytes += static_cast<size_t>(reserved - used);
  (void)cudaGetLastError();
  return free_bytes;
}

// Freed output blocks kept for the next run (block_cache.h says why). 512 MiB holds every output
// of the benchmarks' models (a GPT-2 decoder step's 24 present tensors at past 512: 37 MB); larger
// sets of outputs keep what fits. Never destroyed: freeing device memory from a static destructor
// could run after the CUDA runtime has shut down.
BlockCache& block_cache() {
  static auto* cache = new BlockCache(size_t{512} << 20);
  return *cache;
}

void free_now(void* p) {
  cudaStream_t s = copy_stream();
  (void)cudaFreeAsync(p, s);
  (void)cudaStreamSynchronize(s);
}

void free_kept_blocks() {
  for (void* p : block_cache().drain()) free_now(p);
}

void* allocate_from_pool(size_t bytes) {
  // Stream-ordered allocation from the device's default pool (shared with MLX), synchronised so
  // that the memory is usable from any stream when ORT gets it; freed memory stays in the pool.
  void* p = nullptr;
  cudaStream_t s = copy_stream();
  if (cudaMallocAsync(&p, bytes, s) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  if (cudaStreamSynchronize(s) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}

// MLX's CUDA stream for the default GPU stream: copies queued there are ordered with MLX's
// kernels without a host synchronisation.
cudaStream_t mlx_stream() {
  return mx::cu::get_command_encoder(mx::default_stream(mx::Device::gpu)).stream();
}

}  // namespace

bool gpu_io_available() {
  static const bool available = [] {
    try {
      return mx::is_available(mx::Device::gpu) && mx::default_device() == mx::Device::gpu;
    } catch (...) {
      return false;
    }
  }();
  return available;
}

int gpu_ordinal() {
  return 0;  // MLX's CUDA backend runs on device 0 of the visible devices
}

const char* gpu_name() {
  static const std::string name = [] {
    cudaDeviceProp prop{};
    return cudaGetDeviceProperties(&prop, gpu_ordinal()) == cudaSuccess ? std::string(prop.name)
                                                                        : std::string("CUDA");
  }();
  return name.c_str();
}

void* alloc_device(size_t bytes) {
  // Every block the EP hands out is freed only after the run that wrote it has synchronised
  // (copy_out waits), so a kept block has no GPU work pending when it is reused.
  const size_t size = BlockCache::rounded(bytes);
  if (void* p = block_cache().reuse(size)) return p;
  void* p = allocate_from_pool(size);
  if (p == nullptr) {  // the pool may be short by what the cache keeps
    free_kept_blocks();
    p = allocate_from_pool(size);
  }
  if (p != nullptr) block_cache().track(p, size);
  return p;
}

void free_device(void* p) {
  if (p == nullptr || block_cache().release(p)) return;
  free_now(p);
}

void* alloc_pinned(size_t bytes) {
  void* p = nullptr;
  if (cudaMallocHost(&p, bytes == 0 ? 1 : bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return p;
}

void free_pinned(void* p) {
  if (p != nullptr) (void)cudaFreeHost(p);
}

size_t device_free_bytes() {
  // The memory guard asks before an evaluation: kept output blocks go back to the pool when they
  // are more than an eighth of what is free, so MLX is never short by what the cache holds.
  size_t free_bytes = pool_free_bytes();
  const size_t kept = block_cache().kept_bytes();
  if (kept != 0 && free_bytes != 0 && kept > free_bytes / 8) {
    free_kept_blocks();
    free_bytes = pool_free_bytes();
  }
  return free_bytes;
}

void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  cudaStream_t s = copy_stream();
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s), "cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

mx::array new_device_array(const mx::Shape& shape, mx::Dtype dtype) {
  // MLX allocates kernel outputs in device memory: a fill materialised on the GPU gives an
  // MLX-owned device buffer of the right size (upload() overwrites it).
  return mx::full(shape, mx::array(0, dtype), mx::Device::gpu);
}

void upload(const std::vector<Upload>& uploads) {
  if (uploads.empty()) return;
  std::vector<mx::array> dsts;
  for (const auto& u : uploads) dsts.push_back(u.dst);
  // MLX encodes GPU work on the calling thread: once async_eval returns, each array has its
  // (stream-ordered) device buffer and the fills that made it are queued on MLX's stream; the
  // copies follow them there, and one wait covers both. The wait stays: MLX counts these arrays
  // as evaluated once their fills are done, so a translator that reads an input's values on the
  // host (a shape, a trip count) would not wait for a copy still in flight.
  mx::async_eval(dsts);
  cudaStream_t s = mlx_stream();
  for (const auto& u : uploads)
    check(cudaMemcpyAsync(const_cast<void*>(device_address(u.dst)), u.src, u.dst.nbytes(),
                          cudaMemcpyDefault, s),
          "cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

void to_device(const mx::array& a, void* dst) {
  copy_bytes(dst, device_address(a), a.nbytes());
}

void copy_out(const std::vector<CopyOut>& copies) {
  if (copies.empty()) return;
  // On MLX's stream: an output may be an input array whose upload copy is still queued there.
  cudaStream_t s = mlx_stream();
  for (const auto& c : copies)
    if (c.src.nbytes() != 0)
      check(cudaMemcpyAsync(c.dst, device_address(c.src), c.src.nbytes(), cudaMemcpyDefault, s),
            "cudaMemcpyAsync");
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

}  // namespace ortmlx::device
