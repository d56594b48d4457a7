// The fused CPU AttentionVJP kernel: a custom MLX primitive whose eval_cpu runs a multithreaded
// C++ kernel (std::thread workers over the machine's cores; every tile product through a
// micro-kernel of cpu_gemm.h and the row math of cpu_rows.h, both in the instruction set the run
// picks: AVX-512, AVX2 + FMA or portable C++).
//
// Work item = (batch b, kv head g, part p). An item owns dK/dV of (b, g) (part 0 writes the
// output, parts > 0 private partials summed at the end: no atomics) and the dQ rows of the query
// tiles it visits (tiles t with t % parts == p, for each query head of the group). Per query tile
// of `rows` rows and query head h it builds a score panel over the live keys (causal: keys < the
// tile's end; a narrow mask: keys < its width):
//     S = scale Q K^T + bias -> P = softmax rows (exact: the panel holds whole rows, so the row's
//     log-sum-exp needs no separate pass; a row with every key masked gives P = 0)
//     [Recompute: Y = P V]    delta = rowsum(dY * Y)
//     dV += P^T dY     dP = dY V^T     dS = P (dP - delta)     dQ = scale dS K     dK += scale dS^T
//     Q
// which is 5 GEMMs over the scores (the minimum) and one exp per score. Extra memory per worker is
// two rows x Sk panels plus K^T and V^T of one kv head, independent of Sq. The dense path uses the
// same kernel: whole-head panels measured 15-25% slower than 128-row ones, so the panel size does
// not depend on the path.
//
// Non-finite values follow the float64 reference (ortmlx.contracts): the products run over every
// (query, key) pair with P = 0 where a key is masked, so a NaN or Inf in Q, K, V, Y or dY reaches
// the gradients through 0 * NaN like it does there, and a row whose visible scores hold a NaN or
// +Inf counts as dead (P = 0), like a fully masked row. Skipping masked keys (causal, narrow mask,
// fully masked rows) is exact only for finite inputs, so the kernel first scans Q, K, V, Y and dY
// and, when one holds a non-finite value, runs every panel over all keys ("full" mode).
#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include <mlx/allocator.h>
#include <mlx/backend/cpu/encoder.h>
#include <mlx/ops.h>
#include <mlx/primitives.h>
#include <mlx/utils.h>

#include "ortmlx/ops/attention_vjp/cpu_gemm.h"
#include "ortmlx/ops/attention_vjp/cpu_rows.h"
#include "ortmlx/ops/attention_vjp/paths.h"
#include "ortmlx/ops/common.h"

namespace ortmlx::attention_vjp {

namespace {

// Everything the kernel needs besides the data pointers (also the primitive's identity).
struct Geometry {
  int64_t b = 0, hq = 0, hk = 0, sq = 0, sk = 0, d = 0;
  int rank = 4;
  float scale = 1.f;
  bool causal = false;
  int mask_kind = 0;
  bool recompute = false;
  bool want[3] = {false, false, false};  // dQ, dK, dV
  int64_t rows = 0;                      // query rows per panel
  // Compute only when an input is non-finite, else write zeros (the native path's exact fallback).
  bool nonfinite_only = false;
  Isa isa = Isa::kPortable;  // micro-kernels and row math
  bool operator==(const Geometry& o) const {
    return b == o.b && hq == o.hq && hk == o.hk && sq == o.sq && sk == o.sk && d == o.d &&
           rank == o.rank && scale == o.scale && causal == o.causal && mask_kind == o.mask_kind &&
           recompute == o.recompute && want[0] == o.want[0] && want[1] == o.want[1] &&
           want[2] == o.want[2] && rows == o.rows && nonfinite_only == o.nonfinite_only &&
           isa == o.isa;
  }
};

// Element strides of the mask against (B, HQ, Sq, Sk) (0 where it broadcasts) and its width.
struct MaskView {
  const void* data = nullptr;
  int64_t stride[4] = {0, 0, 0, 0};
  int64_t width = 1;
};

// Row-major (rows, cols) view of head h of a (B, H, S, D) or (B, S, H*D) tensor.
inline int64_t head_offset(const Geometry& g, int64_t b, int64_t h, int64_t heads, int64_t seq) {
  return g.rank == 4 ? (b * heads + h) * seq * g.d : b * seq * heads * g.d + h * g.d;
}
inline int64_t row_stride(const Geometry& g, int64_t heads) {
  return g.rank == 4 ? g.d : heads * g.d;
}

struct Pointers {
  const float *q, *k, *v, *y, *dy;  // y null for Recompute
  MaskView mask;
  float* out[3];  // dQ, dK, dV (null when not requested)
};

struct Scratch {
  std::unique_ptr<float[]> s, dp, y;
  std::unique_ptr<float[]> kt, vt;  // K^T and V^T of the item's kv head
  int64_t ld = 0;
};

class Kernel {
 public:
  Kernel(const Geometry& g, const Pointers& p) : g_(g), p_(p) {
    group_ = g.hq / g.hk;
    tiles_ = (g.sq + g.rows - 1) / g.rows;
    const int threads = cpu_threads();
    const int64_t pairs = g.b * g.hk;
    kv_ = g.want[1] || g.want[2];
    // Enough items for every worker (and some slack for balance), never more parts than tiles,
    // and dK/dV partials (parts - 1 copies) within 256 MiB.
    parts_ = std::max<int64_t>(1, std::min<int64_t>(tiles_, (4 * threads + pairs - 1) / pairs));
    if (kv_) {
      const int64_t copy = 4 * pairs * g.sk * g.d * ((g.want[1] ? 1 : 0) + (g.want[2] ? 1 : 0));
      parts_ = std::min<int64_t>(parts_, 1 + (int64_t{256} << 20) / std::max<int64_t>(1, copy));
    }
    items_ = pairs * parts_;
    // Panel rows and K^T / V^T rows are padded off power-of-two strides: the micro-kernel walks
    // down a column of them (dV/dK read P^T, S/dP read K^T), and strides that are multiples of
    // 4 KiB map every row to one L1 set.
    ld_ = (g.sk + 15) / 16 * 16 + 16;
    ldt_ = ld_;
    // Workers, capped so that their scratch (two panels, K^T, V^T) stays within 512 MiB on
    // many-core machines with long keys.
    const int64_t per_worker = 4 * (2 * g.rows * ld_ + 2 * g.d * ldt_ + g.rows * g.d);
    const int64_t by_memory =
        std::max<int64_t>(1, (int64_t{512} << 20) / std::max<int64_t>(1, per_worker));
    threads_ = static_cast<int>(std::min<int64_t>({threads, items_, by_memory}));
  }

  // Allocations happen here, before the work is dispatched, so failures surface as exceptions.
  void allocate() {
    if (kv_ && parts_ > 1) {
      const size_t n = static_cast<size_t>((parts_ - 1) * g_.b * g_.hk * g_.sk * g_.d);
      for (int o = 1; o < 3; ++o)
        if (g_.want[o]) partial_[o].reset(new float[n]);
    }
    scratch_.resize(static_cast<size_t>(threads_));
    const bool need_dp = g_.want[0] || g_.want[1];
    for (auto& s : scratch_) {
      s.ld = ld_;
      s.s.reset(new float[static_cast<size_t>(g_.rows * ld_)]);
      if (need_dp) s.dp.reset(new float[static_cast<size_t>(g_.rows * ld_)]);
      if (g_.recompute && need_dp) s.y.reset(new float[static_cast<size_t>(g_.rows * g_.d)]);
      s.kt.reset(new float[static_cast<size_t>(g_.d * ldt_)]);
      if (need_dp) s.vt.reset(new float[static_cast<size_t>(g_.d * ldt_)]);
    }
  }

  // Runs the whole pullback. Never throws (it runs on MLX's stream thread).
  void run() noexcept {
    full_ = !inputs_finite();
    if (g_.nonfinite_only && !full_) {
      zero_outputs();
      return;
    }
    std::atomic<int64_t> next{0};
    auto worker = [&](int tid) {
      for (int64_t it; (it = next.fetch_add(1)) < items_;)
        item(it, scratch_[static_cast<size_t>(tid)]);
    };
    run_parallel(threads_, worker);
    if (kv_ && parts_ > 1) reduce_partials();
  }

 private:
  template <typename F>
  static void run_parallel(int threads, F&& fn) noexcept {
    std::vector<std::thread> pool;
    try {
      for (int t = 1; t < threads; ++t) pool.emplace_back(fn, t);
    } catch (...) {
      // Could not start a thread: the running ones and this one finish the queue.
    }
    fn(0);
    for (auto& th : pool) th.join();
  }

  // Destination of dK or dV rows of (b, g) for a part: the output, or a private partial.
  float* kv_dest(int o, int64_t b, int64_t kvh, int64_t part, int64_t* ld) const {
    if (part == 0) {
      *ld = row_stride(g_, g_.hk);
      return p_.out[o] + head_offset(g_, b, kvh, g_.hk, g_.sk);
    }
    *ld = g_.d;
    return partial_[o].get() + (((part - 1) * g_.b + b) * g_.hk + kvh) * g_.sk * g_.d;
  }

  // Whether Q, K, V, Y and dY hold only finite values (an exponent of all ones is Inf or NaN).
  bool inputs_finite() const {
    auto finite = [](const float* x, int64_t n) {
      bool bad = false;
      for (int64_t i = 0; i < n; ++i)
        bad |= (std::bit_cast<uint32_t>(x[i]) & 0x7f800000u) == 0x7f800000u;
      return !bad;
    };
    const int64_t nq = g_.b * g_.hq * g_.sq * g_.d, nk = g_.b * g_.hk * g_.sk * g_.d;
    return finite(p_.q, nq) && finite(p_.k, nk) && finite(p_.v, nk) && finite(p_.dy, nq) &&
           (!p_.y || finite(p_.y, nq));
  }

  void zero_outputs() const {
    const int64_t size[3] = {g_.b * g_.hq * g_.sq * g_.d, g_.b * g_.hk * g_.sk * g_.d,
                             g_.b * g_.hk * g_.sk * g_.d};
    for (int o = 0; o < 3; ++o)
      if (p_.out[o]) std::memset(p_.out[o], 0, static_cast<size_t>(size[o]) * sizeof(float));
  }

  static void zero_rows(float* x, int64_t rows, int64_t cols, int64_t ld) {
    for (int64_t r = 0; r < rows; ++r)
      std::memset(x + r * ld, 0, static_cast<size_t>(cols) * sizeof(float));
  }

  void item(int64_t it, Scratch& sc) const {
    const int64_t part = it % parts_;
    const int64_t pair = it / parts_;
    const int64_t b = pair / g_.hk, kvh = pair % g_.hk;
    float* dk = nullptr;
    float* dv = nullptr;
    int64_t lddk = 0, lddv = 0;
    if (g_.want[1]) {
      dk = kv_dest(1, b, kvh, part, &lddk);
      zero_rows(dk, g_.sk, g_.d, lddk);
    }
    if (g_.want[2]) {
      dv = kv_dest(2, b, kvh, part, &lddv);
      zero_rows(dv, g_.sk, g_.d, lddv);
    }
    const int64_t ldk = row_stride(g_, g_.hk);
    transpose(p_.k + head_offset(g_, b, kvh, g_.hk, g_.sk), ldk, sc.kt.get());
    if (sc.vt) transpose(p_.v + head_offset(g_, b, kvh, g_.hk, g_.sk), ldk, sc.vt.get());
    for (int64_t t = part; t < tiles_; t += parts_)
      for (int64_t h = kvh * group_; h < (kvh + 1) * group_; ++h)
        panel(b, h, kvh, t, sc, dk, lddk, dv, lddv);
  }

  // (Sk x D, row stride ld) -> (D x Sk, row stride ldt_).
  void transpose(const float* x, int64_t ld, float* xt) const {
    for (int64_t j0 = 0; j0 < g_.sk; j0 += 32)
      for (int64_t e = 0; e < g_.d; ++e)
        for (int64_t j = j0; j < std::min(g_.sk, j0 + 32); ++j) xt[e * ldt_ + j] = x[j * ld + e];
  }

  // C = alpha A B (+ C when accumulate), a(i, k) = a[i * a_row + k * a_col], B row-major.
  void mm(int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t a_row,
          int64_t a_col, const float* b, int64_t ldb, float* c, int64_t ldc,
          bool accumulate) const {
    gemm::run(g_.isa, m, n, k, alpha, a, a_row, a_col, b, ldb, c, ldc, accumulate);
  }

  // Applies causal/mask to row i (keys [0, live)), then softmax in place; keys [live, n) -> 0.
  void softmax_row(float* s, int64_t b, int64_t h, int64_t i, int64_t n) const {
    int64_t live = g_.causal ? std::min(n, i + 1) : n;
    // Keys at or beyond a narrow mask's width are masked (in full mode n runs past them).
    if (g_.mask_kind != 0 && p_.mask.width != 1) live = std::min(live, p_.mask.width);
    if (g_.mask_kind != 0 && live > 0) {
      const MaskView& m = p_.mask;
      const int64_t off = b * m.stride[0] + h * m.stride[1] + i * m.stride[2];
      if (g_.mask_kind == 1) {
        const uint8_t* row = static_cast<const uint8_t*>(m.data) + off;
        if (m.width == 1) {
          if (!row[0]) live = 0;
        } else if (m.stride[3] == 1) {
          rows::keep(g_.isa, s, row, static_cast<int>(live));
        } else {
          for (int64_t j = 0; j < live; ++j)
            if (!row[j * m.stride[3]]) s[j] = rows::kNegInf;
        }
      } else {
        const float* row = static_cast<const float*>(m.data) + off;
        if (m.width == 1) {
          const float a = row[0];
          for (int64_t j = 0; j < live; ++j) s[j] += a;
        } else if (m.stride[3] == 1) {
          rows::add(g_.isa, s, row, static_cast<int>(live));
        } else {
          for (int64_t j = 0; j < live; ++j) s[j] += row[j * m.stride[3]];
        }
      }
    }
    const float mx = live > 0 ? rows::row_max(g_.isa, s, static_cast<int>(live)) : rows::kNegInf;
    if (mx == rows::kNegInf) live = 0;  // every key masked: the row contributes nothing
    if (live > 0) {
      const float sum = rows::exp_sum(g_.isa, s, static_cast<int>(live), mx);
      // A NaN or +Inf score makes the sum NaN (exp(NaN) or exp(Inf - Inf)): the reference's row
      // maximum is then not finite and it treats the row like a fully masked one, P = 0.
      if (std::isfinite(sum))
        rows::scale(g_.isa, s, static_cast<int>(live), 1.f / sum);
      else
        live = 0;
    }
    if (live < n) std::memset(s + live, 0, static_cast<size_t>(n - live) * sizeof(float));
  }

  void panel(int64_t b, int64_t h, int64_t kvh, int64_t t, Scratch& sc, float* dk, int64_t lddk,
             float* dv, int64_t lddv) const {
    const int64_t i0 = t * g_.rows;
    const int64_t m = std::min(g_.rows, g_.sq - i0);
    int64_t n = g_.sk;
    if (!full_) {  // keys no row of the tile sees (full mode: every key, see the top)
      if (g_.causal) n = std::min(n, i0 + m);
      if (g_.mask_kind != 0 && p_.mask.width != 1) n = std::min(n, p_.mask.width);
    }
    const int64_t ldq = row_stride(g_, g_.hq), ldk = row_stride(g_, g_.hk);
    const float* q = p_.q + head_offset(g_, b, h, g_.hq, g_.sq) + i0 * ldq;
    const float* dy = p_.dy + head_offset(g_, b, h, g_.hq, g_.sq) + i0 * ldq;
    const float* k = p_.k + head_offset(g_, b, kvh, g_.hk, g_.sk);
    const float* v = p_.v + head_offset(g_, b, kvh, g_.hk, g_.sk);
    float* dq = g_.want[0] ? p_.out[0] + head_offset(g_, b, h, g_.hq, g_.sq) + i0 * ldq : nullptr;
    if (n <= 0) {  // no live key for any row of the tile
      if (dq) zero_rows(dq, m, g_.d, ldq);
      return;
    }
    const int64_t ld = sc.ld;
    const int64_t dd = g_.d;
    // Causal tiles have a diagonal block (keys i0..n): row r sees keys <= i0 + r only. Products
    // cover the rectangle of keys before the tile for every row, then the diagonal block in
    // chunks of rows (or keys) that stop where the chunk's visibility ends; entries outside what
    // a row sees are zeros in P and dS (or never read).
    const bool tri = !full_ && g_.causal && n > i0;
    const int64_t n0 = tri ? i0 : n;
    constexpr int64_t kChunk = 32;

    // out (m x n, ld) = alpha * a (m x D, ldq) packed (D x Sk, ldt_: K^T or V^T).
    auto scores = [&](float alpha, const float* a, const float* packed, float* out) {
      if (n0 > 0) mm(m, n0, dd, alpha, a, ldq, 1, packed, ldt_, out, ld, false);
      if (!tri) return;
      for (int64_t r0 = 0; r0 < m; r0 += kChunk) {
        const int64_t r1 = std::min(m, r0 + kChunk), cols = std::min(n, i0 + r1) - n0;
        mm(r1 - r0, cols, dd, alpha, a + r0 * ldq, ldq, 1, packed + n0, ldt_, out + r0 * ld + n0,
           ld, false);
      }
    };
    // out (m x D) = alpha * a (m x n, ld) rows_ (n x D, ldk): the sum runs over keys.
    auto over_keys = [&](float alpha, const float* a, const float* rows_, float* out, int64_t ldo) {
      if (n0 > 0 || !tri) mm(m, dd, n0, alpha, a, ld, 1, rows_, ldk, out, ldo, false);
      if (!tri) return;
      for (int64_t r0 = 0; r0 < m; r0 += kChunk) {
        const int64_t r1 = std::min(m, r0 + kChunk), cols = std::min(n, i0 + r1) - n0;
        mm(r1 - r0, dd, cols, alpha, a + r0 * ld + n0, ld, 1, rows_ + n0 * ldk, ldk, out + r0 * ldo,
           ldo, n0 > 0);
      }
    };
    // out (n x D) += alpha * a^T (n x m) rows_ (m x D, ldq): the sum runs over the tile's rows.
    auto over_rows = [&](float alpha, const float* a, const float* rows_, float* out, int64_t ldo) {
      if (n0 > 0) mm(n0, dd, m, alpha, a, 1, ld, rows_, ldq, out, ldo, true);
      if (!tri) return;
      for (int64_t c0 = n0; c0 < n; c0 += kChunk) {
        const int64_t c1 = std::min(n, c0 + kChunk), r0 = c0 - i0;  // rows before r0 see none
        mm(c1 - c0, dd, m - r0, alpha, a + r0 * ld + c0, 1, ld, rows_ + r0 * ldq, ldq,
           out + c0 * ldo, ldo, true);
      }
    };

    float* s = sc.s.get();
    scores(g_.scale, q, sc.kt.get(), s);
    for (int64_t r = 0; r < m; ++r) softmax_row(s + r * ld, b, h, i0 + r, n);

    if (dv) over_rows(1.f, s, dy, dv, lddv);
    if (!dq && !dk) return;

    const float* y;
    int64_t ldy;
    if (g_.recompute) {
      over_keys(1.f, s, v, sc.y.get(), dd);
      y = sc.y.get();
      ldy = dd;
    } else {
      y = p_.y + head_offset(g_, b, h, g_.hq, g_.sq) + i0 * ldq;
      ldy = ldq;
    }
    float* dp = sc.dp.get();
    scores(1.f, dy, sc.vt.get(), dp);
    for (int64_t r = 0; r < m; ++r) {
      const int64_t live = g_.causal && !full_ ? std::min(n, i0 + r + 1) : n;
      const float delta = rows::dot(g_.isa, dy + r * ldq, y + r * ldy, static_cast<int>(dd));
      float* row = dp + r * ld;
      rows::ds(g_.isa, s + r * ld, row, static_cast<int>(live), delta);
      if (live < n) std::memset(row + live, 0, static_cast<size_t>(n - live) * sizeof(float));
    }
    if (dq) over_keys(g_.scale, dp, k, dq, ldq);
    if (dk) over_rows(g_.scale, dp, q, dk, lddk);
  }

  // dK/dV of part 0 (in the output) += the other parts' partials; parallel over (b, g, row block).
  void reduce_partials() noexcept {
    const int64_t blocks = std::max<int64_t>(1, std::min<int64_t>(g_.sk, 4 * threads_));
    const int64_t block_rows = (g_.sk + blocks - 1) / blocks;
    const int64_t jobs = g_.b * g_.hk * blocks;
    std::atomic<int64_t> next{0};
    run_parallel(threads_, [&](int) {
      for (int64_t job; (job = next.fetch_add(1)) < jobs;) {
        const int64_t blk = job % blocks, pair = job / blocks;
        const int64_t b = pair / g_.hk, kvh = pair % g_.hk;
        const int64_t r0 = blk * block_rows, r1 = std::min(g_.sk, r0 + block_rows);
        for (int o = 1; o < 3; ++o) {
          if (!g_.want[o]) continue;
          int64_t ld0 = 0, ldp = 0;
          float* dst = kv_dest(o, b, kvh, 0, &ld0);
          for (int64_t part = 1; part < parts_; ++part) {
            const float* src = kv_dest(o, b, kvh, part, &ldp);
            for (int64_t r = r0; r < r1; ++r) {
              float* drow = dst + r * ld0;
              const float* srow = src + r * ldp;
              for (int64_t c = 0; c < g_.d; ++c) drow[c] += srow[c];
            }
          }
        }
      }
    });
  }

  Geometry g_;
  Pointers p_;
  int64_t group_ = 1, tiles_ = 0, parts_ = 1, items_ = 0;
  int threads_ = 1;
  bool kv_ = false;
  bool full_ = false;  // an input is non-finite: every panel runs over all keys
  int64_t ld_ = 0, ldt_ = 0;
  std::unique_ptr<float[]> partial_[3];
  std::vector<Scratch> scratch_;
};

class AttentionVjpCpu : public mx::Primitive {
 public:
  AttentionVjpCpu(mx::Stream stream, Geometry g) : mx::Primitive(stream), g_(g) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override {
    const size_t tensors = g_.recompute ? 4 : 5;
    if (inputs.size() != tensors + 1)
      throw std::runtime_error("AttentionVJP CPU kernel: wrong number of inputs");
    for (size_t i = 0; i < tensors; ++i)
      if (!inputs[i].flags().row_contiguous || inputs[i].dtype() != mx::float32)
        throw std::runtime_error("AttentionVJP CPU kernel: input " + std::to_string(i) +
                                 " must be row-contiguous float32");
    const mx::array& mask = inputs[tensors];
    for (auto& out : outputs) out.set_data(mx::allocator::malloc(out.nbytes()));

    Pointers p{};
    p.q = inputs[0].data<float>();
    p.k = inputs[1].data<float>();
    p.v = inputs[2].data<float>();
    p.y = g_.recompute ? nullptr : inputs[3].data<float>();
    p.dy = inputs[tensors - 1].data<float>();
    if (g_.mask_kind != 0) {
      // Strides against (B, HQ, Sq, Sk): the mask's trailing axes, 0 where it broadcasts.
      const int nd = mask.ndim();
      for (int a = 0; a < nd; ++a) {
        const int target = 4 - nd + a;
        p.mask.stride[target] = mask.shape(a) == 1 ? 0 : static_cast<int64_t>(mask.strides()[a]);
      }
      p.mask.width = mask.shape(-1);
      if (g_.mask_kind == 1 ? mask.dtype() != mx::bool_ : mask.dtype() != mx::float32)
        throw std::runtime_error("AttentionVJP CPU kernel: mask has the wrong type");
      p.mask.data = g_.mask_kind == 1 ? static_cast<const void*>(mask.data<bool>())
                                      : static_cast<const void*>(mask.data<float>());
    }
    size_t slot = 0;
    for (int o = 0; o < 3; ++o) p.out[o] = g_.want[o] ? outputs[slot++].data<float>() : nullptr;

    auto& encoder = mx::cpu::get_command_encoder(stream());
    for (const auto& in : inputs) encoder.set_input_array(in);
    for (auto& out : outputs) encoder.set_output_array(out);

    const bool empty = g_.b == 0 || g_.sq == 0 || g_.sk == 0;
    std::shared_ptr<Kernel> kernel;
    if (!empty) {
      kernel = std::make_shared<Kernel>(g_, p);
      kernel->allocate();
    }
    // The arrays are captured to keep their buffers alive until the task has run.
    encoder.dispatch([kernel, keep_in = inputs, keep_out = outputs]() mutable {
      if (kernel) {
        kernel->run();
      } else {
        for (auto& out : keep_out)
          if (out.nbytes()) std::memset(out.data<float>(), 0, out.nbytes());
      }
    });
  }

  void eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) override {
    throw std::runtime_error(
        "the AttentionVJP CPU kernel is not implemented on this backend (GPU); GPU kernels come "
        "later: use the dense path (raise ONNXRUNTIME_EP_MLX_ATTENTION_VJP_DENSE_LIMIT_BYTES)");
  }

  const char* name() const override { return "OnnaxAttentionVJPCpu"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    auto* o = dynamic_cast<const AttentionVjpCpu*>(&other);
    return o && o->g_ == g_;
  }

 private:
  Geometry g_;
};

}  // namespace

int cpu_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(std::min(n, 64u));
}

int cpu_tile_rows(int sk) {
  // 128 rows keep the GEMMs near their best on these skinny (K = D) products (measured flat between
  // 64 and 256 at Sk = 2048..4096, with OpenBLAS then); very long keys shrink the panel so a
  // worker's two panels stay within 2 x 16 MiB (16 rows at least).
  const int64_t rows = (int64_t{1} << 22) / std::max(1, sk);
  return static_cast<int>(std::clamp<int64_t>(rows / 16 * 16, 16, 128));
}

std::vector<mx::array> cpu_kernel(const Config& c, const std::vector<mx::array>& inputs,
                                  mx::StreamOrDevice s, int panel_rows, bool nonfinite_only,
                                  std::optional<Isa> isa) {
  const mx::Stream stream = mx::to_stream(s);
  const Isa picked = isa.value_or(rows::best_isa());
  if (!rows::supported(picked))
    throw std::runtime_error(std::string("the AttentionVJP CPU kernel was asked for ") +
                             isa_name(picked) + " code, which this CPU does not run");
  if (!ops::runs_on_cpu(stream))
    throw std::runtime_error(
        "the tiled AttentionVJP kernel is not implemented on the GPU backend yet (GPU kernels "
        "come later); raise ONNXRUNTIME_EP_MLX_ATTENTION_VJP_DENSE_LIMIT_BYTES to use the dense "
        "path");
  const size_t tensors = static_cast<size_t>(c.tensor_inputs());
  const mx::array& q = inputs[0];
  const mx::array& k = inputs[1];
  Geometry g;
  g.rank = c.rank;
  g.b = q.shape(0);
  g.hq = c.hq;
  g.hk = c.hk;
  g.d = c.d;
  g.sq = c.rank == 4 ? q.shape(2) : q.shape(1);
  g.sk = c.rank == 4 ? k.shape(2) : k.shape(1);
  g.scale = c.scale;
  g.causal = c.causal != 0;
  g.mask_kind = c.mask;
  g.recompute = c.recompute;
  for (int o : c.outputs) g.want[o] = true;
  g.rows = panel_rows > 0 ? panel_rows
                          : cpu_tile_rows(static_cast<int>(std::min<int64_t>(g.sk, 1 << 30)));
  g.rows = std::min<int64_t>(g.rows, std::max<int64_t>(1, g.sq));
  g.nonfinite_only = nonfinite_only;
  g.isa = picked;
  std::vector<mx::array> in;
  in.reserve(inputs.size());
  for (size_t i = 0; i < tensors; ++i) in.push_back(mx::contiguous(inputs[i], false, stream));
  in.push_back(inputs[tensors]);  // the mask is read through its strides (broadcasts stay cheap)
  std::vector<mx::Shape> shapes;
  std::vector<mx::Dtype> dtypes;
  for (int o : c.outputs) {
    shapes.push_back(inputs[static_cast<size_t>(o)].shape());
    dtypes.push_back(mx::float32);
  }
  return mx::array::make_arrays(std::move(shapes), dtypes,
                                std::make_shared<AttentionVjpCpu>(stream, g), in);
}

}  // namespace ortmlx::attention_vjp
