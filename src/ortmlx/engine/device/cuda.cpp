// Device-resident I/O on MLX's CUDA backend (the CUDA flavour only; see device_memory.h).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
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
#include "ortmlx/engine/device/cuda_internal.h"
#include "ortmlx/engine/device/device_memory.h"

namespace ortmlx::device {

namespace mx = mlx::core;

namespace {

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

// Blocks of device_block() that MLX dropped, kept for the next request of the same size on MLX's
// stream: the EP's input buffers and its primitives' outputs and workspaces ask for the same
// sizes every run, and a stream-ordered allocation of a block the pool has just released costs
// the host several microseconds (up to ~12 us a call, measured on an H100). A block freed on that
// stream is reused on it, so the GPU work that used it is ordered before the next use; no wait.
// Never destroyed, like block_cache().
BlockCache& stream_block_cache() {
  static auto* cache = new BlockCache(size_t{512} << 20);
  return *cache;
}

void free_stream_blocks(cudaStream_t s) {
  for (void* p : stream_block_cache().drain()) (void)cudaFreeAsync(p, s);
  (void)cudaGetLastError();
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

// A buffer the EP allocated for MLX (device_block: inputs, its primitives' outputs) goes back to
// the pool when MLX drops it: from device memory, or from the unified memory MLX moved it to if
// host code read it (Buffer::raw_ptr copies the data there and frees the device block itself,
// stream-ordered).
void free_device_block(mx::allocator::Buffer b, cudaStream_t s) {
  auto* buf = static_cast<mx::cu::CudaBuffer*>(b.ptr());
  if (buf == nullptr) return;
  if (buf->device >= 0) {
    (void)cudaFreeAsync(buf->data, s);
  } else if (buf->data != nullptr) {
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, buf->data) == cudaSuccess &&
        attr.type == cudaMemoryTypeHost)
      (void)cudaFreeHost(buf->data);
    else
      (void)cudaFree(buf->data);
  }
  (void)cudaGetLastError();
  delete buf;
}

// ONNXRUNTIME_EP_MLX_DEVICE_COPY=legacy (read once): each device input is a GPU fill evaluated to
// get an MLX-owned buffer, and every copy is its own call: the path measured on the H200 before
// the default (pool blocks, batched copies) replaced it; kept for comparisons and as a fallback.
bool legacy_device_copy() {
  static const bool legacy = [] {
    const char* e = std::getenv("ONNXRUNTIME_EP_MLX_DEVICE_COPY");
    return e != nullptr && std::string(e) == "legacy";
  }();
  return legacy;
}

}  // namespace

void check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();  // a later launch's error check must not see this one
  throw std::runtime_error(std::string("CUDA ") + what + " failed: " + cudaGetErrorString(err));
}

// MLX's CUDA stream for the default GPU stream: copies queued there are ordered with MLX's
// kernels without a host synchronisation.
cudaStream_t mlx_stream() {
  return mx::cu::get_command_encoder(mx::default_stream(mx::Device::gpu)).stream();
}

// Queues plain copies on `s`: one cudaMemcpyBatchAsync call (a host call costs ~5-10 us, and a
// decoder step moves 49 tensors), or one cudaMemcpyAsync each where the driver refuses the batch.
void queue_copies(std::vector<void*>& dsts, std::vector<const void*>& srcs,
                  std::vector<size_t>& sizes, cudaStream_t s) {
  static std::atomic<bool> batch_works{!legacy_device_copy()};
  if (dsts.size() > 1 && batch_works.load(std::memory_order_relaxed)) {
    cudaMemcpyAttributes attr{};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    size_t first = 0;
    if (cudaMemcpyBatchAsync(dsts.data(), srcs.data(), sizes.data(), dsts.size(), &attr, &first, 1,
                             s) == cudaSuccess)
      return;
    (void)cudaGetLastError();
    batch_works.store(false, std::memory_order_relaxed);  // copies queued again below: same bytes
  }
  for (size_t i = 0; i < dsts.size(); ++i)
    check(cudaMemcpyAsync(dsts[i], srcs[i], sizes[i], cudaMemcpyDefault, s), "cudaMemcpyAsync");
}

// MLX's own gpu_ptr, which is not exported. Reading the buffer struct never migrates the buffer,
// unlike array::data().
const void* device_address(const mx::array& a) {
  auto* buf = static_cast<const mx::cu::CudaBuffer*>(a.buffer().ptr());
  if (buf == nullptr || buf->data == nullptr) throw std::runtime_error("array has no buffer");
  return static_cast<const char*>(buf->data) + a.offset();  // offset() is in bytes
}

void* device_address(const mx::allocator::Data& block) {
  auto* buf = static_cast<mx::cu::CudaBuffer*>(block.buffer().ptr());
  return buf == nullptr ? nullptr : buf->data;
}

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
  const size_t kept = block_cache().kept_bytes() + stream_block_cache().kept_bytes();
  if (kept != 0 && free_bytes != 0 && kept > free_bytes / 8) {
    free_kept_blocks();
    free_stream_blocks(mlx_stream());
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
  // An MLX array over a block of the device's default pool (MLX's own kernels allocate from it),
  // taken in MLX's stream order: no kernel fills it first, and upload() overwrites all of it.
  size_t bytes = dtype.size();
  for (int d : shape) bytes *= static_cast<size_t>(d);
  if (bytes == 0) return mx::zeros(shape, dtype);
  if (legacy_device_copy()) return mx::full(shape, mx::array(0, dtype), mx::Device::gpu);
  return mx::array(device_block(bytes, mlx_stream()), shape, dtype);
}

namespace {
thread_local std::vector<void*>* capture_blocks = nullptr;

// Read at each capture: one process can A/B it (bench/gpu_peer.py --ab).
bool capture_allocs_in_graph() {
  const char* e = std::getenv("ONNXRUNTIME_EP_MLX_GRAPH_REPLAY_ALLOC");
  return e != nullptr && std::string(e) == "graph";
}
}  // namespace

void set_capture_blocks(std::vector<void*>* blocks) {
  capture_blocks = blocks;
}

mx::allocator::Data device_block(size_t bytes, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  const bool cached = s == mlx_stream();  // reuse is ordered on that stream only
  const size_t size = BlockCache::rounded(bytes);
  void* p = cached ? stream_block_cache().reuse(size) : nullptr;
  if (p == nullptr && capture_blocks != nullptr) {
    // The captured run's own memory (set_capture_blocks): no retry after freeing kept blocks,
    // which would queue frees into the graph. By default a plain pool block taken outside the
    // capture (on the copy stream, waited for): an allocation on the capturing stream becomes a
    // memory node of the graph, which, instantiated to free on launch, allocates again at every
    // launch. ONNXRUNTIME_EP_MLX_GRAPH_REPLAY_ALLOC=graph keeps those memory nodes (A/B).
    if (capture_allocs_in_graph()) {
      check(cudaMallocAsync(&p, size, s), "cudaMallocAsync");
    } else {
      p = allocate_from_pool(size);
      if (p == nullptr) throw std::runtime_error("graph capture: no device memory for a block");
    }
    capture_blocks->push_back(p);
    auto* buf = new mx::cu::CudaBuffer{p, bytes, gpu_ordinal()};
    return mx::allocator::Data(mx::allocator::Buffer(buf), [s, p](mx::allocator::Buffer b) {
      auto* dropped = static_cast<mx::cu::CudaBuffer*>(b.ptr());
      if (dropped != nullptr && dropped->device >= 0 && dropped->data == p)
        delete dropped;  // the captured run frees the block
      else
        free_device_block(b, s);  // moved to unified memory by MLX, which freed the block
    });
  }
  if (p == nullptr) {
    if (cudaMallocAsync(&p, size, s) != cudaSuccess) {  // the pool may be short by what is kept
      (void)cudaGetLastError();
      free_stream_blocks(s);
      check(cudaMallocAsync(&p, size, s), "cudaMallocAsync");
    }
    if (cached) stream_block_cache().track(p, size);
  }
  auto* buf = new mx::cu::CudaBuffer{p, bytes, gpu_ordinal()};
  return mx::allocator::Data(mx::allocator::Buffer(buf), [s, cached, p](mx::allocator::Buffer b) {
    auto* dropped = static_cast<mx::cu::CudaBuffer*>(b.ptr());
    if (cached && dropped != nullptr) {
      // Still our device block: kept when there is room. Moved to unified memory by MLX (host
      // code read it; MLX freed the block itself): the cache forgets it.
      if (dropped->device >= 0 && dropped->data == p) {
        if (stream_block_cache().release(p)) {
          delete dropped;
          return;
        }
      } else {
        stream_block_cache().forget(p);
      }
    }
    free_device_block(b, s);
  });
}

namespace {
thread_local bool uploads_pending = false;  // upload(wait = false) left copies unwaited
}  // namespace

void wait_uploads() {
  if (!uploads_pending) return;
  uploads_pending = false;
  check(cudaStreamSynchronize(mlx_stream()), "cudaStreamSynchronize");
}

void upload(const std::vector<Upload>& uploads, bool wait) {
  if (uploads.empty()) return;
  // On MLX's stream, after the allocations. The wait stays: a translator that reads an input's
  // values on the host (a shape, a trip count) must not see a copy still in flight.
  if (legacy_device_copy()) {  // the fills must have their buffers before the copies
    std::vector<mx::array> fills;
    for (const auto& u : uploads) fills.push_back(u.dst);
    mx::async_eval(fills);
  }
  std::vector<void*> dsts;
  std::vector<const void*> srcs;
  std::vector<size_t> sizes;
  for (const auto& u : uploads) {
    dsts.push_back(const_cast<void*>(device_address(u.dst)));
    srcs.push_back(u.src);
    sizes.push_back(u.dst.nbytes());
  }
  cudaStream_t s = mlx_stream();
  queue_copies(dsts, srcs, sizes, s);
  uploads_pending = !wait;
  if (wait) check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

void to_device(const mx::array& a, void* dst) {
  copy_bytes(dst, device_address(a), a.nbytes());
}

void copy_out(const std::vector<CopyOut>& copies) {
  if (copies.empty()) return;
  // On MLX's stream: an output may be an input array whose upload copy is still queued there.
  std::vector<void*> dsts;
  std::vector<const void*> srcs;
  std::vector<size_t> sizes;
  cudaStream_t s = mlx_stream();
  for (const auto& c : copies) {
    if (c.src.nbytes() == 0) continue;
    if (c.to_host) {  // pageable host memory: not part of the batch
      check(cudaMemcpyAsync(c.dst, device_address(c.src), c.src.nbytes(), cudaMemcpyDefault, s),
            "cudaMemcpyAsync");
      continue;
    }
    dsts.push_back(c.dst);
    srcs.push_back(device_address(c.src));
    sizes.push_back(c.src.nbytes());
  }
  if (!dsts.empty()) queue_copies(dsts, srcs, sizes, s);
  check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
}

}  // namespace ortmlx::device
