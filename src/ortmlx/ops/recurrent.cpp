// Recurrent family: RNN, GRU, LSTM (opsets 7 and 14), float32.
//
// The reference is ORT's CPU kernels, whose conventions differ from the ONNX text in places and
// are matched here:
// - activation_alpha/beta are consumed in order, one value per activation that takes it
//   (Affine, ScaledTanh, HardSigmoid: alpha and beta; LeakyRelu, ThresholdedRelu, Elu: alpha);
//   once a list runs out the defaults are LeakyRelu 0.01, HardSigmoid 0.2/0.5, Elu 1.0 and 0 for
//   the rest (Affine, ThresholdedRelu, ScaledTanh: not the ONNX op defaults). GRU/LSTM read
//   activation names case-insensitively, RNN takes the exact names only.
// - clip bounds the input of every gate activation (after the bias). RNN: a negative clip means
//   no clip; GRU/LSTM: ORT rejects clip <= 0, and clamps to FLT_MAX when clip is absent.
// - sequence_lens: a row stops at its length (its state is held), Y is zero from there on, and
//   the reverse direction runs over the first `length` steps only. A row of length 0 gets zero
//   final states (not initial_h / initial_c).
// - layout 1 (batch-major X, Y, Y_h, Y_c): ORT's CPU kernels refuse it; it is transposed here to
//   the time-major form, as the ONNX definition states.
//
// The time loop is unrolled into the (shape-keyed) MLX graph: X·W^T for every step and direction
// is one matmul; each step adds one recurrent matmul and the gate arithmetic. The graph grows
// linearly with the sequence length; docs/ENGINE.md ("Recurrent ops") has the measured cost and
// the claim's limit kMaxUnrolledSteps.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/matmul_cpu.h"
#include "ortmlx/ops/ops.h"
#include "ortmlx/ops/recurrent/cuda/recurrence.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

enum class Cell { kRnn, kGru, kLstm };

// A static sequence length beyond this is refused: the unrolled graph, its trace and compile
// grow with the step count (about 2.5 ms of compile per step of a bidirectional LSTM on MLX's CPU
// backend, docs/ENGINE.md "Recurrent ops"). A dynamic length is unrolled at whatever it is.
constexpr int64_t kMaxUnrolledSteps = 1024;

int gate_count(Cell cell) {
  return cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 3 : 4;
}
// Activations per direction: RNN f; GRU f (z, r), g (h); LSTM f (i, f, o), g (cell), h (output).
size_t acts_per_direction(Cell cell) {
  return cell == Cell::kRnn ? 1 : cell == Cell::kGru ? 2 : 3;
}

enum class Act {
  kSigmoid,
  kTanh,
  kRelu,
  kAffine,
  kLeakyRelu,
  kThresholdedRelu,
  kScaledTanh,
  kHardSigmoid,
  kElu,
  kSoftsign,
  kSoftplus
};

struct ActSpec {
  Act kind = Act::kTanh;
  float alpha = 0.0f;
  float beta = 0.0f;
};

struct ActName {
  const char* name;
  Act kind;
  bool alpha, beta;           // consumes an alpha / beta
  float alpha_def, beta_def;  // ORT's defaults once the list runs out
};

constexpr ActName kActs[] = {
    {"Sigmoid", Act::kSigmoid, false, false, 0, 0},
    {"Tanh", Act::kTanh, false, false, 0, 0},
    {"Relu", Act::kRelu, false, false, 0, 0},
    {"Affine", Act::kAffine, true, true, 0, 0},
    {"LeakyRelu", Act::kLeakyRelu, true, false, 0.01f, 0},
    {"ThresholdedRelu", Act::kThresholdedRelu, true, false, 0, 0},
    {"ScaledTanh", Act::kScaledTanh, true, true, 0, 0},
    {"HardSigmoid", Act::kHardSigmoid, true, true, 0.2f, 0.5f},
    {"Elu", Act::kElu, true, false, 1.0f, 0},
    {"Softsign", Act::kSoftsign, false, false, 0, 0},
    {"Softplus", Act::kSoftplus, false, false, 0, 0},
};

const ActName* find_act(const std::string& name, bool case_insensitive) {
  for (const ActName& a : kActs) {
    const std::string n = a.name;
    if (n.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < n.size() && same; ++i)
      same = case_insensitive ? std::tolower(static_cast<unsigned char>(n[i])) ==
                                    std::tolower(static_cast<unsigned char>(name[i]))
                              : n[i] == name[i];
    if (same) return &a;
  }
  return nullptr;
}

// Everything the attributes say, validated once for claim and translation alike.
struct Spec {
  Cell cell = Cell::kRnn;
  int64_t hidden = 0;
  int directions = 1;
  bool reverse_only = false;  // direction == "reverse"
  bool batch_major = false;   // layout == 1
  std::optional<float> clip;  // bound of every gate activation's input
  bool linear_before_reset = false;
  bool input_forget = false;
  std::vector<ActSpec> acts;  // acts_per_direction(cell) per direction
};

std::optional<Spec> parse_spec(const NodeView& n, Cell cell, std::string* why) {
  Spec s;
  s.cell = cell;
  if (!n.has_attr("hidden_size")) {
    *why = "hidden_size attribute is required (ORT's kernel rejects its absence)";
    return std::nullopt;
  }
  s.hidden = n.attr_int("hidden_size", 0);
  if (s.hidden < 1 || s.hidden > std::numeric_limits<int32_t>::max() / 4) {
    *why = "hidden_size " + std::to_string(s.hidden) + " is outside [1, 2^29)";
    return std::nullopt;
  }
  const std::string dir = n.attr_string("direction", "forward");
  if (dir != "forward" && dir != "reverse" && dir != "bidirectional") {
    *why = "direction '" + dir + "' is not forward, reverse or bidirectional";
    return std::nullopt;
  }
  s.directions = dir == "bidirectional" ? 2 : 1;
  s.reverse_only = dir == "reverse";
  const int64_t layout = n.attr_int("layout", 0);
  if (layout != 0 && layout != 1) {
    *why = "layout " + std::to_string(layout) + " is not 0 or 1";
    return std::nullopt;
  }
  s.batch_major = layout == 1;
  if (n.has_attr("clip")) {
    const float clip = n.attr_float("clip", 0.0f);
    if (std::isnan(clip)) {
      *why = "clip is NaN";
      return std::nullopt;
    }
    if (cell == Cell::kRnn) {
      if (clip >= 0.0f) s.clip = clip;  // ORT's RNN: a negative clip means none
    } else {
      if (!(clip > 0.0f)) {
        *why = "clip must be positive (ORT's kernel rejects " + std::to_string(clip) + ")";
        return std::nullopt;
      }
      s.clip = clip;
    }
  }
  s.linear_before_reset = cell == Cell::kGru && n.attr_int("linear_before_reset", 0) != 0;
  s.input_forget = cell == Cell::kLstm && n.attr_int("input_forget", 0) != 0;

  // Activations.
  const size_t per_dir = acts_per_direction(cell);
  const size_t want = per_dir * static_cast<size_t>(s.directions);
  std::vector<std::string> names;
  if (auto it = n.attrs.find("activations"); it != n.attrs.end()) {
    const auto* v = std::get_if<std::vector<std::string>>(&it->second);
    if (!v) {
      *why = "activations must be a list of strings";
      return std::nullopt;
    }
    names = *v;
  } else {
    const std::vector<std::string> defaults =
        cell == Cell::kRnn   ? std::vector<std::string>{"Tanh"}
        : cell == Cell::kGru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                             : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
    for (int d = 0; d < s.directions; ++d)
      names.insert(names.end(), defaults.begin(), defaults.end());
  }
  // ORT's RNN takes the first of two activations given for one direction (the ONNX default
  // lists two).
  if (cell == Cell::kRnn && s.directions == 1 && names.size() == 2) names.resize(1);
  if (names.size() != want) {
    *why = "activations lists " + std::to_string(names.size()) + " functions, expected " +
           std::to_string(want);
    return std::nullopt;
  }
  const std::vector<float> alphas =
      n.attr_floats("activation_alpha").value_or(std::vector<float>{});
  const std::vector<float> betas = n.attr_floats("activation_beta").value_or(std::vector<float>{});
  size_t ai = 0, bi = 0;
  for (const std::string& name : names) {
    const ActName* a = find_act(name, cell != Cell::kRnn);
    if (!a) {
      *why = "activation '" + name + "' is not one ORT's kernel implements";
      return std::nullopt;
    }
    ActSpec spec{a->kind, 0.0f, 0.0f};
    if (a->alpha) spec.alpha = ai < alphas.size() ? alphas[ai++] : a->alpha_def;
    if (a->beta) spec.beta = bi < betas.size() ? betas[bi++] : a->beta_def;
    s.acts.push_back(spec);
  }
  return s;
}

// ---------------------------------------------------------------- claim

ClaimResult claim_recurrent(const ClaimContext& c, Cell cell) {
  const NodeView& n = c.node();
  const size_t max_in = cell == Cell::kLstm ? 8 : 6, max_out = cell == Cell::kLstm ? 3 : 2;
  ORTMLX_REQUIRE(c.num_inputs() >= 3 && c.num_inputs() <= max_in,
                 "expects 3 to " + std::to_string(max_in) + " inputs");
  ORTMLX_REQUIRE(c.num_outputs() <= max_out,
                 "expects at most " + std::to_string(max_out) + " outputs");
  auto r = refuse_unknown_attrs(
      c, {"activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size",
          "layout", "linear_before_reset", "input_forget"});
  if (!r.ok) return r;
  ORTMLX_REQUIRE(cell == Cell::kGru || !n.has_attr("linear_before_reset"),
                 "linear_before_reset is a GRU attribute");
  ORTMLX_REQUIRE(cell == Cell::kLstm || !n.has_attr("input_forget"),
                 "input_forget is an LSTM attribute");
  ORTMLX_REQUIRE(n.since_version >= 14 || !n.has_attr("layout"), "layout needs opset 14");
  std::string why;
  const auto spec = parse_spec(n, cell, &why);
  if (!spec) return ClaimResult::no(why);
  // ORT's CPU kernels run float32 only (double is declared but not implemented).
  for (size_t i = 0; i < c.num_inputs(); ++i) {
    if (!c.has_input(i)) continue;
    const ElemType want = i == 4 ? ElemType::kInt32 : ElemType::kFloat;
    ORTMLX_REQUIRE(c.input_type(i) == want, "input " + std::to_string(i) + " must be " +
                                                type_str(want) + ", not " +
                                                type_str(c.input_type(i)));
  }
  for (size_t i = 0; i < c.num_outputs(); ++i)
    ORTMLX_REQUIRE(n.outputs[i].empty() || c.output_type(i) == ElemType::kUndefined ||
                       c.output_type(i) == ElemType::kFloat,
                   "outputs must be float32");
  ORTMLX_REQUIRE(c.input_rank(0) == 3, "X must be 3-D");
  const TensorInfo* x = c.input(0);
  const int64_t steps = x->shape[spec->batch_major ? 1 : 0];
  ORTMLX_REQUIRE(steps != 0, "X has no time steps");
  ORTMLX_REQUIRE(steps <= kMaxUnrolledSteps, "sequence length " + std::to_string(steps) +
                                                 " exceeds the unrolled limit " +
                                                 std::to_string(kMaxUnrolledSteps));
  return ClaimResult::yes();
}

// ---------------------------------------------------------------- translation

mx::array scalar(float v) {
  return mx::array(v);
}

mx::array activate(const mx::array& x, const ActSpec& a, mx::StreamOrDevice s) {
  const mx::array zero = scalar(0.0f), one = scalar(1.0f);
  switch (a.kind) {
    case Act::kSigmoid:
      return mx::sigmoid(x, s);
    case Act::kTanh:
      return mx::tanh(x, s);
    case Act::kRelu:
      return mx::maximum(x, zero, s);
    case Act::kAffine:
      return mx::add(mx::multiply(x, scalar(a.alpha), s), scalar(a.beta), s);
    case Act::kLeakyRelu:
      return mx::where(mx::greater_equal(x, zero, s), x, mx::multiply(x, scalar(a.alpha), s), s);
    case Act::kThresholdedRelu:
      return mx::where(mx::greater(x, scalar(a.alpha), s), x, zero, s);
    case Act::kScaledTanh:
      return mx::multiply(mx::tanh(mx::multiply(x, scalar(a.beta), s), s), scalar(a.alpha), s);
    case Act::kHardSigmoid:
      return mx::minimum(
          mx::maximum(mx::add(mx::multiply(x, scalar(a.alpha), s), scalar(a.beta), s), zero, s),
          one, s);
    case Act::kElu:
      return mx::where(mx::greater_equal(x, zero, s), x,
                       mx::multiply(mx::subtract(mx::exp(x, s), one, s), scalar(a.alpha), s), s);
    case Act::kSoftsign:
      return mx::divide(x, mx::add(mx::abs(x, s), one, s), s);
    case Act::kSoftplus:
      // ORT computes log(1 + exp(x)) as written (Inf past exp's range, x > 88.72): so does
      // this, with an exp that keeps that range on MLX's CPU backend too.
      return mx::log(mx::add(ops::exp_full_range(x, s), one, s), s);
  }
  throw std::runtime_error("unknown activation");
}

void check_shape(const mx::array& a, const mx::Shape& want, const char* what) {
  if (a.shape() == want) return;
  auto str = [](const mx::Shape& sh) {
    std::string out = "[";
    for (size_t i = 0; i < sh.size(); ++i) out += (i ? ", " : "") + std::to_string(sh[i]);
    return out + "]";
  };
  throw std::runtime_error(std::string(what) + " has shape " + str(a.shape()) + ", expected " +
                           str(want));
}

std::optional<mx::array> optional_input(TranslationContext& ctx, const NodeDesc& n, size_t i) {
  if (i >= n.inputs.size() || n.inputs[i].empty()) return std::nullopt;
  return ctx.input(n, i);
}

bool wants_output(const NodeDesc& n, size_t i) {
  return i < n.outputs.size() && !n.outputs[i].empty();
}

// Columns [g * h, (g + count) * h) of the last axis.
mx::array gate_cols(const mx::array& a, int g, int count, int h, mx::StreamOrDevice s) {
  mx::Shape start(a.ndim(), 0), stop = a.shape();
  start.back() = g * h;
  stop.back() = (g + count) * h;
  return mx::slice(a, start, stop, s);
}

// acc + a·b as one GEMM with acc as its accumulator (C, beta 1): one primitive per step instead
// of a matmul and an add (MLX's GPU backends pay per primitive). OpenBLAS on MLX's CPU backend.
mx::array add_product(const mx::array& acc, const mx::array& a, const mx::array& b,
                      mx::StreamOrDevice s) {
  if (use_blas_matmul(s, mx::float32)) return blas_matmul(a, b, s, 1.f, acc, 1.f);
  return mx::addmm(acc, a, b, 1.f, 1.f, s);
}

struct DirectionResult {
  std::vector<mx::array> ys;  // per time index (not step order)
  mx::array h_last;
  mx::array c_last;
  std::optional<mx::array> y_all;  // (T, B, H) at once, from the CUDA kernel (ys then unused)
};

// The activations the recurrence kernel computes: sigmoid gates, tanh cell/candidate and output.
bool default_activations(Cell cell, const ActSpec* act) {
  return act[0].kind == Act::kSigmoid && act[1].kind == Act::kTanh &&
         (cell != Cell::kLstm || act[2].kind == Act::kTanh);
}

void translate_recurrent(TranslationContext& ctx, const NodeDesc& n, Cell cell) {
  const auto s = ctx.stream();
  std::string why;
  const auto spec = parse_spec(n, cell, &why);
  if (!spec) throw std::runtime_error(why);
  const int G = gate_count(cell);
  const int H = checked_int(spec->hidden, "hidden_size");
  const int ND = spec->directions;

  mx::array x = ctx.input(n, 0);
  if (x.ndim() != 3) throw std::runtime_error("X must be 3-D");
  if (spec->batch_major) x = mx::transpose(x, {1, 0, 2}, s);
  const int T = x.shape(0), B = x.shape(1), I = x.shape(2);
  if (T == 0) throw std::runtime_error("X has no time steps");
  const int GH = checked_int(checked_mul(G, H, "gate width"), "gate width");

  mx::array W = ctx.input(n, 1), R = ctx.input(n, 2);
  check_shape(W, {ND, GH, I}, "W");
  check_shape(R, {ND, GH, H}, "R");
  auto bias = optional_input(ctx, n, 3);
  if (bias) check_shape(*bias, {ND, 2 * GH}, "B");
  auto lens = optional_input(ctx, n, 4);
  if (lens) check_shape(*lens, {B}, "sequence_lens");
  // Initial states are (ND, B, H), batch-first (B, ND, H) under layout 1.
  const mx::Shape state_shape = spec->batch_major ? mx::Shape{B, ND, H} : mx::Shape{ND, B, H};
  auto init_h = optional_input(ctx, n, 5);
  if (init_h) check_shape(*init_h, state_shape, "initial_h");
  auto init_c = cell == Cell::kLstm ? optional_input(ctx, n, 6) : std::nullopt;
  if (init_c) check_shape(*init_c, state_shape, "initial_c");
  if (spec->batch_major) {
    if (init_h) init_h = mx::transpose(*init_h, {1, 0, 2}, s);
    if (init_c) init_c = mx::transpose(*init_c, {1, 0, 2}, s);
  }
  auto peep = cell == Cell::kLstm ? optional_input(ctx, n, 7) : std::nullopt;
  if (peep) check_shape(*peep, {ND, 3 * H}, "P");

  // Per-row masks: step t of row b is live when t < length. ORT rejects lengths outside
  // [0, T]; the masks themselves stay memory-safe whatever the values.
  std::optional<mx::array> lens2;       // (B, 1) int32
  std::optional<mx::array> live_steps;  // (T, B, 1): step t of row b is live
  if (lens) {
    ctx.require(n,
                mx::logical_and(mx::greater_equal(*lens, mx::array(0), s),
                                mx::less_equal(*lens, mx::array(T), s), s),
                "sequence_lens values must be within [0, " + std::to_string(T) + "]");
    lens2 = mx::reshape(*lens, {B, 1}, s);
    // Every step's mask at once, sliced per step below: a literal step index would be inlined
    // into the kernels MLX fuses around it, giving each step kernels of its own to compile.
    live_steps = mx::less(mx::reshape(mx::arange(0, T, mx::int32, s), {T, 1, 1}, s), *lens2, s);
  }
  const mx::array zeros_bh = mx::zeros({B, H}, mx::float32, s);

  // X·W^T for all steps and directions in one matmul: (T*B, I) x (I, ND*GH).
  mx::array xw = matmul_any(mx::reshape(x, {T * B, I}, s),
                            mx::transpose(mx::reshape(W, {ND * GH, I}, s), {1, 0}, s), s);
  xw = mx::reshape(xw, {T, B, ND * GH}, s);

  std::vector<DirectionResult> results;
  for (int d = 0; d < ND; ++d) {
    const bool reverse = spec->reverse_only || d == 1;
    const ActSpec* act = &spec->acts[static_cast<size_t>(d) * acts_per_direction(cell)];
    mx::array xw_d = gate_cols(xw, d * G, G, H, s);  // (T, B, GH)
    mx::array r_t = mx::transpose(mx::squeeze(mx::slice(R, {d, 0, 0}, {d + 1, GH, H}, s), 0, s),
                                  {1, 0}, s);  // (H, GH)
    // GRU's recurrent weights of z and r, and of h (each (H, .)), sliced once per direction.
    const mx::array r_zr = cell == Cell::kGru ? gate_cols(r_t, 0, 2, H, s) : r_t;
    const mx::array r_h = cell == Cell::kGru ? gate_cols(r_t, 2, 1, H, s) : r_t;
    std::optional<mx::array> wb, rb;  // (GH) each
    if (bias) {
      mx::array bd = mx::squeeze(mx::slice(*bias, {d, 0}, {d + 1, 2 * GH}, s), 0, s);
      wb = mx::slice(bd, {0}, {GH}, s);
      rb = mx::slice(bd, {GH}, {2 * GH}, s);
    }
    // The input-side bias is folded into X·W^T; GRU's recurrent h bias stays apart when it sits
    // inside the reset product (linear_before_reset).
    std::optional<mx::array> rb_h;
    if (bias) {
      mx::array folded = mx::add(*wb, *rb, s);
      if (cell == Cell::kGru && spec->linear_before_reset) {
        folded = mx::concatenate(
            {mx::slice(folded, {0}, {2 * H}, s), mx::slice(*wb, {2 * H}, {3 * H}, s)}, 0, s);
        rb_h = mx::slice(*rb, {2 * H}, {3 * H}, s);
      }
      xw_d = mx::add(xw_d, folded, s);
    }
    // GRU/LSTM always clamp (to FLT_MAX without a clip attribute, so an overflowing gate input
    // becomes FLT_MAX, not Inf), and with a bias input their clamp turns NaN into +bound.
    const std::optional<float> bound =
        cell == Cell::kRnn ? spec->clip : spec->clip.value_or(std::numeric_limits<float>::max());
    const bool nan_to_bound = cell != Cell::kRnn && bias.has_value();
    auto clip = [&](const mx::array& a) {
      if (!bound) return a;
      mx::array out = mx::clip(a, scalar(-*bound), scalar(*bound), s);
      return nan_to_bound ? mx::where(mx::isnan(a, s), scalar(*bound), out, s) : out;
    };
    std::optional<mx::array> p_i, p_o, p_f;
    if (peep) {
      mx::array pd = mx::squeeze(mx::slice(*peep, {d, 0}, {d + 1, 3 * H}, s), 0, s);
      p_i = mx::slice(pd, {0}, {H}, s);
      p_o = mx::slice(pd, {H}, {2 * H}, s);
      p_f = mx::slice(pd, {2 * H}, {3 * H}, s);
    }

    // Step t's gate inputs: rows [t * B, (t + 1) * B) of the (T * B, GH) inputs, one slice (one
    // primitive) per step; not one mx::split into T outputs: MLX handles a primitive's sibling
    // outputs in loops over all of them, so a T-way split costs T^2 in the graph walks of every
    // trace and run.
    const mx::array xw_rows = mx::reshape(xw_d, {T * B, GH}, s);
    auto step_gates = [&](int t) { return mx::slice(xw_rows, {t * B, 0}, {(t + 1) * B, GH}, s); };
    mx::array h =
        init_h ? mx::squeeze(mx::slice(*init_h, {d, 0, 0}, {d + 1, B, H}, s), 0, s) : zeros_bh;
    mx::array c =
        init_c ? mx::squeeze(mx::slice(*init_c, {d, 0, 0}, {d + 1, B, H}, s), 0, s) : zeros_bh;
    // The whole time loop as one CUDA kernel where it applies (opt-in; recurrent/cuda/).
    if (cell != Cell::kRnn && B > 0 && !peep && !lens2 && !spec->input_forget &&
        default_activations(cell, act) && cuda_recurrence_usable(H, GH, s)) {
      RecurrenceInputs in{
          cell == Cell::kGru, reverse, spec->linear_before_reset, xw_d, r_t, h, c, rb_h, *bound,
          nan_to_bound};
      RecurrenceOutputs out = cuda_recurrence(in, s);
      results.push_back({{}, out.h_last, cell == Cell::kLstm ? out.c_last : c, out.y});
      ctx.mark_fast(n, cell == Cell::kGru ? "GRU time loop -> one CUDA kernel"
                                          : "LSTM time loop -> one CUDA kernel");
      continue;
    }
    DirectionResult res{std::vector<mx::array>(static_cast<size_t>(T), zeros_bh), h, c,
                        std::nullopt};
    for (int k = 0; k < T; ++k) {
      const int t = reverse ? T - 1 - k : k;
      mx::array g = step_gates(t);  // (B, GH)
      mx::array h_new = zeros_bh, c_new = c;
      if (cell == Cell::kRnn) {
        h_new = activate(clip(add_product(g, h, r_t, s)), act[0], s);
      } else if (cell == Cell::kGru) {
        // z and r: one product, one clip of both gates (elementwise: the same values).
        mx::array zr = clip(add_product(gate_cols(g, 0, 2, H, s), h, r_zr, s));
        mx::array z = activate(gate_cols(zr, 0, 1, H, s), act[0], s);
        mx::array rg = activate(gate_cols(zr, 1, 1, H, s), act[0], s);
        mx::array pre = gate_cols(g, 2, 1, H, s);
        if (spec->linear_before_reset) {
          mx::array lin = rb_h ? add_product(*rb_h, h, r_h, s) : matmul_any(h, r_h, s);
          pre = mx::add(pre, mx::multiply(rg, lin, s), s);
        } else {
          pre = add_product(pre, mx::multiply(rg, h, s), r_h, s);
        }
        mx::array hh = activate(clip(pre), act[1], s);
        // (1 - z) * hh + z * h, in ORT's order.
        h_new = mx::add(mx::multiply(mx::subtract(scalar(1.0f), z, s), hh, s),
                        mx::multiply(z, h, s), s);
      } else {
        mx::array gates = add_product(g, h, r_t, s);  // i, o, f, c
        // Without peepholes every gate is clipped as it is: one clip of all four.
        if (!peep) gates = clip(gates);
        auto gate_clip = [&](const mx::array& a) { return peep ? clip(a) : a; };
        mx::array pi = gate_cols(gates, 0, 1, H, s);
        if (p_i) pi = mx::add(pi, mx::multiply(c, *p_i, s), s);
        mx::array ig = activate(gate_clip(pi), act[0], s);
        mx::array fg = mx::subtract(scalar(1.0f), ig, s);
        if (!spec->input_forget) {
          mx::array pf = gate_cols(gates, 2, 1, H, s);
          if (p_f) pf = mx::add(pf, mx::multiply(c, *p_f, s), s);
          fg = activate(gate_clip(pf), act[0], s);
        }
        mx::array cg = activate(gate_clip(gate_cols(gates, 3, 1, H, s)), act[1], s);
        c_new = mx::add(mx::multiply(c, fg, s), mx::multiply(ig, cg, s), s);
        mx::array po = gate_cols(gates, 1, 1, H, s);
        if (p_o) po = mx::add(po, mx::multiply(c_new, *p_o, s), s);
        mx::array og = activate(gate_clip(po), act[0], s);
        h_new = mx::multiply(activate(c_new, act[2], s), og, s);
      }
      if (lens2) {
        // A row past its length holds its state and outputs zeros.
        const mx::array live =
            mx::squeeze(mx::slice(*live_steps, {t, 0, 0}, {t + 1, B, 1}, s), 0, s);  // (B, 1)
        res.ys[static_cast<size_t>(t)] = mx::where(live, h_new, zeros_bh, s);
        h = mx::where(live, h_new, h, s);
        if (cell == Cell::kLstm) c = mx::where(live, c_new, c, s);
      } else {
        res.ys[static_cast<size_t>(t)] = h_new;
        h = h_new;
        c = c_new;
      }
    }
    if (lens2) {
      // ORT gives a row of length 0 zero final states.
      mx::array empty = mx::equal(*lens2, mx::array(0), s);
      h = mx::where(empty, zeros_bh, h, s);
      c = mx::where(empty, zeros_bh, c, s);
    }
    res.h_last = h;
    res.c_last = c;
    results.push_back(std::move(res));
  }

  auto finals = [&](bool cell_state) {
    std::vector<mx::array> per_dir;
    for (const auto& r : results) per_dir.push_back(cell_state ? r.c_last : r.h_last);
    mx::array out = mx::stack(per_dir, 0, s);  // (ND, B, H)
    return spec->batch_major ? mx::transpose(out, {1, 0, 2}, s) : out;
  };
  if (wants_output(n, 0)) {
    std::vector<mx::array> per_dir;
    for (const auto& r : results)
      per_dir.push_back(r.y_all ? *r.y_all : mx::stack(r.ys, 0, s));  // (T, B, H)
    mx::array y = mx::stack(per_dir, 1, s);                           // (T, ND, B, H)
    if (spec->batch_major) y = mx::transpose(y, {2, 0, 1, 3}, s);
    ctx.bind_output(n, 0, y);
  }
  if (wants_output(n, 1)) ctx.bind_output(n, 1, finals(false));
  if (cell == Cell::kLstm && wants_output(n, 2)) ctx.bind_output(n, 2, finals(true));
}

}  // namespace

void register_recurrent_ops(OpRegistry& r) {
  const std::pair<const char*, Cell> ops[] = {
      {"RNN", Cell::kRnn}, {"GRU", Cell::kGru}, {"LSTM", Cell::kLstm}};
  for (const auto& [name, cell] : ops) {
    const Cell k = cell;
    r.add(
        "", name, 7, 1 << 30, [k](const ClaimContext& c) { return claim_recurrent(c, k); },
        [k](TranslationContext& ctx, const NodeDesc& n) { translate_recurrent(ctx, n, k); });
  }
}

}  // namespace ortmlx
