// The dense AttentionVJP pullback with MLX ops (scores materialised; runs on every MLX backend),
// the key visibility shared with the blocked and native paths, and the exact softmax.
//
// Non-finite inputs follow the float64 reference (docs/ATTENTION_VJP.md, "Non-finite inputs"):
// hidden keys are selected away (adding -inf to a NaN or +Inf score would give NaN, a visible
// NaN), a row whose visible scores hold NaN or +Inf is a dead row (P = 0), and every product
// runs over every key, so 0 * NaN reaches the gradients as in the reference.
#include <limits>

#include <mlx/ops.h>

#include "ortmlx/ops/attention_vjp/paths.h"

namespace ortmlx::attention_vjp {

namespace {
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
}

ScoreMask score_mask(const Config& c, const mx::array& mask, int sq, int sk, mx::StreamOrDevice s,
                     const std::optional<mx::array>& query_rows) {
  ScoreMask out;
  if (c.mask != 0) {
    mx::Shape shape = mask.shape();
    while (shape.size() < 4) shape.insert(shape.begin(), 1);
    mx::array m = mx::reshape(mask, shape, s);
    const int width = shape[3];
    if (width != 1 && width > sk)
      m = mx::slice(m, {0, 0, 0, 0}, {shape[0], shape[1], shape[2], sk}, s);
    if (c.mask == 1) {
      // Keys at or beyond a narrow mask's width are hidden.
      if (width != 1 && width < sk)
        m = mx::pad(m, {{0, 0}, {0, 0}, {0, 0}, {0, sk - width}}, mx::array(false), "constant", s);
      out.keep = m;
    } else {
      if (width != 1 && width < sk) {
        // Hidden beyond the width (a select); the padded values are never seen.
        m = mx::pad(m, {{0, 0}, {0, 0}, {0, 0}, {0, sk - width}}, mx::array(0.f), "constant", s);
        out.keep = mx::reshape(mx::less(mx::arange(sk, mx::int32, s), mx::array(width), s),
                               {1, 1, 1, sk}, s);
      }
      out.add = m;
    }
  }
  if (c.causal) {
    // Top-left alignment: key j is visible to query i iff j <= i (also when Sq != Sk).
    mx::array rows =
        mx::reshape(query_rows ? *query_rows : mx::arange(sq, mx::int32, s), {1, 1, sq, 1}, s);
    mx::array cols = mx::reshape(mx::arange(sk, mx::int32, s), {1, 1, 1, sk}, s);
    mx::array seen = mx::less_equal(cols, rows, s);
    out.keep = out.keep ? mx::logical_and(*out.keep, seen, s) : seen;
  }
  return out;
}

std::optional<mx::array> additive_bias(const Config& c, const mx::array& mask, int sq, int sk,
                                       mx::StreamOrDevice s,
                                       const std::optional<mx::array>& query_rows) {
  const ScoreMask m = score_mask(c, mask, sq, sk, s, query_rows);
  if (!m.keep) return m.add;
  return mx::where(*m.keep, m.add ? *m.add : mx::array(0.f), mx::array(kNegInf), s);
}

std::pair<mx::array, mx::array> neutralise_dead_rows(const Config& c, const mx::array& bias,
                                                     const mx::array& dy, mx::StreamOrDevice s) {
  if (c.mask == 0) return {bias, dy};
  mx::array dead = mx::all(mx::isneginf(bias, s), -1, true, s);  // (Bm, Hm, Sq|1, 1)
  if (c.mask == 2) {
    // Hidden keys carry -inf already (causal wins over the mask value), so this sees only the
    // visible ones.
    const mx::array odd = mx::logical_or(mx::isnan(bias, s), mx::isposinf(bias, s), s);
    dead = mx::logical_or(dead, mx::any(odd, -1, true, s), s);
  }
  return {mx::where(dead, mx::array(0.f, bias.dtype()), bias, s),
          mx::where(dead, mx::array(0.f, dy.dtype()), dy, s)};
}

mx::array exact_probs(const Config& c, mx::array s5, const ScoreMask& m, mx::StreamOrDevice s) {
  // (Bm, Hm, R|1, Sk) -> 5-D against (B, HK, G, R, Sk), splitting a non-broadcast head axis.
  auto to5 = [&](const mx::array& a) {
    const mx::Shape sh = a.shape();
    return sh[1] == 1 ? mx::reshape(a, {sh[0], 1, 1, sh[2], sh[3]}, s)
                      : mx::reshape(a, {sh[0], c.hk, c.group(), sh[2], sh[3]}, s);
  };
  // The additive mask is added (a -inf value hides a finite or -inf score; on +Inf or NaN it
  // gives NaN, a visible NaN, as in the reference); causal, boolean and width masks select.
  if (m.add) s5 = mx::add(s5, to5(*m.add), s);
  if (m.keep) s5 = mx::where(to5(*m.keep), s5, mx::array(kNegInf), s);
  // A live row (a visible finite score, no visible NaN or +Inf) has a finite log-sum-exp; a
  // dead row gets NaN, +Inf or -Inf there, whatever max does with NaN (exp(NaN - m) is NaN, and
  // +Inf - +Inf is NaN): P = 0 there. exp(S - lse) is the softmax in one pass over the tile.
  const mx::array lse = mx::logsumexp(s5, -1, true, s);
  return mx::where(mx::isfinite(lse, s), mx::exp(mx::subtract(s5, lse, s), s), mx::array(0.f), s);
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
  mx::array p5 = exact_probs(c, s5, score_mask(c, t.mask, sq, sk, s), s);
  mx::array p = mx::reshape(p5, {b, hk, g * sq, sk}, s);

  // Every product runs over every key and row (hidden ones hold P = 0), as in the reference.
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
