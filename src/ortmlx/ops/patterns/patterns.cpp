// The pattern pass (see patterns.h): matchers over a Plan's node list and the translators of the
// pattern nodes they produce.
//
// Forms recognised (operands of Add/Mul in either order; constants are initializers):
//   LayerNorm (torch export): m = ReduceMean(x, [-1]); d = Sub(x, m); p = Pow(d, 2) | Mul(d, d);
//     v = ReduceMean(p, [-1]); s = Sqrt(Add(v, eps)); n = Div(d, s); [Mul(n, gamma)]; [Add(.,
//     beta)]
//   RMSNorm: p = Pow(x, 2) | Mul(x, x); v = ReduceMean(p, [-1]); s = Sqrt(Add(v, eps));
//     n = Div(x, s) | Mul(x, Reciprocal(s)) | Mul(x, Div(1, s)); [Cast(float)]; [Mul(n, w)]
//   GELU (erf): e = Erf(Div(x, sqrt2) | Mul(x, 1/sqrt2)); a = Add(e, 1);
//     Mul(Mul(x, a), 0.5) | Mul(Mul(x, 0.5), a)
//   GELU (tanh): t = Tanh(Mul(Add(x, Mul(Pow(x, 3), 0.044715)), sqrt(2/pi))); a = Add(t, 1);
//     the same two tails.
//   Attention: p = Softmax(Mul(MatMul(q, kT), c) | Div(MatMul(q, kT), c), -1); MatMul(p, v), rank
//     4, kT = Transpose(k, [0, 1, 3, 2]) or any value.
//   Linear: Add(MatMul(a, b), bias), bias a vector of the last axis, a and b of rank >= 2 (one
//     addmm: a GEMM with the bias as its accumulator, one primitive instead of two).
//   MatMuls of one input: MatMul(a, W_i) for 2+ constant 2-D W_i of one K
//   (shared_input_matmul.cpp).
// The norms run as mx::fast::layer_norm / rms_norm, which MLX's CUDA backend implements as one
// kernel each (float32 accumulation, two-pass variance for LayerNorm: mlx/backend/cuda/
// layer_norm.cu, rms_norm.cu); on MLX's CPU backend they are MLX's composed fallback. The GELU
// nodes run the chain's own ops (the same constants, the same erf as the Erf op) in one
// translator: mlx::compile fuses them into one elementwise kernel either way, and the pattern
// node shows in the report that the activation was recognised.
#include "ortmlx/ops/patterns/patterns.h"

#include <cmath>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <mlx/fast.h>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/cuda_support.h"
#include "ortmlx/ops/elementwise.h"
#include "ortmlx/ops/elementwise/cuda/gelu.h"
#include "ortmlx/ops/matmul_cpu.h"
#include "ortmlx/ops/norm/cuda/layer_norm.h"
#include "ortmlx/ops/patterns/patterns_internal.h"

namespace ortmlx::ops::patterns {

namespace {

using detail::Match;
using detail::PlanIndex;

constexpr const char* kAttentionScaleOnQ =
    "attention chain: its own ops, the power-of-two scale on q (exact; no pass over the scores)";

bool close_to(double v, double target) {
  return std::fabs(v - target) <= 1e-6 * std::fabs(target);
}

// The operand of binary node n that is not `known` (either order); nullopt when n does not read
// `known`.
std::optional<std::string> other_operand(const NodeDesc& n, const std::string& known) {
  if (n.inputs.size() != 2) return std::nullopt;
  if (n.inputs[0] == known) return n.inputs[1];
  if (n.inputs[1] == known) return n.inputs[0];
  return std::nullopt;
}

// Binary node n with one scalar-constant operand: (the other operand, the constant's value).
std::optional<std::pair<std::string, double>> split_scalar(const PlanIndex& ix, const NodeDesc& n,
                                                           bool constant_second_only = false) {
  if (n.inputs.size() != 2) return std::nullopt;
  for (int k = 1; k >= (constant_second_only ? 1 : 0); --k) {
    if (auto v = ix.scalar(n.inputs[k]); v && !ix.constant(n.inputs[1 - k]))
      return std::make_pair(n.inputs[1 - k], *v);
  }
  return std::nullopt;
}

bool float_input(const NodeDesc& n, size_t i) {
  return i < n.input_infos.size() && n.input_infos[i].dtype == ElemType::kFloat;
}

// ReduceMean over exactly the last axis with keepdims=1, axes from the attribute (opset < 18) or
// a constant input.
bool reduce_mean_last_axis(const PlanIndex& ix, const NodeDesc& n) {
  if (n.attr_int("keepdims", 1) != 1) return false;
  std::vector<int64_t> axes;
  if (n.inputs.size() > 1 && !n.inputs[1].empty()) {
    auto v = ix.constant(n.inputs[1]);
    if (!v) return false;
    for (double a : *v) axes.push_back(static_cast<int64_t>(a));
  } else if (auto a = n.attr_ints("axes")) {
    axes = *a;
  }
  if (axes.size() != 1) return false;
  const int64_t rank = n.input_infos.empty() ? -1 : n.input_infos[0].rank();
  return axes[0] == -1 || (rank > 0 && axes[0] == rank - 1);
}

// s = Sqrt(Add(ReduceMean(Pow(b, 2) | Mul(b, b), [-1]), eps)): the nodes, b and eps.
struct MeanSquare {
  std::set<size_t> nodes;
  std::string base;
  double eps = 0;
};
std::optional<MeanSquare> match_mean_square_root(const PlanIndex& ix, size_t sqrt_node) {
  MeanSquare m;
  const NodeDesc& sq = ix.node(sqrt_node);
  auto add = ix.producer(sq.inputs[0], "Add");
  if (!add) return std::nullopt;
  auto eps = split_scalar(ix, ix.node(*add));
  if (!eps) return std::nullopt;
  auto rm = ix.producer(eps->first, "ReduceMean");
  if (!rm || !reduce_mean_last_axis(ix, ix.node(*rm))) return std::nullopt;
  const std::string& p = ix.node(*rm).inputs[0];
  std::optional<size_t> sqr = ix.producer(p, "Pow");
  if (sqr) {
    auto e = ix.scalar(ix.node(*sqr).inputs[1]);
    if (!e || *e != 2.0) return std::nullopt;
  } else {
    sqr = ix.producer(p, "Mul");
    if (!sqr || ix.node(*sqr).inputs[0] != ix.node(*sqr).inputs[1]) return std::nullopt;
  }
  m.base = ix.node(*sqr).inputs[0];
  if (!float_input(ix.node(*sqr), 0)) return std::nullopt;
  m.eps = eps->second;
  m.nodes = {*sqr, *rm, *add, sqrt_node};
  return m;
}

// Optional affine tail after a norm: Mul by a float constant vector, then Add of one.
void extend_affine(const PlanIndex& ix, Match& m, bool with_shift) {
  const std::string& out = ix.node(m.last).outputs[0];
  auto mul = ix.sole_consumer(out, "Mul");
  if (!mul) return;
  auto w = other_operand(ix.node(*mul), out);
  if (!w || !ix.vector_constant(*w)) return;
  m.nodes.insert(*mul);
  m.last = *mul;
  m.inputs[1] = *w;
  if (!with_shift) return;
  const std::string& y = ix.node(*mul).outputs[0];
  auto add = ix.sole_consumer(y, "Add");
  if (!add) return;
  auto b = other_operand(ix.node(*add), y);
  if (!b || !ix.vector_constant(*b)) return;
  m.nodes.insert(*add);
  m.last = *add;
  m.inputs[2] = *b;
}

std::optional<Match> match_layer_norm(const PlanIndex& ix, size_t i) {
  const NodeDesc& div = ix.node(i);
  if (div.inputs.size() != 2) return std::nullopt;
  auto sq = ix.producer(div.inputs[1], "Sqrt");
  if (!sq) return std::nullopt;
  auto ms = match_mean_square_root(ix, *sq);
  if (!ms || ms->base != div.inputs[0]) return std::nullopt;
  auto sub = ix.producer(div.inputs[0], "Sub");
  if (!sub) return std::nullopt;
  const std::string& x = ix.node(*sub).inputs[0];
  auto rm = ix.producer(ix.node(*sub).inputs[1], "ReduceMean");
  if (!rm || ix.node(*rm).inputs[0] != x || !reduce_mean_last_axis(ix, ix.node(*rm)) ||
      !float_input(ix.node(*sub), 0))
    return std::nullopt;
  Match m;
  m.pattern = "layer_norm";
  m.nodes = ms->nodes;
  m.nodes.insert({*rm, *sub, i});
  m.last = i;
  m.inputs = {x, "", ""};
  m.attrs["epsilon"] = static_cast<float>(ms->eps);
  extend_affine(ix, m, /*with_shift=*/true);
  return m;
}

std::optional<Match> match_rms_norm(const PlanIndex& ix, size_t i) {
  auto ms = match_mean_square_root(ix, i);
  if (!ms) return std::nullopt;
  const std::string& x = ms->base;
  const std::string& s = ix.node(i).outputs[0];
  Match m;
  m.pattern = "rms_norm";
  m.nodes = ms->nodes;
  if (auto div = ix.sole_consumer(s, "Div")) {
    const NodeDesc& d = ix.node(*div);
    if (d.inputs[1] != s) return std::nullopt;
    if (d.inputs[0] == x) {
      m.nodes.insert(*div);
      m.last = *div;
    } else {
      // 1 / s, then x * (1 / s).
      auto one = ix.scalar(d.inputs[0]);
      if (!one || *one != 1.0) return std::nullopt;
      auto mul = ix.sole_consumer(d.outputs[0], "Mul");
      if (!mul || other_operand(ix.node(*mul), d.outputs[0]) != x) return std::nullopt;
      m.nodes.insert({*div, *mul});
      m.last = *mul;
    }
  } else if (auto rec = ix.sole_consumer(s, "Reciprocal")) {
    const std::string& r = ix.node(*rec).outputs[0];
    auto mul = ix.sole_consumer(r, "Mul");
    if (!mul || other_operand(ix.node(*mul), r) != x) return std::nullopt;
    m.nodes.insert({*rec, *mul});
    m.last = *mul;
  } else {
    return std::nullopt;
  }
  // A Cast to float32 of the float32 result (torch's `.to(input_dtype)`) is the identity.
  if (auto cast = ix.sole_consumer(ix.node(m.last).outputs[0], "Cast")) {
    if (ix.node(*cast).attr_int("to", 0) == static_cast<int64_t>(ElemType::kFloat)) {
      m.nodes.insert(*cast);
      m.last = *cast;
    }
  }
  m.inputs = {x, ""};
  m.attrs["epsilon"] = static_cast<float>(ms->eps);
  extend_affine(ix, m, /*with_shift=*/false);
  return m;
}

// GELU tail from a = Add(f, 1): Mul(Mul(x, a), 0.5) or Mul(Mul(x, 0.5), a). Adds its nodes and
// the "tail" attribute (0: (x * a) * c, 1: (x * c) * a) and "half".
bool match_gelu_tail(const PlanIndex& ix, Match& m, size_t add_node, const std::string& x) {
  const std::string& a = ix.node(add_node).outputs[0];
  auto mul = ix.sole_consumer(a, "Mul");
  if (!mul) return false;
  auto q = other_operand(ix.node(*mul), a);
  if (!q) return false;
  if (*q == x) {
    auto half = ix.sole_consumer(ix.node(*mul).outputs[0], "Mul");
    if (!half) return false;
    auto c = split_scalar(ix, ix.node(*half));
    if (!c || c->first != ix.node(*mul).outputs[0] || !close_to(c->second, 0.5)) return false;
    m.nodes.insert({*mul, *half});
    m.last = *half;
    m.attrs["tail"] = int64_t{0};
    m.attrs["half"] = static_cast<float>(c->second);
    return true;
  }
  auto h = ix.producer(*q, "Mul");
  if (!h) return false;
  auto c = split_scalar(ix, ix.node(*h));
  if (!c || c->first != x || !close_to(c->second, 0.5)) return false;
  m.nodes.insert({*h, *mul});
  m.last = *mul;
  m.attrs["tail"] = int64_t{1};
  m.attrs["half"] = static_cast<float>(c->second);
  return ix.internal(*q, m.nodes);
}

std::optional<std::pair<size_t, double>> add_one(const PlanIndex& ix, const std::string& v) {
  auto add = ix.sole_consumer(v, "Add");
  if (!add) return std::nullopt;
  auto one = split_scalar(ix, ix.node(*add));
  if (!one || one->first != v || one->second != 1.0) return std::nullopt;
  return std::make_pair(*add, one->second);
}

std::optional<Match> match_gelu_erf(const PlanIndex& ix, size_t i) {
  const NodeDesc& erf = ix.node(i);
  Match m;
  m.pattern = "gelu_erf";
  std::optional<size_t> scale = ix.producer(erf.inputs[0], "Div");
  bool divide = true;
  if (!scale) {
    scale = ix.producer(erf.inputs[0], "Mul");
    divide = false;
  }
  if (!scale) return std::nullopt;
  auto c = split_scalar(ix, ix.node(*scale), /*constant_second_only=*/divide);
  if (!c || !close_to(c->second, divide ? M_SQRT2 : M_SQRT1_2)) return std::nullopt;
  const std::string x = c->first;
  const NodeDesc& sn = ix.node(*scale);
  if (!float_input(sn, sn.inputs[0] == x ? 0 : 1)) return std::nullopt;
  auto one = add_one(ix, erf.outputs[0]);
  if (!one) return std::nullopt;
  m.nodes = {*scale, i, one->first};
  if (!ix.internal(erf.inputs[0], m.nodes)) return std::nullopt;
  if (!match_gelu_tail(ix, m, one->first, x)) return std::nullopt;
  m.inputs = {x};
  m.attrs["divide"] = int64_t{divide ? 1 : 0};
  m.attrs["c"] = static_cast<float>(c->second);
  return m;
}

std::optional<Match> match_gelu_tanh(const PlanIndex& ix, size_t i) {
  const NodeDesc& tanh = ix.node(i);
  auto outer = ix.producer(tanh.inputs[0], "Mul");
  if (!outer) return std::nullopt;
  auto k = split_scalar(ix, ix.node(*outer));
  if (!k || !close_to(k->second, std::sqrt(2.0 / M_PI))) return std::nullopt;
  auto inner = ix.producer(k->first, "Add");
  if (!inner || ix.node(*inner).inputs.size() != 2) return std::nullopt;
  // One operand of the inner Add is x, the other Mul(Pow(x, 3), 0.044715).
  for (int side = 0; side < 2; ++side) {
    const std::string x = ix.node(*inner).inputs[side];
    auto cube_mul = ix.producer(ix.node(*inner).inputs[1 - side], "Mul");
    if (!cube_mul) continue;
    auto a = split_scalar(ix, ix.node(*cube_mul));
    if (!a || !close_to(a->second, 0.044715)) continue;
    auto pow = ix.producer(a->first, "Pow");
    if (!pow || ix.node(*pow).inputs[0] != x || ix.scalar(ix.node(*pow).inputs[1]) != 3.0 ||
        !float_input(ix.node(*pow), 0))
      continue;
    auto one = add_one(ix, tanh.outputs[0]);
    if (!one) return std::nullopt;
    Match m;
    m.pattern = "gelu_tanh";
    m.nodes = {*pow, *cube_mul, *inner, *outer, i, one->first};
    if (!match_gelu_tail(ix, m, one->first, x)) return std::nullopt;
    for (const std::string& v : {ix.node(*pow).outputs[0], ix.node(*cube_mul).outputs[0],
                                 ix.node(*inner).outputs[0], tanh.inputs[0]})
      if (!ix.internal(v, m.nodes)) return std::nullopt;
    m.inputs = {x};
    m.attrs["a"] = static_cast<float>(a->second);
    m.attrs["k"] = static_cast<float>(k->second);
    return m;
  }
  return std::nullopt;
}

// softmax(MatMul(q, kT) * c | / c) then MatMul(probs, v); kT = Transpose(k, [0,1,3,2]) or any
// value (then transposed back in the translator). Rank 4 float32, softmax over the last axis.
std::optional<Match> match_attention(const PlanIndex& ix, size_t i) {
  const NodeDesc& sm = ix.node(i);
  if (sm.since_version < 13 || sm.input_infos.empty() || sm.input_infos[0].rank() != 4)
    return std::nullopt;
  const int64_t axis = sm.attr_int("axis", -1);
  if (axis != -1 && axis != 3) return std::nullopt;
  std::optional<size_t> scale = ix.producer(sm.inputs[0], "Mul");
  bool divide = false;
  if (!scale) {
    scale = ix.producer(sm.inputs[0], "Div");
    divide = true;
  }
  if (!scale) return std::nullopt;
  auto c = split_scalar(ix, ix.node(*scale), /*constant_second_only=*/divide);
  if (!c || c->second == 0.0) return std::nullopt;
  auto mm1 = ix.producer(c->first, "MatMul");
  if (!mm1) return std::nullopt;
  const NodeDesc& qk = ix.node(*mm1);
  auto mm2 = ix.sole_consumer(sm.outputs[0], "MatMul");
  if (!mm2 || ix.node(*mm2).inputs[0] != sm.outputs[0]) return std::nullopt;
  const NodeDesc& pv = ix.node(*mm2);
  for (const NodeDesc* nd : {&qk, &pv})
    for (size_t k = 0; k < 2; ++k)
      if (!float_input(*nd, k) || nd->input_infos[k].rank() != 4) return std::nullopt;
  Match m;
  m.pattern = "attention";
  m.nodes = {*mm1, *scale, i, *mm2};
  m.last = *mm2;
  std::string key = qk.inputs[1];
  int64_t key_transposed = 0;
  if (auto tr = ix.producer(qk.inputs[1], "Transpose")) {
    auto perm = ix.node(*tr).attr_ints("perm");
    if (perm && *perm == std::vector<int64_t>{0, 1, 3, 2} && ix.internal(qk.inputs[1], {*mm1})) {
      m.nodes.insert(*tr);
      key = ix.node(*tr).inputs[0];
      key_transposed = 1;
    }
  }
  m.inputs = {qk.inputs[0], key, pv.inputs[1]};
  m.attrs["scale"] = static_cast<float>(divide ? 1.0 / c->second : c->second);
  m.attrs["key_transposed"] = key_transposed;
  return m;
}

// y = Add(MatMul(a, b), bias) | Add(bias, MatMul(a, b)): a Gemm-like layer (a Linear as torch
// exports it). float32, a and b of rank >= 2 (2-D or batched), bias of rank 1 (a vector of the
// last axis; its length is checked in the translator). The product's only reader is the Add.
// MLX CPU only: on GPU backends mx::addmm first copies the broadcast bias into the output and then
// runs the GEMM, the same two kernels as MatMul + Add, and the Add can no longer fuse with the
// elementwise ops after it (measured on an H200: bert 0.94 -> 1.21 ms per run with the pattern).
std::optional<Match> match_matmul_add(const PlanIndex& ix, size_t i) {
  if (gpu_backend()) return std::nullopt;
  const NodeDesc& add = ix.node(i);
  if (add.inputs.size() != 2 || add.input_infos.size() != 2) return std::nullopt;
  for (size_t side = 0; side < 2; ++side) {
    auto mm = ix.producer(add.inputs[side], "MatMul");
    if (!mm || ix.sole_consumer(add.inputs[side], "Add") != i) continue;
    const NodeDesc& m = ix.node(*mm);
    const TensorInfo& bias = add.input_infos[1 - side];
    if (add.inputs[0] == add.inputs[1] || bias.dtype != ElemType::kFloat || bias.rank() != 1)
      return std::nullopt;
    for (size_t k = 0; k < 2; ++k)
      if (!float_input(m, k) || m.input_infos[k].rank() < 2) return std::nullopt;
    Match r;
    r.pattern = "matmul_add";
    r.nodes = {*mm, i};
    r.last = i;
    r.inputs = {m.inputs[0], m.inputs[1], add.inputs[1 - side]};
    return r;
  }
  return std::nullopt;
}

// Every interior value (all outputs of matched nodes but the result) is read inside the chain
// only; nothing else of the matched nodes is used outside.
bool self_contained(const PlanIndex& ix, const Match& m) {
  const std::set<std::string> results(m.outputs.begin(), m.outputs.end());
  for (size_t i : m.nodes) {
    const NodeDesc& n = ix.node(i);
    for (size_t o = 0; o < n.outputs.size(); ++o) {
      if (n.outputs[o].empty() || (i == m.last && o == 0) || results.count(n.outputs[o])) continue;
      if (!ix.internal(n.outputs[o], m.nodes)) return false;
    }
  }
  return !m.outputs.empty() || ix.node(m.last).outputs.size() == 1;
}

// ------------------------------------------------------------------------------ translators
//
// A pattern translator returns false when its fast form does not apply to the concrete shapes
// (e.g. a scale that is not a vector of the last axis): the pattern node then translates the
// chain's original nodes, exactly as without the pass, and records a composed path.

using FastFn = bool (*)(TranslationContext&, const NodeDesc&);

bool has_input(const NodeDesc& n, size_t i) {
  return i < n.inputs.size() && !n.inputs[i].empty();
}

// mx::fast takes a scale/shift of exactly the last axis; a scalar or size-1 constant (legal in
// the chain, which broadcasts) keeps the chain's ops.
bool fits_last_axis(const TranslationContext& ctx, const NodeDesc& n, size_t i,
                    const mx::array& x) {
  if (!has_input(n, i)) return true;
  const mx::array p = ctx.input(n, i);
  return p.dtype() == mx::float32 && p.ndim() == 1 && x.ndim() >= 1 && p.shape(0) == x.shape(-1);
}

std::optional<mx::array> optional_input(const TranslationContext& ctx, const NodeDesc& n,
                                        size_t i) {
  if (!has_input(n, i)) return std::nullopt;
  return ctx.input(n, i);
}

bool layer_norm_chain(TranslationContext& ctx, const NodeDesc& n) {
  const mx::array x = ctx.input(n, 0);
  if (x.dtype() != mx::float32 || x.ndim() < 1 || x.shape(-1) == 0 ||
      !fits_last_axis(ctx, n, 1, x) || !fits_last_axis(ctx, n, 2, x))
    return false;
  bind_fast_layer_norm(ctx, n, x, optional_input(ctx, n, 1), optional_input(ctx, n, 2),
                       n.attr_float("epsilon", 0.0f), "LayerNorm chain -> mlx::fast::layer_norm");
  return true;
}

bool rms_norm_chain(TranslationContext& ctx, const NodeDesc& n) {
  const mx::array x = ctx.input(n, 0);
  if (x.dtype() != mx::float32 || x.ndim() < 1 || x.shape(-1) == 0 || !fits_last_axis(ctx, n, 1, x))
    return false;
  ctx.bind_output(n, 0,
                  mx::fast::rms_norm(x, optional_input(ctx, n, 1), n.attr_float("epsilon", 0.0f),
                                     ctx.stream()));
  ctx.mark_fast(n, "RMSNorm chain -> mlx::fast::rms_norm");
  return true;
}

// The chain's arithmetic as the matcher recorded it (the fused node's attributes).
GeluForm chain_form(const NodeDesc& n, bool tanh_form) {
  GeluForm f;
  f.tanh_form = tanh_form;
  f.divide = n.attr_int("divide", 1) != 0;
  f.c = n.attr_float("c", 1.0f);
  f.alpha = n.attr_float("a", 0.f);
  f.k = n.attr_float("k", 0.f);
  f.half_first = n.attr_int("tail", 0) != 0;
  f.half = n.attr_float("half", 0.5f);
  return f;
}

// (x * a) * half, or (x * half) * a.
mx::array gelu_tail(const GeluForm& f, const mx::array& x, const mx::array& a,
                    mx::StreamOrDevice s) {
  const mx::array half(f.half);
  if (!f.half_first) return mx::multiply(mx::multiply(x, a, s), half, s);
  return mx::multiply(mx::multiply(x, half, s), a, s);
}

// The chain as one CUDA kernel (elementwise/cuda/gelu.h) where the build and device have it:
// MLX would split it into several kernels (its fusion stops at a depth of 11 operations).
bool gelu_chain_kernel(TranslationContext& ctx, const NodeDesc& n, const GeluForm& form) {
  const mx::array x = ctx.input(n, 0);
  if (x.dtype() != mx::float32 || !cuda_gelu_supports(x.size(), ctx.stream())) return false;
  ctx.bind_output(n, 0, cuda_gelu(x, form, ctx.stream()));
  ctx.mark_fast(n, form.tanh_form ? "GELU (tanh) chain -> one CUDA kernel"
                                  : "GELU (erf) chain -> one CUDA kernel");
  return true;
}

bool gelu_erf_chain(TranslationContext& ctx, const NodeDesc& n) {
  const GeluForm form = chain_form(n, /*tanh_form=*/false);
  if (gelu_chain_kernel(ctx, n, form)) return true;
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const mx::array c(form.c);
  const mx::array u = form.divide ? mx::divide(x, c, s) : mx::multiply(x, c, s);
  const mx::array a = mx::add(erf_accurate(u, s), mx::array(1.0f), s);
  ctx.bind_output(n, 0, gelu_tail(form, x, a, s));
  ctx.mark_fast(n, "GELU (erf) chain -> one fused elementwise op");
  return true;
}

bool gelu_tanh_chain(TranslationContext& ctx, const NodeDesc& n) {
  const GeluForm form = chain_form(n, /*tanh_form=*/true);
  if (gelu_chain_kernel(ctx, n, form)) return true;
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const mx::array cube = mx::power(x, mx::array(3.0f), s);
  const mx::array inner = mx::add(x, mx::multiply(cube, mx::array(form.alpha), s), s);
  const mx::array t = mx::tanh(mx::multiply(inner, mx::array(form.k), s), s);
  ctx.bind_output(n, 0, gelu_tail(form, x, mx::add(t, mx::array(1.0f), s), s));
  ctx.mark_fast(n, "GELU (tanh) chain -> one fused elementwise op");
  return true;
}

// softmax(q k^T * scale) v as mx::fast::scaled_dot_product_attention where MLX has a fused
// kernel for it: on CUDA in float32 that is the vector kernel (fewer than 4 queries, head size
// 64, 96 or 128, no mask: a decoder step; mlx/backend/cuda/scaled_dot_product_attention.cu).
// Elsewhere MLX would compose the same ops (with the scale on q), so the chain keeps its own.
bool attention_chain(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array q = ctx.input(n, 0);
  mx::array k = ctx.input(n, 1);
  const mx::array v = ctx.input(n, 2);
  if (n.attr_int("key_transposed", 0) == 0) k = mx::swapaxes(k, -1, -2, s);
  const bool shapes = q.ndim() == 4 && k.ndim() == 4 && v.ndim() == 4 && q.dtype() == mx::float32 &&
                      k.dtype() == mx::float32 && v.dtype() == mx::float32 &&
                      q.shape(0) == k.shape(0) && q.shape(0) == v.shape(0) &&
                      q.shape(1) == k.shape(1) && q.shape(1) == v.shape(1) &&
                      k.shape(2) == v.shape(2) && q.shape(3) == k.shape(3) &&
                      q.shape(3) == v.shape(3) && k.shape(2) > 0;
  const int d = q.ndim() == 4 ? q.shape(3) : 0;
  const bool vector_kernel = shapes && q.shape(2) < 4 && (d == 64 || d == 96 || d == 128);
  const bool forced = ctx.options().fast_patterns.value_or(false);
  if (!(shapes && (forced || (gpu_backend() && vector_kernel)))) return false;
  ctx.bind_output(n, 0,
                  mx::fast::scaled_dot_product_attention(q, k, v, n.attr_float("scale", 1.0f), "",
                                                         {}, {}, false, s));
  ctx.mark_fast(n, "attention chain -> mlx::fast::scaled_dot_product_attention");
  return true;
}

// A scale of +-2^e commutes exactly with the product: every term q_i k_i and every partial sum
// only change exponent (barring overflow and subnormal results), so (q c) k^T is bitwise
// (q k^T) c, and the scores, the largest tensor of the chain, take no elementwise pass of their
// own (on CUDA one kernel fewer a layer: q * c fuses with the copy that makes a head-split q
// contiguous). 1/sqrt(d) is one for d = 4^j (16, 64, 256); other scales keep the chain as given.
bool power_of_two(float c) {
  int exponent = 0;
  return std::isfinite(c) && c != 0.0f && std::frexp(std::fabs(c), &exponent) == 0.5f;
}

// The chain's own ops with a power-of-two scale moved onto q: the scale node's result is the qk
// product of q * c. False (nothing bound) when the scale is not a power of two, q is also the
// key operand (then both operands would carry it) or ONNXRUNTIME_EP_MLX_ATTENTION_SCALE_ON_Q=0
// (read per translation: bench/gpu_peer.py --ab compares both forms in one process).
bool attention_scale_on_q(TranslationContext& ctx, const NodeDesc& n,
                          const std::vector<NodeDesc>& originals) {
  const float c = n.attr_float("scale", 1.0f);
  if (!power_of_two(c) || !kernel_enabled("ONNXRUNTIME_EP_MLX_ATTENTION_SCALE_ON_Q")) return false;
  const NodeDesc* scale = nullptr;
  for (const NodeDesc& o : originals)
    if (o.op_type == "Mul" || o.op_type == "Div") scale = &o;
  const NodeDesc* qk = nullptr;
  for (const NodeDesc& o : originals)
    if (scale && o.op_type == "MatMul" && !o.outputs.empty() &&
        (o.outputs[0] == scale->inputs[0] || o.outputs[0] == scale->inputs[1]))
      qk = &o;
  if (!qk || qk->inputs.size() != 2 || qk->inputs[0] == qk->inputs[1]) return false;
  const std::string& q_name = qk->inputs[0];
  for (const NodeDesc& o : originals) {
    if (&o == scale) {
      ctx.bind_output(o, 0, ctx.resolve(qk->outputs[0]));
    } else if (&o == qk) {
      // q rebound for this one product only: any other reader of q sees it unscaled.
      const mx::array q = ctx.resolve(q_name);
      Rebinding scaled(ctx);
      scaled.bind(q_name, mx::multiply(q, mx::array(c, q.dtype()), ctx.stream()));
      o.entry->translate(ctx, o);
    } else {
      o.entry->translate(ctx, o);
    }
  }
  ctx.mark_fast(n, kAttentionScaleOnQ);
  return true;
}

// MatMul + bias as one product with the bias as the accumulator's start (C = bias, beta = 1):
// blas_matmul (one sgemm) on MLX's CPU backend (mx::addmm where MLX's own CPU matmul is forced:
// tests). Each element is
// round(dot + bias) as with the two ops whenever the product is not split over K; the sums of
// long rows differ in the last bits only (the tolerance ORT's own MatMul+Add -> Gemm fusion has).
bool matmul_add_chain(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array a = ctx.input(n, 0);
  const mx::array b = ctx.input(n, 1);
  const mx::array bias = ctx.input(n, 2);
  if (a.ndim() < 2 || b.ndim() < 2 || bias.ndim() != 1 || a.dtype() != mx::float32 ||
      b.dtype() != mx::float32 || bias.dtype() != mx::float32 || a.shape(-1) != b.shape(-2) ||
      bias.shape(0) != b.shape(-1))
    return false;
  ctx.bind_output(n, 0,
                  use_blas_matmul(s, mx::float32) ? blas_matmul(a, b, s, 1.f, bias, 1.f)
                                                  : mx::addmm(bias, a, b, 1.f, 1.f, s));
  ctx.mark_fast(n, "MatMul + bias Add -> one addmm");
  return true;
}

// A better form of the chain's own ops, tried when the fast form does not apply; false when it
// does not apply either (then the original nodes run as given).
using ComposedFn = bool (*)(TranslationContext&, const NodeDesc&, const std::vector<NodeDesc>&);

struct PatternKind {
  const char* op_type;
  FastFn fast;
  const char* composed_reason;
  ComposedFn composed = nullptr;
};

const PatternKind& kind_of(const std::string& pattern) {
  static const std::map<std::string, PatternKind> kinds = {
      {"layer_norm",
       {"LayerNorm", layer_norm_chain,
        "LayerNorm chain: scale/shift not a vector of the last axis"}},
      {"rms_norm",
       {"RMSNorm", rms_norm_chain, "RMSNorm chain: scale not a vector of the last axis"}},
      {"gelu_erf", {"GeluErf", gelu_erf_chain, ""}},
      {"gelu_tanh", {"GeluTanh", gelu_tanh_chain, ""}},
      {"attention",
       {"Attention", attention_chain,
        "attention chain: no fused MLX kernel for these shapes on this backend (its own ops)",
        attention_scale_on_q}},
      {"matmul_add",
       {"MatMulAdd", matmul_add_chain, "MatMul + Add: the bias is not a vector of the last axis"}},
      {"shared_input_matmul",
       {"SharedInputMatMul", detail::shared_input_matmul_chain,
        "MatMuls of one input: the input does not fit the concatenated weight (its own MatMuls)"}},
  };
  return kinds.at(pattern);
}

// The pattern node's entry: the fast form, or else the chain's original nodes in order.
std::shared_ptr<const OpEntry> make_entry(const std::string& pattern,
                                          std::vector<NodeDesc> originals) {
  const PatternKind& kind = kind_of(pattern);
  auto entry = std::make_shared<OpEntry>();
  entry->domain = kDomain;
  entry->op_type = kind.op_type;
  entry->translate = [fast = kind.fast, composed = kind.composed,
                      reason = std::string(kind.composed_reason), originals = std::move(originals)](
                         TranslationContext& ctx, const NodeDesc& n) {
    if (fast(ctx, n)) return;
    if (composed && composed(ctx, n, originals)) return;
    for (const NodeDesc& o : originals) o.entry->translate(ctx, o);
    ctx.mark_composed(n, reason);
  };
  return entry;
}

}  // namespace

mx::array shifted_fast_layer_norm(const mx::array& x, const std::optional<mx::array>& w,
                                  const std::optional<mx::array>& b, float eps,
                                  mx::StreamOrDevice s) {
  mx::Shape stop = x.shape();
  stop.back() = 1;
  const mx::array pivot = mx::slice(x, mx::Shape(x.ndim(), 0), stop, s);
  return mx::fast::layer_norm(mx::subtract(x, pivot, s), w, b, eps, s);
}

void bind_fast_layer_norm(TranslationContext& ctx, const NodeDesc& n, const mx::array& x,
                          const std::optional<mx::array>& w, const std::optional<mx::array>& b,
                          float eps, const char* mlx_path) {
  const auto s = ctx.stream();
  if (!cuda_layer_norm_applies(x, s)) {
    ctx.bind_output(n, 0, shifted_fast_layer_norm(x, w, b, eps, s));
    ctx.mark_fast(n, mlx_path);
    return;
  }
  const LayerNormSum parts = layer_norm_sum_parts(x);
  LayerNormResult r = cuda_layer_norm(parts, w, b, eps, s);
  if (r.sum) ctx.bind(n.inputs[0], *r.sum);
  ctx.bind_output(n, 0, r.y);
  ctx.mark_fast(n, r.sum ? "LayerNorm (residual Add folded in) -> one CUDA kernel"
                         : "LayerNorm -> one CUDA kernel");
}

bool chains_enabled(const EpOptions& options) {
  return options.fast_patterns.value_or(true);
}

bool fast_layer_norm_op_enabled(const EpOptions& options) {
  return options.fast_patterns.value_or(gpu_backend());
}

std::map<std::string, size_t> apply(Plan& plan) {
  // Control-flow bodies read enclosing values by name without listing them as node inputs, so an
  // interior value of a chain could be used unseen: such plans are left alone.
  for (const NodeDesc& n : plan.nodes)
    if (n.has_subgraphs || !n.bodies.empty()) return {};
  PlanIndex ix(plan);
  std::vector<Match> matches;
  using Matcher = std::optional<Match> (*)(const PlanIndex&, size_t);
  // LayerNorm before RMSNorm: a LayerNorm's variance chain is an RMSNorm of x - mean.
  const std::pair<const char*, Matcher> passes[] = {
      {"Div", match_layer_norm},
      {"Sqrt", match_rms_norm},
      {"Erf", match_gelu_erf},
      {"Tanh", match_gelu_tanh},
      {"Softmax", match_attention},
      // Before MatMul + bias, which would take the products of a Q/K/V trio one by one.
      {"MatMul", detail::match_shared_input_matmul},
      {"Add", match_matmul_add}};
  for (const auto& [anchor, matcher] : passes) {
    for (size_t i = 0; i < plan.nodes.size(); ++i) {
      const NodeDesc& n = plan.nodes[i];
      if (ix.taken(i) || !n.domain.empty() || n.op_type != anchor) continue;
      std::optional<Match> m = matcher(ix, i);
      if (!m || !self_contained(ix, *m)) continue;
      bool free = true;
      for (size_t k : m->nodes) free = free && !ix.taken(k);
      if (!free) continue;
      ix.take(m->nodes);
      matches.push_back(std::move(*m));
    }
  }
  std::map<std::string, size_t> counts;
  if (matches.empty()) return counts;

  // Each match becomes one node at the position of its last node (its inputs are produced before
  // its first node, so the order stays topological), or at `at` for patterns of several results;
  // the other matched nodes are dropped.
  std::map<size_t, const Match*> by_last;
  std::set<size_t> dropped;
  for (const auto& m : matches) {
    by_last[m.at.value_or(m.last)] = &m;
    dropped.insert(m.nodes.begin(), m.nodes.end());
    counts[m.pattern] += 1;
  }
  std::vector<NodeDesc> nodes;
  nodes.reserve(plan.nodes.size());
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    auto it = by_last.find(i);
    if (it == by_last.end()) {
      if (!dropped.count(i)) nodes.push_back(std::move(plan.nodes[i]));
      continue;
    }
    const Match& m = *it->second;
    const NodeDesc& last = plan.nodes[i];
    NodeDesc p;
    p.index = last.index;
    p.name = last.name;
    p.since_version = 1;
    p.outputs = {last.outputs[0]};
    p.output_infos = {last.output_infos.empty() ? TensorInfo{} : last.output_infos[0]};
    if (!m.outputs.empty()) {
      p.outputs = m.outputs;
      p.output_infos.clear();
      for (const auto& out : m.outputs)
        for (size_t k : m.nodes)
          if (!plan.nodes[k].outputs.empty() && plan.nodes[k].outputs[0] == out)
            p.output_infos.push_back(
                plan.nodes[k].output_infos.empty() ? TensorInfo{} : plan.nodes[k].output_infos[0]);
    }
    p.inputs = m.inputs;
    p.attrs = m.attrs;
    for (const auto& in : m.inputs) {
      TensorInfo info;
      for (size_t k : m.nodes)
        for (size_t j = 0; j < plan.nodes[k].inputs.size(); ++j)
          if (!in.empty() && plan.nodes[k].inputs[j] == in && j < plan.nodes[k].input_infos.size())
            info = plan.nodes[k].input_infos[j];
      p.input_infos.push_back(info);
    }
    std::vector<NodeDesc> originals;
    for (size_t k : m.nodes) originals.push_back(plan.nodes[k]);  // ascending: topological
    plan.pattern_entries.push_back(make_entry(m.pattern, std::move(originals)));
    p.entry = plan.pattern_entries.back().get();
    p.domain = p.entry->domain;
    p.op_type = p.entry->op_type;
    nodes.push_back(std::move(p));
  }
  plan.nodes = std::move(nodes);
  return counts;
}

}  // namespace ortmlx::ops::patterns
