// The time loop of LSTM and GRU in one CUDA kernel (the CUDA flavour, sm_90; host side:
// recurrence.cpp). Unrolled into MLX ops, each step of each direction costs 6-10 kernels that
// wait on each other, so a 50-step bidirectional LSTM + GRU ran 4.3x slower than ORT's CUDA EP
// (cuDNN). Here one block per batch row runs every step of one direction: the gate inputs X W^T
// + bias come precomputed for all steps (one MLX matmul, as on the MLX-op path), the state lives
// in shared memory, and each step is a dot product per gate column (thread j, columns j,
// j + blockDim.x, ...) followed by the cell update, in the MLX-op path's arithmetic order.
//
// Gate columns (GH = G * H): LSTM i, o, f, c (G = 4); GRU z, r, h (G = 3). Default activations
// only (sigmoid for the gates, tanh for cell and output / the GRU candidate); every gate input
// clamped to [-bound, bound], NaN to +bound when `nan_to_bound` (GRU/LSTM with a bias input, as
// ORT's CPU kernels do).
#ifndef ORTMLX_RNN_TAG
#define ORTMLX_RNN_TAG dev
#endif
#define RNN_CAT2(a, b) a##b
#define RNN_CAT(a, b) RNN_CAT2(a, b)

extern __shared__ float rnn_smem[];

namespace {

struct Clamp {
  float bound;
  int nan_to_bound;
  __device__ __forceinline__ float operator()(float v) const {
    if (isnan(v)) return nan_to_bound ? bound : v;
    return fminf(fmaxf(v, -bound), bound);
  }
};

__device__ __forceinline__ float sigmoid(float v) {
  return 1.f / (1.f + expf(-v));
}

// acc + sum_k v[k] * rt[k * gh + col], k ascending (rt: R^T, H x GH, row-major).
__device__ __forceinline__ float dot_column(float acc, const float* v, const float* rt, int h,
                                            int gh, int col) {
  for (int k = 0; k < h; ++k) acc = fmaf(v[k], rt[static_cast<long long>(k) * gh + col], acc);
  return acc;
}

}  // namespace

// Grid (B): block b runs row b through all T steps. xw (T, B, GH), rt (H, GH), h0 and c0 (B, H),
// rbh (H, GRU's recurrent h bias under linear_before_reset when has_rbh); outputs y (T, B, H),
// h_last and c_last (B, H). Shared: h, c, r*h (H each), gates (GH).
extern "C" __global__ void __launch_bounds__(1024)
    RNN_CAT(ortmlx_recurrence_, ORTMLX_RNN_TAG)(const float* xw, const float* rt, const float* h0,
                                                const float* c0, const float* rbh, float* y,
                                                float* h_last, float* c_last, int steps, int batch,
                                                int hidden, int gru, int reverse, int lbr,
                                                int has_rbh, float bound, int nan_to_bound) {
  const int H = hidden, GH = (gru ? 3 : 4) * H, b = static_cast<int>(blockIdx.x);
  const int tid = static_cast<int>(threadIdx.x), nt = static_cast<int>(blockDim.x);
  float* h = rnn_smem;
  float* c = h + H;
  float* rh = c + H;
  float* gates = rh + H;
  const Clamp clamp{bound, nan_to_bound};
  for (int j = tid; j < H; j += nt) {
    h[j] = h0[static_cast<long long>(b) * H + j];
    c[j] = c0[static_cast<long long>(b) * H + j];
  }
  __syncthreads();
  for (int k = 0; k < steps; ++k) {
    const int t = reverse ? steps - 1 - k : k;
    const float* g_in = xw + (static_cast<long long>(t) * batch + b) * GH;
    float* y_out = y + (static_cast<long long>(t) * batch + b) * H;
    if (!gru) {
      for (int j = tid; j < GH; j += nt) gates[j] = clamp(dot_column(g_in[j], h, rt, H, GH, j));
      __syncthreads();
      for (int j = tid; j < H; j += nt) {
        const float ig = sigmoid(gates[j]), og = sigmoid(gates[H + j]);
        const float fg = sigmoid(gates[2 * H + j]), cg = tanhf(gates[3 * H + j]);
        const float c_new = c[j] * fg + ig * cg;
        const float h_new = tanhf(c_new) * og;
        c[j] = c_new;  // only thread j reads c[j]
        gates[j] = h_new;
      }
      __syncthreads();  // every dot product of this step has read h
      for (int j = tid; j < H; j += nt) {
        h[j] = gates[j];
        y_out[j] = gates[j];
      }
      __syncthreads();
      continue;
    }
    // GRU: z and r (clamped), and with linear_before_reset the h column's rbh + h R_h (not).
    const int cols = lbr ? GH : 2 * H;
    for (int j = tid; j < cols; j += nt) {
      if (j < 2 * H) {
        gates[j] = clamp(dot_column(g_in[j], h, rt, H, GH, j));
      } else {
        gates[j] = dot_column(has_rbh ? rbh[j - 2 * H] : 0.f, h, rt, H, GH, j);
      }
    }
    __syncthreads();
    if (!lbr) {  // the candidate's product reads r * h
      for (int j = tid; j < H; j += nt) rh[j] = sigmoid(gates[H + j]) * h[j];
      __syncthreads();
      for (int j = 2 * H + tid; j < GH; j += nt) gates[j] = dot_column(g_in[j], rh, rt, H, GH, j);
      __syncthreads();
    }
    for (int j = tid; j < H; j += nt) {
      const float z = sigmoid(gates[j]);
      const float pre =
          lbr ? g_in[2 * H + j] + sigmoid(gates[H + j]) * gates[2 * H + j] : gates[2 * H + j];
      const float hh = tanhf(clamp(pre));
      rh[j] = (1.f - z) * hh + z * h[j];
    }
    __syncthreads();
    for (int j = tid; j < H; j += nt) {
      h[j] = rh[j];
      y_out[j] = rh[j];
    }
    __syncthreads();
  }
  for (int j = tid; j < H; j += nt) {
    h_last[static_cast<long long>(b) * H + j] = h[j];
    c_last[static_cast<long long>(b) * H + j] = c[j];
  }
}
