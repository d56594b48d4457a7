#include "ortmlx/engine/mlx_thread.h"

#include <dlfcn.h>

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
  std::unique_lock<std::mutex> lock(mu_);
  queue_.push_back(&job);
  work_cv_.notify_one();
  done_cv_.wait(lock, [&] { return job.done; });
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
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return !queue_.empty(); });
    Job* job = queue_.front();
    queue_.pop_front();
    lock.unlock();
    try {
      job->fn();
    } catch (...) {
      job->error = std::current_exception();
    }
    lock.lock();
    job->done = true;
    ++jobs_run_;
    // Several callers may wait; each checks its own job's flag.
    done_cv_.notify_all();
  }
}

}  // namespace ortmlx
