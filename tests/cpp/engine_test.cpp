// Engine tests: compiled vs eager execution, the shape-keyed LRU and MLX's compile cache, eager
// fallback, path-mark replay, the MLX thread, options, the trace sink and the session report.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <mlx/compile.h>
#include <mlx/compile_impl.h>
#include <mlx/ops.h>
#include <mlx/random.h>
#include <mlx/transforms.h>

#include "ortmlx/diagnostics/report.h"
#include "ortmlx/diagnostics/trace.h"
#include "ortmlx/engine/compile_cache.h"
#include "ortmlx/engine/executor.h"
#include "ortmlx/engine/mlx_thread.h"
#include "ortmlx/engine/options.h"
#include "ortmlx/engine/plan.h"

namespace ortmlx {
namespace {

namespace mx = mlx::core;

TensorInfo f32(std::vector<int64_t> shape) {
  TensorInfo t;
  t.dtype = ElemType::kFloat;
  t.has_shape = true;
  t.shape = std::move(shape);
  return t;
}

// A small graph builder: nodes of the global registry plus custom test ops.
struct GraphBuilder {
  GraphView g;
  void input(const std::string& name, TensorInfo info) {
    g.graph_inputs.push_back(name);
    g.value_infos[name] = std::move(info);
  }
  void constant(const std::string& name, std::vector<float> values, std::vector<int64_t> shape) {
    auto t = std::make_shared<ConstTensor>();
    t->dtype = ElemType::kFloat;
    t->shape = shape;
    t->bytes.resize(values.size() * sizeof(float));
    std::memcpy(t->bytes.data(), values.data(), t->bytes.size());
    g.constants[name] = t;
    g.constant_names[name] = f32(shape);
    g.value_infos[name] = f32(shape);
  }
  void node(const std::string& op, std::vector<std::string> in, std::vector<std::string> out,
            const std::string& domain = "") {
    NodeView n;
    n.index = g.nodes.size();
    n.name = op + std::to_string(n.index);
    n.op_type = op;
    n.domain = domain;
    n.since_version = 21;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    for (const auto& o : n.outputs) g.value_infos[o] = f32({-1, -1});
    g.nodes.push_back(std::move(n));
  }
};

// x[n,8] * w -> Tanh -> Exp -> Add x -> Sigmoid -> y  (elementwise-heavy, one constant)
std::shared_ptr<Plan> chain_plan(const OpRegistry& reg = OpRegistry::global()) {
  GraphBuilder b;
  b.input("x", f32({-1, 8}));
  b.constant("w", {0.5f, -1.f, 2.f, 0.25f, 1.5f, -0.75f, 1.f, 0.1f}, {8});
  b.node("Mul", {"x", "w"}, {"a"});
  b.node("Tanh", {"a"}, {"b"});
  b.node("Exp", {"b"}, {"c"});
  b.node("Add", {"c", "x"}, {"d"});
  b.node("Sigmoid", {"d"}, {"y"});
  return build_plan(b.g, "chain", {"x"}, {"y"}, reg);
}

mx::array random_input(int rows, int cols = 8, uint64_t seed = 1) {
  auto a = mx::random::normal({rows, cols}, mx::float32, 0.0, 1.0, mx::random::key(seed));
  mx::eval(a);
  return a;
}

std::vector<float> values(const mx::array& a) {
  std::vector<float> v(a.size());
  std::memcpy(v.data(), a.data<float>(), a.nbytes());
  return v;
}

// Runs `f` on the MLX thread, as the plugin does.
template <typename F>
auto on_mlx(F&& f) {
  return MlxThread::get().run(std::forward<F>(f));
}

TEST(Engine, CompiledMatchesEager) {
  on_mlx([] {
    auto plan = chain_plan();
    Executor compiled(plan, {true, 4});
    Executor eager(plan, {false, 4});
    for (int rows : {1, 3, 17}) {
      auto x = random_input(rows, 8, static_cast<uint64_t>(rows));
      RunResult c = compiled.run({x});
      RunResult e = eager.run({x});
      ASSERT_TRUE(c.stats.compiled);
      ASSERT_FALSE(e.stats.compiled);
      EXPECT_EQ(e.stats.cache, CacheOutcome::kNone);
      auto cv = values(c.outputs[0]);
      auto ev = values(e.outputs[0]);
      ASSERT_EQ(cv.size(), ev.size());
      for (size_t i = 0; i < cv.size(); ++i) EXPECT_NEAR(cv[i], ev[i], 1e-6f * (1 + std::abs(ev[i])));
    }
  });
}

TEST(Engine, SameShapeHitsNewShapeMisses) {
  on_mlx([] {
    Executor ex(chain_plan(), {true, 16});
    auto x1 = random_input(2);
    auto x2 = random_input(5);
    EXPECT_EQ(ex.run({x1}).stats.cache, CacheOutcome::kMiss);
    EXPECT_EQ(ex.run({x1}).stats.cache, CacheOutcome::kHit);
    EXPECT_EQ(ex.run({random_input(2, 8, 9)}).stats.cache, CacheOutcome::kHit);
    EXPECT_EQ(ex.run({x2}).stats.cache, CacheOutcome::kMiss);
    EXPECT_EQ(ex.run({x1}).stats.cache, CacheOutcome::kHit);
    EXPECT_EQ(ex.run({x2}).stats.cache, CacheOutcome::kHit);
    EXPECT_EQ(ex.cache().size(), 2u);
  });
}

TEST(Engine, LruStaysWithinBound) {
  on_mlx([] {
    Executor ex(chain_plan(), {true, 2});
    std::vector<CacheOutcome> got;
    for (int rows : {1, 2, 1, 3, 4, 1, 4}) {
      RunResult r = ex.run({random_input(rows)});
      got.push_back(r.stats.cache);
      EXPECT_LE(ex.cache().size(), 2u);
    }
    using C = CacheOutcome;
    // 1 miss, 2 miss, 1 hit, 3 miss (evicts 2), 4 miss (evicts 1), 1 miss (evicts 3), 4 hit
    EXPECT_EQ(got, (std::vector<C>{C::kMiss, C::kMiss, C::kHit, C::kMiss, C::kMiss, C::kMiss,
                                   C::kHit}));
    EXPECT_EQ(ex.cache().evictions(), 3u);
  });
}

// ORT's input buffers become MLX arrays through the raw-pointer constructor; the first compiled
// call on a fresh thread used to miss MLX's cache once more (the default stream did not exist
// when the entry was made). The MLX thread creates its stream first: no RETRACE.
TEST(Engine, RawPointerInputsHitTheCache) {
  on_mlx([] {
    Executor ex(chain_plan(), {true, 2});
    std::vector<float> buf(16);
    for (size_t i = 0; i < buf.size(); ++i) buf[i] = 0.1f * static_cast<float>(i) - 0.7f;
    auto raw = [&](int rows) {
      return mx::array(buf.data(), {rows, 8}, mx::float32, [](void*) {});
    };
    std::vector<CacheOutcome> got;
    for (int rows : {1, 2, 1, 1}) got.push_back(ex.run({raw(rows)}).stats.cache);
    using C = CacheOutcome;
    EXPECT_EQ(got, (std::vector<C>{C::kMiss, C::kMiss, C::kHit, C::kHit}));
  });
}

}  // namespace
}  // namespace ortmlx
