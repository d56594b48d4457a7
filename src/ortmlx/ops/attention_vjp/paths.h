// The AttentionVJP execution paths. Each takes live MLX arrays and returns lazy gradients; the
// translator (attention_vjp.cpp) picks one with the seed's rule and binds the results.
//
//  - dense_mlx: scores materialised with MLX GEMMs (portable: CPU, CUDA, Metal).
//  - blocked_mlx: the same by blocks of query rows, O(block x Sk) memory (portable); GPU
//    backends run it beyond the dense budget (until fused GPU kernels replace it).
//  - cpu_kernel: our fused CPU primitive (AVX-512, AVX2 + FMA or portable micro-kernels per tile
//    product, std::thread workers) on panels of a few query rows: extra memory O(threads * rows *
//    Sk), independent of Sq. The CPU backend runs both the dense and the tiled path with it.
//  - native_sdpa: recompute the forward with MLX's fused SDPA and differentiate it (mx::vjp).
#pragma once

#include <array>
#include <optional>
#include <utility>
#include <vector>

#include <mlx/array.h>
#include <mlx/stream.h>

#include "ortmlx/ops/attention_vjp/contract.h"
#include "ortmlx/ops/attention_vjp/cpu_rows.h"

namespace ortmlx::attention_vjp {

namespace mx = mlx::core;

// The live tensors in (B, H, S, D) layout (dense_mlx / blocked_mlx / native_sdpa). `y` is absent
// for Recompute.
struct Bhsd {
  mx::array q, k, v;
  std::optional<mx::array> y;
  mx::array dy, mask;
};

// Which keys each query row sees, for scores (B, HQ, Sq, Sk), as the reference decides it.
// `keep` (bool, broadcastable): false where a key is hidden by a select (causal top-left, a false
// boolean mask entry, keys at or beyond a narrow mask's width); `add`: the additive mask's values
// (last axis matched to Sk), added to the scores. Either is absent when it does not apply.
// `query_rows` (int32, Sq entries) are the query indices of the rows for causal (default
// 0..Sq-1; the blocked path passes its block's rows, with the mask already sliced to them).
struct ScoreMask {
  std::optional<mx::array> keep, add;
};
ScoreMask score_mask(const Config& c, const mx::array& mask, int sq, int sk, mx::StreamOrDevice s,
                     const std::optional<mx::array>& query_rows = std::nullopt);

// The same as one additive float bias (-inf = hidden), for MLX's SDPA; nullopt when nothing is
// masked (causal 0, mask kind 0).
std::optional<mx::array> additive_bias(const Config& c, const mx::array& mask, int sq, int sk,
                                       mx::StreamOrDevice s,
                                       const std::optional<mx::array>& query_rows = std::nullopt);

// Fully masked rows made harmless for a fused softmax (MLX's SDPA, cuDNN's), which would give NaN
// there: a row whose bias hides every key (-inf), or shows a NaN or +Inf value (the reference's
// dead row: no finite row maximum), gets a zero bias (an ordinary softmax) and a zero incoming
// gradient. With dY = 0 the row contributes exactly nothing to dQ, dK and dV (dP = 0, delta = 0,
// P^T dY = 0): the contract's zeros. Returns {bias, dY} (each in its own type). Causal alone
// never empties a row (top-left: key 0 is visible), so only mask kinds 1 and 2 are looked at.
std::pair<mx::array, mx::array> neutralise_dead_rows(const Config& c, const mx::array& bias,
                                                     const mx::array& dy, mx::StreamOrDevice s);

// P from scaled scores grouped by kv head, (B, HK, G, R, Sk), with the reference's semantics:
// hidden keys selected away, a row with no visible finite score, or a visible NaN or +Inf score,
// is all zeros (never NaN).
mx::array exact_probs(const Config& c, mx::array s5, const ScoreMask& m, mx::StreamOrDevice s);

// Dense pullback with MLX ops. Returns {dQ, dK, dV} in (B, H, S, D); unrequested ones are lazy
// and never evaluated. With the Recompute form Y is recomputed from the dense probabilities.
std::array<mx::array, 3> dense_mlx(const Config& c, const Bhsd& t, mx::StreamOrDevice s);

// Blocked pullback with MLX ops (portable): dense_mlx over blocks of `block_rows` query rows
// (0 = blocked_rows with the default budget). A block holds whole score rows, so its softmax is
// exact; dK and dV accumulate over the blocks, which run one after another (a fence primitive
// orders them and, on a GPU, drains the stream every ~512 MiB of allocations), so the live tiles
// are those of a few blocks: O(block x Sk) memory. Returns {dQ, dK, dV} in
// (B, H, S, D); unrequested ones are zero placeholders, never evaluated.
std::array<mx::array, 3> blocked_mlx(const Config& c, const Bhsd& t, mx::StreamOrDevice s,
                                     int block_rows = 0);

// Query rows per block of blocked_mlx: one block's (B, HQ, rows, Sk) fp32 score tile within
// `budget` bytes (the translator passes the dense limit: a block's tile is held to what a dense
// problem may use), at least 1, at most Sq, evened out over the blocks.
int blocked_rows(const Config& c, int b, int sq, int sk, uint64_t budget = kDefaultDenseLimitBytes);

// Recompute form. On MLX's CPU backend (`mlx_ops` false): differentiates
// mx::fast::scaled_dot_product_attention with mx::vjp, with an explicit additive bias (our causal
// is top-left, MLX's bottom-right) and fully masked rows neutralised so they give zeros, never
// NaN; non-finite inputs take the fused CPU kernel's answer. With `mlx_ops` (GPU backends, or the
// attention_vjp_mlx_ops test option): dense_mlx, which follows the reference exactly and runs the
// same GEMMs as MLX's float32 SDPA vjp (see native.cpp). Returns {dQ, dK, dV} in (B, H, S, D).
std::array<mx::array, 3> native_sdpa(const Config& c, const Bhsd& t, mx::StreamOrDevice s,
                                     bool mlx_ops);

// The fused CPU kernel, on the inputs in their ORIGINAL layout (rank 3 rows are read with a row
// stride, no transposes). inputs: Q, K, V, [Y], dY, Mask (row-contiguous apart from the mask,
// which may be broadcast-strided). Returns the requested gradients in the order of c.outputs,
// shaped like their inputs.
// panel_rows > 0 forces the query rows per panel (tests); 0 picks cpu_tile_rows(Sk).
// nonfinite_only: compute only when Q, K, V, Y or dY holds a NaN or Inf, else return zeros (the
// native path's exact answer for non-finite inputs, selected where they occur).
// isa: the instruction set of the micro-kernels and row math (nullopt: the fastest this CPU
// runs, rows::best_isa()); one the CPU lacks is an error.
std::vector<mx::array> cpu_kernel(const Config& c, const std::vector<mx::array>& inputs,
                                  mx::StreamOrDevice s, int panel_rows = 0,
                                  bool nonfinite_only = false,
                                  std::optional<Isa> isa = std::nullopt);

// Query rows per panel of the CPU kernel for a key length (tiled mode): large enough for
// efficient GEMMs, small enough that a worker's two panels stay in its L2 for moderate Sk.
int cpu_tile_rows(int sk);

// Threads the CPU kernel uses (hardware concurrency, at least 1).
int cpu_threads();

}  // namespace ortmlx::attention_vjp
