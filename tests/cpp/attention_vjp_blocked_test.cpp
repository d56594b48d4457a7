// AttentionVJP blocked path (blocked.cpp: MLX ops by query blocks): numerics against the float64
// reference and dense_mlx for several block sizes, the translator with the attention_vjp_tiled
// option, the path choice per backend, and the O(S x block) peak memory the block chaining buys.
#include <gtest/gtest.h>

#include <functional>
#include <stdexcept>
#include <string>

#include <mlx/mlx.h>

#include "attention_vjp_reference.h"
#include "ortmlx/engine/options.h"
#include "ortmlx/ops/attention_vjp/contract.h"
#include "ortmlx/ops/attention_vjp/paths.h"

namespace ortmlx::attention_vjp {
namespace {

namespace mx = mlx::core;
using namespace ortmlx::attention_vjp::test_support;
using Tiled = EpOptions::AttentionVjpTiled;

// blocked_mlx with `rows` query rows per block against the float64 reference (and, when asked,
// against dense_mlx on the same fp32 inputs).
void check_blocked(const Problem& p, int rows, bool vs_dense = false, unsigned seed = 1) {
  const Data x = make_data(p, seed);
  SCOPED_TRACE(p.name() + " b" + std::to_string(p.b) + " sq" + std::to_string(p.sq) + " sk" +
               std::to_string(p.sk) + " rows " + std::to_string(rows));
  const Config c = *Config::parse(p.name());
  const Bhsd t = bhsd_of(p, x);
  const auto grads = blocked_mlx(c, t, {}, rows);
  for (int o : p.outputs) {
    const std::string what = std::string("d") + "QKV"[o];
    expect_close(grad_of(p, grads[o], o), x.grads[o], what + " vs float64");
    if (vs_dense)
      expect_close(grad_of(p, grads[o], o), grad_of(p, dense_mlx(c, t, {})[o], o),
                   what + " vs dense_mlx");
  }
}

bool default_is_cpu() {
  return mx::default_device() == mx::Device::cpu;
}

TEST(AttentionVjpBlocked, RowsFitTheDefaultBudgetAndEvenOut) {
  const Config c =
      *Config::parse("AttentionVJP_r4_q16_k8_d64_s3e000000_c0_o012_m0_0123456789abcdef");
  // (1, 16, rows, 4096) fp32 = 256 KiB per row: 256 rows fit 64 MiB.
  EXPECT_EQ(blocked_rows(c, 1, 8192, 4096), 256);
  EXPECT_EQ(blocked_rows(c, 1, 300, 4096), 150);  // two even blocks rather than 256 + 44
  EXPECT_EQ(blocked_rows(c, 1, 100, 4096), 100);  // capped by Sq
  EXPECT_EQ(blocked_rows(c, 4, 64, 1 << 22), 1);  // a single row over budget: still one row
  EXPECT_EQ(blocked_rows(c, 0, 0, 0), 1);
  // An explicit budget (the dense limit): 0 gives 1-row blocks, 5 rows' worth gives 5 rows.
  EXPECT_EQ(blocked_rows(c, 1, 8192, 4096, 0), 1);
  EXPECT_EQ(blocked_rows(c, 1, 100, 4096, 5 * 16 * 4096 * 4), 5);
  EXPECT_EQ(blocked_rows(c, 1, 8192, 4096, uint64_t{1} << 40), 8192);
  for (int sq : {1, 7, 255, 256, 257, 1000, 4097}) {
    const int rows = blocked_rows(c, 2, sq, 4096);
    EXPECT_GE(rows, 1);
    EXPECT_LE(rows, sq);
    EXPECT_LE(uint64_t{4} * 2 * 16 * static_cast<uint64_t>(rows) * 4096, kDefaultDenseLimitBytes);
  }
}

TEST(AttentionVjpBlocked, EveryVariantAndBlockSize) {
  // 1 row, a non-divisor of every Sq here (5), 16 rows and the budget's choice (one block).
  for (bool recompute : {false, true})
    for (const auto& p : variants(recompute))
      for (int rows : {1, 5, 16, 0}) check_blocked(p, rows, rows == 5);
}

TEST(AttentionVjpBlocked, CausalNarrowMasksAndDeadRowsAcrossBlocks) {
  // Causal with Sq > Sk and Sq < Sk (key ranges clipped per block), narrow masks below the block
  // boundaries (clipped too), fully masked rows in some blocks, GQA and MQA.
  Problem p = P(4, 2, 40, 33, 4, 2, 16);
  p.causal = true, p.mask_kind = 1, p.mask_shape = {2, 1, 40, 7}, p.dead_rows = true;
  for (int rows : {1, 3, 8, 13, 40}) check_blocked(p, rows, true);
  p = P(3, 1, 21, 50, 6, 1, 24);
  p.causal = true, p.mask_kind = 2, p.mask_shape = {6, 21, 60}, p.dead_rows = true;
  for (int rows : {4, 7, 21}) check_blocked(p, rows, true);
  p.outputs = {1};
  check_blocked(p, 4);
  p.outputs = {0, 2};
  p.recompute = true, p.d = 32, p.scale = 0.2f;
  check_blocked(p, 6);
  p = P(4, 1, 64, 64, 2, 2, 32);  // causal only: the first blocks see a few keys
  p.causal = true;
  for (int rows : {1, 9, 64}) check_blocked(p, rows, true);
  p.mask_kind = 1, p.mask_shape = {64, 64}, p.dead_rows = true;  // every third row fully masked
  check_blocked(p, 10, true);
}

TEST(AttentionVjpBlocked, EmptyDimsGiveZeros) {
  for (auto dims : {std::array<int, 3>{0, 8, 8}, {2, 0, 8}, {2, 8, 0}}) {
    Problem p = P(4, dims[0], dims[1], dims[2], 4, 2, 16);
    p.causal = true, p.mask_kind = 1, p.mask_shape = {8, 1};
    check_blocked(p, 3);
  }
}

// The translator with attention_vjp_tiled=blocked and a limit beyond which every case is: 0
// (1-row blocks) and 7 rows' worth of scores (7-row blocks); rank 3 and 4 in, both forms.
TEST(AttentionVjpBlocked, TranslatorRunsItWhenForced) {
  for (bool recompute : {false, true})
    for (const auto& p : variants(recompute))
      for (uint64_t rows : {0, 7}) {
        const Data x = make_data(p, 5);
        SCOPED_TRACE(p.name() + " rows " + std::to_string(rows));
        const uint64_t limit = rows * 4 * p.b * p.hq * p.sk;
        const Outcome out = run_translator(p, x, limit, std::nullopt, Tiled::kBlocked);
        EXPECT_EQ(out.label, kBlockedLabel);
        for (int o : p.outputs) expect_close(out.grads[o], x.grads[o], std::string("d") + "QKV"[o]);
      }
}

TEST(AttentionVjpBlocked, PathChoicePerBackendAndOption) {
  const std::string plain = "AttentionVJP_r4_q16_k8_d8_s3e800000_c0_o012_m0_0123456789abcdef";
  const std::string rec =
      "AttentionVJPRecompute_r4_q16_k8_d32_s3e800000_c0_o012_m0_0123456789abcdef";
  const mx::Shape q{1, 16, 8, 8}, k{1, 8, 8, 8}, qr{1, 16, 8, 32}, kr{1, 8, 8, 32};
  // Forced: within the budget dense, beyond it blocked, on any backend.
  EXPECT_EQ(path_label(plain, q, k, 1 << 20, std::nullopt, Tiled::kBlocked), kDenseLabel);
  EXPECT_EQ(path_label(plain, q, k, 0, std::nullopt, Tiled::kBlocked), kBlockedLabel);
  EXPECT_EQ(path_label(rec, qr, kr, 0, std::nullopt, Tiled::kBlocked), kBlockedLabel);
  EXPECT_EQ(path_label(rec, qr, kr, std::nullopt, true, Tiled::kBlocked), kNativeLabel);
  // Recompute with native forced off takes the default budget; 1025 keys are beyond it.
  EXPECT_EQ(
      path_label(rec, {1, 16, 1024, 32}, {1, 8, 1025, 32}, std::nullopt, false, Tiled::kBlocked),
      kBlockedLabel);
  EXPECT_EQ(path_label(rec, qr, kr, std::nullopt, false, Tiled::kBlocked), kDenseLabel);
  // auto: the fused CPU kernel on MLX's CPU backend, the fused CUDA kernels on the CUDA backend
  // with an sm_90 GPU, blocked MLX ops on other GPU backends.
  const char* beyond = tiled_label();
  EXPECT_EQ(path_label(plain, q, k, 0), beyond);
  EXPECT_EQ(path_label(rec, qr, kr, 4095), beyond);
  // kernel: the backend's fused kernel (the CPU kernel on MLX's CPU backend, the CUDA kernels on
  // the CUDA backend with an sm_90 GPU); a clear error on a GPU backend without one.
  const bool cuda = !default_is_cpu() && ortmlx::attention_vjp::cuda_fused_available();
  if (default_is_cpu() || cuda) {
    const char* kernel = cuda ? kCudaFusedLabel : kTiledLabel;
    const mx::Shape qb{1, 16, 1024, 32}, kb{1, 8, 1025, 32};  // beyond the default budget
    EXPECT_EQ(path_label(plain, q, k, 0, std::nullopt, Tiled::kKernel), kernel);
    EXPECT_EQ(path_label(rec, qr, kr, 4095, std::nullopt, Tiled::kKernel), kernel);
    EXPECT_EQ(path_label(rec, qb, kb, std::nullopt, false, Tiled::kKernel), kernel);
    // Recompute without a limit: native auto keeps its choice (native on GPU backends).
    EXPECT_EQ(path_label(rec, qb, kb, std::nullopt, std::nullopt, Tiled::kKernel),
              cuda ? kNativeLabel : kTiledLabel);
  } else {
    try {
      path_label(plain, q, k, 0, std::nullopt, Tiled::kKernel);
      ADD_FAILURE() << "kernel on a GPU backend must be an error";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("attention_vjp_tiled=kernel"), std::string::npos);
    }
  }
}

// ---- memory ---------------------------------------------------------------------------------

using Fn = std::function<std::vector<mx::array>(const std::vector<mx::array>&)>;

// Peak active memory (bytes) of evaluating `grads(inputs)` above what was active before, with
// every input evaluated first.
size_t measure(const Fn& grads, const std::vector<mx::array>& inputs) {
  mx::eval(inputs);
  // A GPU stream releases buffers when its kernels complete: wait, so that the base does not
  // count the previous measurement's buffers.
  mx::synchronize();
  const size_t base = mx::get_active_memory();
  mx::reset_peak_memory();
  {
    std::vector<mx::array> out = grads(inputs);
    mx::eval(out);
    mx::synchronize();
  }
  const size_t peak = mx::get_peak_memory();
  return peak - std::min(base, peak);
}

// B 1, H 2, Sq = Sk = 2048, D 64, a (Sq, Sk) keep-mask: one dense score tile is 32 MiB.
void expect_bounded_peak(mx::Device device) {
  const int b = 1, h = 2, s = 2048, d = 64;
  mx::StreamOrDevice dev = device;
  mx::random::seed(3);
  std::vector<mx::array> in;
  for (int i = 0; i < 5; ++i)  // Q K V Y dY
    in.push_back(mx::random::normal({b, h, s, d}, mx::float32, 0.f, 1.f, std::nullopt, dev));
  in.push_back(
      mx::less(mx::random::uniform({s, s}, mx::float32, std::nullopt, dev), mx::array(0.9f), dev));
  auto grads = [&](bool causal, int block) -> Fn {
    const Config c = *Config::parse(std::string("AttentionVJP_r4_q2_k2_d64_s3e000000_c") +
                                    (causal ? "1" : "0") + "_o012_m1_0123456789abcdef");
    return [c, dev, block](const std::vector<mx::array>& a) {
      const Bhsd t{a[0], a[1], a[2], a[3], a[4], a[5]};
      const auto g = block ? blocked_mlx(c, t, dev, block) : dense_mlx(c, t, dev);
      return std::vector<mx::array>(g.begin(), g.end());
    };
  };
  const double mib = 1024.0 * 1024.0;
  const size_t tile = size_t{4} * b * h * s * s;  // one dense fp32 score tile
  const size_t dense = measure(grads(false, 0), in);
  const size_t b128 = measure(grads(false, 128), in);
  const size_t b32 = measure(grads(false, 32), in);
  const size_t compiled = measure(mx::compile(grads(false, 128)), in);  // as in a plan
  const size_t causal = measure(grads(true, 128), in);
  std::printf(
      "[ peak     ] %s: dense tile %.1f MiB; dense_mlx %.1f MiB; blocked: 128 rows %.1f MiB "
      "(compiled %.1f, causal %.1f), 32 rows %.1f MiB\n",
      device == mx::Device::cpu ? "cpu" : "gpu", tile / mib, dense / mib, b128 / mib,
      compiled / mib, causal / mib, b32 / mib);
  // The dense path keeps several (B, H, Sq, Sk) tiles alive (about 3 since the exact softmax:
  // 100 MiB here).
  EXPECT_GT(dense, 5 * tile / 2);
  // Blocked: a few tiles of the block being computed and of the next one (MLX allocates a task's
  // output when it encodes it, up to 10 tasks ahead of the stream), plus O(S x D) results and
  // accumulators. Measured on CPU: about 9 block tiles (2 MiB each at 128 rows) + 6 MiB.
  for (size_t peak : {b128, causal}) {
    EXPECT_LT(peak, tile);
    EXPECT_LT(4 * peak, dense);
  }
  // Under mx::compile the exact softmax (log-sum-exp, then exp(S - lse) with dead rows selected
  // to zero) keeps about three more block tiles alive than MLX's softmax primitive did: measured
  // 33-36 MiB against 28 MiB. Still a few block tiles, independent of Sq x Sk.
  EXPECT_LT(compiled, tile + tile / 4);
  // It scales with the block, not with Sq x Sk: 32-row blocks need well under half a tile.
  EXPECT_LT(b32, tile / 2);
  EXPECT_LT(b32, b128);
}

// GPU: B 1, HQ = HK = 16, Sq = Sk = 8192, D 128, 128-row blocks: one dense score tile is 4 GiB,
// one block's 64 MiB. Here the host's lead over the GPU matters (blocked.cpp drains the stream).
void expect_bounded_gpu_peak() {
  const int h = 16, s = 8192, d = 128, block = 128;
  mx::StreamOrDevice dev = mx::Device::gpu;
  std::vector<mx::array> in;
  for (int i = 0; i < 5; ++i)  // Q K V Y dY
    in.push_back(mx::random::normal({1, h, s, d}, mx::float32, 0.f, 1.f, std::nullopt, dev));
  in.push_back(
      mx::less(mx::random::uniform({s, s}, mx::float32, std::nullopt, dev), mx::array(0.9f), dev));
  const double mib = 1024.0 * 1024.0;
  const size_t tile = size_t{4} * h * s * s, block_tile = size_t{4} * h * block * s;
  for (bool causal : {false, true}) {
    const Config c = *Config::parse("AttentionVJP_r4_q16_k16_d128_s3e000000_c" +
                                    std::string(causal ? "1" : "0") + "_o012_m1_0123456789abcdef");
    const Fn f = [c, dev](const std::vector<mx::array>& a) {
      const auto g = blocked_mlx(c, Bhsd{a[0], a[1], a[2], a[3], a[4], a[5]}, dev, block);
      return std::vector<mx::array>(g.begin(), g.end());
    };
    const size_t plain = measure(f, in), compiled = measure(mx::compile(f), in);
    std::printf(
        "[ peak     ] gpu causal %d: dense tile %.0f MiB, block tile %.0f MiB; blocked %.1f MiB "
        "(compiled %.1f MiB)\n",
        causal ? 1 : 0, tile / mib, block_tile / mib, plain / mib, compiled / mib);
    // Beyond the inputs: the three gradients (64 MiB each), the O(S x D) flag and accumulator
    // terms, and what the host encodes ahead of the GPU between two stream drains (blocked.cpp:
    // about 512 MiB of allocations, kDrainBytes), with the block in flight on either side of a
    // drain. Measured on an H200: 587-1056 MiB; the dense score tile alone is 4 GiB.
    const size_t grads = 3 * size_t{4} * h * s * d, drain = size_t{512} << 20;
    for (size_t peak : {plain, compiled}) {
      EXPECT_LT(peak, tile / 2);
      EXPECT_LT(peak, grads + 2 * drain + 4 * block_tile);
    }
  }
}

TEST(AttentionVjpBlocked, PeakMemoryIsOfOneBlockNotTheScores) {
  // The default device: MLX's CPU backend in the CPU build, the GPU in a GPU build.
  if (mx::default_device() == mx::Device::cpu)
    expect_bounded_peak(mx::Device::cpu);
  else
    expect_bounded_gpu_peak();
}

}  // namespace
}  // namespace ortmlx::attention_vjp
