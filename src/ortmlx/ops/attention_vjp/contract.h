// The pkg.onnax AttentionVJP contract: name grammar (Config), the claim predicate, the
// dense-or-tiled selection rule and the kernel tile sizes of the reference Metal handler
// (docs/ATTENTION_VJP.md states the contract as the EP implements it).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "ortmlx/registry/registry.h"

namespace ortmlx::attention_vjp {

inline constexpr std::string_view kPlainPrefix = "AttentionVJP_";
inline constexpr std::string_view kRecomputePrefix = "AttentionVJPRecompute_";
inline constexpr uint64_t kDefaultDenseLimitBytes = 64ull * 1024 * 1024;
// The explicit limit comes from EpOptions::attention_vjp_dense_limit_bytes (the environment
// variable ONNXRUNTIME_EP_MLX_ATTENTION_VJP_DENSE_LIMIT_BYTES, or the session option).

// Trace labels (diagnostics show which path ran).
inline constexpr const char* kDenseLabel = "onnax GEMM attention VJP";
inline constexpr const char* kTiledLabel = "onnax tiled attention VJP";
inline constexpr const char* kNativeLabel = "onnax native SDPA attention VJP";
// Beyond the dense budget with MLX ops by query blocks (GPU backends, or the option forced).
inline constexpr const char* kBlockedLabel = "onnax blocked attention VJP";
// Beyond the dense budget on the CUDA backend: the fused CUDA kernels (cuda/kernels.cu).
inline constexpr const char* kCudaFusedLabel = "onnax CUDA fused attention VJP";
// float16/bfloat16 through cuDNN's fused SDPA backward (opt-in: cuda/cudnn_half.h).
inline constexpr const char* kCudnnHalfLabel = "onnax cuDNN half attention VJP";

// The parameters carried by the contract's name.
struct Config {
  bool recompute = false;  // AttentionVJPRecompute_: Y is not an input, it is recomputed
  int rank = 0;            // 3: (B, S, H*D); 4: (B, H, S, D)
  int hq = 0;              // query heads
  int hk = 0;              // key/value heads (hq % hk == 0)
  int d = 0;               // head size
  float scale = 0.f;
  int causal = 0;
  std::vector<int> outputs;  // requested gradients: 0 = dQ, 1 = dK, 2 = dV (strictly increasing)
  int mask = 0;              // 0 none, 1 boolean keep-mask, 2 additive float mask

  int group() const { return hq / hk; }
  bool wants(int output) const;
  // Key rows per threadgroup tile of the seed's Metal dK/dV kernel (and of our GPU kernels).
  int kv_rows() const { return d >= 128 ? 8 : 16; }
  // Number of tensor inputs before the mask (Q K V [Y] dY).
  int tensor_inputs() const { return recompute ? 4 : 5; }
  int heads_of_input(int i) const { return i == 1 || i == 2 ? hk : hq; }

  // nullopt unless `name` is exactly a valid contract name: the seed's parser and validity
  // rules, held to the documented grammar (unsigned decimal fields, exactly 8 hex digits of
  // scale) where the seed's Rust number parsers are looser.
  static std::optional<Config> parse(std::string_view name);
};

// GPU tile geometry of the seed (threadgroups of 128, 32 KiB of threadgroup memory): query rows
// per dQ tile and the bytes each kernel's tiles need. Kept here so the bound is unit-tested.
inline constexpr int kThreadgroup = 128;
inline constexpr int kQueryRows = 16;
inline constexpr int kThreadgroupBytes = 32 * 1024;
int dkv_tile_bytes(const Config& c);
int dq_tile_bytes(const Config& c);

// The seed's selection rule: dense when 4 * B * HQ * Sq * Sk bytes fit the limit (default
// 64 MiB); the Recompute form without an explicit limit always takes the dense/native branch.
// `q` and `k` are (B, H, S, D) shapes.
bool use_dense(const Config& c, const std::array<int64_t, 4>& q, const std::array<int64_t, 4>& k,
               std::optional<uint64_t> explicit_limit);

// The claim predicate: name grammar, then the interface from static value infos.
ClaimResult claim(const ClaimContext& ctx);

}  // namespace ortmlx::attention_vjp
