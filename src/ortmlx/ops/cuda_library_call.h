// What the ops' calls into NVIDIA's libraries (cuDNN's convolutions, cuBLASLt's products) share:
// the library's handle from the process, the timing of candidate algorithms, and the shapes a
// call failed on. CUDA flavour only.
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstdint>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace ortmlx::ops {

// The library MLX's CUDA backend already loaded (its functions are then looked up with dlsym: no
// link-time dependency of ours), else loaded here; nullptr when absent.
inline void* open_library(const char* soname) {
  void* lib = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
  return lib != nullptr ? lib : dlopen(soname, RTLD_NOW | RTLD_LOCAL);
}

// Declares `struct NAME` with a pointer per function of LIST (an X-macro: LIST(X) applies X to each
// function name) and `loaded`, and `const NAME& ACCESSOR()`: the functions looked up once in the
// library SONAME (open_library), `loaded` only when every one was found.
#define ORTMLX_LIBRARY_POINTER(name) decltype(&::name) name = nullptr;
#define ORTMLX_LIBRARY_LOOKUP(name)                                  \
  api.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, #name)); \
  all = all && api.name != nullptr;
#define ORTMLX_DECLARE_LIBRARY_API(NAME, ACCESSOR, LIST, SONAME) \
  struct NAME {                                                  \
    LIST(ORTMLX_LIBRARY_POINTER)                                 \
    bool loaded = false;                                         \
  };                                                             \
  const NAME& ACCESSOR() {                                       \
    static const NAME loaded_api = [] {                          \
      NAME api;                                                  \
      void* lib = ::ortmlx::ops::open_library(SONAME);           \
      if (lib == nullptr) return api;                            \
      bool all = true;                                           \
      LIST(ORTMLX_LIBRARY_LOOKUP)                                \
      api.loaded = all;                                          \
      return api;                                                \
    }();                                                         \
    return loaded_api;                                           \
  }

// Shapes a library call failed on in this process: later translations of them keep MLX's op, so
// the run that failed is retried (the executor's plain rerun translates again) and the session
// goes on. Translations ask from any thread.
class FailedShapes {
 public:
  bool contains(const std::vector<int64_t>& key) const {
    std::lock_guard lock(mutex_);
    return keys_.count(key) != 0;
  }
  void add(std::vector<int64_t> key) {
    std::lock_guard lock(mutex_);
    keys_.insert(std::move(key));
  }

 private:
  mutable std::mutex mutex_;
  std::set<std::vector<int64_t>> keys_;
};

// Two CUDA events timing candidates, destroyed with the scope (also on an exception).
struct TimingEvents {
  cudaEvent_t start = nullptr, stop = nullptr;
  explicit TimingEvents(const char* who) {
    if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
      (void)cudaGetLastError();
      release();
      throw std::runtime_error(std::string(who) + ": cudaEventCreate failed");
    }
  }
  TimingEvents(const TimingEvents&) = delete;
  TimingEvents& operator=(const TimingEvents&) = delete;
  ~TimingEvents() { release(); }

  // Milliseconds taken by `runs` calls of `run` on `stream` (each a bool: launched), after one
  // untimed call; a negative value when a call or the timing failed (the CUDA error is cleared).
  template <typename Run>
  float time(cudaStream_t stream, int runs, Run&& run) {
    bool ok = run() && cudaEventRecord(start, stream) == cudaSuccess;
    for (int k = 0; ok && k < runs; ++k) ok = run();
    float ms = 0.0f;
    ok = ok && cudaEventRecord(stop, stream) == cudaSuccess &&
         cudaEventSynchronize(stop) == cudaSuccess &&
         cudaEventElapsedTime(&ms, start, stop) == cudaSuccess;
    (void)cudaGetLastError();
    return ok ? ms : -1.0f;
  }

 private:
  void release() {
    if (start != nullptr) (void)cudaEventDestroy(start);
    if (stop != nullptr) (void)cudaEventDestroy(stop);
    start = stop = nullptr;
  }
};

}  // namespace ortmlx::ops
