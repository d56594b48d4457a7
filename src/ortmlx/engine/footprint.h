// The memory guard's accounting (docs/ENGINE.md, "Memory guard"): what evaluating a lazy MLX
// graph will allocate, measured without evaluating it (GraphFootprint, FootprintWalk), and what
// MLX can still get (available_memory). The Executor checks one against the other before every
// evaluation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <mlx/array.h>

#include "ortmlx/engine/plan.h"

namespace ortmlx {

// A byte count that overflows 64 bits (saturated): never allocatable.
inline constexpr size_t kUncountable = SIZE_MAX;

// What evaluating a lazy graph will allocate, measured without evaluating it. Counts saturate at
// kUncountable.
struct GraphFootprint {
  size_t largest = 0;      // bytes of the largest single array the evaluation allocates
  size_t total = 0;        // bytes of all of them: an upper bound of the peak, not the peak
  size_t arrays = 0;       // unevaluated arrays walked
  mlx::core::Shape shape;  // the largest array's shape and dtype
  mlx::core::Dtype dtype = mlx::core::float32;
  const NodeDesc* node = nullptr;  // the node whose translation built it (eager runs), or null
  // A lower bound of the bytes the evaluation holds at once: the larger of the outputs' buffers
  // together (all alive when it ends) and, for any one kernel, its outputs' and inputs' buffers
  // (alive while it runs). Arrays that each fit can together not fit. Kept a lower bound: views
  // and reshapes share their input's buffer, and so may any array of an input's byte size (MLX
  // donates a buffer nobody else holds; Copy, Depends and no-op unary kernels share it).
  size_t held_together = 0;
  std::string held_what;  // what holds them, for messages ("its 3 outputs", "node 'x' (Add)...")
};

// Walks the unevaluated arrays behind some roots (inputs and siblings, each array once), stopping
// at arrays that already have data. Views that never allocate (broadcasts, transposes, slices)
// count 0 bytes, so a broadcast input is not mistaken for a huge tensor.
class FootprintWalk {
 public:
  // Adds the arrays reachable from `root` that no earlier call reached, attributed to `node`.
  void add(const mlx::core::array& root, const NodeDesc* node = nullptr);
  // Adds `root` as above and counts it among the outputs held when the evaluation ends.
  void add_output(const mlx::core::array& root, const NodeDesc* node = nullptr);
  // The footprint, held_together computed over everything added so far.
  const GraphFootprint& result();

 private:
  // One unevaluated array, by its index in entries_ (assigned when the walk first sees it, as an
  // input, a sibling or a root). Inputs (the unevaluated ones) and siblings are ranges of
  // inputs_ and siblings_; a sibling has its primitive's inputs and names the first of its
  // siblings reached as `primary`.
  struct Entry {
    size_t bytes = 0;  // 0 for a view
    const NodeDesc* node = nullptr;
    const char* primitive = "";
    uint32_t inputs_begin = 0, inputs_end = 0;
    uint32_t siblings_begin = 0, siblings_end = 0;
    uint32_t primary = 0;
    uint32_t shares = 0;  // union-find parent: an array whose buffer this one may share
    bool visited = false;
    bool view = false;  // a view or a reshape of its first input
  };
  uint32_t index_of(const mlx::core::array& a);  // the entry of `a`, made on first sight
  uint32_t buffer_class(uint32_t i);             // the root of i's may-share class
  void link_buffers();                           // views and same-size arrays join inputs
  // Bytes of the distinct buffer classes of `ids` (which it overwrites), and how many.
  std::pair<size_t, size_t> class_bytes(std::vector<uint32_t>& ids);

  GraphFootprint fp_;
  std::unordered_map<std::uintptr_t, uint32_t> index_;
  std::vector<Entry> entries_;
  std::vector<uint32_t> inputs_, siblings_, outputs_;
  std::vector<size_t> class_max_;  // largest bytes in each class, by its root
  std::vector<const mlx::core::array*> stack_;
};

// Bytes that MLX's default device can still allocate, and what bounds them. On MLX's CPU backend:
// the host budget of engine/host_memory.h (the least of MemAvailable, the address-space limit's
// headroom and the cgroup's) plus MLX's cache, at most MLX's memory limit; on a GPU: MLX's memory
// limit, and the device's free memory plus MLX's cache where the build can ask (CUDA flavour).
// Exact when `need` comes near it; otherwise (need well below every bound) a cheap lower bound,
// since reading /proc/meminfo costs as much as a small run.
struct AvailableMemory {
  size_t bytes = 0;
  const char* note = "";  // what bounds `bytes` when not the machine's memory, for messages
};
AvailableMemory available_memory(size_t need);

// "64.0 GiB", "3.5 MiB", "12 bytes"; kUncountable says it overflows.
std::string format_bytes(size_t bytes);

}  // namespace ortmlx
