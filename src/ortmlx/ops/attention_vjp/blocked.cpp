// The blocked AttentionVJP pullback with MLX ops: the dense algorithm run over blocks of query
// rows, so the live score tiles are O(block x Sk) instead of O(Sq x Sk). Portable (CPU, CUDA,
// Metal); on GPU backends it runs beyond the dense byte budget until fused GPU kernels exist.
//
// Per block of rows [r0, r1) (query heads grouped by kv head, as in dense_mlx):
//     S = scale Q K^T + bias      P = softmax rows (exact: a block holds whole rows, every key)
//     [Recompute: Y = P V]        delta = rowsum(dY * Y)
//     dP = dY V^T     dS = P (dP - delta)     dQ[r0:r1] = scale dS K
//     dK += dS^T Q (scaled once at the end)   dV += P^T dY
// Only the keys a block can see take part: causal (top-left) rows below r1 never see keys >= r1,
// and keys at or beyond a narrow mask's width are masked for every row, so the block's key range
// stops there and its dK/dV parts are padded to Sk.
//
// Non-finite inputs. The reference's products run over every key, so a key a block leaves out
// still adds 0 * x terms: zero, or NaN where x is not finite. Those terms are reproduced exactly
// by O(S x D) flags (x * 0 is 0 or NaN; a sum of flags is NaN iff one is), never by computing the
// left-out keys. For a block's row i and a left-out key j (P_ij = 0):
//   dS_ij = 0 * (dY_i.V_j - delta_i) is NaN iff delta_i or V_j is not finite (dY_i.V_j is not
//     finite iff dY_i or V_j is not, and a non-finite dY_i makes delta_i non-finite too);
//   Recompute Y_i gains 0 * V_j (per head dim), before delta_i is formed;
//   dQ_i gains dS_ij K_j: NaN where dS_ij is, or per head dim where K_j is not finite;
//   dK_j gains dS_ij Q_i: NaN where dS_ij is, or per head dim where Q_i is not finite;
//   dV_j gains 0 * dY_i: NaN per head dim where dY_i is not finite.
// The key-side flags over j >= kn are suffix sums (one reverse cumsum over the keys); the row-side
// flags are sums over the block's rows. Adding a zero flag leaves a finite result bit-exact.
//
// Evaluation order. MLX orders a lazy graph by its data edges only. Without extra edges the
// blocks are independent (each block's dS feeds both its dQ rows and the dK sum), so the
// scheduler may interleave them and keep many blocks' tiles alive: measured 70 MiB against
// 23 MiB at Sq = Sk = 2048 with 128-row blocks (a dense score tile: 32 MiB). So every
// row-dependent input of block i+1 (its Q, dY, Y and mask rows, its causal row indices) passes
// through a fence (BlockFence, like mx::depends) on block i's requested results: block i+1
// cannot start before block i is done, and block i's tiles are released. The K and V slices are
// views and need no edge. On a GPU the fence also drains the stream now and then (see there).
#include <algorithm>
#include <cstdint>
#include <memory>

#include <mlx/ops.h>
#include <mlx/primitives.h>
#include <mlx/stream.h>

#include "ortmlx/ops/attention_vjp/paths.h"

namespace ortmlx::attention_vjp {

namespace {

// Orders block i+1 after block i like mx::depends (its outputs share the first inputs' buffers;
// the rest are the ordering inputs). On a GPU stream it can also drain the stream first: MLX
// frees a kernel's buffers only once the kernel has run, and the host encodes far ahead of the
// GPU (up to about 10 command batches of 100 ops on an H100/H200), so without a wait tens of
// blocks' tiles are alive together. The CPU stream needs no wait: MLX keeps at most 10 CPU tasks
// in flight.
class BlockFence : public mx::Primitive {
 public:
  BlockFence(mx::Stream stream, bool drain) : mx::Primitive(stream), drain_(drain) {}
  void eval_cpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override {
    share(in, out);
  }
  void eval_gpu(const std::vector<mx::array>& in, std::vector<mx::array>& out) override {
    if (drain_) mx::synchronize(stream());
    share(in, out);
  }
  const char* name() const override { return "OnnaxAttentionBlockFence"; }

 private:
  static void share(const std::vector<mx::array>& in, std::vector<mx::array>& out) {
    for (size_t i = 0; i < out.size(); ++i) out[i].copy_shared_buffer(in[i]);
  }
  bool drain_;
};

// GPU stream drains: at most about this many bytes allocated between two (8 dense budgets).
// Each drain idles the GPU while the host encodes the next block, so draining every block costs
// time: measured on an H200 (HQ 16, Sq = Sk = 16384, D 128, causal, 64 MiB score tiles):
// 247 ms and 14.6 GB without drains, 413 ms and 1.2 GB draining every block, 299 ms and 3.1 GB
// every 4 blocks.
constexpr uint64_t kDrainBytes = 8 * kDefaultDenseLimitBytes;

std::vector<mx::array> fence(const std::vector<mx::array>& in, const std::vector<mx::array>& after,
                             bool drain, mx::StreamOrDevice s) {
  std::vector<mx::array> all = in;
  all.insert(all.end(), after.begin(), after.end());
  std::vector<mx::Shape> shapes;
  std::vector<mx::Dtype> dtypes;
  for (const auto& a : in) {
    shapes.push_back(a.shape());
    dtypes.push_back(a.dtype());
  }
  return mx::array::make_arrays(std::move(shapes), std::move(dtypes),
                                std::make_shared<BlockFence>(mx::to_stream(s), drain), all);
}

}  // namespace

int blocked_rows(const Config& c, int b, int sq, int sk, uint64_t budget) {
  // One block's (B, HQ, rows, Sk) fp32 score tile within the budget, then rows evened out over
  // the blocks (300 rows in blocks of 256 -> two blocks of 150).
  const uint64_t row_bytes = 4ull * static_cast<uint64_t>(std::max(1, b)) *
                             static_cast<uint64_t>(std::max(1, c.hq)) *
                             static_cast<uint64_t>(std::max(1, sk));
  const uint64_t total = static_cast<uint64_t>(std::max(1, sq));
  const uint64_t rows = std::clamp<uint64_t>(budget / row_bytes, 1, total);
  const uint64_t blocks = (total + rows - 1) / rows;
  return static_cast<int>((total + blocks - 1) / blocks);
}

std::array<mx::array, 3> blocked_mlx(const Config& c, const Bhsd& t, mx::StreamOrDevice s,
                                     int block_rows) {
  const int b = t.q.shape(0), sq = t.q.shape(2), sk = t.k.shape(2);
  const int hk = c.hk, g = c.group(), d = c.d;
  // Unrequested gradients are placeholders (never evaluated): building them would keep every
  // block's tiles referenced after the evaluation.
  std::array<mx::array, 3> out = {mx::zeros(t.q.shape(), mx::float32, s),
                                  mx::zeros(t.k.shape(), mx::float32, s),
                                  mx::zeros(t.v.shape(), mx::float32, s)};
  if (b == 0 || sq == 0 || sk == 0) return out;
  const int rows = std::min(sq, block_rows > 0 ? block_rows : blocked_rows(c, b, sq, sk));
  const bool want_q = c.wants(0), want_k = c.wants(1), want_v = c.wants(2);

  // Every block reads K and V: one contiguous copy each (rank-3 inputs arrive as strided views)
  // rather than one per block. K carries the scale: S = Q (scale K)^T and dQ = dS (scale K).
  const mx::array ks = mx::multiply(t.k, mx::array(c.scale), s);
  const mx::array v = mx::contiguous(t.v, false, s);
  auto rows_of = [&](const mx::array& a, int r0, int r1) {
    return mx::slice(a, {0, 0, r0, 0}, {a.shape(0), a.shape(1), r1, a.shape(3)}, s);
  };
  auto keys_of = [&](const mx::array& a, int n) {
    return n == sk ? a : mx::slice(a, {0, 0, 0, 0}, {b, hk, n, d}, s);
  };
  // The mask in 4-D: its row axis is 1 (shared by every block) or Sq (sliced per block).
  std::optional<mx::array> mask4;
  int key_limit = sk;
  if (c.mask != 0) {
    mx::Shape shape = t.mask.shape();
    while (shape.size() < 4) shape.insert(shape.begin(), 1);
    mask4 = mx::reshape(t.mask, shape, s);
    if (shape[3] != 1) key_limit = std::max(1, std::min(sk, shape[3]));  // narrow: keys masked
  }

  // Flags of the keys left out of some block (see the top): per key, V_j not finite (B,HK,Sk,1);
  // suffix sums over keys j >= n of, per head dim, 0 * K_j plus V_j's flag (dQ), and of 0 * V_j
  // (the Recompute Y). Built only when a block leaves keys out.
  const bool skips = c.causal || key_limit < sk;
  const mx::array zero(0.f);
  std::optional<mx::array> v_flag, dq_suffix, y_suffix;
  if (skips) {
    const mx::array v0 = mx::multiply(v, zero, s);
    v_flag = mx::sum(v0, -1, true, s);
    dq_suffix = mx::cumsum(mx::add(mx::multiply(t.k, zero, s), *v_flag, s), 2, true, true, s);
    if (!t.y) y_suffix = mx::cumsum(v0, 2, true, true, s);
  }
  auto suffix_at = [&](const mx::array& a, int n) {  // (B, HK, 1, D): the sum over keys >= n
    return mx::slice(a, {0, 0, n, 0}, {b, hk, n + 1, d}, s);
  };

  std::vector<mx::array> dq_blocks;
  std::optional<mx::array> dk, dv;  // accumulated over blocks; dK without the scale
  std::vector<mx::array> previous;  // the previous block's requested results (ordering edges)
  // GPU: what the blocks since the last drain allocate (estimated: a few score tiles, and per
  // accumulator a new sum, plus a padded part when keys are clipped), against kDrainBytes.
  const uint64_t acc_bytes = 4ull * static_cast<uint64_t>(b) * static_cast<uint64_t>(hk) *
                             static_cast<uint64_t>(sk) * static_cast<uint64_t>(d);
  const uint64_t accumulators = (want_k ? 1 : 0) + (want_v ? 1 : 0);
  uint64_t pending = 0;
  for (int r0 = 0; r0 < sq; r0 += rows) {
    const int r1 = std::min(sq, r0 + rows), r = r1 - r0;
    const int kn = c.causal ? std::min(key_limit, r1) : key_limit;  // keys this block can see

    // The block's row-dependent inputs, ordered after the previous block.
    std::vector<mx::array> in = {rows_of(t.q, r0, r1), rows_of(t.dy, r0, r1)};
    const size_t y_at = in.size();
    if (t.y) in.push_back(rows_of(*t.y, r0, r1));
    const size_t mask_at = in.size();
    if (mask4) in.push_back(mask4->shape(2) == 1 ? *mask4 : rows_of(*mask4, r0, r1));
    const size_t causal_at = in.size();
    if (c.causal) in.push_back(mx::arange(r0, r1, s));
    if (!previous.empty()) {
      const bool drain = pending >= kDrainBytes;
      in = fence(in, previous, drain, s);
      if (drain) pending = 0;
    }
    pending += 6ull * 4 * static_cast<uint64_t>(b) * static_cast<uint64_t>(c.hq) *
                   static_cast<uint64_t>(r) * static_cast<uint64_t>(kn) +
               accumulators * acc_bytes * (kn < sk ? 2 : 1);

    const mx::array q4 = mx::reshape(in[0], {b, hk, g * r, d}, s);
    const mx::array dy4 = mx::reshape(in[1], {b, hk, g * r, d}, s);
    const mx::array kb = keys_of(ks, kn);
    const mx::array vb = keys_of(v, kn);

    // Few passes over the (B, HQ, R, kn) tiles: each one is a live buffer (and MLX allocates a
    // task's output before it runs), so the per-block footprint is a small multiple of a tile.
    const mx::array s5 =
        mx::reshape(mx::matmul(q4, mx::swapaxes(kb, -1, -2, s), s), {b, hk, g, r, kn}, s);
    const std::optional<mx::array> causal_rows =
        c.causal ? std::optional<mx::array>(in[causal_at]) : std::nullopt;
    const mx::array mask_rows = mask4 ? in[mask_at] : t.mask;
    const mx::array p =
        mx::reshape(exact_probs(c, s5, score_mask(c, mask_rows, r, kn, s, causal_rows), s),
                    {b, hk, g * r, kn}, s);

    const bool clipped = kn < sk;
    mx::array y4 = t.y ? mx::reshape(in[y_at], {b, hk, g * r, d}, s) : mx::matmul(p, vb, s);
    if (!t.y && clipped) y4 = mx::add(y4, suffix_at(*y_suffix, kn), s);
    const mx::array dp = mx::matmul(dy4, mx::swapaxes(vb, -1, -2, s), s);
    const mx::array delta = mx::sum(mx::multiply(dy4, y4, s), -1, true, s);
    const mx::array ds = mx::multiply(p, mx::subtract(dp, delta, s), s);
    const mx::array row_flag = mx::multiply(delta, zero, s);  // (B, HK, G*R, 1)

    // The parts of the keys beyond this block's range: their flags (see the top).
    auto to_sk = [&](const mx::array& part, const mx::array& rest) {
      return clipped ? mx::concatenate({part, mx::broadcast_to(rest, {b, hk, sk - kn, d}, s)}, 2, s)
                     : part;
    };
    std::vector<mx::array> done;
    if (want_q) {
      mx::array dq = mx::matmul(ds, kb, s);
      if (clipped) dq = mx::add(dq, mx::add(row_flag, suffix_at(*dq_suffix, kn), s), s);
      dq_blocks.push_back(mx::reshape(dq, {b, c.hq, r, d}, s));
      done.push_back(dq_blocks.back());
    }
    if (want_k) {
      mx::array rest = zero;
      if (clipped) {
        const mx::array from_rows = mx::add(mx::sum(row_flag, 2, true, s),
                                            mx::sum(mx::multiply(q4, zero, s), 2, true, s), s);
        rest = mx::add(from_rows, mx::slice(*v_flag, {0, 0, kn, 0}, {b, hk, sk, 1}, s), s);
      }
      const mx::array part = to_sk(mx::matmul(mx::swapaxes(ds, -1, -2, s), q4, s), rest);
      dk = dk ? mx::add(*dk, part, s) : part;
      done.push_back(*dk);
    }
    if (want_v) {
      const mx::array rest = clipped ? mx::sum(mx::multiply(dy4, zero, s), 2, true, s) : zero;
      const mx::array part = to_sk(mx::matmul(mx::swapaxes(p, -1, -2, s), dy4, s), rest);
      dv = dv ? mx::add(*dv, part, s) : part;
      done.push_back(*dv);
    }
    previous = std::move(done);
  }
  if (want_q) out[0] = dq_blocks.size() == 1 ? dq_blocks[0] : mx::concatenate(dq_blocks, 2, s);
  if (want_k) out[1] = mx::multiply(*dk, mx::array(c.scale), s);
  if (want_v) out[2] = *dv;
  return out;
}

}  // namespace ortmlx::attention_vjp
