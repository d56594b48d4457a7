// Freed device blocks kept for reuse by the EP's device allocator (device/cuda.cpp).
//
// By default ORT wraps a plugin EP's device allocator in no arena: with device-resident outputs it
// allocates every output of every run through alloc_device and frees it after the run. Each fresh
// block costs a stream-ordered allocation and a stream synchronisation (each free another): a
// fixed cost per output and run (a GPT-2 decoder step has 25 outputs), not yet timed apart. A run
// of a session asks for the same sizes as the run before, so blocks freed by one run serve the next
// without a CUDA call, as ORT's own CUDA EP gets from its arena.
//
// Sizes are rounded up to kGranule so that blocks of nearly equal size are shared; at most
// `capacity` bytes are kept (a block that does not fit goes back to the caller to free), and
// drain() hands every kept block back (memory pressure, a failed allocation). Thread-safe: ORT may
// allocate from several sessions' threads at once. No CUDA here, so the logic is unit-tested on
// every flavour (tests/cpp/block_cache_test.cpp).
#pragma once
#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace ortmlx::device {

class BlockCache {
 public:
  static constexpr size_t kGranule = 512;

  explicit BlockCache(size_t capacity) : capacity_(capacity) {}
  BlockCache(const BlockCache&) = delete;
  BlockCache& operator=(const BlockCache&) = delete;

  // The size a request of `bytes` is served with (and allocated at, on a miss).
  static size_t rounded(size_t bytes) {
    const size_t b = bytes == 0 ? 1 : bytes;
    return (b + kGranule - 1) / kGranule * kGranule;
  }

  // A kept block of rounded size `size`, now live; nullptr when none is kept.
  void* reuse(size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = kept_.find(size);
    if (it == kept_.end() || it->second.empty()) return nullptr;
    void* p = it->second.back();
    it->second.pop_back();
    kept_bytes_ -= size;
    live_[p] = size;
    return p;
  }

  // A block the caller has just allocated at rounded size `size`, now live.
  void track(void* p, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    live_[p] = size;
  }

  // The user is done with p: true when it is kept for reuse; false when the caller must free it
  // (the cache is full, or p is not a live block of this cache).
  bool release(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) return false;
    const size_t size = it->second;
    live_.erase(it);
    if (kept_bytes_ + size > capacity_) return false;
    kept_[size].push_back(p);
    kept_bytes_ += size;
    return true;
  }

  // p is no longer the caller's to release (its memory went elsewhere): neither kept nor live.
  void forget(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.erase(p);
  }

  // Every kept block, no longer kept, for the caller to free.
  std::vector<void*> drain() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<void*> out;
    for (auto& [size, blocks] : kept_) out.insert(out.end(), blocks.begin(), blocks.end());
    kept_.clear();
    kept_bytes_ = 0;
    return out;
  }

  size_t kept_bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return kept_bytes_;
  }

 private:
  mutable std::mutex mu_;
  const size_t capacity_;
  size_t kept_bytes_ = 0;
  std::unordered_map<size_t, std::vector<void*>> kept_;  // rounded size -> free blocks
  std::unordered_map<void*, size_t> live_;               // handed out -> rounded size
};

}  // namespace ortmlx::device
