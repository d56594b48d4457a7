// AttentionVJP (pkg.onnax): the seed's own unit cases (contract parsing, the dense-budget rule,
// tile memory bounds) and numeric checks of every path (dense MLX, CPU kernel dense/tiled, native
// SDPA vjp, and the translator end to end) against a float64 reference
// (attention_vjp_reference.h). The blocked MLX path: attention_vjp_blocked_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include <mlx/mlx.h>

#include "attention_vjp_reference.h"
#include "ortmlx/engine/plan.h"
#include "ortmlx/engine/translation_context.h"
#include "ortmlx/ops/attention_vjp/contract.h"
#include "ortmlx/ops/attention_vjp/paths.h"
#include "ortmlx/registry/registry.h"

namespace ortmlx::attention_vjp {
namespace {

namespace mx = mlx::core;
using namespace ortmlx::attention_vjp::test_support;

const std::string kValid = "AttentionVJP_r3_q16_k8_d128_s3db504f3_c1_o012_m1_0123456789abcdef";

std::string replace(std::string s, const std::string& from, const std::string& to) {
  const size_t pos = s.find(from);
  if (pos != std::string::npos) s.replace(pos, from.size(), to);
  return s;
}

// ---- the seed's unit cases ------------------------------------------------------------------

TEST(AttentionVjpContract, RecomputedContractIsExplicit) {
  const std::string name =
      "AttentionVJPRecompute_r3_q4_k2_d40_s3e21e89b_c0_o012_m0_0123456789abcdef";
  const auto c = Config::parse(name);
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->recompute);
  for (auto [from, to] :
       {std::pair{"d40_", "d8_"}, {"d40_", "d264_"}, {"c0_", "c2_"}, {"m0_", "m3_"}})
    EXPECT_FALSE(Config::parse(replace(name, from, to)).has_value()) << to;
  EXPECT_FALSE(Config::parse(kValid)->recompute);
  EXPECT_TRUE(Config::parse(replace(kValid, "AttentionVJP_", "AttentionVJPRecompute_"))->recompute);
}

TEST(AttentionVjpContract, ExplicitScoreBudgetAppliesToRecomputedPullbacks) {
  Config c = *Config::parse(kValid);
  const std::array<int64_t, 4> query{1, 16, 4096, 128}, key{1, 8, 4096, 128};
  const uint64_t score_bytes = 1024ull * 1024 * 1024;
  EXPECT_FALSE(use_dense(c, query, key, std::nullopt));
  EXPECT_TRUE(use_dense(c, query, key, score_bytes));
  EXPECT_FALSE(use_dense(c, query, key, score_bytes - 1));
  c.recompute = true;
  EXPECT_TRUE(use_dense(c, query, key, std::nullopt));
  EXPECT_TRUE(use_dense(c, query, key, score_bytes));
  EXPECT_FALSE(use_dense(c, query, key, 0));
  EXPECT_FALSE(use_dense(c, query, key, score_bytes - 1));
}

TEST(AttentionVjpContract, DefaultBudgetIs64MiBAndOverflowIsNotDense) {
  const Config c = *Config::parse(kValid);  // hq = 16
  // 4 * 1 * 16 * 1024 * 1024 bytes = 64 MiB exactly: dense; one more key row: tiled.
  EXPECT_TRUE(use_dense(c, {1, 16, 1024, 128}, {1, 8, 1024, 128}, std::nullopt));
  EXPECT_FALSE(use_dense(c, {1, 16, 1024, 128}, {1, 8, 1025, 128}, std::nullopt));
  const int64_t huge = int64_t{1} << 40;
  EXPECT_FALSE(use_dense(c, {huge, 16, huge, 128}, {huge, 8, huge, 128}, ~uint64_t{0}));
  EXPECT_TRUE(use_dense(c, {0, 16, 4096, 128}, {0, 8, 4096, 128}, 0));  // 0 bytes fit
}

TEST(AttentionVjpContract, WideTilesFitThreadgroupMemory) {
  for (int d = 8; d <= 256; d += 8) {
    const auto c = Config::parse(replace(kValid, "d128_", "d" + std::to_string(d) + "_"));
    ASSERT_TRUE(c.has_value()) << d;
    EXPECT_LE(dkv_tile_bytes(*c), kThreadgroupBytes) << d;
    EXPECT_LE(dq_tile_bytes(*c), kThreadgroupBytes) << d;
    EXPECT_EQ((4 * c->kv_rows() * 32 + 2 * c->kv_rows() * d) * 4, dkv_tile_bytes(*c));
    EXPECT_EQ((3 * 16 * 32 + 16 * d) * 4, dq_tile_bytes(*c));
    EXPECT_EQ(c->kv_rows(), d >= 128 ? 8 : 16);
  }
}

TEST(AttentionVjpContract, ParameterizedFunctionContract) {
  const auto c = Config::parse(kValid);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->rank, 3);
  EXPECT_EQ(c->hq, 16);
  EXPECT_EQ(c->hk, 8);
  EXPECT_EQ(c->d, 128);
  EXPECT_EQ(c->causal, 1);
  EXPECT_EQ(c->mask, 1);
  EXPECT_FLOAT_EQ(c->scale, 1.f / std::sqrt(128.f));
  EXPECT_EQ(c->outputs, (std::vector<int>{0, 1, 2}));
  const std::pair<const char*, const char*> bad[] = {{"AttentionVJP_", "AttentionVJP_v1_"},
                                                     {"q16_", "q15_"},
                                                     {"q16_", "q2147483640_"},
                                                     {"d128_", "d512_"},
                                                     {"d128_", "d0_"},
                                                     {"d128_", "d41_"},
                                                     {"s3db504f3_", "s7f800000_"},
                                                     {"c1_", "c2_"},
                                                     {"o012_", "o210_"},
                                                     {"m1_", "m3_"}};
  for (auto [from, to] : bad)
    EXPECT_FALSE(Config::parse(replace(kValid, from, to)).has_value()) << to;
  EXPECT_FALSE(Config::parse("AttentionVJP").has_value());
  EXPECT_FALSE(Config::parse(kValid + "_extra").has_value());
}

TEST(AttentionVjpContract, EveryMalformedFieldIsRefused) {
  const std::pair<const char*, const char*> bad[] = {{"r3_", "r5_"},
                                                     {"r3_", "x3_"},
                                                     {"r3_", "r_"},
                                                     {"q16_", "q0_"},
                                                     {"q16_", "q-16_"},
                                                     {"k8_", "k0_"},
                                                     {"k8_", "k3_"},
                                                     {"q16_", "q99999999999_"},
                                                     {"d128_", "d4_"},
                                                     {"d128_", "d12_"},
                                                     {"d128_", "d264_"},
                                                     {"s3db504f3_", "s_"},
                                                     {"s3db504f3_", "s3db5g4f3_"},
                                                     {"s3db504f3_", "s00000000_"},
                                                     {"s3db504f3_", "sbf800000_"},
                                                     {"s3db504f3_", "s7fc00000_"},
                                                     {"s3db504f3_", "s13db504f3_"},
                                                     {"c1_", "c-1_"},
                                                     {"o012_", "o_"},
                                                     {"o012_", "o3_"},
                                                     {"o012_", "o011_"},
                                                     {"o012_", "o01a_"},
                                                     {"m1_", "m-1_"},
                                                     {"0123456789abcdef", "0123456789abcde"},
                                                     {"0123456789abcdef", "0123456789abcdeg"},
                                                     {"0123456789abcdef", "0123456789abcdef0"},
                                                     {"_m1_", "_m1__"},
                                                     {"AttentionVJP_", "AttentionVJPX_"},
                                                     {"AttentionVJP_", "attentionVJP_"}};
  for (auto [from, to] : bad) {
    const std::string name = replace(kValid, from, to);
    ASSERT_NE(name, kValid) << from;
    EXPECT_FALSE(Config::parse(name).has_value()) << name;
  }
  // The documented grammar (docs/ATTENTION_VJP.md) is stricter than the seed's Rust parsers
  // (from_str takes a sign, from_str_radix a short hex field): signs and short scale fields are
  // not claimed, so the function body runs on ORT. Leading zeros and upper-case hex are fine.
  for (auto [from, to] : {std::pair{"r3_", "r+3_"}, {"s3db504f3_", "s3f80_"}, {"c1_", "c-0_"}}) {
    const std::string name = replace(kValid, from, to);
    EXPECT_FALSE(Config::parse(name).has_value()) << name;
  }
  for (auto [from, to] : {std::pair{"q16_", "q016_"},
                          {"s3db504f3_", "s3DB504F3_"},
                          {"0123456789abcdef", "0123456789ABCDEF"},
                          {"o012_", "o1_"},
                          {"o012_", "o02_"}})
    EXPECT_TRUE(Config::parse(replace(kValid, from, to)).has_value()) << to;
  // Recompute needs D >= 32.
  const std::string rec = replace(kValid, "AttentionVJP_", "AttentionVJPRecompute_");
  EXPECT_FALSE(Config::parse(replace(rec, "d128_", "d24_")).has_value());
  EXPECT_TRUE(Config::parse(replace(rec, "d128_", "d32_")).has_value());
}

// ---- claim from static value infos ----------------------------------------------------------

struct ClaimFixture {
  GraphView graph;
  NodeView node;
  ClaimResult claim() const { return OpRegistry::global().claim(graph, node); }
};

ClaimFixture claim_case(const std::string& op, int rank, int hq, int hk, int d, ElemType mask_type,
                        std::vector<int64_t> mask_shape, size_t outputs = 3) {
  ClaimFixture f;
  f.node.name = "attention_vjp";
  f.node.op_type = op;
  f.node.domain = "pkg.onnax";
  f.node.since_version = 1;
  const bool recompute = op.rfind("AttentionVJPRecompute_", 0) == 0;
  std::vector<std::string> names = {"Q", "K", "V", "Y", "dY"};
  if (recompute) names = {"Q", "K", "V", "dY"};
  for (size_t i = 0; i < names.size(); ++i) {
    const int64_t heads = (i == 1 || i == 2) ? hk : hq;
    TensorInfo t;
    t.dtype = ElemType::kFloat;
    t.has_shape = true;
    t.shape =
        rank == 3 ? std::vector<int64_t>{2, 8, heads * d} : std::vector<int64_t>{2, heads, 8, d};
    f.graph.value_infos[names[i]] = t;
    f.node.inputs.push_back(names[i]);
  }
  TensorInfo m;
  m.dtype = mask_type;
  m.has_shape = true;
  m.shape = std::move(mask_shape);
  f.graph.value_infos["Mask"] = m;
  f.node.inputs.push_back("Mask");
  for (size_t o = 0; o < outputs; ++o) f.node.outputs.push_back("out" + std::to_string(o));
  return f;
}

TEST(AttentionVjpClaim, InterfaceChecks) {
  const std::string plain = "AttentionVJP_r4_q4_k2_d16_s3e800000_c1_o012_m1_0123456789abcdef";
  EXPECT_TRUE(claim_case(plain, 4, 4, 2, 16, ElemType::kBool, {8, 8}).claim().ok);
  // Wrong output count, mask type, mask rank.
  EXPECT_FALSE(claim_case(plain, 4, 4, 2, 16, ElemType::kBool, {8, 8}, 2).claim().ok);
  EXPECT_FALSE(claim_case(plain, 4, 4, 2, 16, ElemType::kFloat, {8, 8}).claim().ok);
  EXPECT_FALSE(claim_case(plain, 4, 4, 2, 16, ElemType::kBool, {1, 1, 1, 8, 8}).claim().ok);
  EXPECT_FALSE(claim_case(plain, 4, 4, 2, 16, ElemType::kBool, {}).claim().ok);
  // Heads or head size unlike the name.
  EXPECT_FALSE(claim_case(plain, 4, 2, 2, 16, ElemType::kBool, {8, 8}).claim().ok);
  EXPECT_FALSE(claim_case(plain, 4, 4, 2, 24, ElemType::kBool, {8, 8}).claim().ok);
  EXPECT_FALSE(claim_case(plain, 3, 4, 2, 16, ElemType::kBool, {8, 8}).claim().ok);
  // Additive masks are FLOAT; rank 3 widths are heads * D.
  const std::string add3 = "AttentionVJP_r3_q4_k2_d16_s3e800000_c0_o02_m2_0123456789abcdef";
  EXPECT_TRUE(claim_case(add3, 3, 4, 2, 16, ElemType::kFloat, {8}, 2).claim().ok);
  EXPECT_FALSE(claim_case(add3, 3, 4, 2, 16, ElemType::kBool, {8}, 2).claim().ok);
  // A dynamic last dim is refused (compared literally, as the seed does).
  auto dyn = claim_case(plain, 4, 4, 2, 16, ElemType::kBool, {8, 8});
  dyn.graph.value_infos["K"].shape[3] = -1;
  EXPECT_FALSE(dyn.claim().ok);
  auto wrong_type = claim_case(plain, 4, 4, 2, 16, ElemType::kBool, {8, 8});
  wrong_type.graph.value_infos["Y"].dtype = ElemType::kFloat16;
  EXPECT_FALSE(wrong_type.claim().ok);
  // Recompute: 5 inputs.
  const std::string rec =
      "AttentionVJPRecompute_r4_q4_k2_d32_s3e800000_c1_o012_m0_0123456789abcdef";
  EXPECT_TRUE(claim_case(rec, 4, 4, 2, 32, ElemType::kBool, {1}).claim().ok);
  auto six = claim_case(rec, 4, 4, 2, 32, ElemType::kBool, {1});
  six.node.inputs.insert(six.node.inputs.begin() + 3, "Q");
  EXPECT_FALSE(six.claim().ok);
  // Every refusal has a reason.
  const auto r = claim_case("AttentionVJP_bad", 4, 4, 2, 16, ElemType::kBool, {8, 8}).claim();
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.reason.empty());
}

// ---- numerics -------------------------------------------------------------------------------

enum class Path { kDense, kTiled, kNative, kDenseMlx };

void check(const Problem& p, Path path, unsigned seed = 1) {
  const Data x = make_data(p, seed);
  SCOPED_TRACE(p.name() + " b" + std::to_string(p.b) + " sq" + std::to_string(p.sq) + " sk" +
               std::to_string(p.sk) + " path " + std::to_string(static_cast<int>(path)));
  if (path == Path::kDenseMlx) {
    auto bhsd = [&](const std::vector<double>& t, int heads, int seq) {
      Problem q = p;
      q.rank = 4;
      return to_layout(q, t, heads, seq);
    };
    Bhsd t{bhsd(x.q, p.hq, p.sq), bhsd(x.k, p.hk, p.sk),  bhsd(x.v, p.hk, p.sk),
           std::nullopt,          bhsd(x.dy, p.hq, p.sq), mask_array(p, x)};
    if (!p.recompute) t.y = bhsd(x.y, p.hq, p.sq);
    Config c = *Config::parse(p.name());
    const auto grads = dense_mlx(c, t, {});
    Problem q = p;
    q.rank = 4;
    for (int o : p.outputs)
      expect_close(from_layout(q, grads[o], o == 0 ? p.hq : p.hk, o == 0 ? p.sq : p.sk), x.grads[o],
                   std::string("d") + "QKV"[o]);
    return;
  }
  std::optional<uint64_t> limit;
  const char* want_label = kDenseLabel;
  if (path == Path::kDense) limit = uint64_t{1} << 40;
  if (path == Path::kTiled) {
    limit = 0;
    want_label = tiled_label();
  }
  std::optional<bool> native;
  if (path == Path::kNative) {
    want_label = kNativeLabel;
    native = true;  // auto picks the fused kernel on MLX's CPU backend
  }
  const Outcome out = run_translator(p, x, limit, native);
  const bool empty = p.b == 0 || p.sq == 0 || p.sk == 0;
  if (!empty) {
    EXPECT_EQ(out.label, want_label);
  }
  for (int o : p.outputs) expect_close(out.grads[o], x.grads[o], std::string("d") + "QKV"[o]);
}

TEST(AttentionVjpNumerics, DenseCpuKernel) {
  for (const auto& p : variants(false)) check(p, Path::kDense);
}
TEST(AttentionVjpNumerics, TiledCpuKernel) {
  for (const auto& p : variants(false)) check(p, Path::kTiled);
}
// Every instruction set this CPU runs (the default run above takes the fastest): the micro-kernels
// and row math of each, on the variants, a masked causal GQA case and row/column tails.
TEST(AttentionVjpNumerics, CpuKernelEveryIsa) {
  using CpuIsa = EpOptions::CpuIsa;
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kPortable}) {
    if (!cpu_isa_supported(isa)) continue;
    SCOPED_TRACE(cpu_isa_name(isa));
    g_cpu_isa = isa;
    for (const auto& p : variants(false)) check(p, Path::kTiled);
    for (const auto& p : variants(true)) check(p, Path::kDense);
    Problem p = P(3, 1, 300, 200, 4, 2, 32);
    p.causal = true, p.mask_kind = 1, p.mask_shape = {300, 200};
    check(p, Path::kTiled);
    p = P(4, 1, 40, 1100, 2, 1, 24);  // long keys (K chunks), D not a multiple of 16
    p.mask_kind = 2, p.mask_shape = {1100};
    check(p, Path::kTiled);
    p = P(4, 2, 150, 77, 2, 2, 40);  // causal, a key length and D off every vector width
    p.causal = true, p.dead_rows = true, p.mask_kind = 2, p.mask_shape = {2, 1, 150, 77};
    check(p, Path::kTiled);
  }
  g_cpu_isa = CpuIsa::kAuto;
}
TEST(AttentionVjpNumerics, DenseMlxOps) {
  for (const auto& p : variants(false)) check(p, Path::kDenseMlx);
  for (const auto& p : variants(true)) check(p, Path::kDenseMlx);
}
TEST(AttentionVjpNumerics, RecomputeNativeSdpa) {
  for (const auto& p : variants(true)) check(p, Path::kNative);
}
TEST(AttentionVjpNumerics, RecomputeDenseAndTiled) {
  for (const auto& p : variants(true)) {
    check(p, Path::kDense);
    check(p, Path::kTiled);
  }
}

TEST(AttentionVjpNumerics, TiledKernelSpansManyTilesAndParts) {
  // Several query tiles, a kv head shared by all query heads (work split into parts with private
  // dK/dV partials), causal with a key-length not a multiple of 16.
  Problem p = P(4, 1, 300, 277, 4, 1, 32);
  p.causal = true;
  check(p, Path::kTiled);
  p = P(3, 2, 150, 160, 2, 2, 64);
  p.mask_kind = 2, p.mask_shape = {2, 1, 150, 160}, p.dead_rows = true;
  check(p, Path::kTiled);
  check(p, Path::kDense);
  p = P(4, 1, 40, 1100, 2, 1, 24);  // long keys: the micro-kernel cuts K = Sk into chunks
  p.mask_kind = 2, p.mask_shape = {1100};
  check(p, Path::kTiled);
  p = P(3, 1, 600, 600, 2, 2, 16);  // causal with panels reaching past one K chunk
  p.causal = true;
  check(p, Path::kTiled);
  p = P(3, 1, 300, 200, 4, 2, 32);  // rank 3 (strided rows), GQA, several parts per kv head
  p.mask_kind = 1, p.mask_shape = {300, 200}, p.outputs = {1, 2};
  check(p, Path::kTiled);
  p.recompute = true;
  check(p, Path::kTiled);
}

TEST(AttentionVjpNumerics, StridedAndBroadcastMasksAreReadInPlace) {
  // The kernel reads the mask through its strides: a transposed view and a broadcast view.
  for (int kind : {1, 2}) {
    Problem p = P(4, 2, 24, 20, 4, 2, 16);
    p.causal = true, p.mask_kind = kind, p.mask_shape = {2, 1, 24, 20};
    const Data x = make_data(p, 11);
    const mx::array dense_mask = mask_array(p, x);  // (2, 1, 24, 20)
    // Same values, stored transposed: (2, 1, 20, 24) swapped back to a (2, 1, 24, 20) view.
    const mx::array transposed = mx::swapaxes(mx::contiguous(mx::swapaxes(dense_mask, 2, 3)), 2, 3);
    const mx::array broadcast = mx::broadcast_to(dense_mask, {2, 4, 24, 20});
    for (const mx::array& mask : {transposed, broadcast}) {
      mx::eval(mask);
      const Config c = *Config::parse(p.name());
      std::vector<mx::array> in = {to_layout(p, x.q, p.hq, p.sq),  to_layout(p, x.k, p.hk, p.sk),
                                   to_layout(p, x.v, p.hk, p.sk),  to_layout(p, x.y, p.hq, p.sq),
                                   to_layout(p, x.dy, p.hq, p.sq), mask};
      // 7-row panels: many tiles and row tails (on the CPU stream: a GPU build has one too).
      const auto out = cpu_kernel(c, in, mx::Device::cpu, 7);
      for (int o = 0; o < 3; ++o)
        expect_close(from_layout(p, out[o], o == 0 ? p.hq : p.hk, o == 0 ? p.sq : p.sk), x.grads[o],
                     std::string("d") + "QKV"[o]);
    }
  }
}

TEST(AttentionVjpNumerics, RepeatedRunsAgree) {
  Problem p = P(4, 2, 16, 16, 4, 4, 16);
  for (int i = 0; i < 4; ++i) check(p, Path::kTiled, 7);
}

TEST(AttentionVjpNumerics, EmptyDimsGiveZeros) {
  for (Path path : {Path::kDense, Path::kTiled}) {
    for (auto dims : {std::array<int, 3>{0, 8, 8}, {2, 0, 8}, {2, 8, 0}}) {
      Problem p = P(3, dims[0], dims[1], dims[2], 4, 2, 16);
      // The mask broadcasts against every live shape here: one of 8 query rows would not
      // broadcast against Sq = 0, and the contract's body raises for it (so does the EP).
      p.causal = true, p.mask_kind = 1, p.mask_shape = {1, 8};
      check(p, path);
      p.rank = 4;
      check(p, path);
    }
  }
  Problem p = P(4, 2, 8, 0, 4, 2, 32);
  p.recompute = true;
  check(p, Path::kNative);
}

TEST(AttentionVjpPaths, SelectionFollowsTheSeed) {
  const std::string plain = "AttentionVJP_r4_q16_k8_d8_s3e800000_c0_o012_m0_0123456789abcdef";
  const std::string rec =
      "AttentionVJPRecompute_r4_q16_k8_d32_s3e800000_c0_o012_m0_0123456789abcdef";
  // 4 * 1 * 16 * 1024 * 1024 bytes = 64 MiB: dense; one more key: tiled_label().
  EXPECT_EQ(path_label(plain, {1, 16, 1024, 8}, {1, 8, 1024, 8}, std::nullopt), kDenseLabel);
  EXPECT_EQ(path_label(plain, {1, 16, 1024, 8}, {1, 8, 1025, 8}, std::nullopt), tiled_label());
  EXPECT_EQ(path_label(plain, {1, 16, 8, 8}, {1, 8, 8, 8}, 0), tiled_label());
  // Recompute: native without an explicit limit (any size) when native is on (auto on GPU
  // backends, the CUDA backend included); on MLX's CPU backend auto takes the fused kernel,
  // labelled by the default budget.
  const bool cpu = mx::default_device() == mx::Device::cpu;
  EXPECT_EQ(path_label(rec, {1, 16, 1024, 32}, {1, 8, 1025, 32}, std::nullopt, true), kNativeLabel);
  EXPECT_EQ(path_label(rec, {1, 16, 1024, 32}, {1, 8, 1025, 32}, std::nullopt),
            cpu ? kTiledLabel : kNativeLabel);
  EXPECT_EQ(path_label(rec, {1, 16, 1024, 32}, {1, 8, 1024, 32}, std::nullopt),
            cpu ? kDenseLabel : kNativeLabel);
  EXPECT_EQ(path_label(rec, {1, 16, 8, 32}, {1, 8, 8, 32}, std::nullopt, false), kDenseLabel);
  EXPECT_EQ(path_label(rec, {1, 16, 8, 32}, {1, 8, 8, 32}, 1 << 20), kDenseLabel);
  EXPECT_EQ(path_label(rec, {1, 16, 8, 32}, {1, 8, 8, 32}, 4095), tiled_label());
}

TEST(AttentionVjpNumerics, LiveShapeErrorsAreClear) {
  Problem p = P(4, 2, 8, 8, 2, 2, 16);
  p.mask_kind = 1;  // a boolean mask: kind 0 never reads the mask, so its shape is not checked
  Data x = make_data(p, 3);
  Plan plan;
  plan.options.attention_vjp_dense_limit_bytes = 0;
  NodeDesc node;
  node.op_type = p.name();
  node.inputs = {"Q", "K", "V", "Y", "dY", "Mask"};
  node.outputs = {"dQ", "dK", "dV"};
  const OpEntry* entry = OpRegistry::global().find("pkg.onnax", node.op_type, 1);
  ASSERT_NE(entry, nullptr);
  auto attempt = [&](const std::string& which, mx::array bad) {
    TranslationContext ctx(plan);
    ctx.bind("Q", to_layout(p, x.q, 2, 8));
    ctx.bind("K", to_layout(p, x.k, 2, 8));
    ctx.bind("V", to_layout(p, x.v, 2, 8));
    ctx.bind("Y", to_layout(p, x.y, 2, 8));
    ctx.bind("dY", to_layout(p, x.dy, 2, 8));
    ctx.bind("Mask", mx::ones({1}, mx::bool_));
    ctx.bind(which, bad);
    try {
      entry->translate(ctx, node);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(attempt("Y", mx::zeros({2, 2, 9, 16})).find("incompatible live"), std::string::npos);
  EXPECT_NE(attempt("V", mx::zeros({2, 2, 7, 16})).find("incompatible live"), std::string::npos);
  EXPECT_NE(attempt("K", mx::zeros({3, 2, 8, 16})).find("incompatible live"), std::string::npos);
  EXPECT_NE(attempt("Q", mx::zeros({2, 3, 8, 16})).find("expected"), std::string::npos);
  EXPECT_NE(attempt("Mask", mx::zeros({5, 8}, mx::bool_)).find("mask broadcast"),
            std::string::npos);
  EXPECT_NE(attempt("Mask", mx::zeros({1, 1, 1, 1, 8}, mx::bool_)).find("mask rank"),
            std::string::npos);
  EXPECT_EQ(attempt("Mask", mx::zeros({8, 5}, mx::bool_)), "");  // last axis: any width
}

}  // namespace
}  // namespace ortmlx::attention_vjp
