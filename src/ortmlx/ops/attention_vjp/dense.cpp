// The dense AttentionVJP pullback with MLX ops (scores materialised; runs on every MLX backend),
// and the explicit additive bias shared with the native path.
#include <limits>

#include <mlx/ops.h>

#include "ortmlx/ops/attention_vjp/paths.h"

namespace ortmlx::attention_vjp {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}

std::optional<mx::array> additive_bias(const Config& c, const mx::array& mask, int sq, int sk,
                                       mx::StreamOrDevice s,
                                       const std::optional<mx::array>& query_rows) {
  std::optional<mx::array> bias;
  if (c.mask != 0) {
    mx::Shape shape = mask.shape();
    while (shape.size() < 4) shape.insert(shape.begin(), 1);
    mx::array m = mx::reshape(mask, shape, s);
    m = c.mask == 1 ? mx::where(m, mx::array(0.f), mx::array(kNegInf), s)
                    : mx::astype(m, mx::float32, s);
    const int width = shape[3];
    if (width != 1 && width > sk) {
      m = mx::slice(m, {0, 0, 0, 0}, {shape[0], shape[1], shape[2], sk}, s);
    } else if (width != 1 && width < sk) {
      // Keys at or beyond the mask's width are masked.
      m = mx::pad(m, {{0, 0}, {0, 0}, {0, 0}, {0, sk - width}}, mx::array(kNegInf), "constant", s);
    }
    bias = m;
  }
  if (c.causal) {
    // Top-left alignment: key j is visible to query i iff j <= i (also when Sq != Sk).
    mx::array rows =
        mx::reshape(query_rows ? *query_rows : mx::arange(sq, mx::int32, s), {1, 1, sq, 1}, s);
    mx::array cols = mx::reshape(mx::arange(sk, mx::int32, s), {1, 1, 1, sk}, s);
    mx::array hidden = mx::greater(cols, rows, s);
    bias = mx::where(hidden, mx::array(kNegInf), bias ? *bias : mx::array(0.f), s);
  }
  return bias;
}

std::array<mx::array, 3> dense_mlx(const Config& c, const Bhsd& t, mx::StreamOrDevice s) {
  const int b = t.q.shape(0), sq = t.q.shape(2), sk = t.k.shape(2);
  const int hk = c.hk, g = c.group(), d = c.d;
  // Query heads grouped by their kv head: (B, HQ, Sq, D) -> (B, HK, G*Sq, D) is a plain reshape
  // because consecutive query heads share one kv head. GEMMs then sum over the group for free.
  mx::array q4 = mx::reshape(t.q, {b, hk, g * sq, d}, s);
  mx::array dy4 = mx::reshape(t.dy, {b, hk, g * sq, d}, s);
  mx::array kt = mx::swapaxes(t.k, -1, -2, s);
  mx::array vt = mx::swapaxes(t.v, -1, -2, s);

  mx::array scores = mx::multiply(mx::matmul(q4, kt, s), mx::array(c.scale), s);
  mx::array s5 = mx::reshape(scores, {b, hk, g, sq, sk}, s);
  if (auto bias = additive_bias(c, t.mask, sq, sk, s)) {
    // (Bm, Hm, Sq|1, Sk) -> 5-D, splitting the head axis when it is not broadcast.
    const mx::Shape bs = bias->shape();
    mx::array b5 = bs[1] == 1 ? mx::reshape(*bias, {bs[0], 1, 1, bs[2], bs[3]}, s)
                              : mx::reshape(*bias, {bs[0], hk, g, bs[2], bs[3]}, s);
    s5 = mx::add(s5, b5, s);
  }
  // Softmax with fully masked rows (max = -inf) giving zeros instead of NaN.
  mx::array mx_ = mx::max(s5, -1, true, s);
  mx::array dead = mx::isneginf(mx_, s);
  mx::array e = mx::exp(mx::subtract(s5, mx::where(dead, mx::array(0.f), mx_, s), s), s);
  mx::array sum = mx::sum(e, -1, true, s);
  mx::array p5 = mx::where(dead, mx::array(0.f), mx::divide(e, sum, s), s);
  mx::array p = mx::reshape(p5, {b, hk, g * sq, sk}, s);

  mx::array y4 = t.y ? mx::reshape(*t.y, {b, hk, g * sq, d}, s) : mx::matmul(p, t.v, s);
  mx::array dv = mx::matmul(mx::swapaxes(p, -1, -2, s), dy4, s);
  mx::array dp = mx::matmul(dy4, vt, s);
  mx::array delta = mx::sum(mx::multiply(dy4, y4, s), -1, true, s);
  mx::array ds = mx::multiply(p, mx::subtract(dp, delta, s), s);
  mx::array dq = mx::multiply(mx::matmul(ds, t.k, s), mx::array(c.scale), s);
  mx::array dk =
      mx::multiply(mx::matmul(mx::swapaxes(ds, -1, -2, s), q4, s), mx::array(c.scale), s);
  return {mx::reshape(dq, {b, c.hq, sq, d}, s), dk, dv};
}

}  // namespace ortmlx::attention_vjp
