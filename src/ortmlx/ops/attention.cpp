// Attention family: ONNX Attention (opsets 23-24) and the com.microsoft contrib ops
// MultiHeadAttention and GroupQueryAttention, as ONNX Runtime's CPU kernels compute them
// (RotaryEmbedding: ops/rotary.cpp).
//
// All attention is composed from explicit MLX ops in float32 (scores = Q K^T * scale, additive
// bias, max-subtracted softmax, P V), not mx::fast::scaled_dot_product_attention: the explicit
// form is exact in float32 on every backend, supports the masks and biases these ops combine,
// and grouped-query heads (q head h reads kv head h / (Hq / Hk)) need no repeated K/V copies
// (the group is a broadcast batch dimension of the matmul). Half inputs are computed in float32
// and rounded once.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <tuple>

#include <mlx/transforms.h>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

mx::array f32(const mx::array& a, mx::StreamOrDevice s) {
  return a.dtype() == mx::float32 ? a : mx::astype(a, mx::float32, s);
}

mx::array to_type(const mx::array& a, mx::Dtype dt, mx::StreamOrDevice s) {
  return a.dtype() == dt ? a : mx::astype(a, dt, s);
}

bool present(const NodeDesc& n, size_t i) {
  return i < n.inputs.size() && !n.inputs[i].empty();
}
bool output_wanted(const ClaimContext& c, size_t i) {
  return i < c.num_outputs() && !c.node().outputs[i].empty();
}

// [B, S, H*D] -> [B, H, S, D]
mx::array split_heads(const mx::array& x, int heads, mx::StreamOrDevice s, const char* what) {
  if (x.ndim() != 3) throw std::runtime_error(std::string(what) + " must be 3-D");
  if (heads <= 0 || x.shape(2) % heads != 0)
    throw std::runtime_error(std::string(what) + " hidden size " + std::to_string(x.shape(2)) +
                             " is not a multiple of its head count " + std::to_string(heads));
  mx::array r = mx::reshape(x, {x.shape(0), x.shape(1), heads, x.shape(2) / heads}, s);
  return mx::transpose(r, {0, 2, 1, 3}, s);
}

// [B, H, S, D] -> [B, S, H*D]
mx::array merge_heads(const mx::array& x, mx::StreamOrDevice s) {
  mx::array t = mx::transpose(x, {0, 2, 1, 3}, s);
  return mx::reshape(t, {x.shape(0), x.shape(2), x.shape(1) * x.shape(3)}, s);
}

struct AttnResult {
  mx::array y;       // [B, Hq, Sq, Dv] float32
  mx::array scores;  // scaled Q K^T, [B, Hq, Sq, T]
  mx::array capped;  // after softcap
  mx::array biased;  // after the additive bias
  mx::array probs;   // softmax (fully masked rows zeroed when guard_masked_rows)
};

// q [B,Hq,Sq,D], k [B,Hk,T,D], v [B,Hk,T,Dv] (float32). bias: additive, broadcastable to
// [B,Hq,Sq,T], may hold -inf. guard_masked_rows: rows whose bias is -inf everywhere give zero
// probabilities (ONNX Attention), instead of softmax's NaN.
AttnResult attend(const mx::array& q, const mx::array& k, const mx::array& v, float scale,
                  float softcap, const std::optional<mx::array>& bias, bool guard_masked_rows,
                  mx::StreamOrDevice s) {
  const int B = q.shape(0), Hq = q.shape(1), Sq = q.shape(2), D = q.shape(3);
  const int Hk = k.shape(1), T = k.shape(2), Dv = v.shape(3);
  if (k.shape(0) != B || v.shape(0) != B) throw std::runtime_error("Q/K/V batch sizes differ");
  if (k.shape(3) != D) throw std::runtime_error("Q and K head sizes differ");
  if (v.shape(1) != Hk || v.shape(2) != T) throw std::runtime_error("K and V shapes disagree");
  if (Hk <= 0 || Hq % Hk != 0)
    throw std::runtime_error("q heads " + std::to_string(Hq) + " are not a multiple of kv heads " +
                             std::to_string(Hk));
  const int G = Hq / Hk;
  // Group q heads under their kv head: [B, Hk, G, Sq, D] x [B, Hk, 1, D, T].
  const mx::array q5 = mx::reshape(q, {B, Hk, G, Sq, D}, s);
  const mx::array kt = mx::expand_dims(mx::swapaxes(k, 2, 3, s), 2, s);
  mx::array scores = mx::reshape(mx::matmul(q5, kt, s), {B, Hq, Sq, T}, s);
  scores = mx::multiply(scores, mx::array(scale), s);
  mx::array capped = scores;
  if (softcap > 0.f)
    capped =
        mx::multiply(mx::tanh(mx::divide(scores, mx::array(softcap), s), s), mx::array(softcap), s);
  mx::array biased = bias ? mx::add(capped, *bias, s) : capped;
  mx::array probs = mx::softmax(biased, {-1}, /*precise=*/true, s);
  if (bias && guard_masked_rows) {
    const mx::array row_max = mx::max(*bias, {-1}, /*keepdims=*/true, s);
    probs = mx::where(mx::equal(row_max, mx::array(kNegInf), s), mx::array(0.0f), probs, s);
  }
  const mx::array p5 = mx::reshape(probs, {B, Hk, G, Sq, T}, s);
  mx::array y = mx::matmul(p5, mx::expand_dims(v, 2, s), s);
  return {mx::reshape(y, {B, Hq, Sq, Dv}, s), scores, capped, biased, probs};
}

// Causal frontier j <= i + offset as an additive [Sq, T] bias (0 / -inf). offset may be an array
// [B] (per-batch), giving [B, 1, Sq, T].
mx::array causal_bias(int Sq, int T, const mx::array& offset, mx::StreamOrDevice s) {
  const mx::array i = mx::reshape(mx::arange(Sq, mx::int32, s), {Sq, 1}, s);
  const mx::array j = mx::reshape(mx::arange(T, mx::int32, s), {1, T}, s);
  mx::array off = mx::astype(offset, mx::int32, s);
  if (off.ndim() == 1) off = mx::reshape(off, {off.shape(0), 1, 1, 1}, s);
  const mx::array allowed = mx::less_equal(j, mx::add(i, off, s), s);
  return mx::where(allowed, mx::array(0.0f), mx::array(kNegInf), s);
}

ClaimResult require_float_io(const ClaimContext& c, std::initializer_list<size_t> ins,
                             std::initializer_list<size_t> outs) {
  ElemType first = ElemType::kUndefined;
  for (size_t i : ins) {
    if (!c.has_input(i)) continue;
    auto r = require_input_type(
        c, i, [](ElemType t) { return t == ElemType::kFloat || t == ElemType::kFloat16; },
        "float32/float16 only");
    if (!r.ok) return r;
    if (first == ElemType::kUndefined) first = c.input_type(i);
    ORTMLX_REQUIRE(c.input_type(i) == first, "mixed float input types");
  }
  for (size_t i : outs) {
    if (!output_wanted(c, i)) continue;
    const ElemType t = c.output_type(i);
    ORTMLX_REQUIRE(t == ElemType::kUndefined || t == first,
                   "output " + std::to_string(i) + " type differs from the inputs");
  }
  return ClaimResult::yes();
}

// ---------------------------------------------------------------- ONNX Attention (23, 24)

ClaimResult claim_attention(const ClaimContext& c) {
  const bool v24 = c.node().since_version >= 24;
  ORTMLX_REQUIRE(c.num_inputs() >= 3 && c.num_inputs() <= (v24 ? 7u : 6u), "unexpected inputs");
  ORTMLX_REQUIRE(c.num_outputs() >= 1 && c.num_outputs() <= 4, "expects 1 to 4 outputs");
  auto r = refuse_unknown_attrs(c, {"is_causal", "kv_num_heads", "q_num_heads", "scale", "softcap",
                                    "softmax_precision", "qk_matmul_output_mode"});
  if (!r.ok) return r;
  r = require_float_io(c, {0, 1, 2, 4, 5}, {0, 1, 2, 3});
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.has_input(4) == c.has_input(5), "past_key and past_value must come together");
  const int64_t prec = c.node().attr_int("softmax_precision", 1);
  ORTMLX_REQUIRE(prec == 1, "softmax_precision " + std::to_string(prec) +
                                " is not implemented (softmax runs in float32)");
  // ONNX defines is_causal 0 and 1 only; ORT reads the low 32 bits and is causal only where they
  // are 1 (2 and 2^32 run non-causal, 2^32 + 1 causal): other values are left to ORT.
  const int64_t causal = c.node().attr_int("is_causal", 0);
  ORTMLX_REQUIRE(causal == 0 || causal == 1,
                 "is_causal " + std::to_string(causal) + " is neither 0 nor 1");
  const int64_t mode = c.node().attr_int("qk_matmul_output_mode", 0);
  ORTMLX_REQUIRE(mode >= 0 && mode <= 3, "unknown qk_matmul_output_mode");
  ORTMLX_REQUIRE(c.node().attr_float("softcap", 0.f) >= 0.f, "negative softcap");
  const int64_t rq = c.input_rank(0), rk = c.input_rank(1), rv = c.input_rank(2);
  ORTMLX_REQUIRE(rq == 3 || rq == 4, "Q must have a known rank of 3 or 4");
  ORTMLX_REQUIRE(rk == rq && rv == rq, "Q, K and V ranks differ");
  if (rq == 3)
    ORTMLX_REQUIRE(c.node().has_attr("q_num_heads") && c.node().has_attr("kv_num_heads"),
                   "3-D inputs need q_num_heads and kv_num_heads");
  if (c.has_input(3)) {
    const ElemType mt = c.input_type(3);
    ORTMLX_REQUIRE(mt == ElemType::kBool || mt == c.input_type(0),
                   "attn_mask must be bool or the query's type");
  }
  if (c.has_input(6)) {
    ORTMLX_REQUIRE(c.input_type(6) == ElemType::kInt64, "nonpad_kv_seqlen must be int64");
    ORTMLX_REQUIRE(!c.has_input(4), "nonpad_kv_seqlen with a past cache is not allowed");
  }
  return ClaimResult::yes();
}

void translate_attention(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  mx::array q = ctx.input(n, 0), k = ctx.input(n, 1), v = ctx.input(n, 2);
  // ORT's CPU kernel rejects an empty batch rather than returning empty outputs.
  if (q.ndim() > 0 && q.shape(0) == 0) throw std::runtime_error("batch_size must be > 0");
  const mx::Dtype dt = q.dtype();
  const bool three_d = q.ndim() == 3;
  if (!three_d) {
    // ORT checks the head-count attributes against the 4-D shapes, each read as a 32-bit int
    // (its low bits: 2^32 + 2 reads as 2, 2^31 as negative), only where that int is positive.
    auto check_heads = [&](const char* name, const mx::array& t, const char* what) {
      const auto given = static_cast<int32_t>(static_cast<uint32_t>(n.attr_int(name, 0)));
      if (given > 0 && given != t.shape(1))
        throw std::runtime_error(std::string(name) + " different from " + what + ".shape[1]");
    };
    check_heads("q_num_heads", q, "Q");
    check_heads("kv_num_heads", k, "K");
  }
  if (three_d) {
    q = split_heads(q, static_cast<int>(n.attr_int("q_num_heads", 0)), s, "Q");
    k = split_heads(k, static_cast<int>(n.attr_int("kv_num_heads", 0)), s, "K");
    v = split_heads(v, static_cast<int>(n.attr_int("kv_num_heads", 0)), s, "V");
  }
  int past_len = 0;
  if (present(n, 4)) {
    const mx::array pk = ctx.input(n, 4), pv = ctx.input(n, 5);
    if (pk.ndim() != 4 || pv.ndim() != 4) throw std::runtime_error("past_key/value must be 4-D");
    if (pk.shape(2) != pv.shape(2))
      throw std::runtime_error(
          "inconsistent past_sequence_length (between past_key and past_value)");
    past_len = pk.shape(2);
    k = mx::concatenate({pk, k}, 2, s);
    v = mx::concatenate({pv, v}, 2, s);
  }
  ctx.bind_output(n, 1, k);
  ctx.bind_output(n, 2, v);
  const int Sq = q.shape(2), T = k.shape(2);
  std::optional<mx::array> bias;
  auto add_bias = [&](const mx::array& b) { bias = bias ? mx::add(*bias, b, s) : b; };
  if (present(n, 3)) {
    mx::array m = ctx.input(n, 3);
    m = m.dtype() == mx::bool_ ? mx::where(m, mx::array(0.0f), mx::array(kNegInf), s) : f32(m, s);
    if (m.ndim() == 0) m = mx::reshape(m, {1}, s);
    // Opset 24: a shorter last dim is padded with -inf (False).
    if (m.shape(-1) < T && m.shape(-1) != 1)
      m = mx::pad(m, {static_cast<int>(m.ndim()) - 1}, {0}, {T - m.shape(-1)}, mx::array(kNegInf),
                  "constant", s);
    add_bias(m);
  }
  if (present(n, 6)) {
    const mx::array lens = ctx.input(n, 6);
    if (lens.ndim() != 1 || lens.shape(0) != q.shape(0))
      throw std::runtime_error("nonpad_kv_seqlen must have shape (batch_size)");
    // Values only compared against positions, never used as indices: a check is enough.
    const mx::array l64 = mx::astype(lens, mx::int64, s);
    ctx.require(n,
                mx::logical_and(mx::greater_equal(l64, mx::array(int64_t{0}), s),
                                mx::less_equal(l64, mx::array(int64_t{T}), s), s),
                "nonpad_kv_seqlen is out of range [0, " + std::to_string(T) +
                    "] (the total key/value sequence length)");
  }
  if (n.attr_int("is_causal", 0) != 0) {
    if (present(n, 6))
      add_bias(causal_bias(Sq, T, mx::subtract(ctx.input(n, 6), mx::array(Sq, mx::int64), s), s));
    else
      add_bias(causal_bias(Sq, T, mx::array(past_len, mx::int32), s));
  }
  if (present(n, 6)) {
    const mx::array len = mx::astype(ctx.input(n, 6), mx::int32, s);
    const mx::array j = mx::arange(T, mx::int32, s);
    const mx::array ok =
        mx::less(mx::reshape(j, {1, 1, 1, T}, s), mx::reshape(len, {len.shape(0), 1, 1, 1}, s), s);
    add_bias(mx::where(ok, mx::array(0.0f), mx::array(kNegInf), s));
  }
  const float scale = n.has_attr("scale") ? n.attr_float("scale", 1.f)
                                          : 1.0f / std::sqrt(static_cast<float>(q.shape(3)));
  AttnResult a = attend(f32(q, s), f32(k, s), f32(v, s), scale, n.attr_float("softcap", 0.f), bias,
                        /*guard_masked_rows=*/true, s);
  ctx.bind_output(n, 0, to_type(three_d ? merge_heads(a.y, s) : a.y, dt, s));
  const int64_t mode = n.attr_int("qk_matmul_output_mode", 0);
  const mx::array& qk = mode == 0   ? a.scores
                        : mode == 1 ? a.capped
                        : mode == 2 ? a.biased
                                    : a.probs;
  ctx.bind_output(n, 3, to_type(qk, dt, s));
}

// ---------------------------------------------------------------- com.microsoft MultiHeadAttention

// Forms: Q [B,S,H*D] with K/V [B,L,H*D] (+ optional projection bias [3 hidden], past/present
// caches), or K/V already split into heads [B,H,L,D] (cross attention, no bias, no past). Masks are
// additive as in ORT's CPU kernel: a masked key (padding or beyond the causal frontier) gets
// mask_filter_value (default -10000) added to its scaled score; attention_bias [B|1, H|1, S, T] is
// added on top.
ClaimResult claim_mha(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 1 && c.num_inputs() <= 10, "unexpected inputs");
  ORTMLX_REQUIRE(c.num_outputs() >= 1 && c.num_outputs() <= 4, "expects 1 to 4 outputs");
  auto r = refuse_unknown_attrs(c, {"num_heads", "unidirectional", "scale", "mask_filter_value"});
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.node().attr_int("num_heads", 0) > 0, "num_heads must be positive");
  r = require_float_io(c, {0, 1, 2, 3, 5, 6, 7}, {0, 1, 2});
  if (!r.ok) return r;
  ORTMLX_REQUIRE(!output_wanted(c, 3), "the qk output is not implemented");
  ORTMLX_REQUIRE(!c.has_input(8) && !c.has_input(9),
                 "past_sequence_length / cache_indirection (buffer sharing, beam search) are not "
                 "implemented");
  ORTMLX_REQUIRE(c.has_input(6) == c.has_input(7), "past_key and past_value must come together");
  const int64_t rq = c.input_rank(0), rk = c.input_rank(1), rv = c.input_rank(2);
  if (rq == 5 || (c.has_input(1) && rk == 5)) {
    // Packed QKV [B,S,N,3,H] (no key/value) or packed KV [B,L,N,2,H] (no value): unpacked into
    // the 3-D form. ORT's CPU kernel implements neither ("not implemented for CPU"); the tests
    // compare with ORT CPU on the unpacked inputs. Without projection bias or past caches.
    const TensorInfo* p = c.input(rq == 5 ? 0 : 1);
    ORTMLX_REQUIRE(
        p && p->has_shape && p->shape[3] == (rq == 5 ? 3 : 2),
        rq == 5 ? "packed QKV must be [B, S, N, 3, H]" : "packed KV must be [B, L, N, 2, H]");
    ORTMLX_REQUIRE(p->shape[2] < 0 || p->shape[2] == c.node().attr_int("num_heads", 0),
                   "packed dim 2 differs from num_heads");
    ORTMLX_REQUIRE(rq == 5 ? !c.has_input(1) && !c.has_input(2) : rq == 3 && !c.has_input(2),
                   rq == 5 ? "packed QKV comes without key and value"
                           : "packed KV needs a 3-D query and no value");
    ORTMLX_REQUIRE(!c.has_input(3) && !c.has_input(6),
                   "packed QKV/KV with bias or past is not implemented");
  } else {
    ORTMLX_REQUIRE(rq == 3, "query must be 3-D, or packed QKV [B, S, N, 3, H]");
    ORTMLX_REQUIRE(c.has_input(1) && c.has_input(2), "key and value are required");
    ORTMLX_REQUIRE((rk == 3 && rv == 3) || (rk == 4 && rv == 4),
                   "key/value must be both 3-D or "
                   "both 4-D (BNSH)");
    ORTMLX_REQUIRE(rk == 3 || (!c.has_input(3) && !c.has_input(6)),
                   "4-D key/value with bias or past is not implemented");
    // ORT's kernel does not check that num_heads divides a 3-D hidden size (its reshape fails
    // for a non-empty batch; a batch of 0 returns the empty output): a static hidden size it
    // does not divide is left to ORT.
    const int64_t heads = c.node().attr_int("num_heads", 0);
    for (size_t i = 0; i < 3; ++i) {
      const TensorInfo* t = c.input(i);
      if (t && t->has_shape && t->rank() == 3 && t->shape[2] >= 0)
        ORTMLX_REQUIRE(t->shape[2] % heads == 0, "hidden size " + std::to_string(t->shape[2]) +
                                                     " of input " + std::to_string(i) +
                                                     " is not a multiple of num_heads " +
                                                     std::to_string(heads));
    }
  }
  if (c.has_input(4)) {
    ORTMLX_REQUIRE(c.input_type(4) == ElemType::kInt32, "key_padding_mask must be int32");
    const int64_t rm = c.input_rank(4);
    ORTMLX_REQUIRE(rm == 2 || rm == 3,
                   "only 2-D (batch, total_sequence_length) and 3-D key "
                   "padding masks are implemented");
  }
  if (c.has_input(5)) ORTMLX_REQUIRE(c.input_rank(5) == 4, "attention_bias must be 4-D");
  if (c.node().attr_int("unidirectional", 0) != 0) {
    // ORT's CPU kernel masks cross-length causal rows irregularly (checked: S=3, L=7 lets rows
    // 0 and 1 see keys j <= i and row 2 every key), so only self-attention lengths S == L and
    // single-token S == 1 are claimed, which needs both lengths static.
    const TensorInfo *qi = c.input(0), *ki = c.has_input(1) ? c.input(1) : c.input(0);
    const int64_t S = qi && (qi->rank() == 3 || qi->rank() == 5) ? qi->shape[1] : -1;
    const int64_t L = ki && ki->rank() >= 3 ? ki->shape[ki->rank() == 4 ? 2 : 1] : -1;
    ORTMLX_REQUIRE(S == 1 || (S > 0 && S == L),
                   "unidirectional needs static query/key lengths with S == L or S == 1");
  }
  return ClaimResult::yes();
}

// [B, S, N, parts, H] -> `parts` arrays [B, S, N * H] (the third is x itself for 2 parts).
std::tuple<mx::array, mx::array, mx::array> unpack_heads(const mx::array& x, int parts,
                                                         mx::StreamOrDevice s) {
  if (x.ndim() != 5 || x.shape(3) != parts)
    throw std::runtime_error("packed input must be [B, S, N, " + std::to_string(parts) + ", H]");
  const mx::Shape flat{x.shape(0), x.shape(1), x.shape(2) * x.shape(4)};
  auto part = [&](int i) { return mx::reshape(mx::take(x, i, 3, s), flat, s); };
  return {part(0), part(1), parts == 3 ? part(2) : x};
}

void translate_mha(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const int H = static_cast<int>(n.attr_int("num_heads", 0));
  mx::array q = ctx.input(n, 0);
  const mx::Dtype dt = q.dtype();
  mx::array k = q, v = q;
  {
    if (q.ndim() == 5) {  // packed QKV [B, S, N, 3, H]
      std::tie(q, k, v) = unpack_heads(q, 3, s);
    } else if (ctx.input(n, 1).ndim() == 5) {  // packed KV [B, L, N, 2, H]
      std::tie(k, v, std::ignore) = unpack_heads(ctx.input(n, 1), 2, s);
    } else {
      k = ctx.input(n, 1);
      v = ctx.input(n, 2);
    }
    if (present(n, 3)) {
      const mx::array b = ctx.input(n, 3);
      const int hq = q.shape(2), hk = k.shape(2), hv = v.shape(2);
      if (b.ndim() != 1 || b.shape(0) != hq + hk + hv)
        throw std::runtime_error("bias must have shape (q + k + v hidden sizes)");
      q = mx::add(q, mx::slice(b, {0}, {hq}, s), s);
      k = mx::add(k, mx::slice(b, {hq}, {hq + hk}, s), s);
      v = mx::add(v, mx::slice(b, {hq + hk}, {hq + hk + hv}, s), s);
    }
    q = split_heads(q, H, s, "query");
    if (k.ndim() == 3) {
      k = split_heads(k, H, s, "key");
      v = split_heads(v, H, s, "value");
    }
  }
  if (present(n, 6)) {
    const mx::array pk = ctx.input(n, 6), pv = ctx.input(n, 7);
    if (pk.ndim() != 4 || pv.ndim() != 4) throw std::runtime_error("past_key/value must be 4-D");
    if (pk.shape(2) != pv.shape(2))
      throw std::runtime_error("past_key and past_value have different sequence lengths (" +
                               std::to_string(pk.shape(2)) + " and " + std::to_string(pv.shape(2)) +
                               ")");
    k = mx::concatenate({pk, k}, 2, s);
    v = mx::concatenate({pv, v}, 2, s);
  }
  ctx.bind_output(n, 1, to_type(k, dt, s));
  ctx.bind_output(n, 2, to_type(v, dt, s));
  const int B = q.shape(0), S = q.shape(2), T = k.shape(2);
  // Allowed keys: causal frontier (bottom-right aligned, j <= i + T - S, as ORT's CPU kernel) and
  // padding mask; masked keys get mask_filter_value once.
  std::optional<mx::array> allowed;
  auto allow = [&](const mx::array& a) { allowed = allowed ? mx::logical_and(*allowed, a, s) : a; };
  if (n.attr_int("unidirectional", 0) != 0) {
    const mx::array i = mx::reshape(mx::arange(S, mx::int32, s), {S, 1}, s);
    const mx::array j = mx::reshape(mx::arange(T, mx::int32, s), {1, T}, s);
    allow(mx::less_equal(j, mx::add(i, mx::array(T - S), s), s));
  }
  if (present(n, 4)) {
    const mx::array m = ctx.input(n, 4);
    if (m.ndim() == 2) {
      if (m.shape(0) != B || m.shape(1) != T)
        throw std::runtime_error("key_padding_mask must have shape (batch, total_sequence_length)");
      allow(mx::reshape(mx::greater(m, mx::array(0), s), {B, 1, 1, T}, s));
    } else {
      if (m.shape(0) != B || m.shape(1) != S || m.shape(2) != T)
        throw std::runtime_error("3-D key_padding_mask must be (batch, sequence, total_sequence)");
      allow(mx::reshape(mx::greater(m, mx::array(0), s), {B, 1, S, T}, s));
    }
  }
  std::optional<mx::array> bias;
  if (allowed)
    bias = mx::where(*allowed, mx::array(0.0f),
                     mx::array(n.attr_float("mask_filter_value", -10000.0f)), s);
  if (present(n, 5)) {
    const mx::array ab = f32(ctx.input(n, 5), s);
    bias = bias ? mx::add(*bias, ab, s) : ab;
  }
  const float scale = n.has_attr("scale") ? n.attr_float("scale", 1.f)
                                          : 1.0f / std::sqrt(static_cast<float>(q.shape(3)));
  AttnResult a = attend(f32(q, s), f32(k, s), f32(v, s), scale, 0.f, bias,
                        /*guard_masked_rows=*/false, s);
  ctx.bind_output(n, 0, to_type(merge_heads(a.y, s), dt, s));
}

// ---------------------------------------------------------------- com.microsoft
// GroupQueryAttention

// ORT CPU semantics (checked against ORT 1.30): per batch b, total_b = seqlens_k[b] + 1; the first
// prompt (sequence_length == total_sequence_length) has no past, otherwise past_b = total_b - S.
// present[b, :, j] = past[b, :, j] for j < past_b, the new K/V at [past_b, past_b + S), zeros
// after; present length = max(past buffer length, total_sequence_length). Query i attends keys
// j <= past_b + i and j < total_b. total_sequence_length is read on the host (it sets the
// present length), so the node runs eagerly rather than compiled.
ClaimResult claim_gqa(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 7, "expects at least 7 inputs");
  const bool rotary = c.node().attr_int("do_rotary", 0) == 1;
  for (size_t i = 7; i < c.num_inputs(); ++i) {
    if (rotary && (i == 7 || i == 8)) continue;
    ORTMLX_REQUIRE(!c.has_input(i), "optional input " + std::to_string(i) +
                                        " (position_ids, attention_bias, head_sink, KV scales, QK "
                                        "norm weights; rotary caches without do_rotary) is not "
                                        "implemented");
  }
  if (rotary) {
    ORTMLX_REQUIRE(c.has_input(7) && c.has_input(8), "do_rotary needs cos_cache and sin_cache");
    ORTMLX_REQUIRE(c.input_rank(7) == 2 && c.input_rank(8) == 2, "cos_cache/sin_cache must be 2-D");
    ORTMLX_REQUIRE(c.input_type(7) == c.input_type(0) && c.input_type(8) == c.input_type(0),
                   "cos_cache/sin_cache type differs from query");
  }
  ORTMLX_REQUIRE(c.num_outputs() >= 1 && c.num_outputs() <= 3, "output_qk is not implemented");
  auto r = refuse_unknown_attrs(
      c, {"num_heads", "kv_num_heads", "scale", "softcap", "local_window_size", "do_rotary",
          "rotary_interleaved", "causal", "smooth_softmax", "qk_output", "k_quant_type",
          "v_quant_type", "kv_cache_bit_width", "sliding_window_cache", "qk_norm_epsilon"});
  if (!r.ok) return r;
  const auto& nd = c.node();
  const int64_t hq = nd.attr_int("num_heads", 0), hk = nd.attr_int("kv_num_heads", 0);
  ORTMLX_REQUIRE(hq > 0 && hk > 0 && hq % hk == 0, "num_heads must be a multiple of kv_num_heads");
  ORTMLX_REQUIRE(nd.attr_float("softcap", 0.f) >= 0.f, "negative softcap");
  ORTMLX_REQUIRE(nd.attr_int("local_window_size", -1) >= -1, "local_window_size below -1");
  // Both together: ORT 1.30's padded query rows of a right-padded first prompt come out
  // differently (not reproduced); each alone matches.
  ORTMLX_REQUIRE(nd.attr_float("softcap", 0.f) == 0.f || nd.attr_int("local_window_size", -1) < 0,
                 "softcap together with local_window_size is not implemented");
  ORTMLX_REQUIRE(nd.attr_int("do_rotary", 0) == 0 || nd.attr_int("do_rotary", 0) == 1,
                 "do_rotary must be 0 or 1");
  ORTMLX_REQUIRE(
      nd.attr_int("rotary_interleaved", 0) == 0 || nd.attr_int("rotary_interleaved", 0) == 1,
      "rotary_interleaved must be 0 or 1");
  ORTMLX_REQUIRE(nd.attr_int("causal", 1) == 1, "non-causal GQA is not implemented");
  ORTMLX_REQUIRE(nd.attr_int("smooth_softmax", -1) <= 0, "smooth_softmax is not implemented");
  ORTMLX_REQUIRE(nd.attr_int("qk_output", 0) == 0, "qk_output is not implemented");
  ORTMLX_REQUIRE(nd.attr_string("k_quant_type", "NONE") == "NONE" &&
                     nd.attr_string("v_quant_type", "NONE") == "NONE",
                 "quantized KV caches are not implemented");
  ORTMLX_REQUIRE(nd.attr_int("sliding_window_cache", 0) == 0,
                 "sliding_window_cache is not "
                 "implemented");
  r = require_float_io(c, {0, 1, 2, 3, 4}, {0, 1, 2});
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.has_input(3) == c.has_input(4), "past_key and past_value must come together");
  ORTMLX_REQUIRE(c.has_input(1) == c.has_input(2), "key and value must come together");
  ORTMLX_REQUIRE(c.input_rank(0) == 3, "query must be 3-D");
  if (c.has_input(3)) ORTMLX_REQUIRE(c.input_rank(3) == 4, "past_key must be 4-D (BNSH)");
  ORTMLX_REQUIRE(c.input_type(5) == ElemType::kInt32 && c.input_type(6) == ElemType::kInt32,
                 "seqlens_k and total_sequence_length must be int32");
  return ClaimResult::yes();
}

int host_scalar_int(TranslationContext& ctx, const NodeDesc& n, size_t i) {
  if (const ConstTensor* c = ctx.constant_input(n, i);
      c && c->dtype == ElemType::kInt32 && c->bytes.size() == sizeof(int32_t)) {
    int32_t v = 0;
    std::memcpy(&v, c->bytes.data(), sizeof v);
    return v;
  }
  if (ctx.compiling())
    throw NotCompilable("total_sequence_length sets the present length and is read on the host");
  mx::array a = mx::astype(ctx.input(n, i), mx::int32, ctx.stream());
  if (a.size() != 1) throw std::runtime_error("total_sequence_length must hold one value");
  mx::eval(a);
  return a.data<int32_t>()[0];
}

// do_rotary positions [B, S] as ORT's CPU kernel derives them without position_ids: the first
// prompt counts from 0; later chunks from the past length seqlens_k[b] + 1 - S.
mx::array gqa_positions(TranslationContext& ctx, const NodeDesc& n, int B, int S, int total) {
  const auto s = ctx.stream();
  const mx::array i = mx::reshape(mx::arange(S, mx::int32, s), {1, S}, s);
  if (S == total) return mx::broadcast_to(i, {B, S}, s);
  const mx::array seqlens = mx::astype(ctx.input(n, 5), mx::int32, s);
  const mx::array past = mx::subtract(mx::add(seqlens, mx::array(1), s), mx::array(S), s);
  return mx::add(mx::reshape(past, {B, 1}, s), i, s);
}

// In-op rotary of GroupQueryAttention on x [B, H, S, D]: the first 2 * cos_cache.shape[1] features
// of each head, pairs (x[i], x[i + half]) or (x[2i], x[2i + 1]) with rotary_interleaved. Rows of
// the caches are gathered by position; a position outside them raises (as ORT does).
mx::array gqa_rotary(TranslationContext& ctx, const NodeDesc& n, const mx::array& x,
                     const mx::array& pos) {
  const auto s = ctx.stream();
  const mx::array cosc = f32(ctx.input(n, 7), s), sinc = f32(ctx.input(n, 8), s);
  if (cosc.ndim() != 2 || sinc.shape() != cosc.shape())
    throw std::runtime_error("cos_cache/sin_cache must be 2-D of one shape");
  const int half = cosc.shape(1), rows = cosc.shape(0), D = x.shape(3);
  const int rot = 2 * half;
  if (rot == 0 || rot > D)
    throw std::runtime_error("cos_cache width " + std::to_string(half) +
                             " does not fit the head size " + std::to_string(D));
  if (rows == 0) throw std::runtime_error("cos_cache/sin_cache are empty");
  ctx.require(n,
              mx::logical_and(mx::greater_equal(pos, mx::array(0), s),
                              mx::less(pos, mx::array(rows), s), s),
              "a rotary position is outside the cos/sin cache [0, " + std::to_string(rows) + ")");
  const mx::array p = mx::clip(pos, mx::array(0), mx::array(rows - 1), s);
  const int B = x.shape(0), S = x.shape(2);
  const mx::array c = mx::reshape(mx::take(cosc, p, 0, s), {B, 1, S, half}, s);
  const mx::array sn = mx::reshape(mx::take(sinc, p, 0, s), {B, 1, S, half}, s);
  const mx::array xf = f32(x, s);
  const mx::array xr = mx::slice(xf, {0, 0, 0, 0}, {B, x.shape(1), S, rot}, s);
  mx::array x1 = xr, x2 = xr;
  const bool interleaved = n.attr_int("rotary_interleaved", 0) == 1;
  if (interleaved) {
    const mx::array pr = mx::reshape(xr, {B, x.shape(1), S, half, 2}, s);
    x1 = mx::take(pr, 0, 4, s);
    x2 = mx::take(pr, 1, 4, s);
  } else {
    x1 = mx::slice(xr, {0, 0, 0, 0}, {B, x.shape(1), S, half}, s);
    x2 = mx::slice(xr, {0, 0, 0, half}, {B, x.shape(1), S, rot}, s);
  }
  const mx::array o1 = mx::subtract(mx::multiply(x1, c, s), mx::multiply(x2, sn, s), s);
  const mx::array o2 = mx::add(mx::multiply(x2, c, s), mx::multiply(x1, sn, s), s);
  mx::array out = interleaved ? mx::reshape(mx::stack({o1, o2}, 4, s), xr.shape(), s)
                              : mx::concatenate({o1, o2}, 3, s);
  if (rot < D) out = mx::concatenate({out, mx::slice(xf, {0, 0, 0, rot}, xf.shape(), s)}, 3, s);
  return to_type(out, x.dtype(), s);
}

void translate_gqa(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const int Hq = static_cast<int>(n.attr_int("num_heads", 0));
  const int Hk = static_cast<int>(n.attr_int("kv_num_heads", 0));
  mx::array q = ctx.input(n, 0);
  const mx::Dtype dt = q.dtype();
  const int B = q.shape(0), S = q.shape(1);
  mx::array k = q, v = q;
  if (present(n, 1)) {
    k = ctx.input(n, 1);
    v = ctx.input(n, 2);
  } else {  // packed [B, S, (Hq + 2 Hk) D]
    const int D = q.shape(2) / (Hq + 2 * Hk);
    if (D * (Hq + 2 * Hk) != q.shape(2)) throw std::runtime_error("packed QKV width mismatch");
    k = mx::slice(q, {0, 0, Hq * D}, {B, S, (Hq + Hk) * D}, s);
    v = mx::slice(q, {0, 0, (Hq + Hk) * D}, {B, S, (Hq + 2 * Hk) * D}, s);
    q = mx::slice(q, {0, 0, 0}, {B, S, Hq * D}, s);
  }
  q = split_heads(q, Hq, s, "query");
  k = split_heads(k, Hk, s, "key");
  v = split_heads(v, Hk, s, "value");
  const int D = q.shape(3);
  const int total = host_scalar_int(ctx, n, 6);
  if (n.attr_int("do_rotary", 0) == 1) {
    const mx::array pos = gqa_positions(ctx, n, B, S, total);
    q = gqa_rotary(ctx, n, q, pos);
    k = gqa_rotary(ctx, n, k, pos);
  }
  if (total <= 0)
    throw std::runtime_error("total_sequence_length must be positive, got " +
                             std::to_string(total));
  const int P = present(n, 3) ? ctx.input(n, 3).shape(2) : 0;
  if (present(n, 3) && ctx.input(n, 4).shape(2) != P)
    throw std::runtime_error("past_key and past_value have different sequence lengths (" +
                             std::to_string(P) + " and " +
                             std::to_string(ctx.input(n, 4).shape(2)) + ")");
  if (S > 1 && S != total && B != 1)
    throw std::runtime_error(
        "batch_size must be 1 when sequence_length > 1 and past context is given");
  const int Tp = std::max(P, total);
  const mx::array seqlens = mx::astype(ctx.input(n, 5), mx::int32, s);
  if (seqlens.ndim() != 1 || seqlens.shape(0) != B)
    throw std::runtime_error("seqlens_k must have shape (batch_size)");
  // ORT's bound: a sequence ends inside the present cache. The values only shift positions that
  // are compared or clipped before any gather, so the check alone keeps the run memory-safe.
  ctx.require(
      n,
      mx::logical_and(mx::greater_equal(seqlens, mx::array(0), s),
                      mx::less(seqlens, mx::array(Tp), s), s),
      "seqlens_k is out of range [0, " + std::to_string(Tp) + ") (the present cache length)");
  const mx::array total_b = mx::reshape(mx::add(seqlens, mx::array(1), s), {B, 1, 1, 1}, s);
  const bool first_prompt = S == total;
  const mx::array past_b =
      first_prompt ? mx::zeros({B, 1, 1, 1}, mx::int32, s) : mx::subtract(total_b, mx::array(S), s);
  // present[b, :, j]: past for j < past_b, new[j - past_b] for past_b <= j < past_b + S, else 0.
  const mx::array j = mx::reshape(mx::arange(Tp, mx::int32, s), {1, 1, Tp, 1}, s);
  const mx::array rel = mx::subtract(j, past_b, s);  // [B, 1, Tp, 1]
  const mx::array in_new =
      mx::logical_and(mx::greater_equal(rel, mx::array(0), s), mx::less(rel, mx::array(S), s), s);
  const mx::array idx =
      mx::broadcast_to(mx::clip(rel, mx::array(0), mx::array(S - 1), s), {B, Hk, Tp, 1}, s);
  auto build = [&](const mx::array& cur, size_t past_i) {
    const int Dh = cur.shape(3);
    const mx::array idx_d = mx::broadcast_to(idx, {B, Hk, Tp, Dh}, s);
    mx::array out =
        S > 0 ? mx::take_along_axis(cur, idx_d, 2, s) : mx::zeros({B, Hk, Tp, Dh}, cur.dtype(), s);
    mx::array old = mx::zeros({B, Hk, Tp, Dh}, cur.dtype(), s);
    if (present(n, past_i)) {
      mx::array pst = ctx.input(n, past_i);
      if (pst.shape(0) != B || pst.shape(1) != Hk || pst.shape(3) != Dh)
        throw std::runtime_error("past cache shape mismatch");
      if (P < Tp) pst = mx::pad(pst, {2}, {0}, {Tp - P}, mx::array(0.0f), "constant", s);
      old = mx::where(mx::less(rel, mx::array(0), s), pst, old, s);
    }
    return mx::where(in_new, out, old, s);
  };
  const mx::array pk = build(k, 3), pv = build(v, 4);
  ctx.bind_output(n, 1, to_type(pk, dt, s));
  ctx.bind_output(n, 2, to_type(pv, dt, s));
  // Query i (absolute position past_b + i) attends keys j <= past_b + i with j < total_b.
  const mx::array qi = mx::reshape(mx::arange(S, mx::int32, s), {1, 1, S, 1}, s);
  const mx::array kj = mx::reshape(mx::arange(Tp, mx::int32, s), {1, 1, 1, Tp}, s);
  mx::array ok =
      mx::logical_and(mx::less_equal(kj, mx::add(qi, past_b, s), s), mx::less(kj, total_b, s), s);
  // local_window_size W (ORT 1.30 CPU, measured): the query at position p sees the W keys
  // p - W < j <= p (none for W = 0: a zero row, like any fully masked one).
  if (const int64_t w = n.attr_int("local_window_size", -1); w >= 0) {
    const int wc = checked_int(std::min<int64_t>(w, std::numeric_limits<int32_t>::max() / 2),
                               "local_window_size");
    ok = mx::logical_and(
        ok, mx::greater(kj, mx::subtract(mx::add(qi, past_b, s), mx::array(wc), s), s), s);
  }
  const mx::array bias = mx::where(ok, mx::array(0.0f), mx::array(kNegInf), s);
  const float scale = n.has_attr("scale") && n.attr_float("scale", 0.f) != 0.f
                          ? n.attr_float("scale", 1.f)
                          : 1.0f / std::sqrt(static_cast<float>(D));
  AttnResult a = attend(f32(q, s), f32(pk, s), f32(pv, s), scale, n.attr_float("softcap", 0.f),
                        bias, /*guard_masked_rows=*/true, s);
  ctx.bind_output(n, 0, to_type(merge_heads(a.y, s), dt, s));
}

}  // namespace

void register_attention_ops(OpRegistry& r) {
  r.add("", "Attention", 23, 24, claim_attention, translate_attention);
  r.add("com.microsoft", "MultiHeadAttention", 1, 1 << 30, claim_mha, translate_mha);
  r.add("com.microsoft", "GroupQueryAttention", 1, 1 << 30, claim_gqa, translate_gqa);
}

}  // namespace ortmlx
