// LayerNorm of float32 rows in one kernel, with the residual Add before it folded in, for the
// CUDA flavour: built by nvcc into an sm_90 cubin the library embeds
// (cmake/EmbedCudaKernels.cmake); host side: layer_norm.cpp.
//
// Why: a transformer's LayerNorm ran as three kernels on MLX's fast path: the residual sum
// (with the bias of the matmul before it), the row shift by its first element (the pivot that
// keeps the float32 statistics of rows with a large mean exact) and mlx::fast::layer_norm, each
// reading and writing the rows; at batch 1 each launch costs more host time than its work.
// Here one block per row computes
//   x = (m + bias) + r        (the graph's order: Add(Add(m, bias), r); either part optional)
//   y = ((x - p) - mean) / sqrt(var + eps) * gamma + beta,   p = x[0] (the row's pivot)
// with mean and var the two-pass float32 statistics of x - p (as the fast path computes them on
// its shifted rows), and writes y and, when asked, the sum x for the graph's other readers.
#ifndef ORTMLX_NORM_TAG
#define ORTMLX_NORM_TAG dev
#endif
#define NM_CAT2(a, b) a##b
#define NM_CAT(a, b) NM_CAT2(a, b)

extern __shared__ float norm_smem[];  // one partial sum per warp (dynamic: 32 floats)

namespace {

enum : int {
  kHasResidual = 1,  // r
  kHasBias = 2,      // bias, added to m first
  kHasGamma = 4,
  kHasBeta = 8,
  kWriteSum = 16,  // x to `sum`
};

// The sum of v over the block, the same value in every thread (each adds the warps' partial sums
// in the same order). Called by all threads alike.
__device__ __forceinline__ float block_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  __syncthreads();  // the previous call's partial sums have been read
  if (lane == 0) norm_smem[warp] = v;
  __syncthreads();
  float total = 0.f;
  for (int w = 0; w < static_cast<int>(blockDim.x) / 32; ++w) total += norm_smem[w];
  return total;
}

}  // namespace

// One block per row (blockDim.x a multiple of 32, at most 1024); rows of `cols` floats.
extern "C" __global__ void __launch_bounds__(1024)
    NM_CAT(ortmlx_layer_norm_, ORTMLX_NORM_TAG)(const float* m, const float* r, const float* bias,
                                                const float* gamma, const float* beta, float* y,
                                                float* sum, int rows, int cols, int flags,
                                                float eps) {
  const long long row = blockIdx.x;
  if (row >= rows) return;  // uniform over the block
  const long long base = row * cols;
  auto value = [&](int j) {
    float x = m[base + j];
    if (flags & kHasBias) x = x + bias[j];
    if (flags & kHasResidual) x = x + r[base + j];
    return x;
  };
  const float pivot = value(0);
  const int tid = static_cast<int>(threadIdx.x), step = static_cast<int>(blockDim.x);
  float part = 0.f;
  for (int j = tid; j < cols; j += step) part += value(j) - pivot;
  const float mean = block_sum(part) / static_cast<float>(cols);
  part = 0.f;
  for (int j = tid; j < cols; j += step) {
    const float d = (value(j) - pivot) - mean;
    part += d * d;
  }
  const float var = block_sum(part) / static_cast<float>(cols);
  const float inv = 1.f / sqrtf(var + eps);
  for (int j = tid; j < cols; j += step) {
    const float x = value(j);
    float out = ((x - pivot) - mean) * inv;
    if (flags & kHasGamma) out = out * gamma[j];
    if (flags & kHasBeta) out = out + beta[j];
    y[base + j] = out;
    if (flags & kWriteSum) sum[base + j] = x;
  }
}

// Softmax of float32 rows in one kernel, with the attention scores' scale and additive mask
// folded in (host side: softmax.cpp). Why: the scaled, masked scores of an attention layer ran
// as two kernels, the elementwise scale/mask (MLX's fused Multiply/Divide/Add) and MLX's softmax,
// the scores written and read once more in between (a tensor of B*H*S^2 floats). Here each row
// (a warp's for rows up to 1024 wide, a block's beyond) computes, in the graph's order,
//   t = x * c  or  x / c   (c a kernel argument, when flagged)
//   t = t + mask           (when flagged)
//   y = exp(t - max(t)) / sum(exp(t - max(t)))
// The mask is read through strides: the row index splits into (i0, i1, i2) over sizes
// (rows / (d1 * d2), d1, d2), its row starts at i0 * m0 + i1 * m1 + i2 * m2 and steps mj along
// the row (0 where it broadcasts).
namespace {

enum : int {
  kHasScale = 1,
  kScaleDivides = 2,  // t = x / c rather than x * c
  kHasMask = 4,
};

// The maximum of v over the block, the same value in every thread (as block_sum). fmaxf skips a
// NaN; a row holding one still comes out NaN, through its exp in the sum (as ORT's kernel).
__device__ __forceinline__ float block_max(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  __syncthreads();
  if (lane == 0) norm_smem[warp] = v;
  __syncthreads();
  float total = norm_smem[0];
  for (int w = 1; w < static_cast<int>(blockDim.x) / 32; ++w) total = fmaxf(total, norm_smem[w]);
  return total;
}

}  // namespace

// The row's scores as the graph computes them: t = x (*|/) c (+ mask), rounded as the two ops are
// (no FMA contraction of the product and the sum).
struct SoftmaxRow {
  const float* x;
  const float* mask;
  long long base = 0, mrow = 0;
  int flags = 0, mj = 0;
  float c = 1.f;

  __device__ SoftmaxRow(const float* x_, const float* mask_, long long row, int cols, int flags_,
                        int d1, int d2, int m0, int m1, int m2, int mj_, float c_)
      : x(x_), mask(mask_), base(row * cols), flags(flags_), mj(mj_), c(c_) {
    if (flags & kHasMask) {
      const long long i2 = row % d2, r1 = row / d2;
      mrow = (r1 / d1) * m0 + (r1 % d1) * m1 + i2 * m2;
    }
  }
  __device__ float operator()(int j) const {
    float t = x[base + j];
    if (flags & kHasScale) t = (flags & kScaleDivides) ? __fdiv_rn(t, c) : __fmul_rn(t, c);
    if (flags & kHasMask) t = __fadd_rn(t, mask[mrow + static_cast<long long>(j) * mj]);
    return t;
  }
};

// Rows wider than the warp kernels take: one block per row (blockDim.x a multiple of 32, at most
// 1024), three passes over the row (max, sum, write).
extern "C" __global__ void __launch_bounds__(1024)
    NM_CAT(ortmlx_softmax_, ORTMLX_NORM_TAG)(const float* x, const float* mask, float* y, int rows,
                                             int cols, int flags, int d1, int d2, int m0, int m1,
                                             int m2, int mj, float c) {
  const long long row = blockIdx.x;
  if (row >= rows) return;  // uniform over the block
  const SoftmaxRow value(x, mask, row, cols, flags, d1, d2, m0, m1, m2, mj, c);
  const int tid = static_cast<int>(threadIdx.x), step = static_cast<int>(blockDim.x);
  float top = -INFINITY;
  for (int j = tid; j < cols; j += step) top = fmaxf(top, value(j));
  top = block_max(top);
  float part = 0.f;
  for (int j = tid; j < cols; j += step) part += expf(value(j) - top);
  const float total = block_sum(part);
  for (int j = tid; j < cols; j += step) y[value.base + j] = expf(value(j) - top) / total;
}

// Rows of at most 32 * N columns: one warp per row, 8 rows a block (256 threads), the row read
// once into registers (lane l holds columns l, l + 32, ...: each load instruction of the warp is
// one coalesced run), reduced with warp shuffles only. Why: the block-per-row kernel above ran a
// transformer's 512-wide score rows with 2 elements a thread and three dependent passes, latency-
// bound; this is the layout ORT's own softmax uses for such rows. Every warp takes part in the
// shuffles (a row past the end computes on -inf and stores nothing).
template <int N>
__device__ __forceinline__ void softmax_warp_row(const float* x, const float* mask, float* y,
                                                 int rows, int cols, int flags, int d1, int d2,
                                                 int m0, int m1, int m2, int mj, float c) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const long long row =
      static_cast<long long>(blockIdx.x) * (blockDim.x / 32) + static_cast<int>(threadIdx.x) / 32;
  const bool live = row < rows;
  const SoftmaxRow value(x, mask, live ? row : 0, cols, flags, d1, d2, m0, m1, m2, mj, c);
  float v[N];
  float top = -INFINITY;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int j = lane + 32 * i;
    v[i] = live && j < cols ? value(j) : -INFINITY;
    top = fmaxf(top, v[i]);
  }
  for (int off = 16; off > 0; off >>= 1) top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, off));
  float total = 0.f;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int j = lane + 32 * i;
    v[i] = live && j < cols ? expf(v[i] - top) : 0.f;
    total += v[i];
  }
  for (int off = 16; off > 0; off >>= 1) total += __shfl_xor_sync(0xffffffffu, total, off);
  if (!live) return;
#pragma unroll
  for (int i = 0; i < N; ++i) {
    const int j = lane + 32 * i;
    if (j < cols) y[value.base + j] = v[i] / total;
  }
}

#define NM_SOFTMAX_WARP(N)                                                                     \
  extern "C" __global__ void __launch_bounds__(256)                                            \
      NM_CAT(NM_CAT(ortmlx_softmax_w, N), NM_CAT(_, ORTMLX_NORM_TAG))(                         \
          const float* x, const float* mask, float* y, int rows, int cols, int flags, int d1, \
          int d2, int m0, int m1, int m2, int mj, float c) {                                   \
    softmax_warp_row<N>(x, mask, y, rows, cols, flags, d1, d2, m0, m1, m2, mj, c);            \
  }
NM_SOFTMAX_WARP(4)
NM_SOFTMAX_WARP(8)
NM_SOFTMAX_WARP(16)
NM_SOFTMAX_WARP(32)
