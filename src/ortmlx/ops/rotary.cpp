// Rotary position embeddings: com.microsoft RotaryEmbedding and ONNX RotaryEmbedding (opset 23),
// as ONNX Runtime's CPU kernels compute them.
//
// out = x * cos + rotate(x) * sin over the first rotary_embedding_dim features of each head (all
// of them by default), the rest passed through. Pairs are (x[i], x[i + rot/2]) or, with
// interleaved=1, (x[2i], x[2i+1]). The two ops differ in how they find the cos/sin rows:
// com.microsoft gathers them by position_ids [B, S] (or offset + [0, S) for a 1-element
// position_ids); ONNX gathers them by an optional position_ids [B, S] from a 2-D cache, or takes
// a 3-D cache [B, S, rot/2] as the rows themselves. Half inputs are computed in float32 and
// rounded once.
#include <algorithm>
#include <limits>
#include <string>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

mx::array f32(const mx::array& a, mx::StreamOrDevice s) {
  return a.dtype() == mx::float32 ? a : mx::astype(a, mx::float32, s);
}

// Inputs `ins` (when present) and output 0 share one float32/float16 type (ORT's kernels).
ClaimResult require_float_io(const ClaimContext& c, std::initializer_list<size_t> ins) {
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
  const ElemType t = c.output_type(0);
  ORTMLX_REQUIRE(t == ElemType::kUndefined || t == first, "output type differs from the input's");
  return ClaimResult::yes();
}

// Rotates x (3-D [B, S, H * Dh] or 4-D [B, H, S, Dh]) with cos/sin rows c, sn [B, S, rot/2]
// (any float type); returns x's shape and type.
mx::array apply_rotary(const mx::array& x, mx::array c, mx::array sn, int H, bool interleaved,
                       mx::StreamOrDevice s) {
  const bool three_d = x.ndim() == 3;
  const int B = x.shape(0);
  const int S = three_d ? x.shape(1) : x.shape(2);
  const mx::array xh = three_d ? mx::reshape(x, {B, S, H, x.shape(2) / H}, s) : x;
  const int Dh = xh.shape(3);
  const int half = c.shape(-1), rot = 2 * half;
  // cos/sin placed on the sequence axis of xh.
  const mx::Shape cs = three_d ? mx::Shape{B, S, 1, half} : mx::Shape{B, 1, S, half};
  c = mx::reshape(f32(c, s), cs, s);
  sn = mx::reshape(f32(sn, s), cs, s);
  const mx::array xf = f32(xh, s);
  const int nd = static_cast<int>(xf.ndim());
  mx::Shape lo(nd, 0), hi = xf.shape();
  hi[nd - 1] = rot;
  const mx::array xr = mx::slice(xf, lo, hi, s);
  mx::array out = xr;
  if (interleaved) {
    mx::Shape ps = xr.shape();
    ps[nd - 1] = half;
    ps.push_back(2);
    const mx::array pr = mx::reshape(xr, ps, s);
    const mx::array x1 = mx::take(pr, 0, nd, s), x2 = mx::take(pr, 1, nd, s);
    const mx::array o1 = mx::subtract(mx::multiply(x1, c, s), mx::multiply(x2, sn, s), s);
    const mx::array o2 = mx::add(mx::multiply(x2, c, s), mx::multiply(x1, sn, s), s);
    out = mx::reshape(mx::stack({o1, o2}, nd, s), xr.shape(), s);
  } else {
    mx::Shape mid = xr.shape();
    mid[nd - 1] = half;
    const mx::array x1 = mx::slice(xr, lo, mid, s);
    mx::Shape lo2(nd, 0);
    lo2[nd - 1] = half;
    const mx::array x2 = mx::slice(xr, lo2, xr.shape(), s);
    const mx::array o1 = mx::subtract(mx::multiply(x1, c, s), mx::multiply(x2, sn, s), s);
    const mx::array o2 = mx::add(mx::multiply(x2, c, s), mx::multiply(x1, sn, s), s);
    out = mx::concatenate({o1, o2}, nd - 1, s);
  }
  if (rot < Dh) {
    mx::Shape lo3(nd, 0);
    lo3[nd - 1] = rot;
    out = mx::concatenate({out, mx::slice(xf, lo3, xf.shape(), s)}, nd - 1, s);
  }
  out = mx::reshape(out, x.shape(), s);
  return out.dtype() == x.dtype() ? out : mx::astype(out, x.dtype(), s);
}

// Rows of a 2-D cos/sin cache gathered by positions p [B, S], clamped: callers record the range
// check (positions outside the cache raise, ORT's rule); MLX's take does not bounds-check.
mx::array gather_rows(const mx::array& cache, const mx::array& p, mx::StreamOrDevice s) {
  const int rows = cache.shape(0);
  const mx::array pc = mx::clip(mx::astype(p, mx::int64, s), mx::array(int64_t{0}),
                                mx::array(int64_t{std::max(rows - 1, 0)}), s);
  return mx::take(cache, pc, 0, s);
}

// ---------------------------------------------------------------- com.microsoft RotaryEmbedding

ClaimResult claim_rotary(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() == 4 && c.num_outputs() == 1, "expects 4 inputs, 1 output");
  auto r = refuse_unknown_attrs(
      c, {"num_heads", "rotary_embedding_dim", "interleaved", "is_packed_batching", "scale"});
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.node().attr_int("is_packed_batching", 0) == 0,
                 "packed batching is not "
                 "implemented");
  ORTMLX_REQUIRE(c.node().attr_float("scale", 1.f) == 1.f, "scale != 1 is not implemented");
  r = require_float_io(c, {0, 2, 3});
  if (!r.ok) return r;
  ORTMLX_REQUIRE(c.input_type(1) == ElemType::kInt64, "position_ids must be int64");
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank == 3 || rank == 4, "input must be 3-D or 4-D");
  return ClaimResult::yes();
}

void translate_rotary(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const mx::array pos = ctx.input(n, 1);
  const mx::array cosc = ctx.input(n, 2), sinc = ctx.input(n, 3);
  if (cosc.ndim() != 2 || sinc.shape() != cosc.shape())
    throw std::runtime_error("cos_cache/sin_cache must be 2-D of one shape");
  const int half = cosc.shape(1);
  int rot = static_cast<int>(n.attr_int("rotary_embedding_dim", 0));
  int H = static_cast<int>(n.attr_int("num_heads", 0));
  const bool three_d = x.ndim() == 3;
  const int B = x.shape(0);
  const int S = three_d ? x.shape(1) : x.shape(2);
  int Dh = 0;
  if (three_d) {
    Dh = H > 0 ? x.shape(2) / H : 2 * half;
    if (Dh <= 0 || x.shape(2) % Dh != 0)
      throw std::runtime_error("hidden size / head size mismatch");
    H = x.shape(2) / Dh;
  } else {
    Dh = x.shape(3);
  }
  if (rot == 0) rot = Dh;
  if (rot != 2 * half || rot > Dh)
    throw std::runtime_error("rotary_embedding_dim does not match the cos/sin cache width");
  mx::array p = pos;
  if (p.ndim() == 1 && p.shape(0) == 1) {  // offset form
    p = mx::add(mx::reshape(p, {1, 1}, s), mx::reshape(mx::arange(S, mx::int64, s), {1, S}, s), s);
    p = mx::broadcast_to(p, {B, S}, s);
  }
  if (p.ndim() != 2 || p.shape(0) != B || p.shape(1) != S)
    throw std::runtime_error("position_ids must be (batch, sequence) or (1)");
  const int rows = cosc.shape(0);
  if (rows == 0 && p.size() != 0)
    throw std::runtime_error("position_ids index an empty cos/sin cache");
  const std::string range = "[0, " + std::to_string(rows) + ")";
  if (pos.ndim() == 1 && pos.shape(0) == 1) {
    const mx::array base = mx::astype(pos, mx::int64, s);
    ctx.require(n,
                mx::logical_and(mx::greater_equal(base, mx::array(int64_t{0}), s),
                                mx::less_equal(base, mx::array(int64_t{rows} - S), s), s),
                "position_ids base value with sequence_length " + std::to_string(S) +
                    " exceeds cos/sin cache range " + range);
  } else {
    ctx.require(n,
                mx::logical_and(mx::greater_equal(p, mx::array(int64_t{0}), s),
                                mx::less(p, mx::array(int64_t{rows}), s), s),
                "position_ids value is out of range " + range);
  }
  // An empty input (B = 0 or S = 0) gives an empty output, as in ORT; MLX's take refuses to
  // index the empty pairs.
  if (x.size() == 0) {
    ctx.bind_output(n, 0, x);
    return;
  }
  ctx.bind_output(n, 0,
                  apply_rotary(x, gather_rows(cosc, p, s), gather_rows(sinc, p, s), H,
                               n.attr_int("interleaved", 0) != 0, s));
}

// ---------------------------------------------------------------- ONNX RotaryEmbedding (23)

ClaimResult claim_onnx_rotary(const ClaimContext& c) {
  ORTMLX_REQUIRE((c.num_inputs() == 3 || c.num_inputs() == 4) && c.num_outputs() == 1,
                 "expects 3 or 4 inputs, 1 output");
  auto r = refuse_unknown_attrs(c, {"num_heads", "rotary_embedding_dim", "interleaved"});
  if (!r.ok) return r;
  const NodeView& nd = c.node();
  ORTMLX_REQUIRE(nd.attr_int("interleaved", 0) == 0 || nd.attr_int("interleaved", 0) == 1,
                 "interleaved must be 0 or 1");
  r = require_int_range(c, "num_heads", 0, std::numeric_limits<int32_t>::max());
  if (!r.ok) return r;
  r = require_int_range(c, "rotary_embedding_dim", 0, std::numeric_limits<int32_t>::max());
  if (!r.ok) return r;
  r = require_float_io(c, {0, 1, 2});
  if (!r.ok) return r;
  if (c.has_input(3))
    ORTMLX_REQUIRE(c.input_type(3) == ElemType::kInt64, "position_ids must be int64");
  const int64_t rank = c.input_rank(0);
  ORTMLX_REQUIRE(rank == 3 || rank == 4, "input must be 3-D or 4-D");
  ORTMLX_REQUIRE(rank == 4 || nd.attr_int("num_heads", 0) > 0, "a 3-D input needs num_heads > 0");
  const int64_t cache_rank = c.has_input(3) ? 2 : 3;
  for (size_t i : {1, 2})
    ORTMLX_REQUIRE(c.input_rank(i) < 0 || c.input_rank(i) == cache_rank,
                   c.has_input(3) ? "cos/sin caches must be 2-D with position_ids"
                                  : "cos/sin caches must be 3-D without position_ids");
  return ClaimResult::yes();
}

void translate_onnx_rotary(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array x = ctx.input(n, 0);
  const mx::array cosc = ctx.input(n, 1), sinc = ctx.input(n, 2);
  const bool has_pos = n.inputs.size() > 3 && !n.inputs[3].empty();
  if (x.ndim() != 3 && x.ndim() != 4) throw std::runtime_error("input must be 3-D or 4-D");
  const bool three_d = x.ndim() == 3;
  const int B = x.shape(0);
  const int S = three_d ? x.shape(1) : x.shape(2);
  int H = three_d ? checked_int(n.attr_int("num_heads", 0), "num_heads") : x.shape(1);
  if (three_d && (H <= 0 || x.shape(2) % H != 0))
    throw std::runtime_error("hidden size " + std::to_string(x.shape(2)) +
                             " is not a multiple of num_heads " + std::to_string(H));
  const int Dh = three_d ? x.shape(2) / H : x.shape(3);
  const int attr_rot = checked_int(n.attr_int("rotary_embedding_dim", 0), "rotary_embedding_dim");
  const int rot = attr_rot > 0 ? attr_rot : Dh;
  if (rot > Dh) throw std::runtime_error("rotary_embedding_dim exceeds the head size");
  if (sinc.shape() != cosc.shape())
    throw std::runtime_error("cos_cache and sin_cache shapes differ");
  if (cosc.ndim() != (has_pos ? 2 : 3))
    throw std::runtime_error(has_pos ? "cos/sin caches must be 2-D with position_ids"
                                     : "cos/sin caches must be 3-D without position_ids");
  if (cosc.shape(-1) != rot / 2 || rot % 2 != 0)
    throw std::runtime_error("cos/sin cache width " + std::to_string(cosc.shape(-1)) +
                             " is not rotary_embedding_dim / 2 = " + std::to_string(rot / 2));
  mx::array c = cosc, sn = sinc;
  if (has_pos) {
    const mx::array p = ctx.input(n, 3);
    if (p.ndim() != 2 || p.shape(0) != B || p.shape(1) != S)
      throw std::runtime_error("position_ids must be (batch, sequence)");
    const int rows = cosc.shape(0);
    // ORT does not extend the cache: a sequence longer than it is an error.
    if (S > rows)
      throw std::runtime_error("sequence length " + std::to_string(S) +
                               " exceeds the cos/sin cache's " + std::to_string(rows) + " rows");
    ctx.require(n,
                mx::logical_and(mx::greater_equal(p, mx::array(int64_t{0}), s),
                                mx::less(p, mx::array(int64_t{rows}), s), s),
                "position_ids value is out of range [0, " + std::to_string(rows) + ")");
    if (x.size() == 0) {
      ctx.bind_output(n, 0, x);
      return;
    }
    c = gather_rows(cosc, p, s);
    sn = gather_rows(sinc, p, s);
  } else if (cosc.shape(0) != B || cosc.shape(1) != S) {
    throw std::runtime_error("cos/sin caches must be (batch, sequence, rotary_embedding_dim / 2)");
  }
  if (x.size() == 0) {
    ctx.bind_output(n, 0, x);
    return;
  }
  ctx.bind_output(n, 0, apply_rotary(x, c, sn, H, n.attr_int("interleaved", 0) != 0, s));
}

}  // namespace

void register_rotary_ops(OpRegistry& r) {
  r.add("com.microsoft", "RotaryEmbedding", 1, 1 << 30, claim_rotary, translate_rotary);
  r.add("", "RotaryEmbedding", 23, 1 << 30, claim_onnx_rotary, translate_onnx_rotary);
}

}  // namespace ortmlx
