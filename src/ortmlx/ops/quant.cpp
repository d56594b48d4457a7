// com.microsoft MatMulNBits: Y = A @ dequant(B)^T (+ bias), B block-quantised along K.
//
// B is uint8 [N, k_blocks, blob] with `bits`-wide values packed low bits first along K inside
// each block; scales [N, k_blocks] (or flattened); zero points either packed uint8
// [N, ceil(k_blocks * bits / 8)] (same packing) or unpacked in A's type [N, k_blocks]; absent zero
// points mean 2^(bits-1). The weight is dequantised in the graph to float32,
// W[n, k] = (q - zp) * scale, and multiplied in float32 (the result is rounded once to A's type),
// which matches ORT's CPU kernel with accuracy_level 0-3. accuracy_level 4 lets ORT quantise A to
// int8 internally; the EP still computes the exact product (the attribute only sets a minimum).
#include <limits>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

mx::array f32(const mx::array& a, mx::StreamOrDevice s) {
  return a.dtype() == mx::float32 ? a : mx::astype(a, mx::float32, s);
}

// uint8 [..., nbytes] -> uint8 [..., nbytes * 8 / bits], low bits first.
mx::array unpack_bits(const mx::array& packed, int bits, mx::StreamOrDevice s) {
  if (bits == 8) return packed;
  const int per = 8 / bits;
  const uint8_t mask = static_cast<uint8_t>((1 << bits) - 1);
  std::vector<mx::array> parts;
  for (int i = 0; i < per; ++i)
    parts.push_back(mx::bitwise_and(
        mx::right_shift(packed, mx::array(static_cast<uint8_t>(i * bits)), s), mx::array(mask), s));
  mx::array st = mx::stack(parts, -1, s);  // [..., nbytes, per]
  mx::Shape shape = packed.shape();
  shape.back() *= per;
  return mx::reshape(st, shape, s);
}

ClaimResult claim_matmul_nbits(const ClaimContext& c) {
  ORTMLX_REQUIRE(c.num_inputs() >= 3 && c.num_inputs() <= 6, "expects 3 to 6 inputs");
  ORTMLX_REQUIRE(c.num_outputs() == 1, "expects 1 output");
  auto r = refuse_unknown_attrs(
      c, {"K", "N", "bits", "block_size", "accuracy_level", "weight_prepacked"});
  if (!r.ok) return r;
  const auto& nd = c.node();
  const int64_t bits = nd.attr_int("bits", 4), bs = nd.attr_int("block_size", 0);
  ORTMLX_REQUIRE(bits == 2 || bits == 4 || bits == 8, "bits must be 2, 4 or 8");
  ORTMLX_REQUIRE(bs >= 16 && (bs & (bs - 1)) == 0, "block_size must be a power of two >= 16");
  // K, N and block_size size MLX dims (int32); a wider value would wrap (block_size 2^32 to 0).
  for (const char* name : {"K", "N", "block_size"}) {
    r = require_int_range(c, name, 1, std::numeric_limits<int32_t>::max());
    if (!r.ok) return r;
  }
  ORTMLX_REQUIRE(nd.attr_int("weight_prepacked", 0) == 0, "prepacked weights are not implemented");
  ORTMLX_REQUIRE(!c.has_input(4), "g_idx is not implemented");
  r = require_input_type(
      c, 0, [](ElemType t) { return t == ElemType::kFloat || t == ElemType::kFloat16; },
      "float32/float16 only");
  if (!r.ok) return r;
  const ElemType t = c.input_type(0);
  ORTMLX_REQUIRE(c.input_type(1) == ElemType::kUInt8, "B must be uint8");
  ORTMLX_REQUIRE(c.input_type(2) == t, "scales must have A's type");
  if (c.has_input(3))
    ORTMLX_REQUIRE(c.input_type(3) == ElemType::kUInt8 || c.input_type(3) == t,
                   "zero_points must be uint8 or A's type");
  if (c.has_input(5)) ORTMLX_REQUIRE(c.input_type(5) == t, "bias must have A's type");
  const ElemType out = c.output_type(0);
  ORTMLX_REQUIRE(out == ElemType::kUndefined || out == t, "output type differs from A");
  ORTMLX_REQUIRE(c.input_rank(0) != 0, "A must have rank >= 1");
  return ClaimResult::yes();
}

void translate_matmul_nbits(TranslationContext& ctx, const NodeDesc& n) {
  const auto s = ctx.stream();
  const mx::array a = ctx.input(n, 0);
  const int K = checked_int(n.attr_int("K", 0), "K"), N = checked_int(n.attr_int("N", 0), "N");
  const int bits = checked_int(n.attr_int("bits", 4), "bits");
  const int bs = checked_int(n.attr_int("block_size", 0), "block_size");
  if (K < 1 || N < 1 || bs < 1 || (bits != 2 && bits != 4 && bits != 8))
    throw std::runtime_error("K, N, block_size or bits out of range");
  const int nb = checked_int((int64_t{K} + bs - 1) / bs, "k_blocks");
  const int blob = checked_int(int64_t{bs} * bits / 8, "blob_size");
  const int padded_k = checked_int(int64_t{nb} * bs, "k_blocks * block_size");
  if (a.shape(-1) != K) throw std::runtime_error("A's last dimension is not K");
  mx::array b = ctx.input(n, 1);
  if (static_cast<int64_t>(b.size()) != checked_mul(int64_t{N} * nb, blob, "B size"))
    throw std::runtime_error("B must hold N * k_blocks * blob_size bytes");
  b = mx::reshape(b, {N, nb, blob}, s);
  mx::array q = f32(unpack_bits(b, bits, s), s);  // [N, nb, bs]
  mx::array scales = ctx.input(n, 2);
  if (static_cast<int64_t>(scales.size()) != static_cast<int64_t>(N) * nb)
    throw std::runtime_error("scales must hold N * k_blocks values");
  scales = mx::reshape(f32(scales, s), {N, nb, 1}, s);
  mx::array zp = mx::array(static_cast<float>(1 << (bits - 1)));
  if (n.inputs.size() > 3 && !n.inputs[3].empty()) {
    mx::array z = ctx.input(n, 3);
    if (z.dtype() == mx::uint8) {
      const int zbytes = static_cast<int>((int64_t{nb} * bits + 7) / 8);
      if (static_cast<int64_t>(z.size()) != static_cast<int64_t>(N) * zbytes)
        throw std::runtime_error(
            "packed zero_points must hold N * ceil(k_blocks * bits / 8) bytes");
      z = unpack_bits(mx::reshape(z, {N, zbytes}, s), bits, s);
      z = mx::slice(z, {0, 0}, {N, nb}, s);
    } else if (static_cast<int64_t>(z.size()) != static_cast<int64_t>(N) * nb) {
      throw std::runtime_error("zero_points must hold N * k_blocks values");
    }
    zp = mx::reshape(f32(z, s), {N, nb, 1}, s);
  }
  mx::array w = mx::multiply(mx::subtract(q, zp, s), scales, s);  // [N, nb, bs]
  w = mx::reshape(w, {N, padded_k}, s);
  if (padded_k != K) w = mx::slice(w, {0, 0}, {N, K}, s);
  mx::array y = mx::matmul(f32(a, s), mx::transpose(w, {1, 0}, s), s);
  if (n.inputs.size() > 5 && !n.inputs[5].empty()) y = mx::add(y, f32(ctx.input(n, 5), s), s);
  ctx.bind_output(n, 0, y.dtype() == a.dtype() ? y : mx::astype(y, a.dtype(), s));
}

}  // namespace

void register_quant_ops(OpRegistry& r) {
  r.add("com.microsoft", "MatMulNBits", 1, 1 << 30, claim_matmul_nbits, translate_matmul_nbits);
}

}  // namespace ortmlx
