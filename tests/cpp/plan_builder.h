// Helpers of the engine's C++ tests that build plans by hand: a graph builder (inputs, constants,
// nodes that may hold subgraphs), tensor infos, reading float results, running on the MLX thread.
#pragma once

#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <mlx/array.h>

#include "ortmlx/engine/mlx_thread.h"
#include "ortmlx/engine/plan.h"

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

}  // namespace ortmlx::testing
