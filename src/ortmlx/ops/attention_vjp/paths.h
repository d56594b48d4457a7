// The AttentionVJP execution paths. Each takes live MLX arrays and returns lazy gradients; the
// translator (attention_vjp.cpp) picks one with the seed's rule and binds the results.
//
//  - dense_mlx: scores materialised with MLX GEMMs (portable: CPU, CUDA, Metal).
//  - cpu_kernel: our fused CPU primitive (AVX-512 micro-kernel or OpenBLAS per tile product,
//    std::thread workers) on panels of a few query rows: extra memory O(threads * rows * Sk),
//    independent of Sq. The CPU backend runs both the dense and the tiled path with it.
//  - native_sdpa: recompute the forward with MLX's fused SDPA and differentiate it (mx::vjp).
#pragma once

#include <array>
#include <optional>
#include <vector>

#include <mlx/array.h>
#include <mlx/stream.h>

#include "ortmlx/ops/attention_vjp/contract.h"

namespace ortmlx::attention_vjp {

namespace mx = mlx::core;

// The live tensors in (B, H, S, D) layout (dense_mlx / native_sdpa). `y` is absent for Recompute.
struct Bhsd {
  mx::array q, k, v;
  std::optional<mx::array> y;
  mx::array dy, mask;
};

// Additive float bias broadcastable to (B, HQ, Sq, Sk): causal (top-left) and the mask, with the
// mask's last axis matched to Sk (narrower: missing keys masked; wider: sliced). -inf = masked.
// nullopt when nothing is masked (causal 0, mask kind 0).
std::optional<mx::array> additive_bias(const Config& c, const mx::array& mask, int sq, int sk,
                                       mx::StreamOrDevice s);

// Dense pullback with MLX ops. Returns {dQ, dK, dV} in (B, H, S, D); unrequested ones are lazy
// and never evaluated. With the Recompute form Y is recomputed from the dense probabilities.
std::array<mx::array, 3> dense_mlx(const Config& c, const Bhsd& t, mx::StreamOrDevice s);

// Recompute form: differentiates mx::fast::scaled_dot_product_attention with mx::vjp, with an
// explicit additive bias (our causal is top-left, MLX's bottom-right) and fully masked rows
// neutralised so they give zeros, never NaN. Returns {dQ, dK, dV} in (B, H, S, D).
std::array<mx::array, 3> native_sdpa(const Config& c, const Bhsd& t, mx::StreamOrDevice s);

// The fused CPU kernel, on the inputs in their ORIGINAL layout (rank 3 rows are read with a row
// stride, no transposes). inputs: Q, K, V, [Y], dY, Mask (row-contiguous apart from the mask,
// which may be broadcast-strided). Returns the requested gradients in the order of c.outputs,
// shaped like their inputs.
// panel_rows > 0 forces the query rows per panel (tests); 0 picks cpu_tile_rows(Sk).
std::vector<mx::array> cpu_kernel(const Config& c, const std::vector<mx::array>& inputs,
                                  mx::StreamOrDevice s, int panel_rows = 0);

// Query rows per panel of the CPU kernel for a key length (tiled mode): large enough for
// efficient GEMMs, small enough that a worker's two panels stay in its L2 for moderate Sk.
int cpu_tile_rows(int sk);

// Tests: make the CPU kernel use OpenBLAS for every product (the path taken without AVX-512).
void force_blas_gemm(bool on);

// Threads the CPU kernel uses (hardware concurrency, at least 1).
int cpu_threads();

}  // namespace ortmlx::attention_vjp
