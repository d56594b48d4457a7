// cuBLASLt products with a plan per shape (see cublaslt_matmul.h). cuBLASLt is the library MLX's
// CUDA backend already loads; its functions are looked up there at run time (dlsym), so the
// library gains no link-time dependency and the CPU flavour none at all.
#include "ortmlx/ops/matmul/cuda/cublaslt_matmul.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include <mlx/ops.h>

#include "ortmlx/ops/cuda_support.h"

#if ORTMLX_CUDA_KERNELS
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include <mlx/backend/cuda/device.h>
#include <mlx/primitives.h>

#include "ortmlx/engine/device/device_memory.h"
#include "ortmlx/ops/common.h"
#include "ortmlx/ops/cuda_library_call.h"
#endif

namespace ortmlx::ops {

#if ORTMLX_CUDA_KERNELS
namespace {

using device::device_address;

// The cuBLASLt entry points this file calls, from the process's libcublasLt.so.13.
#define ORTMLX_CUBLASLT_FUNCTIONS(X)  \
  X(cublasLtCreate)                   \
  X(cublasLtGetStatusString)          \
  X(cublasLtMatmul)                   \
  X(cublasLtMatmulAlgoGetHeuristic)   \
  X(cublasLtMatmulDescCreate)         \
  X(cublasLtMatmulDescDestroy)        \
  X(cublasLtMatmulDescSetAttribute)   \
  X(cublasLtMatrixLayoutCreate)       \
  X(cublasLtMatrixLayoutDestroy)      \
  X(cublasLtMatrixLayoutSetAttribute) \
  X(cublasLtMatmulPreferenceCreate)   \
  X(cublasLtMatmulPreferenceDestroy)  \
  X(cublasLtMatmulPreferenceSetAttribute)

ORTMLX_DECLARE_LIBRARY_API(CublasLtApi, cublaslt, ORTMLX_CUBLASLT_FUNCTIONS, "libcublasLt.so.13")

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLASLt matmul: ") + what +
                             " failed: " + cublaslt().cublasLtGetStatusString(status));
}

// One handle and one lock for the process (MLX runs one device): a plan's descriptor carries the
// bias address of the call, so calls through a plan must not overlap.
std::mutex& plan_mutex() {
  static std::mutex m;
  return m;
}
cublasLtHandle_t handle() {
  static const cublasLtHandle_t h = [] {
    cublasLtHandle_t created = nullptr;
    check(cublaslt().cublasLtCreate(&created), "cublasLtCreate");
    return created;  // kept for the process's lifetime, as MLX keeps its own
  }();
  return h;
}

template <typename T>
using Descriptor = std::unique_ptr<std::remove_pointer_t<T>, cublasStatus_t (*)(T)>;

// How one operand's (rows x cols) matrices reach cuBLASLt: as stored row by row (ld = the row
// stride) or transposed (stored column by column, ld = the column stride), `batch_stride`
// elements apart (0: the same matrix for every batch). Size-1 axes take the minimal ld.
struct Operand {
  bool transposed = false;
  int64_t ld = 1;
  int64_t batch_stride = 0;
};

// nullopt when cuBLASLt cannot read x's matrices through its strides (a batched operand must be
// row-contiguous: one stride between matrices).
std::optional<Operand> describe(const mx::array& x) {
  const int nd = static_cast<int>(x.ndim());
  const int64_t rows = x.shape(nd - 2), cols = x.shape(nd - 1);
  const int64_t s0 = x.strides()[nd - 2], s1 = x.strides()[nd - 1];
  Operand op;
  if ((cols == 1 || s1 == 1) && (rows == 1 || s0 >= cols)) {
    op.ld = rows == 1 ? cols : s0;
  } else if ((rows == 1 || s0 == 1) && (cols == 1 || s1 >= rows)) {
    op.transposed = true;
    op.ld = cols == 1 ? rows : s1;
  } else {
    return std::nullopt;
  }
  if (static_cast<int64_t>(x.size()) > rows * cols) {
    if (!x.flags().row_contiguous) return std::nullopt;
    op.batch_stride = rows * cols;
  }
  return op;
}

Operand operand(const mx::array& x) {
  auto op = describe(x);
  if (!op) throw std::runtime_error("cuBLASLt matmul: an operand is not a strided matrix");
  return *op;
}

// The largest power of two (up to 256) dividing an address: cuBLASLt's algorithms differ in the
// alignment they need, and its heuristic assumes 256 bytes unless told.
uint32_t alignment(const void* p) {
  const auto v = reinterpret_cast<std::uintptr_t>(p);
  uint32_t a = 256;
  while (a > 4 && v % a != 0) a /= 2;
  return a;
}

// One product's geometry in cuBLASLt's column-major terms: it computes D^T = B^T A^T, so its
// "A" is our b and its "B" our a, and D (N x M, column-major) is our row-major y.
struct Geometry {
  Operand a, b;
  int64_t m = 0, n = 0, k = 0;
  int batch = 1;
  bool bias = false;
  bool tf32 = false;
  uint32_t align_a = 256, align_b = 256, align_d = 256;

  std::vector<int64_t> key() const {
    return {a.transposed, a.ld, a.batch_stride, b.transposed, b.ld,    b.batch_stride, m, n, k,
            batch,        bias, tf32,           align_a,      align_b, align_d};
  }
};

struct Plan {
  Descriptor<cublasLtMatmulDesc_t> desc{nullptr, nullptr};
  Descriptor<cublasLtMatrixLayout_t> lhs{nullptr, nullptr}, rhs{nullptr, nullptr},
      out{nullptr, nullptr};  // cuBLASLt's A (our b), B (our a), and D
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

Descriptor<cublasLtMatrixLayout_t> layout(uint64_t rows, uint64_t cols, int64_t ld, int batch,
                                          int64_t batch_stride) {
  const CublasLtApi& api = cublaslt();
  cublasLtMatrixLayout_t l = nullptr;
  check(api.cublasLtMatrixLayoutCreate(&l, CUDA_R_32F, rows, cols, ld),
        "cublasLtMatrixLayoutCreate");
  Descriptor<cublasLtMatrixLayout_t> owned(l, api.cublasLtMatrixLayoutDestroy);
  if (batch > 1) {
    check(api.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                               sizeof(batch)),
          "cublasLtMatrixLayoutSetAttribute");
    check(api.cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                               &batch_stride, sizeof(batch_stride)),
          "cublasLtMatrixLayoutSetAttribute");
  }
  return owned;
}

// Shapes cuBLASLt failed to run: they keep MLX's matmul.
using ShapeKey = std::vector<int64_t>;
ShapeKey shape_key(const mx::Shape& a, const mx::Shape& b, bool bias) {
  ShapeKey key(a.begin(), a.end());
  key.push_back(-1);
  key.insert(key.end(), b.begin(), b.end());
  key.push_back(bias);
  return key;
}
FailedShapes& failed_shapes() {
  static auto* failed = new FailedShapes();  // never destroyed, like the plans
  return *failed;
}

// The addresses and scalar of one call.
struct Call {
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;
  void* out = nullptr;
  float alpha = 1.f;
};

cublasStatus_t launch(const Plan& p, const cublasLtMatmulAlgo_t& algo, size_t workspace_bytes,
                      void* workspace, const Call& c, cudaStream_t stream) {
  const float beta = 0.f;
  return cublaslt().cublasLtMatmul(handle(), p.desc.get(), &c.alpha, c.b, p.lhs.get(), c.a,
                                   p.rhs.get(), &beta, c.out, p.out.get(), c.out, p.out.get(),
                                   &algo, workspace, workspace_bytes, stream);
}

void set_bias(const Plan& p, const void* bias) {
  check(cublaslt().cublasLtMatmulDescSetAttribute(p.desc.get(), CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                  &bias, sizeof(bias)),
        "cublasLtMatmulDescSetAttribute");
}

// The most workspace an algorithm may take (what ORT's CUDA EP gives cuBLASLt).
constexpr size_t kMaxWorkspace = size_t{32} << 20;

// A plan per geometry, built and timed on first use (plan_mutex held). The candidates run on the
// real operands; the output is overwritten by the call that follows.
std::shared_ptr<const Plan> plan_for(const Geometry& g, const Call& c, cudaStream_t stream) {
  static auto* plans = new std::map<std::vector<int64_t>, std::shared_ptr<const Plan>>();
  constexpr size_t kMaxPlans = 4096;  // shape-polymorphic models: start over past this many
  const std::vector<int64_t> key = g.key();
  if (auto it = plans->find(key); it != plans->end()) return it->second;

  const CublasLtApi& api = cublaslt();
  auto p = std::make_shared<Plan>();
  cublasLtMatmulDesc_t d = nullptr;
  check(api.cublasLtMatmulDescCreate(&d, g.tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
                                     CUDA_R_32F),
        "cublasLtMatmulDescCreate");
  p->desc = Descriptor<cublasLtMatmulDesc_t>(d, api.cublasLtMatmulDescDestroy);
  const cublasOperation_t op_lhs = g.b.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_rhs = g.a.transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(api.cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &op_lhs, sizeof(op_lhs)),
        "cublasLtMatmulDescSetAttribute");
  check(api.cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &op_rhs, sizeof(op_rhs)),
        "cublasLtMatmulDescSetAttribute");
  if (g.bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    check(api.cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                             sizeof(epilogue)),
          "cublasLtMatmulDescSetAttribute");
    set_bias(*p, c.bias);
  }
  // Stored (column-major) dims: our b is K x N row by row = N x K column by column.
  p->lhs = g.b.transposed ? layout(g.k, g.n, g.b.ld, g.batch, g.b.batch_stride)
                          : layout(g.n, g.k, g.b.ld, g.batch, g.b.batch_stride);
  p->rhs = g.a.transposed ? layout(g.m, g.k, g.a.ld, g.batch, g.a.batch_stride)
                          : layout(g.k, g.m, g.a.ld, g.batch, g.a.batch_stride);
  p->out = layout(g.n, g.m, g.n, g.batch, g.n * g.m);

  cublasLtMatmulPreference_t pref = nullptr;
  check(api.cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
  const Descriptor<cublasLtMatmulPreference_t> pref_owned(pref,
                                                          api.cublasLtMatmulPreferenceDestroy);
  const uint64_t ws_cap = kMaxWorkspace;
  check(api.cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                 &ws_cap, sizeof(ws_cap)),
        "cublasLtMatmulPreferenceSetAttribute");
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, g.align_b},  // cuBLASLt's A is our b
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, g.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, g.align_d},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, g.align_d}};
  for (const auto& [attr, bytes] : aligns)
    check(api.cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof(bytes)),
          "cublasLtMatmulPreferenceSetAttribute");

  constexpr int kCandidates = 8;
  cublasLtMatmulHeuristicResult_t found[kCandidates];
  int returned = 0;
  check(api.cublasLtMatmulAlgoGetHeuristic(handle(), d, p->lhs.get(), p->rhs.get(), p->out.get(),
                                           p->out.get(), pref, kCandidates, found, &returned),
        "cublasLtMatmulAlgoGetHeuristic");
  size_t ws_bytes = 0;
  for (int i = 0; i < returned; ++i)
    if (found[i].state == CUBLAS_STATUS_SUCCESS)
      ws_bytes = std::max(ws_bytes, found[i].workspaceSize);
  std::optional<mx::allocator::Data> ws;
  if (ws_bytes != 0) ws.emplace(device::device_block(ws_bytes, stream));
  void* ws_ptr = ws ? device_address(*ws) : nullptr;

  // The heuristic's order is a prediction: each candidate is timed warm and the fastest kept
  // (the first kernel launch of each pays for loading its module, hence the untimed call).
  constexpr int kTimedRuns = 3;
  TimingEvents events("cuBLASLt matmul");
  float best_ms = 0.f;
  int best = -1;
  for (int i = 0; i < returned; ++i) {
    if (found[i].state != CUBLAS_STATUS_SUCCESS) continue;
    const float ms = events.time(stream, kTimedRuns, [&] {
      return launch(*p, found[i].algo, found[i].workspaceSize, ws_ptr, c, stream) ==
             CUBLAS_STATUS_SUCCESS;
    });
    if (ms < 0.f || (best >= 0 && ms >= best_ms)) continue;
    best_ms = ms;
    best = i;
  }
  if (best < 0) throw std::runtime_error("cuBLASLt matmul: no algorithm runs this shape");
  p->algo = found[best].algo;
  p->workspace = found[best].workspaceSize;
  if (kernel_opted_in("ONNXRUNTIME_EP_MLX_CUBLASLT_MATMUL_LOG"))
    std::fprintf(stderr,
                 "ortmlx cuBLASLt matmul M %lld N %lld K %lld batch %d trans %d%d bias %d: "
                 "candidate %d of %d, %.4f ms\n",
                 static_cast<long long>(g.m), static_cast<long long>(g.n),
                 static_cast<long long>(g.k), g.batch, g.a.transposed, g.b.transposed, g.bias, best,
                 returned, best_ms / kTimedRuns);
  if (cudaStreamSynchronize(stream) != cudaSuccess) {
    (void)cudaGetLastError();
    throw std::runtime_error("cuBLASLt matmul: the algorithm search failed on the device");
  }
  if (plans->size() >= kMaxPlans) plans->clear();
  plans->emplace(key, p);
  return p;
}

class CublasLtMatmul final : public mx::UnaryPrimitive {
 public:
  CublasLtMatmul(mx::Stream s, float alpha, bool bias)
      : mx::UnaryPrimitive(s), alpha_(alpha), bias_(bias) {}

  void eval_cpu(const std::vector<mx::array>&, mx::array&) override {
    throw std::runtime_error("cuBLASLt matmul: runs on GPU streams only");
  }

  void eval_gpu(const std::vector<mx::array>& inputs, mx::array& out) override {
    const mx::array& a = inputs[0];
    const mx::array& b = inputs[1];
    auto& encoder = mx::cu::get_command_encoder(stream());
    cudaStream_t cs = encoder.stream();
    out.set_data(device::device_block(out.nbytes(), cs));
    for (const auto& in : inputs) encoder.set_input_array(in);
    encoder.set_output_array(out);
    try {
      Geometry g;
      g.a = operand(a);
      g.b = operand(b);
      g.m = a.shape(-2);
      g.k = a.shape(-1);
      g.n = b.shape(-1);
      g.batch = static_cast<int>(static_cast<int64_t>(out.size()) / (g.m * g.n));
      // Activations times weights: every batch's rows in one product (M' = batch * M).
      if (g.batch > 1 && g.b.batch_stride == 0 && !g.a.transposed && g.a.ld == g.k &&
          g.a.batch_stride == g.m * g.k) {
        g.m *= g.batch;
        g.batch = 1;
        g.a.batch_stride = 0;
      }
      g.bias = bias_;
      g.tf32 = device::tf32_enabled();
      Call c;
      c.a = device_address(a);
      c.b = device_address(b);
      c.out = const_cast<void*>(device_address(out));
      c.bias = bias_ ? device_address(inputs[2]) : nullptr;
      c.alpha = alpha_;
      g.align_a = alignment(c.a);
      g.align_b = alignment(c.b);
      g.align_d = alignment(c.out);
      std::lock_guard lock(plan_mutex());
      const std::shared_ptr<const Plan> plan = plan_for(g, c, cs);
      if (bias_) set_bias(*plan, c.bias);
      // Released in stream order after the product (graphs are off: cublaslt_matmul_applies).
      std::optional<mx::allocator::Data> ws;
      if (plan->workspace != 0) ws.emplace(device::device_block(plan->workspace, cs));
      check(launch(*plan, plan->algo, plan->workspace, ws ? device_address(*ws) : nullptr, c, cs),
            "cublasLtMatmul");
    } catch (const std::exception&) {
      failed_shapes().add(shape_key(a.shape(), b.shape(), bias_));
      throw;
    }
  }

  const char* name() const override { return "OrtmlxCublasLtMatmul"; }

  bool is_equivalent(const mx::Primitive& other) const override {
    if (std::strcmp(other.name(), name()) != 0) return false;
    const auto& o = static_cast<const CublasLtMatmul&>(other);
    return alpha_ == o.alpha_ && bias_ == o.bias_;
  }

 private:
  float alpha_;
  bool bias_;
};

// Opt-in (measured no faster than MLX's matmul on an H100: bench/results/gpu_peer.md, 2026-12-06
// 08:45 UTC). Read at each translation (a session translates a shape once), so that one process
// can hold sessions translated either way (bench/gpu_peer.py --ab).
bool enabled() {
  return kernel_opted_in("ONNXRUNTIME_EP_MLX_CUBLASLT_MATMUL");
}

// An operand's batch dims, right-aligned against the output's: all 1 or all of them.
bool batch_fits(const mx::Shape& x_batch, const mx::Shape& out_batch) {
  int64_t count = 1;
  for (int d : x_batch) count *= d;
  if (count == 1) return true;
  const size_t pad = out_batch.size() - x_batch.size();
  for (size_t i = 0; i < out_batch.size(); ++i)
    if ((i < pad ? 1 : x_batch[i - pad]) != out_batch[i]) return false;
  return true;
}

}  // namespace
#endif  // ORTMLX_CUDA_KERNELS

bool cublaslt_matmul_applies(const mx::array& a, const mx::array& b,
                             const std::optional<mx::array>& bias, mx::StreamOrDevice s) {
#if ORTMLX_CUDA_KERNELS
  if (!enabled() || a.ndim() < 2 || b.ndim() < 2 || a.dtype() != mx::float32 ||
      b.dtype() != mx::float32)
    return false;
  const int64_t m = a.shape(-2), k = a.shape(-1), n = b.shape(-1);
  if (b.shape(-2) != k || m <= 1 || n <= 1 || k <= 0) return false;
  if (bias && (bias->ndim() != 1 || bias->dtype() != mx::float32 || bias->shape(0) != n))
    return false;
  const mx::Shape a_batch(a.shape().begin(), a.shape().end() - 2);
  const mx::Shape b_batch(b.shape().begin(), b.shape().end() - 2);
  mx::Shape out_batch;
  try {
    out_batch = mx::broadcast_shapes(a_batch, b_batch);
  } catch (const std::exception&) {
    return false;  // the caller's matmul reports it
  }
  int64_t batch = 1;
  for (int d : out_batch) batch *= d;
  constexpr int64_t kMaxInt = std::numeric_limits<int>::max();
  if (batch <= 0 || !batch_fits(a_batch, out_batch) || !batch_fits(b_batch, out_batch) ||
      static_cast<int64_t>(a.size()) > kMaxInt || static_cast<int64_t>(b.size()) > kMaxInt ||
      batch * m * n > kMaxInt)
    return false;
  if (!runs_on_gpu(s) || device::cuda_graphs_enabled() ||
      failed_shapes().contains(shape_key(a.shape(), b.shape(), bias.has_value())))
    return false;
  return cublaslt().loaded;
#else
  (void)a;
  (void)b;
  (void)bias;
  (void)s;
  return false;
#endif
}

mx::array cublaslt_matmul(const mx::array& a, const mx::array& b, mx::StreamOrDevice s, float alpha,
                          const std::optional<mx::array>& bias) {
  if (!cublaslt_matmul_applies(a, b, bias, s))
    throw std::runtime_error("cuBLASLt matmul: not for these operands or device");
#if ORTMLX_CUDA_KERNELS
  const mx::Stream stream = mx::to_stream(s);
  mx::Shape out = mx::broadcast_shapes(mx::Shape(a.shape().begin(), a.shape().end() - 2),
                                       mx::Shape(b.shape().begin(), b.shape().end() - 2));
  out.push_back(a.shape(-2));
  out.push_back(b.shape(-1));
  // An evaluated operand (a weight) that cuBLASLt reads as it is goes in directly; others through
  // a Contiguous node (no copy at run time when they are row-contiguous, or a single matrix
  // stored column by column: a Gemm's transposed weights).
  auto prepared = [&](const mx::array& x) {
    if (x.is_available() && describe(x)) return x;
    return mx::contiguous(x, x.size() == static_cast<size_t>(x.shape(-2)) * x.shape(-1), stream);
  };
  std::vector<mx::array> inputs{prepared(a), prepared(b)};
  if (bias) inputs.push_back(mx::contiguous(*bias, false, stream));
  return mx::array(std::move(out), mx::float32,
                   std::make_shared<CublasLtMatmul>(stream, alpha, bias.has_value()),
                   std::move(inputs));
#else
  (void)alpha;
  return a;  // unreachable: cublaslt_matmul_applies is false without the CUDA flavour
#endif
}

}  // namespace ortmlx::ops
