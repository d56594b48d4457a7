// Helpers of the engine's C++ tests that build plans by hand: a graph builder (inputs, constants,
// nodes that may hold subgraphs), tensor infos, reading float results, running on the MLX thread,
// a Loop plan, and test ops.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <mlx/array.h>

#include "ortmlx/engine/mlx_thread.h"
#include "ortmlx/engine/plan.h"
#include "ortmlx/registry/registry.h"

namespace ortmlx::testing {

namespace mx = mlx::core;

inline TensorInfo info(ElemType t, std::vector<int64_t> shape) {
  TensorInfo i;
  i.dtype = t;
  i.has_shape = true;
  i.shape = std::move(shape);
  return i;
}

struct Builder {
  GraphView g;
  void input(const std::string& name, TensorInfo i) {
    g.graph_inputs.push_back(name);
    g.value_infos[name] = std::move(i);
  }
  void constant(const std::string& name, ElemType t, const void* data, size_t bytes,
                std::vector<int64_t> shape) {
    auto c = std::make_shared<ConstTensor>();
    c->dtype = t;
    c->shape = shape;
    c->bytes.resize(bytes);
    std::memcpy(c->bytes.data(), data, bytes);
    g.constants[name] = c;
    g.constant_names[name] = info(t, shape);
    g.value_infos[name] = info(t, shape);
  }
  NodeView& node(const std::string& name, const std::string& op, std::vector<std::string> in,
                 std::vector<std::string> out, ElemType out_type = ElemType::kFloat) {
    NodeView n;
    n.index = g.nodes.size();
    n.name = name;
    n.op_type = op;
    n.since_version = 21;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    for (const auto& o : n.outputs) g.value_infos[o] = info(out_type, {-1});
    g.nodes.push_back(std::move(n));
    return g.nodes.back();
  }
};

template <typename F>
auto on_mlx(F&& f) {
  return MlxThread::get().run(std::forward<F>(f));
}

inline std::vector<float> values(const mx::array& a) {
  std::vector<float> v(a.size());
  std::memcpy(v.data(), a.data<float>(), a.nbytes());
  return v;
}

// Loop(M constant, no condition input): x_{i+1} = x_i * w (w from the outer scope); scan output
// x_{i+1}. The body passes its condition through, or with `until_limit` continues while
// i + 1 < limit, a third fused input (a condition computed from data).
inline std::shared_ptr<Plan> loop_plan(int64_t trip, bool until_limit = false) {
  auto body = std::make_shared<GraphView>();
  {
    Builder b;
    b.input("i", info(ElemType::kInt64, {}));
    b.input("cond_in", info(ElemType::kBool, {}));
    b.input("x_in", info(ElemType::kFloat, {2}));
    b.g.value_infos["w"] = info(ElemType::kFloat, {2});
    if (until_limit) {
      b.g.value_infos["limit"] = info(ElemType::kInt64, {});
      const int64_t one = 1;
      b.constant("one", ElemType::kInt64, &one, sizeof(one), {});
      b.node("body/next", "Add", {"i", "one"}, {"i1"}, ElemType::kInt64);
      b.node("body/less", "Less", {"i1", "limit"}, {"cond_out"}, ElemType::kBool);
    } else {
      b.node("body/id", "Identity", {"cond_in"}, {"cond_out"}, ElemType::kBool);
    }
    b.node("body/mul", "Mul", {"x_in", "w"}, {"x_out"});
    b.node("body/scan", "Identity", {"x_out"}, {"s"});
    b.g.graph_outputs = {"cond_out", "x_out", "s"};
    *body = std::move(b.g);
  }
  Builder b;
  b.input("x", info(ElemType::kFloat, {2}));
  b.input("w", info(ElemType::kFloat, {2}));
  std::vector<std::string> live{"x", "w"};
  if (until_limit) {
    b.input("limit", info(ElemType::kInt64, {}));
    live.push_back("limit");
  }
  b.constant("M", ElemType::kInt64, &trip, sizeof(trip), {});
  NodeView& n = b.node("loop", "Loop", {"M", "", "x"}, {"xf", "scan"});
  n.has_subgraphs = true;
  n.subgraphs["body"] = body;
  return build_plan(b.g, "fused_loop", live, {"xf", "scan"});
}

// A test op of domain "test" that every node claims.
inline OpEntry test_op(const std::string& op, TranslateFn translate) {
  OpEntry e;
  e.domain = "test";
  e.op_type = op;
  e.claim = [](const ClaimContext&) { return ClaimResult::yes(); };
  e.translate = std::move(translate);
  return e;
}

}  // namespace ortmlx::testing
