// The MLX thread: every piece of EP work that touches MLX (constant upload at Compile, each
// Compute, executor teardown) runs on ONE process-wide thread.
//
// Why: MLX 0.32 keeps its compile cache, its tracing state and each thread's default stream in
// thread-local storage. If Compute ran on whichever thread ORT calls it from, every caller
// thread would retrace and recompile each plan into its own cache (which we could not erase from
// another thread), create its own MLX stream (on CPU: its own scheduler thread, never freed),
// and Metal/CUDA command queues would be used from many threads. One thread gives one compile
// cache, one stream and serialised MLX work; callers block until their job is done.
// See docs/ENGINE.md for the concurrency contract.
//
// Hand-offs spin briefly before they sleep: a condition-variable wake-up costs a futex call on
// each side and a trip through the kernel's scheduler, which is a large share of a small
// subgraph's run (ORT's own thread pool spins for the same reason). ONNXRUNTIME_EP_MLX_SPIN_US
// (default 50, read once; 0 = never spin) bounds the spin of each side.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>

namespace ortmlx {

class MlxThread {
 public:
  // The process-wide instance, started on first use and never stopped (see mlx_thread.cpp).
  static MlxThread& get();

  // Runs `f` on the MLX thread and returns its result; exceptions propagate to the caller.
  // Called on the MLX thread itself, runs `f` inline (no deadlock on re-entry).
  template <typename F>
  auto run(F&& f) -> std::invoke_result_t<F&> {
    using R = std::invoke_result_t<F&>;
    if constexpr (std::is_void_v<R>) {
      Job job{[&] { f(); }, nullptr};
      execute(job);
    } else {
      std::optional<R> result;
      Job job{[&] { result.emplace(f()); }, nullptr};
      execute(job);
      return std::move(*result);
    }
  }

  bool on_thread() const { return std::this_thread::get_id() == id_; }
  // Jobs run so far (diagnostics and tests).
  size_t jobs_run() const;

  MlxThread(const MlxThread&) = delete;
  MlxThread& operator=(const MlxThread&) = delete;

 private:
  struct Job {
    std::function<void()> fn;
    std::exception_ptr error;
    std::atomic<bool> done{false};
  };

  MlxThread();
  void execute(Job& job);
  void loop();

  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<Job*> queue_;
  std::atomic<size_t> queued_{0};  // queue_.size(), readable without the lock while spinning
  size_t jobs_run_ = 0;
  std::thread::id id_;
};

}  // namespace ortmlx
