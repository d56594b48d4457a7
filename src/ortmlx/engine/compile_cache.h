// Shape-keyed compiled functions of one fused node, in a bounded LRU.
//
// MLX's compile cache is keyed by a function id. We give every (fused node, shape key) its own
// CompiledFn whose id is the CompiledFn's address, so that
//   - each entry traces and compiles once, for exactly one input signature (shape-keyed: never
//     shapeless, as custom-kernel ops require), and
//   - dropping the entry from the LRU erases MLX's cache entry for that id (compile_erase), which
//     frees the traced tape; memory stays bounded by the LRU size.
// MLX 0.32 compile caches are thread-local: entries are created, called and destroyed on the MLX
// thread (engine/mlx_thread.h); the erase goes to the cache of the thread that traced.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <mlx/array.h>
#include <mlx/compile_impl.h>

#include "ortmlx/engine/translation_context.h"

namespace ortmlx {

using ArrayFn = std::function<std::vector<mlx::core::array>(const std::vector<mlx::core::array>&)>;

// Dtypes and shapes of the live inputs, e.g. "float32[2,8];int64[]". Empty for no inputs.
std::string shape_key(const std::vector<mlx::core::array>& inputs);

class CompiledFn {
 public:
  // `body` receives the CompiledFn so that the trace can record its path marks.
  using Body = std::function<std::vector<mlx::core::array>(const std::vector<mlx::core::array>&,
                                                           CompiledFn&)>;
  // fuse: let MLX generate fused kernels when it traces this function (CompileMode::enabled);
  // otherwise it compiles with CompileMode::no_fuse (graph simplification and replay only).
  explicit CompiledFn(Body body, bool fuse = true);
  ~CompiledFn();
  CompiledFn(const CompiledFn&) = delete;
  CompiledFn& operator=(const CompiledFn&) = delete;

  // Calls the compiled function (tracing and compiling on its first call). Outputs unevaluated.
  std::vector<mlx::core::array> operator()(const std::vector<mlx::core::array>& inputs);

  std::uintptr_t id() const { return reinterpret_cast<std::uintptr_t>(this); }
  size_t traces() const { return traces_; }  // times MLX traced the body
  const std::vector<TranslationContext::PathMark>& marks() const { return marks_; }
  void set_marks(std::vector<TranslationContext::PathMark> marks) { marks_ = std::move(marks); }
  // The runtime checks of the last trace: when there are any, the function's last output holds
  // one bool per check (TranslationContext::require).
  const std::vector<TranslationContext::Check>& checks() const { return checks_; }
  void set_checks(std::vector<TranslationContext::Check> checks) { checks_ = std::move(checks); }

 private:
  Body body_;
  bool fuse_;
  ArrayFn compiled_;
  size_t traces_ = 0;
  bool called_ = false;
  std::vector<TranslationContext::PathMark> marks_;
  std::vector<TranslationContext::Check> checks_;
  mlx::core::detail::CompileCacheWeakPtr mlx_cache_;  // the MLX cache that holds our entry
};

// LRU of CompiledFn by shape key. Not thread-safe: used on the MLX thread only.
class CompileCache {
 public:
  explicit CompileCache(size_t capacity) : capacity_(capacity ? capacity : 1) {}

  // The entry for `key` (marked most recently used), or nullptr.
  CompiledFn* find(const std::string& key);
  // Inserts (replacing any entry of that key) and evicts least recently used entries beyond the
  // capacity. Returns the new entry.
  CompiledFn* insert(const std::string& key, std::unique_ptr<CompiledFn> fn);
  void erase(const std::string& key);
  void clear();

  size_t size() const { return items_.size(); }
  size_t capacity() const { return capacity_; }
  size_t evictions() const { return evictions_; }
  // Keys from most to least recently used (tests).
  std::vector<std::string> keys() const;

 private:
  using Item = std::pair<std::string, std::unique_ptr<CompiledFn>>;
  size_t capacity_;
  size_t evictions_ = 0;
  std::list<Item> items_;  // front = most recently used
  std::unordered_map<std::string, std::list<Item>::iterator> index_;
};

}  // namespace ortmlx
