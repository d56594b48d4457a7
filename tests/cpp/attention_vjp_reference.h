// Shared by the AttentionVJP C++ tests: a float64 reference of the contract's semantics
// (docs/ATTENTION_VJP.md), test data in either layout, and runners of the registered
// translator with given options.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <mlx/mlx.h>

#include "ortmlx/engine/options.h"
#include "ortmlx/engine/plan.h"
#include "ortmlx/engine/translation_context.h"
#include "ortmlx/ops/attention_vjp/contract.h"
#include "ortmlx/ops/attention_vjp/cuda/fused.h"
#include "ortmlx/ops/attention_vjp/paths.h"
#include "ortmlx/registry/registry.h"

namespace ortmlx::attention_vjp::test_support {

namespace mx = mlx::core;

// A float64 reference of the contract's semantics on (B, H, S, D) data.
struct Problem {
  int rank = 4, b = 2, sq = 8, sk = 8, hq = 2, hk = 2, d = 16;
  bool causal = false;
  int mask_kind = 0;
  std::vector<int> mask_shape = {1};
  std::vector<int> outputs = {0, 1, 2};
  bool recompute = false;
  float scale = 0.25f;
  bool dead_rows = false;  // mask every key of some query rows
  bool random_y = false;   // plain form: Y not the forward output

  std::string name() const {
    uint32_t bits;
    std::memcpy(&bits, &scale, 4);
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", bits);
    std::string outs;
    for (int o : outputs) outs += std::to_string(o);
    return std::string(recompute ? "AttentionVJPRecompute_" : "AttentionVJP_") + "r" +
           std::to_string(rank) + "_q" + std::to_string(hq) + "_k" + std::to_string(hk) + "_d" +
           std::to_string(d) + "_s" + hex + "_c" + std::to_string(causal ? 1 : 0) + "_o" + outs +
           "_m" + std::to_string(mask_kind) + "_00112233aabbccdd";
  }
};

struct Data {
  // (B, H, S, D) row-major, double
  std::vector<double> q, k, v, y, dy;
  std::vector<double> mask;  // mask values (bool as 0/1), in mask_shape
  std::vector<double> grads[3];
};

inline constexpr double kInf = std::numeric_limits<double>::infinity();

// Mask value for (b, h, i, j) under the broadcast rule; nullopt = key masked by the width rule.
inline std::optional<double> mask_at(const Problem& p, const Data& x, int b, int h, int i, int j) {
  std::vector<int> shape = p.mask_shape;
  while (shape.size() < 4) shape.insert(shape.begin(), 1);
  const int width = shape[3];
  if (width != 1 && j >= width) return std::nullopt;
  const int idx[4] = {shape[0] == 1 ? 0 : b, shape[1] == 1 ? 0 : h, shape[2] == 1 ? 0 : i,
                      width == 1 ? 0 : j};
  size_t off = 0;
  for (int a = 0; a < 4; ++a)
    off = off * static_cast<size_t>(shape[a]) + static_cast<size_t>(idx[a]);
  return x.mask[off];
}

inline size_t at(const Problem& p, int heads, int seq, int b, int h, int i) {
  return ((static_cast<size_t>(b) * heads + h) * seq + i) * p.d;
}

// Probabilities of query row (b, h, i) over the keys; a row with every key masked is all zeros.
inline void row_probs(const Problem& p, const Data& x, int b, int h, int i,
                      std::vector<double>& pr) {
  const int kv = h / (p.hq / p.hk);
  std::vector<double> s(p.sk);
  std::vector<bool> keep(p.sk, true);
  double mx = -kInf;
  for (int j = 0; j < p.sk; ++j) {
    double acc = 0;
    for (int e = 0; e < p.d; ++e)
      acc += x.q[at(p, p.hq, p.sq, b, h, i) + e] * x.k[at(p, p.hk, p.sk, b, kv, j) + e];
    s[j] = p.scale * acc;
    if (p.causal && j > i) keep[j] = false;  // top-left alignment
    if (p.mask_kind) {
      const auto m = mask_at(p, x, b, h, i, j);
      if (!m || (p.mask_kind == 1 && *m == 0.0))
        keep[j] = false;
      else if (p.mask_kind == 2)
        s[j] += *m;
      if (std::isinf(s[j]) && s[j] < 0) keep[j] = false;
    }
    if (keep[j]) mx = std::max(mx, s[j]);
  }
  pr.assign(p.sk, 0.0);
  double sum = 0;
  for (int j = 0; j < p.sk; ++j) sum += pr[j] = keep[j] && mx > -kInf ? std::exp(s[j] - mx) : 0.0;
  for (int j = 0; j < p.sk; ++j) pr[j] = sum > 0 ? pr[j] / sum : 0.0;
}

// Y = P V (the forward output).
inline std::vector<double> forward(const Problem& p, const Data& x) {
  std::vector<double> y(x.q.size(), 0.0), pr;
  for (int b = 0; b < p.b; ++b)
    for (int h = 0; h < p.hq; ++h)
      for (int i = 0; i < p.sq; ++i) {
        row_probs(p, x, b, h, i, pr);
        for (int j = 0; j < p.sk; ++j)
          for (int e = 0; e < p.d; ++e)
            y[at(p, p.hq, p.sq, b, h, i) + e] +=
                pr[j] * x.v[at(p, p.hk, p.sk, b, h / (p.hq / p.hk), j) + e];
      }
  return y;
}

inline void reference(const Problem& p, Data& x) {
  x.grads[0].assign(x.q.size(), 0.0);
  x.grads[1].assign(x.k.size(), 0.0);
  x.grads[2].assign(x.v.size(), 0.0);
  const std::vector<double> y = p.recompute ? forward(p, x) : x.y;
  std::vector<double> pr, ds(p.sk);
  for (int b = 0; b < p.b; ++b)
    for (int h = 0; h < p.hq; ++h) {
      const int kv = h / (p.hq / p.hk);
      for (int i = 0; i < p.sq; ++i) {
        row_probs(p, x, b, h, i, pr);
        const size_t qi = at(p, p.hq, p.sq, b, h, i);
        double delta = 0;
        for (int e = 0; e < p.d; ++e) delta += x.dy[qi + e] * y[qi + e];
        for (int j = 0; j < p.sk; ++j) {
          double dp = 0;
          for (int e = 0; e < p.d; ++e) dp += x.dy[qi + e] * x.v[at(p, p.hk, p.sk, b, kv, j) + e];
          ds[j] = pr[j] * (dp - delta);
        }
        for (int j = 0; j < p.sk; ++j) {
          const size_t kj = at(p, p.hk, p.sk, b, kv, j);
          for (int e = 0; e < p.d; ++e) {
            x.grads[0][qi + e] += p.scale * ds[j] * x.k[kj + e];
            x.grads[1][kj + e] += p.scale * ds[j] * x.q[qi + e];
            x.grads[2][kj + e] += pr[j] * x.dy[qi + e];
          }
        }
      }
    }
}

// (B, H, S, D) doubles -> float32 array in the contract's layout.
inline mx::array to_layout(const Problem& p, const std::vector<double>& t, int heads, int seq) {
  std::vector<float> f(t.size());
  for (int b = 0; b < p.b; ++b)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < seq; ++i)
        for (int e = 0; e < p.d; ++e) {
          const size_t src = ((static_cast<size_t>(b) * heads + h) * seq + i) * p.d + e;
          const size_t dst =
              p.rank == 4 ? src : ((static_cast<size_t>(b) * seq + i) * heads + h) * p.d + e;
          f[dst] = static_cast<float>(t[src]);
        }
  const mx::Shape shape =
      p.rank == 4 ? mx::Shape{p.b, heads, seq, p.d} : mx::Shape{p.b, seq, heads * p.d};
  return mx::array(f.data(), shape, mx::float32);
}

inline std::vector<double> from_layout(const Problem& p, const mx::array& a, int heads, int seq) {
  mx::array c = mx::contiguous(mx::astype(a, mx::float32));
  mx::eval(c);
  const float* f = c.data<float>();
  std::vector<double> t(static_cast<size_t>(p.b) * heads * seq * p.d);
  for (int b = 0; b < p.b; ++b)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < seq; ++i)
        for (int e = 0; e < p.d; ++e) {
          const size_t dst = ((static_cast<size_t>(b) * heads + h) * seq + i) * p.d + e;
          const size_t src =
              p.rank == 4 ? dst : ((static_cast<size_t>(b) * seq + i) * heads + h) * p.d + e;
          t[dst] = f[src];
        }
  return t;
}

inline Data make_data(const Problem& p, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  std::uniform_real_distribution<double> uni(-1.0, 1.0);
  auto fill = [&](size_t n) {
    std::vector<double> v(n);
    for (auto& e : v) e = static_cast<float>(normal(rng));  // exactly representable in fp32
    return v;
  };
  Data x;
  const size_t nq = static_cast<size_t>(p.b) * p.hq * p.sq * p.d;
  const size_t nk = static_cast<size_t>(p.b) * p.hk * p.sk * p.d;
  x.q = fill(nq);
  x.k = fill(nk);
  x.v = fill(nk);
  x.dy = fill(nq);
  size_t nm = 1;
  for (int s : p.mask_shape) nm *= static_cast<size_t>(s);
  x.mask.resize(nm);
  std::vector<int> shape = p.mask_shape;
  const int rows = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
  const int width = shape.back();
  for (size_t i = 0; i < nm; ++i) {
    const int row = width ? static_cast<int>(i / static_cast<size_t>(width)) % rows : 0;
    const bool dead = p.dead_rows && rows > 1 && row % 3 == 1;
    if (p.mask_kind == 2)
      x.mask[i] = dead || uni(rng) > 0.7 ? -kInf : static_cast<float>(uni(rng));
    else
      x.mask[i] = !dead && uni(rng) < 0.7 ? 1.0 : 0.0;
  }
  if (!p.recompute) {
    x.y = p.random_y ? fill(nq) : forward(p, x);
    for (auto& e : x.y) e = static_cast<float>(e);  // what the fp32 graph receives
  }
  reference(p, x);
  return x;
}

inline mx::array mask_array(const Problem& p, const Data& x) {
  mx::Shape shape(p.mask_shape.begin(), p.mask_shape.end());
  if (p.mask_kind == 2) {
    std::vector<float> f(x.mask.begin(), x.mask.end());
    return mx::array(f.data(), shape, mx::float32);
  }
  std::unique_ptr<bool[]> bits(new bool[x.mask.size() + 1]);
  for (size_t i = 0; i < x.mask.size(); ++i) bits[i] = x.mask[i] != 0.0;
  return mx::array(bits.get(), shape, mx::bool_);
}

// The problem's tensors in (B, H, S, D), as the translator hands them to the MLX paths, and
// gradient `o` (0 dQ, 1 dK, 2 dV) of such a path back as doubles.
inline Bhsd bhsd_of(const Problem& p, const Data& x) {
  Problem q = p;
  q.rank = 4;
  Bhsd t{to_layout(q, x.q, p.hq, p.sq),  to_layout(q, x.k, p.hk, p.sk),
         to_layout(q, x.v, p.hk, p.sk),  std::nullopt,
         to_layout(q, x.dy, p.hq, p.sq), mask_array(p, x)};
  if (!p.recompute) t.y = to_layout(q, x.y, p.hq, p.sq);
  return t;
}

inline std::vector<double> grad_of(const Problem& p, const mx::array& a, int o) {
  Problem q = p;
  q.rank = 4;
  return from_layout(q, a, o == 0 ? p.hq : p.hk, o == 0 ? p.sq : p.sk);
}

inline void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double mag = 1e-3;
  for (double w : want) mag = std::max(mag, std::abs(w));
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(got[i] - want[i]);
    ASSERT_TRUE(std::isfinite(got[i])) << what << " non-finite at " << i;
    if (err > 1e-4 * std::abs(want[i]) + 2e-5 * mag) ++bad;
    worst = std::max(worst, err);
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size() << " off, worst " << worst
                     << " (magnitude " << mag << ")";
}

// Runs the contract through the registered translator with a given dense limit; returns the
// gradients (reference layout) and the path label.
struct Outcome {
  std::vector<double> grads[3];
  std::string label;
};

// The kernel instruction set run_translator's sessions ask for (tests loop over each one the CPU
// runs).
inline EpOptions::CpuIsa g_cpu_isa = EpOptions::CpuIsa::kAuto;

inline Outcome run_translator(
    const Problem& p, const Data& x, std::optional<uint64_t> limit,
    std::optional<bool> native = std::nullopt,
    EpOptions::AttentionVjpTiled tiled = EpOptions::AttentionVjpTiled::kAuto,
    bool mlx_ops = false) {
  Plan plan;
  plan.name = "fused";
  plan.options.attention_vjp_dense_limit_bytes = limit;
  plan.options.attention_vjp_native = native;
  plan.options.attention_vjp_tiled = tiled;
  plan.options.attention_vjp_mlx_ops = mlx_ops;
  plan.options.cpu_isa = g_cpu_isa;
  TranslationContext ctx(plan);
  NodeDesc node;
  node.name = "attention_vjp";
  node.op_type = p.name();
  node.domain = "pkg.onnax";
  node.since_version = 1;
  ctx.bind("Q", to_layout(p, x.q, p.hq, p.sq));
  ctx.bind("K", to_layout(p, x.k, p.hk, p.sk));
  ctx.bind("V", to_layout(p, x.v, p.hk, p.sk));
  if (!p.recompute) ctx.bind("Y", to_layout(p, x.y, p.hq, p.sq));
  ctx.bind("dY", to_layout(p, x.dy, p.hq, p.sq));
  ctx.bind("Mask", mask_array(p, x));
  node.inputs = p.recompute ? std::vector<std::string>{"Q", "K", "V", "dY", "Mask"}
                            : std::vector<std::string>{"Q", "K", "V", "Y", "dY", "Mask"};
  for (int o : p.outputs) node.outputs.push_back("d" + std::string(1, "QKV"[o]));
  const OpEntry* entry = OpRegistry::global().find("pkg.onnax", node.op_type, 1);
  if (!entry) throw std::runtime_error("no registry entry for " + node.op_type);
  entry->translate(ctx, node);
  Outcome out;
  for (size_t i = 0; i < p.outputs.size(); ++i) {
    const int o = p.outputs[i];
    out.grads[o] =
        from_layout(p, ctx.resolve(node.outputs[i]), o == 0 ? p.hq : p.hk, o == 0 ? p.sq : p.sk);
  }
  if (!ctx.path_marks().empty()) out.label = ctx.path_marks().back().label;
  return out;
}

inline Problem P(int rank, int b, int sq, int sk, int hq, int hk, int d) {
  Problem p;
  p.rank = rank, p.b = b, p.sq = sq, p.sk = sk, p.hq = hq, p.hk = hk, p.d = d;
  p.scale = 1.f / std::sqrt(static_cast<float>(d));
  return p;
}

// Variants shared by every path.
inline std::vector<Problem> variants(bool recompute) {
  std::vector<Problem> v;
  auto add = [&](Problem p) {
    p.recompute = recompute;
    if (recompute && p.d < 32) p.d = 32;
    v.push_back(p);
  };
  add(P(4, 2, 16, 16, 4, 4, 16));
  add(P(3, 2, 16, 16, 4, 4, 16));
  {
    Problem p = P(4, 2, 12, 20, 4, 2, 32);  // GQA, causal, Sq < Sk, full mask, dead rows
    p.causal = true, p.mask_kind = 1, p.mask_shape = {2, 1, 12, 20}, p.dead_rows = true;
    add(p);
  }
  {
    Problem p = P(3, 1, 20, 12, 4, 1, 8);  // MQA, causal, Sq > Sk, additive rank-2 mask
    p.causal = true, p.mask_kind = 2, p.mask_shape = {20, 12}, p.dead_rows = true;
    add(p);
  }
  {
    Problem p = P(4, 2, 16, 24, 4, 2, 24);  // wide mask, only dK
    p.mask_kind = 1, p.mask_shape = {1, 1, 1, 30}, p.outputs = {1};
    add(p);
  }
  {
    Problem p = P(3, 2, 9, 33, 4, 2, 40);  // narrow additive mask (4, 1, 7), dQ dK
    p.mask_kind = 2, p.mask_shape = {4, 1, 7}, p.outputs = {0, 1};
    add(p);
  }
  {
    Problem p = P(4, 2, 16, 24, 4, 2, 24);  // causal with a narrow per-head additive mask
    p.causal = true, p.mask_kind = 2, p.mask_shape = {2, 4, 16, 10};
    add(p);
  }
  {
    Problem p = P(4, 3, 17, 17, 6, 3, 16);  // causal, dK dV
    p.causal = true, p.outputs = {1, 2};
    add(p);
  }
  {
    Problem p = P(3, 1, 32, 32, 8, 2, 8);  // mask broadcast over keys (width 1)
    p.causal = true, p.mask_kind = 1, p.mask_shape = {1, 32, 1}, p.outputs = {0, 2};
    add(p);
  }
  {
    Problem p = P(4, 2, 8, 40, 2, 1, 16);  // rank-2 mask with width 1, dQ dV
    p.mask_kind = 1, p.mask_shape = {8, 1}, p.outputs = {0, 2};
    add(p);
  }
  {
    Problem p = P(4, 1, 48, 64, 2, 2, 64);  // additive rank-3 mask, causal
    p.causal = true, p.mask_kind = 2, p.mask_shape = {1, 48, 64};
    add(p);
  }
  {
    Problem p = P(4, 2, 16, 16, 4, 2, 16);  // rank-1 mask (keys), only dV
    p.mask_kind = 1, p.mask_shape = {16}, p.outputs = {2};
    add(p);
  }
  {
    Problem p = P(3, 2, 16, 16, 4, 2, 16);  // additive mask per (batch, head, row), width 1
    p.mask_kind = 2, p.mask_shape = {2, 4, 16, 1}, p.outputs = {0, 1, 2};
    add(p);
  }
  if (!recompute) {
    Problem p = P(3, 2, 16, 16, 4, 2, 16);  // Y taken as given
    p.mask_kind = 1, p.mask_shape = {16, 16}, p.random_y = true;
    add(p);
  }
  return v;
}

// The label the translator marks for live shapes and a limit (the graph is built, not evaluated).
// The label of the path beyond the dense limit with attention_vjp_tiled=auto on the default
// device's backend.
inline const char* tiled_label() {
  if (mx::default_device() == mx::Device::cpu) return kTiledLabel;
  // GPU backends: the fused CUDA kernels on the CUDA backend with an sm_90 GPU (the default
  // there beyond the dense limit), blocked MLX ops elsewhere.
  return ortmlx::attention_vjp::cuda_fused_available() ? kCudaFusedLabel : kBlockedLabel;
}

inline std::string path_label(
    const std::string& op, const mx::Shape& q, const mx::Shape& k, std::optional<uint64_t> limit,
    std::optional<bool> native = std::nullopt,
    EpOptions::AttentionVjpTiled tiled = EpOptions::AttentionVjpTiled::kAuto) {
  Plan plan;
  plan.options.attention_vjp_dense_limit_bytes = limit;
  plan.options.attention_vjp_native = native;
  plan.options.attention_vjp_tiled = tiled;
  TranslationContext ctx(plan);
  NodeDesc node;
  node.op_type = op;
  const bool recompute = op.rfind("AttentionVJPRecompute_", 0) == 0;
  node.inputs = recompute ? std::vector<std::string>{"Q", "K", "V", "dY", "Mask"}
                          : std::vector<std::string>{"Q", "K", "V", "Y", "dY", "Mask"};
  node.outputs = {"dQ", "dK", "dV"};
  for (const auto& n : node.inputs) ctx.bind(n, n == "K" || n == "V" ? mx::zeros(k) : mx::zeros(q));
  ctx.bind("Mask", mx::ones({1}, mx::bool_));
  OpRegistry::global().find("pkg.onnax", op, 1)->translate(ctx, node);
  return ctx.path_marks().empty() ? "" : ctx.path_marks().back().label;
}

}  // namespace ortmlx::attention_vjp::test_support
