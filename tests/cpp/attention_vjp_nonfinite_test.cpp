// AttentionVJP's MLX-op paths (dense_mlx, blocked_mlx, native_sdpa as on GPU backends) with NaN,
// +Inf and -Inf in each input: the same NaN and Inf positions as the float64 reference, and the
// same finite values. Also through the translator with the attention_vjp_mlx_ops option, which
// makes MLX's CPU backend take these paths. And the fused CPU kernel in every instruction set the
// CPU runs (its exp and max treat NaN and -inf by hand).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

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

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Every NaN where the reference has one, every Inf with its sign, finite values close.
void expect_same(const std::vector<double>& got, const std::vector<double>& want,
                 const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double mag = 1e-3;
  for (double w : want)
    if (std::isfinite(w)) mag = std::max(mag, std::abs(w));
  size_t bad = 0, nan_want = 0, nan_got = 0;
  std::ostringstream first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    nan_want += std::isnan(w);
    nan_got += std::isnan(g);
    const bool ok = std::isnan(w) ? std::isnan(g)
                    : std::isinf(w)
                        ? g == w
                        : std::isfinite(g) && std::abs(g - w) <= 1e-4 * std::abs(w) + 2e-5 * mag;
    if (!ok && bad++ < 4) first << " [" << i << "] got " << g << " want " << w << ";";
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " differ (NaN " << nan_got
                     << " vs " << nan_want << " in the reference):" << first.str();
}

// Puts `count` copies of `value` at random positions of one input (0 Q, 1 K, 2 V, 3 Y, 4 dY,
// 5 the additive mask) and recomputes the reference. Returns false when that input is absent.
bool inject(const Problem& p, Data& x, int input, double value, int count, unsigned seed) {
  std::vector<double>* target[] = {&x.q, &x.k, &x.v, &x.y, &x.dy, &x.mask};
  if ((input == 3 && p.recompute) || (input == 5 && p.mask_kind != 2)) return false;
  std::vector<double>& a = *target[input];
  std::mt19937 rng(seed);
  for (int i = 0; i < count; ++i) a[rng() % a.size()] = value;
  reference(p, x);
  return true;
}

// The problems: GQA and MQA, causal with Sq < Sk and Sq > Sk, narrow boolean and additive masks
// (keys left out of the blocked path's products), fully masked rows, both forms.
std::vector<Problem> problems() {
  std::vector<Problem> v;
  for (bool recompute : {false, true}) {
    const int d = recompute ? 32 : 16;  // the Recompute grammar asks for D >= 32
    auto add = [&](Problem p) {
      p.recompute = recompute;
      v.push_back(p);
    };
    Problem p = P(4, 2, 12, 15, 4, 2, d);  // causal, additive mask, dead rows
    p.causal = true, p.mask_kind = 2, p.mask_shape = {2, 1, 12, 15}, p.dead_rows = true;
    add(p);
    p = P(3, 1, 10, 14, 4, 1, d);  // narrow keep-mask (width 9 of 14), dead rows
    p.mask_kind = 1, p.mask_shape = {1, 10, 9}, p.dead_rows = true;
    add(p);
    p = P(4, 2, 14, 9, 2, 2, d);  // causal, Sq > Sk, narrow additive mask (width 6)
    p.causal = true, p.mask_kind = 2, p.mask_shape = {1, 2, 14, 6};
    add(p);
    p = P(4, 1, 9, 16, 2, 1, d);  // causal only, dQ and dK
    p.causal = true, p.outputs = {0, 1};
    add(p);
    add(P(4, 2, 8, 8, 2, 2, d));  // no mask at all
  }
  return v;
}

using Path = std::function<std::array<mx::array, 3>(const Config&, const Bhsd&)>;

void check_paths(const std::vector<std::pair<std::string, Path>>& paths) {
  unsigned seed = 1;
  for (const Problem& p : problems())
    for (int input = 0; input < 6; ++input)
      for (double value : {kNaN, kInf, -kInf}) {
        const unsigned case_seed = seed++;
        Data x = make_data(p, case_seed);
        if (!inject(p, x, input, value, 1 + static_cast<int>(case_seed % 2), case_seed)) continue;
        const auto parsed = Config::parse(p.name());
        ASSERT_TRUE(parsed) << p.name();
        const Config& c = *parsed;
        const Bhsd t = bhsd_of(p, x);
        for (const auto& [label, path] : paths) {
          SCOPED_TRACE(p.name() + " sq" + std::to_string(p.sq) + " sk" + std::to_string(p.sk) +
                       " input " + "QKVYdM"[input] + " value " + std::to_string(value) + " path " +
                       label);
          const auto grads = path(c, t);
          for (int o : p.outputs)
            expect_same(grad_of(p, grads[o], o), x.grads[o], std::string("d") + "QKV"[o]);
        }
      }
}

TEST(AttentionVjpNonFinite, DenseMlxFollowsTheReference) {
  check_paths({{"dense", [](const Config& c, const Bhsd& t) { return dense_mlx(c, t, {}); }}});
}

TEST(AttentionVjpNonFinite, BlockedMlxFollowsTheReference) {
  std::vector<std::pair<std::string, Path>> paths;
  for (int rows : {1, 4, 0})
    paths.emplace_back(
        "blocked rows " + std::to_string(rows),
        [rows](const Config& c, const Bhsd& t) { return blocked_mlx(c, t, {}, rows); });
  check_paths(paths);
}

TEST(AttentionVjpNonFinite, NativeSdpaOfGpuBackendsFollowsTheReference) {
  check_paths({{"native", [](const Config& c, const Bhsd& t) {
                  return native_sdpa(c, t, {}, /*mlx_ops=*/true);
                }}});
}

TEST(AttentionVjpNonFinite, CpuKernelInEveryIsaFollowsTheReference) {
  std::vector<std::pair<std::string, Path>> paths;
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kPortable}) {
    if (!rows::supported(isa)) continue;
    paths.emplace_back(isa_name(isa), [isa](const Config& c, const Bhsd& t) {
      Config c4 = c;  // Bhsd tensors are (B, H, S, D): a rank-4 contract
      c4.rank = 4;
      std::vector<mx::array> in = {t.q, t.k, t.v};
      if (t.y) in.push_back(*t.y);
      in.push_back(t.dy);
      in.push_back(t.mask);
      const auto out = cpu_kernel(c4, in, mx::Device::cpu, /*panel_rows=*/5, false, isa);
      std::array<mx::array, 3> grads = {mx::array(0.f), mx::array(0.f), mx::array(0.f)};
      for (size_t i = 0; i < c.outputs.size(); ++i) grads[c.outputs[i]] = out[i];
      return grads;
    });
  }
  check_paths(paths);
}

// The translator with attention_vjp_mlx_ops: dense within the limit, blocked (1-row and 3-row
// blocks) beyond it, native for Recompute without a limit; the label says which ran.
TEST(AttentionVjpNonFinite, TranslatorWithMlxOpsOption) {
  unsigned seed = 100;
  for (const Problem& p : problems())
    for (int input : {0, 1, 2, 4, 5}) {
      Data x = make_data(p, seed);
      if (!inject(p, x, input, seed % 3 == 0 ? kNaN : seed % 3 == 1 ? kInf : -kInf, 2, seed))
        continue;
      ++seed;
      struct Run {
        std::optional<uint64_t> limit;
        const char* label;
      };
      const uint64_t row = 4ull * p.b * p.hq * p.sk;
      std::vector<Run> runs = {
          {uint64_t{1} << 30, kDenseLabel}, {0, kBlockedLabel}, {3 * row, kBlockedLabel}};
      if (p.recompute) runs.push_back({std::nullopt, kNativeLabel});
      for (const Run& run : runs) {
        SCOPED_TRACE(p.name() + " input " + "QKVYdM"[input] + " label " + run.label);
        const Outcome out = run_translator(p, x, run.limit, std::nullopt, Tiled::kAuto, true);
        EXPECT_EQ(out.label, run.label);
        for (int o : p.outputs) expect_same(out.grads[o], x.grads[o], std::string("d") + "QKV"[o]);
      }
    }
}

}  // namespace
}  // namespace ortmlx::attention_vjp
