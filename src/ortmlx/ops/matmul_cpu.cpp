// The OpenBLAS matmul primitive of matmul_cpu.h.
//
// eval_cpu runs on the thread that evaluates the graph: it reads the inputs' layouts (shapes and
// strides are known there, contents not yet), decides how each operand reaches sgemm, validates
// sizes (errors surface as exceptions there), allocates the output and dispatches the work to
// the CPU stream, which runs it after the inputs' own tasks. The task runs OpenBLAS
// single-threaded and splits products above a few MFLOP over std::threads itself, by batch or by
// blocks of rows (see single_threaded_blas for why).
#include "ortmlx/ops/matmul_cpu.h"
#include "ortmlx/ops/common.h"
#include "ortmlx/ops/matmul/cuda/cublaslt_matmul.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <cblas.h>
#include <mlx/allocator.h>
#include <mlx/backend/cpu/encoder.h>
#include <mlx/ops.h>
#include <mlx/primitives.h>

namespace ortmlx::ops {

namespace mx = mlx::core;

namespace {

// How a (rows x cols) matrix with element strides (s0, s1) reaches row-major CBLAS: as is
// (NoTrans, ld = row stride) or as the transpose of a row-major (cols x rows) matrix (Trans,
// ld = column stride). Size-1 axes have no meaningful stride and get the minimal ld.
struct MatLayout {
  bool ok = false;
  bool trans = false;
  int64_t ld = 1;
};

MatLayout blas_layout(int64_t rows, int64_t cols, int64_t s0, int64_t s1) {
  const int64_t r1 = std::max<int64_t>(rows, 1), c1 = std::max<int64_t>(cols, 1);
  if ((cols == 1 || s1 == 1) && (rows == 1 || s0 >= c1)) return {true, false, rows == 1 ? c1 : s0};
  if ((rows == 1 || s0 == 1) && (cols == 1 || s1 >= r1)) return {true, true, cols == 1 ? r1 : s1};
  return {};
}

// dst (row-major, `shape`) = src read through `strides`. Odometer over all but the last axis.
void strided_copy(const float* src, const mx::Shape& shape, const mx::Strides& strides,
                  float* dst) {
  const int nd = static_cast<int>(shape.size());
  int64_t total = 1;
  for (auto d : shape) total *= d;
  if (total == 0) return;
  if (nd == 0) {
    dst[0] = src[0];
    return;
  }
  const int64_t inner = shape[nd - 1];
  const int64_t is = strides[nd - 1];
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  int64_t off = 0;
  for (int64_t done = 0; done < total; done += inner) {
    if (is == 1) {
      std::memcpy(dst, src + off, static_cast<size_t>(inner) * sizeof(float));
    } else {
      for (int64_t j = 0; j < inner; ++j) dst[j] = src[off + j * is];
    }
    dst += inner;
    for (int ax = nd - 2; ax >= 0; --ax) {
      if (++idx[static_cast<size_t>(ax)] < shape[ax]) {
        off += strides[ax];
        break;
      }
      off -= strides[ax] * (shape[ax] - 1);
      idx[static_cast<size_t>(ax)] = 0;
    }
  }
}

// One operand as the kernel reads it: per output batch axis its element stride (0 where it
// broadcasts), and the layout of its matrices. `pack` when the matrices are neither row- nor
// column-major (e.g. a strided slice): the task first copies the operand row-major into `packed`.
struct Operand {
  const float* data = nullptr;
  std::vector<int64_t> batch_stride;
  MatLayout layout;
  bool pack = false;
  mx::Shape shape;      // for packing
  mx::Strides strides;  // for packing
  std::shared_ptr<float[]> packed;
};

Operand describe(const mx::array& x, int out_batch_dims) {
  Operand op;
  op.data = x.data<float>();
  const int nd = static_cast<int>(x.ndim());
  const int xb = nd - 2;
  mx::Strides st = x.strides();
  const int64_t rows = x.shape(-2), cols = x.shape(-1);
  op.layout = blas_layout(rows, cols, st[nd - 2], st[nd - 1]);
  if (!op.layout.ok) {
    op.pack = true;
    op.shape = x.shape();
    op.strides = st;
    // Row-major strides of the packed copy.
    int64_t acc = 1;
    for (int ax = nd - 1; ax >= 0; --ax) {
      st[ax] = acc;
      acc *= std::max<int64_t>(1, x.shape(ax));
    }
    op.layout = blas_layout(rows, cols, st[nd - 2], st[nd - 1]);
  }
  op.batch_stride.assign(static_cast<size_t>(out_batch_dims), 0);
  for (int ax = 0; ax < xb; ++ax) {
    const int o = out_batch_dims - xb + ax;
    op.batch_stride[static_cast<size_t>(o)] = x.shape(ax) == 1 ? 0 : st[ax];
  }
  return op;
}

void check_blas_int(int64_t v, const char* what) {
  if (v > INT_MAX)
    throw std::runtime_error(std::string("BLAS matmul: ") + what + " " + std::to_string(v) +
                             " exceeds the 32-bit BLAS interface");
}

void sgemm(const MatLayout& la, const MatLayout& lb, int64_t m, int64_t n, int64_t k, float alpha,
           const float* a, const float* b, float beta, float* c, int64_t ldc) {
  scipy_cblas_sgemm(CblasRowMajor, la.trans ? CblasTrans : CblasNoTrans,
                    lb.trans ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
                    static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
                    static_cast<blasint>(la.ld), b, static_cast<blasint>(lb.ld), beta, c,
                    static_cast<blasint>(ldc));
}

// OpenBLAS runs single-threaded and we split the work ourselves. Its own threads busy-wait for
// work: on a loaded machine (ORT's pool, other processes) that measured 10-100x slower than one
// thread on products of a few MFLOP (bench/results/matmul_cpu.md). The count is process-wide
// (this wheel exports no per-thread setting); the fused AttentionVJP kernel sets the same value.
void single_threaded_blas() {
  static std::once_flag once;
  std::call_once(once, [] { scipy_openblas_set_num_threads(1); });
}

int cpu_workers() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(std::min(n, 64u));
}

// fn(i) for i in [0, items) on up to `threads` threads (this one included). Never throws: if a
// thread cannot start, the others finish the queue.
template <typename F>
void parallel_items(int64_t items, int threads, F&& fn) noexcept {
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (int64_t i; (i = next.fetch_add(1)) < items;) fn(i);
  };
  std::vector<std::thread> pool;
  try {
    for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  } catch (...) {
  }
  worker();
  for (auto& th : pool) th.join();
}

// Work per thread below which starting threads costs more than it saves.
constexpr double kFlopsPerThread = 4e6;

// Everything the dispatched task needs; built in eval_cpu.
struct Task {
  Operand a, b;
  const float* c = nullptr;  // broadcast C (read through c_strides), or null
  mx::Strides c_strides;
  float* out = nullptr;
  mx::Shape out_shape;
  mx::Shape batch;  // output batch shape
  int64_t batches = 1, m = 0, n = 0, k = 0;
  float alpha = 1.f, beta = 0.f;
  // Rows of every batch of A form one uniform-stride run and B does not vary over the batch:
  // one sgemm with M' = batches * M instead of a loop (e.g. activations x weights).
  bool fold = false;
  int64_t fold_ld = 0;

  void run() noexcept {
    for (Operand* op : {&a, &b}) {
      if (!op->pack) continue;
      strided_copy(op->data, op->shape, op->strides, op->packed.get());
      op->data = op->packed.get();
    }
    if (c) strided_copy(c, out_shape, c_strides, out);
    const int64_t out_elems = batches * m * n;
    if (out_elems == 0) return;
    if (k == 0) {  // no product: beta * C, or zeros
      if (!c) {
        std::memset(out, 0, static_cast<size_t>(out_elems) * sizeof(float));
      } else if (beta != 1.f) {
        for (int64_t i = 0; i < out_elems; ++i) out[i] *= beta;
      }
      return;
    }
    const float beta_eff = c ? beta : 0.f;
    single_threaded_blas();
    // Jobs: (batch, block of rows). Rows are split only when there are fewer batches than
    // threads; blocks stay multiples of 16 rows.
    const int64_t nbatch = fold ? 1 : batches;
    const int64_t rows = fold ? batches * m : m;
    const double flops = 2.0 * static_cast<double>(out_elems) * static_cast<double>(k);
    const int threads = static_cast<int>(
        std::max<double>(1, std::min<double>(cpu_workers(), flops / kFlopsPerThread)));
    int64_t blocks = 1;
    if (nbatch < threads)
      blocks = std::min<int64_t>((threads + nbatch - 1) / nbatch, (rows + 15) / 16);
    blocks = std::max<int64_t>(1, blocks);
    const int64_t block_rows = ((rows + blocks - 1) / blocks + 15) / 16 * 16;
    blocks = (rows + block_rows - 1) / block_rows;
    // Element offsets of every batch's A and B (odometer over the output batch shape).
    std::vector<int64_t> off_a(static_cast<size_t>(nbatch), 0);
    std::vector<int64_t> off_b(static_cast<size_t>(nbatch), 0);
    if (!fold) {
      const int nb = static_cast<int>(batch.size());
      std::vector<int64_t> idx(static_cast<size_t>(nb), 0);
      int64_t oa = 0, ob = 0;
      for (int64_t t = 0; t < nbatch; ++t) {
        off_a[static_cast<size_t>(t)] = oa;
        off_b[static_cast<size_t>(t)] = ob;
        for (int ax = nb - 1; ax >= 0; --ax) {
          const auto u = static_cast<size_t>(ax);
          if (++idx[u] < batch[ax]) {
            oa += a.batch_stride[u];
            ob += b.batch_stride[u];
            break;
          }
          oa -= a.batch_stride[u] * (batch[ax] - 1);
          ob -= b.batch_stride[u] * (batch[ax] - 1);
          idx[u] = 0;
        }
      }
    }
    const MatLayout la = fold ? MatLayout{true, false, fold_ld} : a.layout;
    auto job = [&](int64_t i) {
      const int64_t t = i / blocks, r0 = (i % blocks) * block_rows;
      const int64_t r = std::min(block_rows, rows - r0);
      if (r <= 0) return;
      // Row r0 of A: r0 rows down (NoTrans) or r0 columns across (A stored transposed).
      const float* ap = a.data + off_a[static_cast<size_t>(t)] + (la.trans ? r0 : r0 * la.ld);
      sgemm(la, b.layout, r, n, k, alpha, ap, b.data + off_b[static_cast<size_t>(t)], beta_eff,
            out + t * m * n + r0 * n, n);
    };
    const int64_t jobs = nbatch * blocks;
    if (threads <= 1 || jobs <= 1) {
      for (int64_t i = 0; i < jobs; ++i) job(i);
    } else {
      parallel_items(jobs, static_cast<int>(std::min<int64_t>(threads, jobs)), job);
    }
  }
};

// Whether A's rows over (batch..., M) have one uniform stride (then returned in *ld) and A is
// not transposed, B is the same matrix for every batch: the batch folds into M.
bool can_fold(const Task& t, int64_t* ld) {
  if (t.batches <= 1 || t.a.layout.trans) return false;
  for (int64_t s : t.b.batch_stride)
    if (s != 0) return false;
  // (extent, stride) of the axes that matter, outermost first.
  std::vector<std::pair<int64_t, int64_t>> axes;
  for (size_t i = 0; i < t.batch.size(); ++i)
    if (t.batch[i] > 1) axes.emplace_back(t.batch[i], t.a.batch_stride[i]);
  if (t.m > 1) axes.emplace_back(t.m, t.a.layout.ld);
  for (size_t i = 0; i + 1 < axes.size(); ++i)
    if (axes[i].second != axes[i + 1].second * axes[i + 1].first) return false;
  const int64_t row = axes.empty() ? t.k : axes.back().second;
  if (row < std::max<int64_t>(1, t.k)) return false;
  *ld = row;
  return true;
}

class BlasMatmul : public mx::Primitive {
 public:
  BlasMatmul(mx::Stream stream, float alpha, float beta, bool has_c)
      : mx::Primitive(stream), alpha_(alpha), beta_(beta), has_c_(has_c) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override {
    mx::array& out = outputs[0];
    for (const auto& in : inputs)
      if (in.dtype() != mx::float32)
        throw std::runtime_error("BLAS matmul: inputs must be float32");
    auto task = std::make_shared<Task>();
    Task& t = *task;
    const mx::array& a = inputs[0];
    const mx::array& b = inputs[1];
    t.out_shape = out.shape();
    t.batch = mx::Shape(out.shape().begin(), out.shape().end() - 2);
    for (auto d : t.batch) t.batches *= d;
    t.m = a.shape(-2);
    t.k = a.shape(-1);
    t.n = b.shape(-1);
    t.alpha = alpha_;
    t.beta = beta_;
    const int nb = static_cast<int>(t.batch.size());
    t.a = describe(a, nb);
    t.b = describe(b, nb);
    check_blas_int(t.m, "M");
    check_blas_int(t.n, "N");
    check_blas_int(t.k, "K");
    check_blas_int(t.a.layout.ld, "lda");
    check_blas_int(t.b.layout.ld, "ldb");
    for (Operand* op : {&t.a, &t.b}) {
      if (!op->pack) continue;
      size_t elems = 1;
      for (auto d : op->shape) elems *= static_cast<size_t>(d);
      op->packed = std::shared_ptr<float[]>(new float[std::max<size_t>(elems, 1)]);
    }
    if (has_c_) {
      t.c = inputs[2].data<float>();
      t.c_strides = inputs[2].strides();
    }
    int64_t ld = 0;
    if (can_fold(t, &ld) && t.batches * t.m <= INT_MAX && ld <= INT_MAX) {
      t.fold = true;
      t.fold_ld = ld;
    }
    out.set_data(mx::allocator::malloc(out.nbytes()));
    t.out = out.data<float>();

    auto& encoder = mx::cpu::get_command_encoder(stream());
    for (const auto& in : inputs) encoder.set_input_array(in);
    encoder.set_output_array(out);
    // The arrays are captured to keep their buffers alive until the task has run.
    encoder.dispatch([task, keep_in = inputs, keep_out = outputs]() { task->run(); });
  }

  void eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) override {
    throw std::runtime_error("the OpenBLAS matmul primitive runs on MLX's CPU backend only");
  }

  const char* name() const override { return "OrtmlxBlasMatmul"; }
  bool is_equivalent(const mx::Primitive& other) const override {
    auto* o = dynamic_cast<const BlasMatmul*>(&other);
    return o && o->alpha_ == alpha_ && o->beta_ == beta_ && o->has_c_ == has_c_;
  }

 private:
  float alpha_, beta_;
  bool has_c_;
};

}  // namespace

bool use_blas_matmul(mx::StreamOrDevice s, mx::Dtype dtype) {
  if (dtype != mx::float32 || !runs_on_cpu(s)) return false;
  const char* ab = std::getenv("ORTMLX_INTERNAL_CPU_MATMUL");
  return !(ab && std::string(ab) == "mlx");
}

mx::array blas_matmul(const mx::array& a, const mx::array& b, mx::StreamOrDevice s, float alpha,
                      const std::optional<mx::array>& c, float beta) {
  const mx::Stream stream = mx::to_stream(s);
  if (!runs_on_cpu(stream))
    throw std::runtime_error("the OpenBLAS matmul primitive runs on MLX's CPU backend only");
  if (a.ndim() < 2 || b.ndim() < 2) throw std::runtime_error("BLAS matmul: operands of rank < 2");
  if (a.dtype() != mx::float32 || b.dtype() != mx::float32)
    throw std::runtime_error("BLAS matmul: operands must be float32");
  if (a.shape(-1) != b.shape(-2))
    throw std::runtime_error("matmul inner dimensions differ: " + std::to_string(a.shape(-1)) +
                             " vs " + std::to_string(b.shape(-2)));
  mx::Shape out = mx::broadcast_shapes(mx::Shape(a.shape().begin(), a.shape().end() - 2),
                                       mx::Shape(b.shape().begin(), b.shape().end() - 2));
  out.push_back(a.shape(-2));
  out.push_back(b.shape(-1));
  std::vector<mx::array> inputs{a, b};
  const bool has_c = c.has_value() && beta != 0.f;
  if (has_c) {
    if (c->dtype() != mx::float32) throw std::runtime_error("BLAS matmul: C must be float32");
    inputs.push_back(mx::broadcast_to(*c, out, stream));  // a view: strides 0 where it repeats
  }
  return mx::array(std::move(out), mx::float32,
                   std::make_shared<BlasMatmul>(stream, alpha, has_c ? beta : 0.f, has_c),
                   std::move(inputs));
}

mx::array matmul_any(const mx::array& a, const mx::array& b, mx::StreamOrDevice s) {
  if (use_blas_matmul(s, a.dtype()) && b.dtype() == a.dtype()) return blas_matmul(a, b, s);
  if (cublaslt_matmul_applies(a, b, std::nullopt, s)) return cublaslt_matmul(a, b, s);
  return mx::matmul(a, b, s);
}

}  // namespace ortmlx::ops
