// Host side of the one-kernel Softmax (kernels.cu): reading the scale and mask off the lazy graph,
// and the launch as an MLX precompiled custom kernel on the node's stream.
#include "ortmlx/ops/norm/cuda/softmax.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <mlx/fast.h>
#include <mlx/ops.h>

#include "ortmlx/ops/cuda_support.h"
#include "ortmlx/ops/lazy_graph.h"

#if ORTMLX_CUDA_KERNELS
ORTMLX_DECLARE_CUBIN(norm_cuda)  // generated: norm_cuda.cpp in the build folder
#endif

namespace ortmlx::ops {

namespace {

constexpr int64_t kMaxInt = std::numeric_limits<int>::max();

// How the kernel is launched for rows of `cols`: rows of at most 1024 columns take a warp each
// (8 rows a block of 256 threads), held in registers by the kernel compiled for `per_lane`
// columns a lane (4, 8, 16 or 32); wider rows take a block each of their width in whole warps,
// at most 256 threads. `threads`: the grid's total (MLX counts the grid in threads).
struct Launch {
  int per_lane = 0;  // 0: a block per row
  int block = 256;
  int64_t threads = 0;
};

Launch launch_for(int64_t rows, int cols) {
  Launch l;
  for (int n : {4, 8, 16, 32})
    if (cols <= 32 * n) {
      l.per_lane = n;
      l.threads = (rows + 7) / 8 * 256;
      return l;
    }
  l.block = std::clamp((cols + 31) / 32 * 32, 32, 256);
  l.threads = rows * l.block;
  return l;
}

// u = x * c | c * x | x / c: x a full float32 array of u's shape (not a broadcast) and c MLX's
// broadcast of a one-element float32 constant (evaluated: an initializer). The graph only; the
// constant's value is read by the caller.
struct ScaleOp {
  mx::array x;
  mx::array c;
  bool divides = false;
};

std::optional<ScaleOp> scale_op(const mx::array& u) {
  const bool mul = made_by(u, "Multiply"), div = made_by(u, "Divide");
  if ((!mul && !div) || u.inputs().size() != 2) return std::nullopt;
  for (int side = 0; side < (mul ? 2 : 1); ++side) {  // Divide: the divisor only
    const mx::array& x = u.inputs()[side];
    const mx::array& c = u.inputs()[1 - side];
    if (!same_float_shape(x, u) || made_by(x, "Broadcast")) continue;
    auto src = broadcast_source(c, u);
    if (!src || src->size() != 1 || (u.size() != 1 && !made_by(c, "Broadcast")) ||
        !src->is_available())
      continue;
    return ScaleOp{x, *src, div};
  }
  return std::nullopt;
}

// The mask's row starts as the kernel indexes them: T's leading dims merged into at most three
// groups (sizes d0, d1, d2; the mask's element strides m0, m1, m2) and its stride along the row.
struct MaskIndex {
  int d1 = 1, d2 = 1, m0 = 0, m1 = 0, m2 = 0, mj = 0;
};

std::optional<MaskIndex> mask_index(const mx::array& mask, const mx::Shape& shape) {
  if (static_cast<int64_t>(mask.size()) > kMaxInt) return std::nullopt;
  const int nd = static_cast<int>(shape.size());
  const int pad = nd - static_cast<int>(mask.ndim());
  // The mask's row-major strides over T's dims (0 where it broadcasts).
  std::vector<int64_t> stride(static_cast<size_t>(nd), 0);
  int64_t run = 1;
  for (int d = nd - 1; d >= pad; --d) {
    const int md = mask.shape(d - pad);
    if (md != 1) stride[static_cast<size_t>(d)] = run;
    run *= md;
  }
  std::vector<std::pair<int64_t, int64_t>> groups;  // (size, stride), outermost first
  for (int d = 0; d + 1 < nd; ++d) {
    const int64_t size = shape[d], st = stride[static_cast<size_t>(d)];
    if (size == 1) continue;
    if (!groups.empty() && groups.back().second == st * size) {
      groups.back() = {groups.back().first * size, st};
      continue;
    }
    groups.emplace_back(size, st);
  }
  if (groups.size() > 3) return std::nullopt;
  while (groups.size() < 3) groups.insert(groups.begin(), {1, 0});
  MaskIndex m;
  m.d1 = static_cast<int>(groups[1].first);
  m.d2 = static_cast<int>(groups[2].first);
  m.m0 = static_cast<int>(groups[0].second);
  m.m1 = static_cast<int>(groups[1].second);
  m.m2 = static_cast<int>(groups[2].second);
  m.mj = static_cast<int>(stride[static_cast<size_t>(nd - 1)]);
  return m;
}

// Opt-in, read at each translation (bench/gpu_peer.py --ab): see softmax.h for why.
bool enabled() {
  return kernel_opted_in("ONNXRUNTIME_EP_MLX_SOFTMAX_KERNEL");
}

}  // namespace

bool cuda_softmax_applies(const mx::array& t, mx::StreamOrDevice s) {
  if (!enabled() || t.dtype() != mx::float32 || t.ndim() < 1 || t.size() == 0 ||
      static_cast<int64_t>(t.size()) > kMaxInt)
    return false;
  const int cols = t.shape(-1);
  const int64_t rows = static_cast<int64_t>(t.size()) / cols;
  return launch_for(rows, cols).threads <= kMaxInt && cuda_kernels_usable(s);
}

SoftmaxScores softmax_score_parts(const mx::array& t) {
  SoftmaxScores p{t, std::nullopt, false, std::nullopt};
  if (made_by(t, "Add") && t.inputs().size() == 2) {
    // The scores side: the scale op if one side is one, else either side that is not a
    // broadcast; the other side is the mask.
    const mx::array &a = t.inputs()[0], &b = t.inputs()[1];
    const bool a_scaled = scale_op(a).has_value();
    const bool b_scaled = !a_scaled && scale_op(b).has_value();
    for (const auto& [scores, mask] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
      if ((a_scaled && scores != &a) || (b_scaled && scores != &b)) continue;
      if (!same_float_shape(*scores, t) || made_by(*scores, "Broadcast")) continue;
      auto src = broadcast_source(*mask, t);
      if (!src || !mask_index(*src, t.shape())) continue;
      p.x = *scores;
      p.mask = *src;
      break;
    }
  }
  if (auto op = scale_op(p.x)) {
    p.x = op->x;
    p.scale = op->c.item<float>();  // read on the host once, at translation
    p.divides = op->divides;
  }
  return p;
}

mx::array cuda_softmax(const SoftmaxScores& t, const mx::Shape& shape, mx::StreamOrDevice s) {
  if (t.x.shape() != shape || !cuda_softmax_applies(t.x, s))
    throw std::runtime_error("Softmax CUDA kernel: not for this input or device");
#if !ORTMLX_CUDA_KERNELS
  throw std::runtime_error("Softmax CUDA kernel: this build has no CUDA kernels");
#else
  const int cols = shape.back();
  const int rows = static_cast<int>(t.x.size() / static_cast<size_t>(cols));
  MaskIndex mi;
  if (t.mask) {
    auto m = mask_index(*t.mask, shape);
    if (!m) throw std::runtime_error("Softmax CUDA kernel: the mask does not broadcast so");
    mi = *m;
  }
  const int flags = (t.scale ? 1 : 0) | (t.scale && t.divides ? 2 : 0) | (t.mask ? 4 : 0);
  const Launch l = launch_for(rows, cols);
  const std::string name =
      l.per_lane != 0 ? "ortmlx_softmax_w" + std::to_string(l.per_lane) + "_" + norm_cuda::kTag
                      : std::string("ortmlx_softmax_") + norm_cuda::kTag;
  const std::vector<mx::fast::ScalarArg> scalars = {
      rows, cols, flags, mi.d1, mi.d2, mi.m0, mi.m1, mi.m2, mi.mj, t.scale.value_or(1.f)};
  // An absent mask: x stands in (the kernel never reads it: its flags say so). The block kernel's
  // reductions take a float per warp of shared memory; the warp kernels none.
  auto outs = mx::fast::precompiled_cuda_kernel(
      name, norm_cuda::cubin(), {t.x, t.mask.value_or(t.x)}, {shape}, {mx::float32}, scalars,
      {static_cast<int>(l.threads), 1, 1}, {l.block, 1, 1},
      l.per_lane != 0 ? 0 : 32 * static_cast<int>(sizeof(float)), std::nullopt,
      /*ensure_row_contiguous=*/true, s);
  return outs[0];
#endif
}

}  // namespace ortmlx::ops
