#include "ortmlx/engine/mlx_thread.h"

#include <dlfcn.h>

#include <chrono>
#include <cstdlib>

#include <mlx/device.h>
#include <mlx/stream.h>

namespace ortmlx {

namespace {

// The MLX thread lives as long as the process. Should ORT unload the plugin library
// (UnregisterExecutionProviderLibrary), the thread would be left parked inside unmapped code; so
// the library that holds this code pins itself in memory once the thread exists.
void pin_this_library() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&pin_this_library), &info) == 0 || info.dli_fname == nullptr)
    return;
  // RTLD_NOLOAD: only takes a reference to the already loaded object; RTLD_NODELETE keeps it.
  if (void* handle = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD | RTLD_NODELETE)) {
    (void)handle;  // intentionally never dlclose'd
  }
}

// How long each side of a hand-off polls before it sleeps on its condition variable.
std::chrono::nanoseconds spin_budget() {
  static const std::chrono::nanoseconds budget = [] {
    long us = 50;
    if (const char* e = std::getenv("ONNXRUNTIME_EP_MLX_SPIN_US")) {
      char* end = nullptr;
      const long v = std::strtol(e, &end, 10);
      if (end != e && *end == '\0' && v >= 0 && v <= 100000) us = v;
    }
    return std::chrono::nanoseconds(us * 1000);
  }();
  return budget;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// Polls `ready` for up to the spin budget; true once it holds.
template <typename Pred>
bool spin_until(Pred ready) {
  const auto budget = spin_budget();
  if (budget.count() == 0) return ready();
  const auto deadline = std::chrono::steady_clock::now() + budget;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    cpu_relax();
    // The clock is read every 64 polls only: a poll is a few nanoseconds.
    if ((i & 63) == 63 && std::chrono::steady_clock::now() >= deadline) return ready();
  }
}

}  // namespace

MlxThread& MlxThread::get() {
  // Leaked on purpose: joining at static destruction would race with MLX's own static teardown
  // (the thread's MLX thread-locals would be destroyed after MLX's allocator).
  static MlxThread* instance = [] {
    pin_this_library();
    return new MlxThread();
  }();
  return *instance;
}

MlxThread::MlxThread() {
  std::thread t([this] { loop(); });
  id_ = t.get_id();
  t.detach();
}

size_t MlxThread::jobs_run() const {
  std::lock_guard<std::mutex> lock(mu_);
  return jobs_run_;
}

void MlxThread::execute(Job& job) {
  if (on_thread()) {
    job.fn();
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(&job);
    queued_.store(queue_.size(), std::memory_order_release);
  }
  work_cv_.notify_one();  // no system call while the MLX thread is spinning (no waiter)
  if (!spin_until([&] { return job.done.load(std::memory_order_acquire); })) {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [&] { return job.done.load(std::memory_order_acquire); });
  }
  if (job.error) std::rethrow_exception(job.error);
}

void MlxThread::loop() {
  // Create this thread's default MLX stream before any compiled function runs. MLX 0.32 keys
  // compile-cache entries by the default stream; an entry made by the thread's first call, when
  // the stream did not exist yet, never matches again (one needless retrace per function; found
  // by the cache.retrace counter and pinned by tests/cpp/engine_test.cpp).
  try {
    (void)mlx::core::default_stream(mlx::core::default_device());
  } catch (...) {
    // no device: the first job reports MLX's error
  }
  for (;;) {
    spin_until([&] { return queued_.load(std::memory_order_acquire) > 0; });
    std::unique_lock<std::mutex> lock(mu_);
    work_cv_.wait(lock, [&] { return !queue_.empty(); });
    Job* job = queue_.front();
    queue_.pop_front();
    queued_.store(queue_.size(), std::memory_order_release);
    lock.unlock();
    try {
      job->fn();
    } catch (...) {
      job->error = std::current_exception();
    }
    lock.lock();
    ++jobs_run_;
    // Set under the lock, so that a caller between its check and its wait cannot miss it; once
    // done is true the caller may return and destroy the job: nothing touches it after this.
    job->done.store(true, std::memory_order_release);
    lock.unlock();
    // Several callers may wait; each checks its own job's flag.
    done_cv_.notify_all();
  }
}

}  // namespace ortmlx
