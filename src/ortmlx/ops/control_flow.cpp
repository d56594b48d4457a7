// Control flow: If, Loop, Scan, claimed whole with their bodies.
//
// A body is a plan of its own (NodeDesc::bodies), translated into the enclosing MLX graph by
// translate_body: values it reads from enclosing graphs resolve in the enclosing scope. What the
// control decisions need on the host decides between compiled and eager evaluation:
// - If: a constant condition, or one derived from shapes only (not an MLX tracer while the plan
//   is traced for mlx::compile), picks its branch at trace time; the compiled function holds the
//   taken branch only. A runtime condition with small branches of the same output shapes
//   (selectable_if) translates both and selects each output on the device; otherwise it throws
//   NotCompilable: the plan runs eagerly, the condition is evaluated, then one branch is
//   translated.
// - Loop: a trip count and conditions known at trace time unroll into the graph (up to
//   kMaxUnroll iterations). A runtime condition with a trip count known at trace time unrolls on
//   the iteration count of the node's latest eager run, each condition checked on the device (a
//   run that ends elsewhere is redone eagerly: engine/executor.h, "Speculation"). Otherwise eager,
//   evaluated one iteration at a time (the condition of the next iteration is read on the host;
//   carried values are evaluated so the graph stays one iteration deep). Loop-carried values may
//   change shape from one iteration to the next.
// - Scan: the sequence length is a static dimension, so Scan always unrolls.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdlib>
#include <limits>

#include <mlx/transforms.h>

#include "ortmlx/ops/common.h"
#include "ortmlx/ops/ops.h"

namespace ortmlx {
namespace {

using namespace ortmlx::ops;

// Past this many iterations a compiled trace would be larger than the eager loop is slow.
constexpr int64_t kMaxUnroll = 256;

std::string shape_str(const mx::Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

// ---- claims --------------------------------------------------------------------------------

// Every value crossing the body boundary is a tensor MLX holds; every node is claimed.
ClaimResult claim_body(const NodeView& node, const char* attr) {
  auto it = node.subgraphs.find(attr);
  ORTMLX_REQUIRE(it != node.subgraphs.end() && it->second,
                 std::string("subgraph '") + attr + "' is missing");
  const GraphView& body = *it->second;
  for (const auto* names : {&body.graph_inputs, &body.graph_outputs})
    for (const auto& name : *names) {
      const TensorInfo* info = body.info(name);
      const ElemType t = info ? info->dtype : ElemType::kUndefined;
      ORTMLX_REQUIRE(t != ElemType::kUndefined,
                     std::string(attr) + " value '" + name +
                         "' is not a tensor of known type (sequences and optionals are not run)");
      ORTMLX_REQUIRE(mlx_supports(t), std::string(attr) + " value '" + name + "' has type " +
                                          type_str(t) + ", which MLX does not hold");
    }
  const OpRegistry& registry = OpRegistry::global();
  for (const NodeView& inner : body.nodes) {
    // ORT partitions bodies first: a body the EP could not take whole already holds the EP's own
    // fused nodes (its refusals are listed under the body's graph).
    ORTMLX_REQUIRE(inner.domain != "MLXExecutionProvider",
                   std::string(attr) + " holds nodes the EP refused (see the body graph's claims)");
    ClaimResult r = registry.claim(body, inner);
    if (!r.ok)
      return ClaimResult::no(std::string(attr) + " node '" + inner.name + "' (" +
                             inner.qualified_op() + ") is not claimed: " + r.reason);
  }
  return ClaimResult::yes();
}

size_t body_inputs(const NodeView& n, const char* attr) {
  return n.subgraphs.at(attr)->graph_inputs.size();
}
size_t body_outputs(const NodeView& n, const char* attr) {
  return n.subgraphs.at(attr)->graph_outputs.size();
}

ClaimResult claim_if(const ClaimContext& c) {
  const NodeView& n = c.node();
  ORTMLX_REQUIRE(c.num_inputs() == 1, "expects 1 input (the condition)");
  ORTMLX_REQUIRE(c.input_type(0) == ElemType::kBool,
                 "condition type " + type_str(c.input_type(0)) + " is not bool");
  for (const char* attr : {"then_branch", "else_branch"}) {
    ClaimResult r = claim_body(n, attr);
    if (!r.ok) return r;
    ORTMLX_REQUIRE(body_inputs(n, attr) == 0, std::string(attr) + " takes inputs");
    ORTMLX_REQUIRE(body_outputs(n, attr) == c.num_outputs(),
                   std::string(attr) + " has " + std::to_string(body_outputs(n, attr)) +
                       " outputs, the If node " + std::to_string(c.num_outputs()));
  }
  return ClaimResult::yes();
}

ClaimResult claim_loop(const ClaimContext& c) {
  const NodeView& n = c.node();
  ORTMLX_REQUIRE(c.num_inputs() >= 2, "expects the trip count and condition inputs (maybe empty)");
  ORTMLX_REQUIRE(!c.has_input(0) || c.input_type(0) == ElemType::kInt64,
                 "trip count type " + type_str(c.input_type(0)) + " is not int64");
  ORTMLX_REQUIRE(!c.has_input(1) || c.input_type(1) == ElemType::kBool,
                 "condition type " + type_str(c.input_type(1)) + " is not bool");
  for (size_t i = 2; i < c.num_inputs(); ++i)
    ORTMLX_REQUIRE(c.has_input(i), "loop-carried input " + std::to_string(i) + " is absent");
  ClaimResult r = claim_body(n, "body");
  if (!r.ok) return r;
  const size_t carried = c.num_inputs() - 2;
  ORTMLX_REQUIRE(body_inputs(n, "body") == carried + 2,
                 "body takes " + std::to_string(body_inputs(n, "body")) + " inputs, expected " +
                     std::to_string(carried + 2) + " (iteration, condition, carried values)");
  ORTMLX_REQUIRE(body_outputs(n, "body") == c.num_outputs() + 1,
                 "body has " + std::to_string(body_outputs(n, "body")) + " outputs, expected " +
                     std::to_string(c.num_outputs() + 1) + " (condition, carried, scan outputs)");
  ORTMLX_REQUIRE(c.num_outputs() >= carried, "fewer outputs than loop-carried values");
  return ClaimResult::yes();
}

ClaimResult claim_scan(const ClaimContext& c) {
  const NodeView& n = c.node();
  auto r = refuse_unknown_attrs(c, {"num_scan_inputs", "scan_input_directions", "scan_input_axes",
                                    "scan_output_directions", "scan_output_axes"});
  if (!r.ok) return r;
  const int64_t m = n.attr_int("num_scan_inputs", 0);
  ORTMLX_REQUIRE(m >= 1 && static_cast<size_t>(m) <= c.num_inputs(),
                 "num_scan_inputs " + std::to_string(m) + " is not in [1, inputs]");
  const size_t states = c.num_inputs() - static_cast<size_t>(m);
  ORTMLX_REQUIRE(c.num_outputs() >= states, "fewer outputs than state variables");
  const size_t scan_outs = c.num_outputs() - states;
  for (size_t i = 0; i < c.num_inputs(); ++i)
    ORTMLX_REQUIRE(c.has_input(i), "input " + std::to_string(i) + " is absent");
  auto check_list = [&](const char* name, size_t len, bool directions) -> ClaimResult {
    auto v = n.attr_ints(name);
    if (!v) return ClaimResult::yes();
    ORTMLX_REQUIRE(v->size() == len, std::string(name) + " has " + std::to_string(v->size()) +
                                         " values, expected " + std::to_string(len));
    for (int64_t x : *v) {
      if (directions) ORTMLX_REQUIRE(x == 0 || x == 1, std::string(name) + " must be 0 or 1");
      if (!directions && n.since_version < 11)
        ORTMLX_REQUIRE(x >= 0, std::string(name) + " is negative before opset 11");
    }
    return ClaimResult::yes();
  };
  for (auto [name, len, dirs] : {std::tuple{"scan_input_directions", size_t(m), true},
                                 std::tuple{"scan_input_axes", size_t(m), false},
                                 std::tuple{"scan_output_directions", scan_outs, true},
                                 std::tuple{"scan_output_axes", scan_outs, false}}) {
    r = check_list(name, len, dirs);
    if (!r.ok) return r;
  }
  r = claim_body(n, "body");
  if (!r.ok) return r;
  ORTMLX_REQUIRE(body_inputs(n, "body") == c.num_inputs(),
                 "body takes " + std::to_string(body_inputs(n, "body")) + " inputs, the Scan " +
                     std::to_string(c.num_inputs()));
  ORTMLX_REQUIRE(body_outputs(n, "body") == c.num_outputs(),
                 "body has " + std::to_string(body_outputs(n, "body")) + " outputs, the Scan " +
                     std::to_string(c.num_outputs()));
  return ClaimResult::yes();
}

// ---- translation ---------------------------------------------------------------------------

// A one-element boolean (or integer) decided on the host. A traced value that depends on a
// fused input cannot be: the plan runs eagerly (NotCompilable).
// `v` as the boolean scalar the host will read, after the checks host_scalar_true makes.
// `v`, which must hold one element, as a boolean scalar.
mx::array scalar_bool(const mx::array& v, const char* what, mx::StreamOrDevice s = {}) {
  if (v.size() != 1)
    throw std::runtime_error(std::string(what) + " must hold one element, got shape " +
                             shape_str(v.shape()));
  return mx::astype(mx::reshape(v, {}, s), mx::bool_, s);
}

mx::array host_scalar_bool(const TranslationContext& ctx, const mx::array& v, const char* what) {
  mx::array b = scalar_bool(v, what);
  if (ctx.compiling() && v.is_tracer())
    throw NotCompilable(std::string(what) + " depends on a runtime value (read on the host)");
  return b;
}

bool host_scalar_true(const TranslationContext& ctx, const mx::array& v, const char* what) {
  mx::array b = host_scalar_bool(ctx, v, what);
  mx::eval(b);
  return b.item<bool>();
}

int64_t host_scalar_int(const TranslationContext& ctx, const mx::array& v, const char* what) {
  if (v.size() != 1)
    throw std::runtime_error(std::string(what) + " must hold one element, got shape " +
                             shape_str(v.shape()));
  if (ctx.compiling() && v.is_tracer())
    throw NotCompilable(std::string(what) + " depends on a runtime value (read on the host)");
  mx::array i = mx::astype(mx::reshape(v, {}), mx::int64);
  mx::eval(i);
  return i.item<int64_t>();
}

// Checks a body output against the static type the node declares for it.
void check_declared(const NodeDesc& n, size_t i, const mx::array& v, const char* what) {
  if (i >= n.output_infos.size()) return;
  const TensorInfo& info = n.output_infos[i];
  const ElemType got = from_mlx_dtype(v.dtype());
  if (info.dtype != ElemType::kUndefined && got != info.dtype)
    throw std::runtime_error(std::string(what) + " output " + std::to_string(i) + " has type " +
                             type_str(got) + ", the node declares " + type_str(info.dtype));
}

// The outputs of the If's branch `attr`, as many as the node has.
std::vector<mx::array> translate_branch(TranslationContext& ctx, const NodeDesc& n,
                                        const char* attr) {
  std::vector<mx::array> outs = translate_body(ctx, n.body(attr), {});
  if (outs.size() != n.outputs.size())
    throw std::runtime_error(std::string(attr) + " produced " + std::to_string(outs.size()) +
                             " outputs for " + std::to_string(n.outputs.size()));
  return outs;
}

// An If whose condition is a runtime value of a compiled trace, its branches small
// (selectable_if): both branches are translated and each output is where(condition, then, else),
// so the compiled function holds the If and no host read of the condition splits the run. Exact:
// `where` picks elements, the branch not taken adds nothing to them, and its runtime checks hold
// vacuously when it is not taken. What cannot be traced both ways (outputs that differ in shape
// or type between the branches, a branch that raises on these shapes) throws NotCompilable: the
// condition is then read on the host and one branch translated, as before.
void translate_if_both(TranslationContext& ctx, const NodeDesc& n, const mx::array& condition) {
  const mx::array taken = scalar_bool(condition, "the If condition", ctx.stream());
  std::array<std::vector<mx::array>, 2> outs;
  const std::array<const char*, 2> attrs = {"then_branch", "else_branch"};
  for (size_t b = 0; b < 2; ++b) {
    const size_t first_check = ctx.checks().size();
    try {
      outs[b] = translate_branch(ctx, n, attrs[b]);
    } catch (const NotCompilable&) {
      throw;
    } catch (const std::exception& e) {
      throw NotCompilable(std::string(attrs[b]) + " cannot be traced for both conditions (" +
                          e.what() + "): the condition is read on the host");
    }
    ctx.guard_checks(first_check, b == 0 ? taken : mx::logical_not(taken, ctx.stream()));
  }
  for (size_t i = 0; i < n.outputs.size(); ++i) {
    const mx::array &t = outs[0][i], &e = outs[1][i];
    if (t.shape() != e.shape() || t.dtype() != e.dtype())
      throw NotCompilable(
          "the branches' output " + std::to_string(i) + " differs (" + shape_str(t.shape()) + " " +
          type_str(from_mlx_dtype(t.dtype())) + " and " + shape_str(e.shape()) + " " +
          type_str(from_mlx_dtype(e.dtype())) + "): the condition is read on the host");
    check_declared(n, i, t, attrs[0]);
    check_declared(n, i, e, attrs[1]);
    ctx.bind_output(n, i, mx::where(taken, t, e, ctx.stream()));
  }
  ctx.mark_fast(n, "If: both branches, output selected on the device");
}

void translate_if(TranslationContext& ctx, const NodeDesc& n) {
  bool cond;
  if (const ConstTensor* t = ctx.constant_input(n, 0); t && t->as_int64() && t->numel() == 1) {
    cond = t->as_int64()->front() != 0;
  } else {
    const mx::array condition = ctx.input(n, 0);
    if (ctx.compiling() && condition.is_tracer() && selectable_if(n))
      return translate_if_both(ctx, n, condition);
    cond = host_scalar_true(ctx, condition, "the If condition");
  }
  const char* attr = cond ? "then_branch" : "else_branch";
  std::vector<mx::array> outs = translate_branch(ctx, n, attr);
  for (size_t i = 0; i < outs.size(); ++i) {
    check_declared(n, i, outs[i], attr);
    ctx.bind_output(n, i, outs[i]);
  }
}

// The iteration number or condition in the rank the body's formal input declares.
mx::array body_scalar(const Plan& body, size_t input, mx::array v) {
  // Formal inputs are not node inputs: their infos live on the nodes that read them; a body
  // that declares a 1-D [1] input gets that shape (as ORT's CPU EP feeds it).
  for (const auto& node : body.nodes)
    for (size_t k = 0; k < node.inputs.size(); ++k)
      if (node.inputs[k] == body.input_names[input] && node.input_infos[k].rank() == 1)
        return mx::reshape(v, {1});
  return v;
}

// One translated iteration of a Loop body, not yet evaluated.
struct LoopStep {
  std::vector<mx::array> carried;
  std::vector<mx::array> scans;
  mx::array next;  // the body's condition output, a bool scalar
};

// Iteration `it` of Loop `n` on `carried`; `number` is its iteration number as the body reads it,
// `first_scans` iteration 0's scan outputs (empty while iteration 0 is translated).
LoopStep translate_iteration(TranslationContext& ctx, const NodeDesc& n, int64_t it,
                             const mx::array& number, const std::vector<mx::array>& carried,
                             const std::vector<mx::array>& first_scans) {
  const Plan& body = n.body("body");
  // An iteration runs only while the condition holds: its condition input is true.
  std::vector<mx::array> args{body_scalar(body, 0, number), body_scalar(body, 1, mx::array(true))};
  args.insert(args.end(), carried.begin(), carried.end());
  std::vector<mx::array> outs = translate_body(ctx, body, args);
  const auto first_scan = outs.begin() + 1 + static_cast<std::ptrdiff_t>(carried.size());
  LoopStep step{{outs.begin() + 1, first_scan},
                {first_scan, outs.end()},
                scalar_bool(outs[0], "the Loop body's condition output", ctx.stream())};
  for (size_t k = 0; k < first_scans.size(); ++k) {
    const mx::array &s = step.scans[k], &f = first_scans[k];
    if (s.shape() != f.shape())
      throw std::runtime_error("scan output " + std::to_string(k) + " has shape " +
                               shape_str(s.shape()) + " in iteration " + std::to_string(it) +
                               " and " + shape_str(f.shape()) + " in iteration 0");
    if (s.dtype() != f.dtype())
      throw std::runtime_error("scan output " + std::to_string(k) + " changes type");
  }
  return step;
}

// ONNXRUNTIME_EP_MLX_LOOP_SPECULATE (read when the node is first translated): "0" keeps a Loop
// whose condition is a runtime value out of compiled traces (no unrolling on its latest count).
bool unroll_on_latest_count() {
  const char* v = std::getenv("ONNXRUNTIME_EP_MLX_LOOP_SPECULATE");
  return v == nullptr || parse_flag(v);
}

// The most iterations a compiled trace unrolls on a Loop's latest iteration count.
constexpr int64_t kMaxSpeculativeUnroll = 64;
// The report's path mark of a Loop with a runtime condition that a compiled trace unrolled.
constexpr const char* kLoopUnrolled =
    "Loop: unrolled on its latest run's iteration count, conditions checked on the device";

void translate_loop(TranslationContext& ctx, const NodeDesc& n) {
  const size_t carried_count = n.inputs.size() - 2;
  const size_t scan_count = n.outputs.size() - carried_count;
  int64_t trip = std::numeric_limits<int64_t>::max();
  if (!n.inputs[0].empty()) trip = host_scalar_int(ctx, ctx.input(n, 0), "the Loop trip count");
  bool cond = true;
  if (!n.inputs[1].empty()) cond = host_scalar_true(ctx, ctx.input(n, 1), "the Loop condition");

  std::vector<mx::array> carried;
  for (size_t i = 2; i < n.inputs.size(); ++i) carried.push_back(ctx.input(n, i));
  std::vector<std::vector<mx::array>> scans(scan_count);
  std::vector<mx::array> first_scans;
  auto take = [&](LoopStep& step) {
    if (first_scans.empty()) first_scans = step.scans;
    for (size_t k = 0; k < scan_count; ++k) scans[k].push_back(step.scans[k]);
    carried = std::move(step.carried);
  };
  int64_t it = 0;
  if (ctx.compiling()) {
    // The iteration number comes from a graph value: a literal would be inlined into the kernels
    // MLX fuses around it, giving every unrolled iteration kernels of its own to compile.
    const mx::array numbers =
        mx::arange(0, static_cast<double>(std::min(trip, kMaxUnroll)), mx::int64, ctx.stream());
    for (; it < trip && cond; ++it) {
      if (it >= kMaxUnroll)
        throw NotCompilable("the Loop runs more than " + std::to_string(kMaxUnroll) +
                            " iterations (evaluated one at a time)");
      const int i = static_cast<int>(it);
      LoopStep step = translate_iteration(
          ctx, n, it, mx::reshape(mx::slice(numbers, {i}, {i + 1}, ctx.stream()), {}, ctx.stream()),
          carried, first_scans);
      const mx::array next = step.next;
      take(step);
      if (!next.is_tracer()) {  // known at trace time (constants and shapes)
        mx::eval(next);
        cond = next.item<bool>();
        continue;
      }
      // A runtime condition: unrolled on the iteration count of the latest eager run, each
      // condition checked on the device (the run is redone eagerly where one differs).
      const Plan::LoopHistory* seen = nullptr;
      if (auto h = ctx.plan().loop_history.find(&n); h != ctx.plan().loop_history.end())
        seen = &h->second;
      if (!ctx.unrolls_loops_on_history())
        throw NotCompilable(
            "the Loop body's condition output depends on a runtime value (read on the host; "
            "unrolling on the latest iteration count missed too often)");
      if (seen == nullptr || !seen->observed)
        throw NotCompilableYet(
            "the Loop body's condition output depends on a runtime value: an eager run counts "
            "the iterations a compiled trace then unrolls");
      if (!seen->unroll)
        throw NotCompilable(
            "the Loop body's condition output depends on a runtime value (read on the host; "
            "ONNXRUNTIME_EP_MLX_LOOP_SPECULATE=0)");
      if (seen->iterations > kMaxSpeculativeUnroll)
        throw NotCompilable("the Loop's latest run took " + std::to_string(seen->iterations) +
                            " iterations, more than a trace unrolls on a runtime condition (" +
                            std::to_string(kMaxSpeculativeUnroll) + ")");
      if (it + 1 < seen->iterations) {
        ctx.speculate(n, next, "iteration " + std::to_string(it) + " continues the Loop");
      } else {
        if (it + 1 < trip)
          ctx.speculate(n, mx::logical_not(next, ctx.stream()),
                        "iteration " + std::to_string(it) + " ends the Loop");
        cond = false;
        ctx.mark_fast(n, kLoopUnrolled);
      }
    }
  } else {
    // Eager: one iteration at a time, the condition read on the host after each; what the next
    // iteration builds on is evaluated with it, one evaluation (a host synchronisation on a GPU)
    // instead of two, so the graph stays one iteration deep. The count is recorded for the
    // compiled traces that unroll on it (above).
    auto [entry, first_run] = ctx.plan().loop_history.try_emplace(&n);
    Plan::LoopHistory& history = entry->second;
    if (first_run) history.unroll = unroll_on_latest_count();
    for (; it < trip && cond; ++it) {
      LoopStep step = translate_iteration(ctx, n, it, mx::array(it), carried, first_scans);
      const mx::array next = step.next;
      std::vector<mx::array> live(step.carried);
      live.insert(live.end(), step.scans.begin(), step.scans.end());
      live.push_back(next);
      mx::eval(live);
      cond = next.item<bool>();
      take(step);
    }
    history.iterations = it;
    history.observed = true;
  }
  for (size_t i = 0; i < carried_count; ++i) {
    check_declared(n, i, carried[i], "the Loop");
    ctx.bind_output(n, i, carried[i]);
  }
  for (size_t k = 0; k < scan_count; ++k) {
    const size_t out = carried_count + k;
    if (!scans[k].empty()) {
      ctx.bind_output(n, out, mx::stack(scans[k], 0, ctx.stream()));
      continue;
    }
    // No iteration: an empty tensor, its per-iteration dims as far as they are known statically
    // (unknown ones 0).
    const TensorInfo& info = n.output_infos[out];
    auto dtype = to_mlx_dtype(info.dtype);
    if (!dtype) throw std::runtime_error("scan output " + std::to_string(k) + " has no type");
    mx::Shape shape{0};
    for (size_t d = 1; info.has_shape && d < info.shape.size(); ++d)
      shape.push_back(info.shape[d] < 0 ? 0 : checked_int(info.shape[d], "scan output dim"));
    ctx.bind_output(n, out, ctx.zeros(shape, *dtype));
  }
}

void translate_scan(TranslationContext& ctx, const NodeDesc& n) {
  const Plan& body = n.body("body");
  const size_t m = static_cast<size_t>(n.attr_int("num_scan_inputs", 0));
  const size_t states_count = n.inputs.size() - m;
  const size_t scan_count = n.outputs.size() - states_count;
  auto list = [&](const char* name, size_t len) {
    auto v = n.attr_ints(name);
    return v ? *v : std::vector<int64_t>(len, 0);
  };
  const auto in_dirs = list("scan_input_directions", m);
  const auto in_axes = list("scan_input_axes", m);
  const auto out_dirs = list("scan_output_directions", scan_count);
  const auto out_axes = list("scan_output_axes", scan_count);

  std::vector<mx::array> states, xs;
  for (size_t i = 0; i < states_count; ++i) states.push_back(ctx.input(n, i));
  std::vector<int> axes;
  int seq_len = -1;
  for (size_t j = 0; j < m; ++j) {
    mx::array x = ctx.input(n, states_count + j);
    const int axis = normalize_axis(in_axes[j], static_cast<int>(x.ndim()));
    if (seq_len >= 0 && x.shape(axis) != seq_len)
      throw std::runtime_error("scan input " + std::to_string(j) + " has sequence length " +
                               std::to_string(x.shape(axis)) + ", scan input 0 " +
                               std::to_string(seq_len));
    seq_len = x.shape(axis);
    xs.push_back(x);
    axes.push_back(axis);
  }
  if (seq_len == 0) throw std::runtime_error("the scan inputs have sequence length 0");

  std::vector<std::vector<mx::array>> scans(scan_count);
  for (int t = 0; t < seq_len; ++t) {
    std::vector<mx::array> args(states);
    for (size_t j = 0; j < m; ++j) {
      const int at = in_dirs[j] ? seq_len - 1 - t : t;
      args.push_back(mx::take(xs[j], at, axes[j], ctx.stream()));
    }
    std::vector<mx::array> outs = translate_body(ctx, body, args);
    for (size_t i = 0; i < states_count; ++i) {
      if (outs[i].shape() != states[i].shape())
        throw std::runtime_error("state variable " + std::to_string(i) + " changes shape from " +
                                 shape_str(states[i].shape()) + " to " +
                                 shape_str(outs[i].shape()));
      states[i] = outs[i];
    }
    for (size_t k = 0; k < scan_count; ++k) {
      const mx::array& s = outs[states_count + k];
      if (!scans[k].empty() && s.shape() != scans[k].front().shape())
        throw std::runtime_error("scan output " + std::to_string(k) + " has shape " +
                                 shape_str(s.shape()) + " at step " + std::to_string(t) + " and " +
                                 shape_str(scans[k].front().shape()) + " at step 0");
      scans[k].push_back(s);
    }
  }
  for (size_t i = 0; i < states_count; ++i) {
    check_declared(n, i, states[i], "the Scan");
    ctx.bind_output(n, i, states[i]);
  }
  for (size_t k = 0; k < scan_count; ++k) {
    auto& seq = scans[k];
    if (out_dirs[k]) std::reverse(seq.begin(), seq.end());
    const int axis = normalize_axis(out_axes[k], static_cast<int>(seq.front().ndim()) + 1);
    ctx.bind_output(n, states_count + k, mx::stack(seq, axis, ctx.stream()));
  }
}

}  // namespace

void register_control_flow_ops(OpRegistry& r) {
  r.add("", "If", 1, 1 << 30, claim_if, translate_if);
  r.add("", "Loop", 1, 1 << 30, claim_loop, translate_loop);
  // Scan-8 has a batch axis and sequence lengths: not run.
  r.add("", "Scan", 9, 1 << 30, claim_scan, translate_scan);
}

}  // namespace ortmlx
