// The memory guard's accounting: what evaluating a lazy MLX graph will allocate, measured
// without evaluating it, and what MLX can still get (docs/ENGINE.md, "Memory guard").
#include "ortmlx/engine/footprint.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>

#include <mlx/device.h>
#include <mlx/memory.h>
#include <mlx/primitives.h>

#include "ortmlx/engine/device/device_memory.h"
#include "ortmlx/engine/host_memory.h"

namespace ortmlx {

namespace mx = mlx::core;

namespace {

// Elements times item size of a shape, saturating at kUncountable. MLX's own count
// (array::size, array::nbytes) is a product that wraps: float32[2^30, 2^30, 4] would be 0 bytes
// and [2^30, 2^30, 2^30] 0 elements, so the guard would let a run through that MLX cannot address.
size_t shape_bytes(const mx::Shape& shape, size_t itemsize) {
  for (const int d : shape)
    if (d == 0) return 0;
  size_t bytes = itemsize;
  for (const int d : shape)
    if (d < 0 || __builtin_mul_overflow(bytes, static_cast<size_t>(d), &bytes)) return kUncountable;
  return bytes;
}

// Bytes an unevaluated array will take when evaluated. MLX evaluates these primitives as views of
// their input's buffer on every backend: a broadcast of a small input to a huge shape allocates
// nothing. Reshape-like ones are views when their input is row-contiguous; that is known only for
// an input with data (otherwise the input is walked and counted itself, and the copy, if any, is
// no larger). Any array whose size overflows 64 bits, a view included, counts kUncountable: MLX's
// kernels would index it with a wrapped count (a crash, or a wrong answer such as a sum of 0).
enum class ViewKind { kNone, kView, kReshape };

ViewKind view_kind(const mx::array& a) {
  if (!a.has_primitive()) return ViewKind::kNone;
  const char* name = a.primitive().name();
  static constexpr const char* kViews[] = {"Broadcast", "BroadcastAxes", "Transpose",
                                           "Slice",     "ExpandDims",    "Squeeze",
                                           "AsStrided", "StopGradient"};
  for (const char* v : kViews)
    if (std::strcmp(name, v) == 0) return ViewKind::kView;
  static constexpr const char* kReshapes[] = {"Reshape", "Flatten", "Unflatten", "Contiguous"};
  for (const char* v : kReshapes)
    if (std::strcmp(name, v) == 0) return ViewKind::kReshape;
  return ViewKind::kNone;
}

size_t allocated_bytes(const mx::array& a) {
  const size_t bytes = shape_bytes(a.shape(), a.itemsize());
  if (bytes == kUncountable) return bytes;
  switch (view_kind(a)) {
    case ViewKind::kView:
      return 0;
    case ViewKind::kReshape: {
      const auto& in = a.inputs();
      if (in.size() == 1 && in[0].status() != mx::array::Status::unscheduled &&
          in[0].flags().row_contiguous)
        return 0;
      return bytes;
    }
    case ViewKind::kNone:
      break;
  }
  return bytes;
}

size_t saturating_add(size_t a, size_t b) {
  size_t sum;
  return __builtin_add_overflow(a, b, &sum) ? kUncountable : sum;
}

}  // namespace

uint32_t FootprintWalk::index_of(const mx::array& a) {
  const auto [it, made] = index_.try_emplace(a.id(), static_cast<uint32_t>(entries_.size()));
  if (made) entries_.emplace_back();
  return it->second;
}

void FootprintWalk::add(const mx::array& root, const NodeDesc* node) {
  stack_.push_back(&root);
  while (!stack_.empty()) {
    const mx::array& a = *stack_.back();
    stack_.pop_back();
    // Arrays with data (inputs, constants, anything evaluated) end the walk: they are allocated
    // already, and their graph is gone.
    if (a.status() != mx::array::Status::unscheduled) continue;
    const uint32_t self = index_of(a);
    if (entries_[self].visited) continue;
    const auto inputs_begin = static_cast<uint32_t>(inputs_.size());
    for (const auto& in : a.inputs())
      if (in.status() == mx::array::Status::unscheduled) {
        inputs_.push_back(index_of(in));
        stack_.push_back(&in);
      }
    const auto inputs_end = static_cast<uint32_t>(inputs_.size());
    // Siblings (the other outputs of a multi-output primitive) are allocated with `a` and share
    // its inputs.
    auto count = [&](uint32_t i, const mx::array& x) {
      const size_t bytes = allocated_bytes(x);
      fp_.arrays += 1;
      fp_.total = saturating_add(fp_.total, bytes);
      if (bytes > fp_.largest) {
        fp_.largest = bytes;
        fp_.shape = x.shape();
        fp_.dtype = x.dtype();
        fp_.node = node;
      }
      Entry& e = entries_[i];
      e.visited = true;
      e.bytes = bytes;
      e.node = node;
      e.primitive = x.has_primitive() ? x.primitive().name() : "";
      e.inputs_begin = inputs_begin;
      e.inputs_end = inputs_end;
      e.primary = self;
    };
    count(self, a);
    const auto siblings_begin = static_cast<uint32_t>(siblings_.size());
    for (const auto& s : a.siblings()) {
      const uint32_t i = index_of(s);
      if (entries_[i].visited) continue;
      count(i, s);
      siblings_.push_back(i);
    }
    Entry& e = entries_[self];  // index_of may have grown entries_
    e.siblings_begin = siblings_begin;
    e.siblings_end = static_cast<uint32_t>(siblings_.size());
    // A view (or a reshape, which MLX makes a view when its input turns out contiguous) of an
    // unevaluated array shares that array's buffer; a view of an evaluated one pins nothing new.
    e.view = view_kind(a) != ViewKind::kNone && !a.inputs().empty() &&
             a.inputs()[0].status() == mx::array::Status::unscheduled;
    if (e.view) e.bytes = 0;
  }
}

void FootprintWalk::add_output(const mx::array& root, const NodeDesc* node) {
  add(root, node);
  if (root.status() == mx::array::Status::unscheduled) outputs_.push_back(index_.at(root.id()));
}

uint32_t FootprintWalk::buffer_class(uint32_t i) {
  uint32_t root = i;
  while (entries_[root].shares != root) root = entries_[root].shares;
  while (i != root) {  // path compression: every array on the way points at the root
    const uint32_t next = entries_[i].shares;
    entries_[i].shares = root;
    i = next;
  }
  return root;
}

void FootprintWalk::link_buffers() {
  const auto n = static_cast<uint32_t>(entries_.size());
  for (uint32_t i = 0; i < n; ++i) entries_[i].shares = i;
  auto source_bytes = [&](uint32_t i) {  // the bytes of the buffer a view chain shows
    for (uint32_t hops = 0; hops <= n && entries_[i].view; ++hops)
      i = inputs_[entries_[i].inputs_begin];
    return entries_[i].view ? size_t{0} : entries_[i].bytes;
  };
  auto join = [&](uint32_t a, uint32_t b) {
    a = buffer_class(a);
    b = buffer_class(b);
    if (a != b) entries_[a].shares = b;
  };
  for (uint32_t i = 0; i < n; ++i) {
    const Entry& e = entries_[i];
    if (e.inputs_begin == e.inputs_end) continue;
    if (e.view) {
      join(i, inputs_[e.inputs_begin]);
      continue;
    }
    // Any array as large as an input's buffer may end up in it (donation, or a kernel that
    // shares it); counting them as one keeps the bound a lower bound.
    for (uint32_t k = e.inputs_begin; k < e.inputs_end; ++k)
      if (source_bytes(inputs_[k]) == e.bytes) {
        join(i, inputs_[k]);
        break;
      }
  }
  class_max_.assign(n, 0);
  for (uint32_t i = 0; i < n; ++i) {
    size_t& most = class_max_[buffer_class(i)];
    most = std::max(most, entries_[i].bytes);
  }
}

std::pair<size_t, size_t> FootprintWalk::class_bytes(std::vector<uint32_t>& ids) {
  for (uint32_t& i : ids) i = buffer_class(i);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  size_t bytes = 0;
  for (const uint32_t c : ids) bytes = saturating_add(bytes, class_max_[c]);
  return {bytes, ids.size()};
}

const GraphFootprint& FootprintWalk::result() {
  fp_.held_together = 0;
  fp_.held_what.clear();
  link_buffers();
  // The outputs are all alive when the evaluation ends.
  std::vector<uint32_t> ids = outputs_;
  const auto [outputs, buffers] = class_bytes(ids);
  if (buffers > 1) {
    fp_.held_together = outputs;
    fp_.held_what = "its " + std::to_string(buffers) + " outputs together";
  }
  // Each kernel: its outputs' buffers and its inputs' at once (an output in an input's class
  // counted once with it).
  for (uint32_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    if (e.view || e.primary != i || e.inputs_begin == e.inputs_end) continue;
    ids.assign(inputs_.begin() + e.inputs_begin, inputs_.begin() + e.inputs_end);
    ids.push_back(i);
    ids.insert(ids.end(), siblings_.begin() + e.siblings_begin, siblings_.begin() + e.siblings_end);
    const size_t held = class_bytes(ids).first;
    if (held > fp_.held_together) {
      fp_.held_together = held;
      fp_.held_what = std::string("one ") + e.primitive + " kernel's inputs and outputs";
      if (e.node) fp_.held_what += " (from " + e.node->label() + ")";
    }
  }
  return fp_;
}

AvailableMemory available_memory(size_t need) {
  const size_t limit = mx::get_memory_limit();
  if (need > limit) return {limit, ""};
  const size_t cache = mx::get_cache_memory();
  if (mx::default_device() == mx::Device::gpu) {
    // cudaMemGetInfo costs tens of microseconds: a need under half of what a query made in the
    // last 100 ms found free fits without asking again (only the MLX thread gets here).
    static size_t known_free = 0;
    static auto known_at = std::chrono::steady_clock::time_point{};
    const auto now = std::chrono::steady_clock::now();
    if (known_free == 0 || need > known_free / 2 ||
        now - known_at > std::chrono::milliseconds(100)) {
      known_free = device::device_free_bytes();
      known_at = now;
    }
    return {known_free == 0 ? limit : std::min(limit, known_free + cache), ""};
  }
  // Host memory: MemAvailable, the address-space limit and the cgroup's (engine/host_memory.h).
  const HostBudget host = host_memory_budget(need);
  size_t bytes = SIZE_MAX;
  if (host.bytes != SIZE_MAX && __builtin_add_overflow(host.bytes, cache, &bytes)) bytes = SIZE_MAX;
  if (bytes >= limit) return {limit, ""};  // unknown or above: MLX's limit
  return {bytes, host_bound_note(host.bound)};
}

std::string format_bytes(size_t bytes) {
  if (bytes == kUncountable) return "more than 16 EiB (its size overflows 64 bits)";
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes >= (size_t{1} << 30))
    std::snprintf(buf, sizeof(buf), "%.1f GiB", b / double(size_t{1} << 30));
  else if (bytes >= (size_t{1} << 20))
    std::snprintf(buf, sizeof(buf), "%.1f MiB", b / double(size_t{1} << 20));
  else if (bytes >= (size_t{1} << 10))
    std::snprintf(buf, sizeof(buf), "%.1f KiB", b / double(size_t{1} << 10));
  else
    std::snprintf(buf, sizeof(buf), "%zu bytes", bytes);
  return buf;
}

}  // namespace ortmlx
