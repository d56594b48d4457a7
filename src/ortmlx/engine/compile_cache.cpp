#include "ortmlx/engine/compile_cache.h"

#include <cstdlib>

#include <mlx/compile.h>

#include "ortmlx/engine/dtype.h"

namespace ortmlx {

namespace mx = mlx::core;

std::string shape_key(const std::vector<mx::array>& inputs) {
  std::string key;
  key.reserve(inputs.size() * 16);
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (i) key += ';';
    const mx::array& a = inputs[i];
    key += elem_type_name(from_mlx_dtype(a.dtype()));
    key += '[';
    for (size_t d = 0; d < a.ndim(); ++d) {
      if (d) key += ',';
      key += std::to_string(a.shape(static_cast<int>(d)));
    }
    key += ']';
  }
  return key;
}

namespace {

// MLX's compile mode is process-global and read when a function is traced. Compiled functions
// run on the MLX thread only, so switching it around our own calls is safe from our side (a
// second MLX user compiling in the same process at that instant would see it: documented).
// MLX_DISABLE_COMPILE is respected: then the mode is never touched.
class CompileModeScope {
 public:
  explicit CompileModeScope(bool fuse) : active_(!fuse && !std::getenv("MLX_DISABLE_COMPILE")) {
    if (active_) mx::set_compile_mode(mx::CompileMode::no_fuse);
  }
  ~CompileModeScope() {
    if (active_) mx::set_compile_mode(mx::CompileMode::enabled);
  }
  CompileModeScope(const CompileModeScope&) = delete;
  CompileModeScope& operator=(const CompileModeScope&) = delete;

 private:
  bool active_;
};

}  // namespace

CompiledFn::CompiledFn(Body body, bool fuse) : body_(std::move(body)), fuse_(fuse) {
  // The traced function counts its traces: on a cache hit a trace means MLX recompiled.
  ArrayFn traced = [this](const std::vector<mx::array>& inputs) {
    ++traces_;
    return body_(inputs, *this);
  };
  // shapeless = false: one entry per exact input signature (shape-keyed).
  compiled_ = mx::detail::compile(std::move(traced), id(), /*shapeless=*/false);
}

CompiledFn::~CompiledFn() {
  // Drop MLX's cache entry (traced tape, fused kernels' graph) for our id. Only when we were
  // called: otherwise MLX holds nothing for this id.
  if (called_) {
    try {
      mx::detail::compile_erase(mlx_cache_, id());
    } catch (...) {
      // destructors never throw; a leaked cache entry is the worst outcome
    }
  }
}

std::vector<mx::array> CompiledFn::operator()(const std::vector<mx::array>& inputs) {
  if (!called_) {
    mlx_cache_ = mx::detail::compile_cache();
    called_ = true;
  }
  CompileModeScope mode(fuse_);
  return compiled_(inputs);
}

CompiledFn* CompileCache::find(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return nullptr;
  items_.splice(items_.begin(), items_, it->second);
  return it->second->second.get();
}

CompiledFn* CompileCache::insert(const std::string& key, std::unique_ptr<CompiledFn> fn) {
  erase(key);
  items_.emplace_front(key, std::move(fn));
  index_[key] = items_.begin();
  while (items_.size() > capacity_) {
    index_.erase(items_.back().first);
    items_.pop_back();  // ~CompiledFn erases MLX's entry
    ++evictions_;
  }
  return items_.front().second.get();
}

void CompileCache::erase(const std::string& key) {
  auto it = index_.find(key);
  if (it == index_.end()) return;
  items_.erase(it->second);
  index_.erase(it);
}

void CompileCache::clear() {
  index_.clear();
  items_.clear();
}

std::vector<std::string> CompileCache::keys() const {
  std::vector<std::string> out;
  for (const auto& item : items_) out.push_back(item.first);
  return out;
}

}  // namespace ortmlx
