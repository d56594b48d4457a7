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
// stops there and its dK/dV parts are zero-padded to Sk.
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
  // (Bm, Hm, R|1, X) bias-shaped -> 5-D against (B, HK, G, R, X), splitting a non-broadcast head
  // axis into (kv head, group).
  auto to5 = [&](const mx::array& a) {
    const mx::Shape sh = a.shape();
    return sh[1] == 1 ? mx::reshape(a, {sh[0], 1, 1, sh[2], sh[3]}, s)
                      : mx::reshape(a, {sh[0], hk, g, sh[2], sh[3]}, s);
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
    mx::array dy4 = mx::reshape(in[1], {b, hk, g * r, d}, s);
    const mx::array kb = keys_of(ks, kn);
    const mx::array vb = keys_of(v, kn);

    // Few passes over the (B, HQ, R, kn) tiles: each one is a live buffer (and MLX allocates a
    // task's output before it runs), so the per-block footprint is a small multiple of a tile.
    mx::array s5 =
        mx::reshape(mx::matmul(q4, mx::swapaxes(kb, -1, -2, s), s), {b, hk, g, r, kn}, s);
    const std::optional<mx::array> causal_rows =
        c.causal ? std::optional<mx::array>(in[causal_at]) : std::nullopt;
    const mx::array mask_rows = mask4 ? in[mask_at] : t.mask;
    if (auto bias = additive_bias(c, mask_rows, r, kn, s, causal_rows)) {
      if (c.mask != 0) {
        // A row with every key masked gives zeros, never NaN (the contract): an ordinary softmax
        // over a zero bias there, and a zero incoming gradient (dY * 0, so that a NaN/Inf in dY
        // still poisons the gradients as in the reference), with which the row contributes
        // exactly nothing (dP = 0, delta = 0, P^T dY = 0). Causal alone never empties a row.
        const mx::array dead = mx::all(mx::isneginf(*bias, s), -1, true, s);
        bias = mx::where(dead, mx::array(0.f), *bias, s);
        const mx::array dy5 = mx::reshape(dy4, {b, hk, g, r, d}, s);
        dy4 = mx::reshape(
            mx::where(to5(dead), mx::multiply(dy5, mx::array(0.f), s), dy5, s),
            {b, hk, g * r, d}, s);
      }
      s5 = mx::add(s5, to5(*bias), s);
    }
    const mx::array p = mx::reshape(mx::softmax(s5, -1, true, s), {b, hk, g * r, kn}, s);

    const mx::array y4 = t.y ? mx::reshape(in[y_at], {b, hk, g * r, d}, s) : mx::matmul(p, vb, s);
    const mx::array dp = mx::matmul(dy4, mx::swapaxes(vb, -1, -2, s), s);
    const mx::array delta = mx::sum(mx::multiply(dy4, y4, s), -1, true, s);
    const mx::array ds = mx::multiply(p, mx::subtract(dp, delta, s), s);

    // Zero rows for the keys beyond this block's range.
    auto to_sk = [&](const mx::array& part) {
      return kn == sk ? part
                      : mx::pad(part, {{0, 0}, {0, 0}, {0, sk - kn}, {0, 0}}, mx::array(0.f),
                                "constant", s);
    };
    std::vector<mx::array> done;
    if (want_q) {
      dq_blocks.push_back(mx::reshape(mx::matmul(ds, kb, s), {b, c.hq, r, d}, s));
      done.push_back(dq_blocks.back());
    }
    if (want_k) {
      const mx::array part = to_sk(mx::matmul(mx::swapaxes(ds, -1, -2, s), q4, s));
      dk = dk ? mx::add(*dk, part, s) : part;
      done.push_back(*dk);
    }
    if (want_v) {
      const mx::array part = to_sk(mx::matmul(mx::swapaxes(p, -1, -2, s), dy4, s));
      dv = dv ? mx::add(*dv, part, s) : part;
      done.push_back(*dv);
    }
    previous = std::move(done);
  }
  if (want_q) out[0] = dq_blocks.size() == 1 ? dq_blocks[0] : mx::concatenate(dq_blocks, 2, s);
  if (want_k) out[1] = mx::multiply(*dk, mx::array(c.scale), s);
  if (want_v) out[2] = *dv;
  // Keys left out of some blocks' products would hide a NaN/Inf there, where the reference (and
  // the function body on ORT) gets NaN through 0 * NaN: a silently finite gradient. Adding
  // sum(x * 0) over the skipped operand keeps finite results bit-exact (x * 0 is +-0) and makes
  // the gradients the reference poisons non-finite: K reaches dQ (per head dim), V reaches dQ
  // (whole head) and dK (per key) through dP = dY V^T. O(S x D), against O(S^2 x D) above.
  if (c.causal || key_limit < sk) {
    const mx::array zero(0.f);
    if (want_q) {
      const mx::array from_k = mx::sum(mx::multiply(ks, zero, s), 2, true, s);     // B,HK,1,D
      const mx::array from_v = mx::sum(mx::multiply(v, zero, s), {2, 3}, true, s);  // B,HK,1,1
      const mx::array poison = mx::reshape(mx::add(from_k, from_v, s), {b, hk, 1, 1, d}, s);
      out[0] = mx::reshape(
          mx::add(mx::reshape(out[0], {b, hk, g, sq, d}, s), poison, s), t.q.shape(), s);
    }
    if (want_k) out[1] = mx::add(out[1], mx::sum(mx::multiply(v, zero, s), 3, true, s), s);
  }
  return out;
}

}  // namespace ortmlx::attention_vjp
