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
// the scores written and read once more in between (a tensor of B*H*S^2 floats). Here one block
// per row computes, in the graph's order,
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

extern "C" __global__ void __launch_bounds__(1024)
    NM_CAT(ortmlx_softmax_, ORTMLX_NORM_TAG)(const float* x, const float* mask, float* y, int rows,
                                             int cols, int flags, int d1, int d2, int m0, int m1,
                                             int m2, int mj, float c) {
  const long long row = blockIdx.x;
  if (row >= rows) return;  // uniform over the block
  const long long base = row * cols;
  long long mrow = 0;
  if (flags & kHasMask) {
    const long long i2 = row % d2, r1 = row / d2;
    mrow = (r1 / d1) * m0 + (r1 % d1) * m1 + i2 * m2;
  }
  auto value = [&](int j) {
    float t = x[base + j];
    // Rounded as the graph's two ops are (no FMA contraction of the product and the sum).
    if (flags & kHasScale) t = (flags & kScaleDivides) ? __fdiv_rn(t, c) : __fmul_rn(t, c);
    if (flags & kHasMask) t = __fadd_rn(t, mask[mrow + static_cast<long long>(j) * mj]);
    return t;
  };
  const int tid = static_cast<int>(threadIdx.x), step = static_cast<int>(blockDim.x);
  float top = -INFINITY;
  for (int j = tid; j < cols; j += step) top = fmaxf(top, value(j));
  top = block_max(top);
  float part = 0.f;
  for (int j = tid; j < cols; j += step) part += expf(value(j) - top);
  const float total = block_sum(part);
  for (int j = tid; j < cols; j += step) y[base + j] = expf(value(j) - top) / total;
}
