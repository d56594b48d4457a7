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
#include <mlx/memory.h>
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
#include "plan_builder.h"

namespace ortmlx {
namespace {

namespace mx = mlx::core;
using ortmlx::testing::test_op;

TensorInfo f32(std::vector<int64_t> shape) {
  return testing::info(ElemType::kFloat, std::move(shape));
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
      for (size_t i = 0; i < cv.size(); ++i)
        EXPECT_NEAR(cv[i], ev[i], 1e-6f * (1 + std::abs(ev[i])));
    }
  });
}

TEST(Engine, CompiledWithoutFusionMatchesEager) {
  on_mlx([] {
    auto plan = chain_plan();
    ExecConfig no_fuse{true, 4, false};
    Executor compiled(plan, no_fuse);
    Executor eager(plan, {false, 4});
    for (int rows : {2, 2, 9}) {
      auto x = random_input(rows, 8, static_cast<uint64_t>(rows) + 50);
      RunResult c = compiled.run({x});
      ASSERT_TRUE(c.stats.compiled);
      // Without fusion MLX replays the same primitives as eager: bit-identical results.
      EXPECT_TRUE(mx::array_equal(c.outputs[0], eager.run({x}).outputs[0]).item<bool>());
    }
    EXPECT_EQ(compiled.cache().size(), 2u);
  });
}

TEST(Engine, FusionPolicy) {
  EpOptions o;
  EXPECT_TRUE(ExecConfig::from(o).fuse);  // auto: fuse on every device (docs/ENGINE.md)
  o.compile_fuse = true;
  EXPECT_TRUE(ExecConfig::from(o).fuse);
  o.compile_fuse = false;
  EXPECT_FALSE(ExecConfig::from(o).fuse);
  EXPECT_FALSE(EpOptions::resolve_entries({{"ep.mlxexecutionprovider.compile_fuse", "auto"}})
                   .compile_fuse.has_value());
  EXPECT_EQ(
      EpOptions::resolve_entries({{"ep.mlxexecutionprovider.compile_fuse", "on"}}).compile_fuse,
      std::optional<bool>(true));
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
    EXPECT_EQ(got,
              (std::vector<C>{C::kMiss, C::kMiss, C::kHit, C::kMiss, C::kMiss, C::kMiss, C::kHit}));
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

// MLX's compile cache is keyed by function id. When the LRU drops an entry, MLX's entry for that
// id must go too: otherwise memory grows, and a later function compiled under a reused id would
// get the dead function's tape back (MLX issue #4096). Checked through MLX's own cache: after
// the CompiledFn is gone, a different function compiled under the same id must trace afresh.
TEST(Engine, DroppingACompiledFunctionErasesMlxCacheEntry) {
  on_mlx([] {
    auto x = random_input(3);
    std::uintptr_t id = 0;
    {
      auto fn = std::make_unique<CompiledFn>([](const std::vector<mx::array>& in, CompiledFn&) {
        return std::vector<mx::array>{mx::multiply(in[0], mx::array(2.0f))};
      });
      id = fn->id();
      mx::eval((*fn)({x}));
      mx::eval((*fn)({x}));
      EXPECT_EQ(fn->traces(), 1u);
    }
    int traced = 0;
    auto other = mx::detail::compile(
        [&](const std::vector<mx::array>& in) {
          ++traced;
          return std::vector<mx::array>{mx::multiply(in[0], mx::array(3.0f))};
        },
        id, false);
    auto y = other({x});
    mx::eval(y);
    EXPECT_EQ(traced, 1) << "stale MLX cache entry survived the CompiledFn";
    auto want = mx::multiply(x, mx::array(3.0f));
    EXPECT_TRUE(mx::allclose(y[0], want).item<bool>());
    mx::detail::compile_erase(mx::detail::compile_cache(), id);
  });
}

TEST(Engine, EvictedShapeRecompilesCorrectly) {
  on_mlx([] {
    auto plan = chain_plan();
    Executor ex(plan, {true, 1});
    Executor eager(plan, {false, 1});
    for (int round = 0; round < 3; ++round) {
      for (int rows : {2, 3}) {
        auto x = random_input(rows, 8, static_cast<uint64_t>(10 * round + rows));
        RunResult r = ex.run({x});
        EXPECT_EQ(r.stats.cache, CacheOutcome::kMiss);  // capacity 1, alternating shapes
        EXPECT_TRUE(mx::allclose(r.outputs[0], eager.run({x}).outputs[0], 1e-5, 1e-6).item<bool>());
      }
    }
    EXPECT_EQ(ex.cache().size(), 1u);
    EXPECT_EQ(ex.cache().evictions(), 5u);
  });
}

TEST(Engine, EmptyAndScalarShapes) {
  on_mlx([] {
    GraphBuilder b;
    b.input("x", f32({-1}));
    b.input("s", f32({}));
    b.node("Mul", {"x", "s"}, {"a"});
    b.node("Exp", {"a"}, {"y"});
    auto plan = build_plan(b.g, "scalar", {"x", "s"}, {"y"});
    Executor ex(plan, {true, 4});
    auto s = mx::array(0.5f);
    RunResult r0 = ex.run({mx::zeros({0}, mx::float32), s});
    EXPECT_TRUE(r0.stats.compiled);
    EXPECT_EQ(r0.outputs[0].size(), 0u);
    auto x = mx::array({1.0f, -2.0f, 3.0f});
    RunResult r1 = ex.run({x, s});
    EXPECT_TRUE(r1.stats.compiled);
    EXPECT_TRUE(mx::allclose(r1.outputs[0], mx::exp(mx::multiply(x, s))).item<bool>());
  });
}

TEST(Engine, PlanWithoutLiveInputs) {
  on_mlx([] {
    GraphBuilder b;
    b.constant("c", {1.0f, -2.0f, 0.5f}, {3});
    b.node("Exp", {"c"}, {"e"});
    b.node("Neg", {"e"}, {"y"});
    auto plan = build_plan(b.g, "consts", {}, {"y"});
    Executor ex(plan, {true, 2});
    for (int i = 0; i < 3; ++i) {
      RunResult r = ex.run({});
      EXPECT_TRUE(r.stats.compiled);
      EXPECT_EQ(r.stats.cache, i == 0 ? CacheOutcome::kMiss : CacheOutcome::kHit);
      auto v = values(r.outputs[0]);
      EXPECT_NEAR(v[0], -std::exp(1.0f), 1e-6f);
      EXPECT_NEAR(v[1], -std::exp(-2.0f), 1e-6f);
    }
  });
}

TEST(Engine, MlxDisableCompileMeansEager) {
  ::setenv("MLX_DISABLE_COMPILE", "1", 1);
  EXPECT_FALSE(ExecConfig::from(EpOptions{}).compile);
  ::unsetenv("MLX_DISABLE_COMPILE");
  EXPECT_TRUE(ExecConfig::from(EpOptions{}).compile);
}

// Test ops: "NeedsData" reads its input's values (cannot be traced for compile); "Marked" records
// a fast path; "EvalInside" evaluates an array while translating (forbidden under compile).
OpRegistry test_registry() {
  OpRegistry reg;
  for (const auto& e : OpRegistry::global().entries()) reg.add(e);
  OpEntry needs_data = test_op("NeedsData", [](TranslationContext& ctx, const NodeDesc& n) {
    if (ctx.compiling()) throw NotCompilable("needs the input's values on the host");
    mx::array x = ctx.input(n, 0);
    mx::eval(x);
    ctx.bind_output(n, 0, mx::add(x, mx::array(x.data<float>()[0])));
  });
  needs_data.shape_keyed = true;
  reg.add(needs_data);
  reg.add(test_op("Marked", [](TranslationContext& ctx, const NodeDesc& n) {
    ctx.mark_fast(n, "test_fast_kernel");
    ctx.mark_composed(n, "test composed reason");
    ctx.bind_output(n, 0, mx::negative(ctx.input(n, 0)));
  }));
  // Two runtime checks per node; the output stays memory-safe whatever the input.
  reg.add(test_op("Checked", [](TranslationContext& ctx, const NodeDesc& n) {
    mx::array x = ctx.input(n, 0);
    ctx.require(n, mx::less(x, mx::array(10.0f)), "x must be below 10");
    ctx.require(n, mx::greater(x, mx::array(-10.0f)), "x must be above -10");
    ctx.bind_output(n, 0, mx::add(x, mx::array(1.0f)));
  }));
  reg.add(test_op("EvalInside", [](TranslationContext& ctx, const NodeDesc& n) {
    mx::array y = mx::abs(ctx.input(n, 0));
    mx::eval(y);  // throws while tracing for compile
    ctx.bind_output(n, 0, y);
  }));
  return reg;
}

std::shared_ptr<Plan> test_op_plan(const OpRegistry& reg, const std::string& op) {
  GraphBuilder b;
  b.input("x", f32({-1, 8}));
  b.node("Exp", {"x"}, {"a"});
  b.node(op, {"a"}, {"b"}, "test");
  b.node("Tanh", {"b"}, {"y"});
  return build_plan(b.g, op, {"x"}, {"y"}, reg);
}

TEST(Engine, NotCompilableOpFallsBackToEagerOnce) {
  on_mlx([] {
    OpRegistry reg = test_registry();
    auto plan = test_op_plan(reg, "NeedsData");
    EXPECT_TRUE(plan->shape_keyed);
    Executor ex(plan, {true, 4});
    auto x = random_input(4);
    RunResult r = ex.run({x});
    EXPECT_FALSE(r.stats.compiled);
    EXPECT_TRUE(r.stats.fallback);
    EXPECT_NE(r.stats.fallback_reason.find("needs the input's values"), std::string::npos)
        << r.stats.fallback_reason;
    EXPECT_NE(r.stats.fallback_reason.find("NeedsData"), std::string::npos);
    EXPECT_FALSE(ex.compile_enabled());
    EXPECT_EQ(ex.cache().size(), 0u);
    // Later runs go straight to eager (no second fallback), with correct results.
    RunResult r2 = ex.run({x});
    EXPECT_FALSE(r2.stats.fallback);
    EXPECT_FALSE(r2.stats.compiled);
    mx::array e = mx::exp(x);
    mx::eval(e);
    auto want = mx::tanh(mx::add(e, mx::array(e.data<float>()[0])));
    EXPECT_TRUE(mx::allclose(r2.outputs[0], want).item<bool>());
  });
}

TEST(Engine, EvalDuringTraceFallsBackToEager) {
  on_mlx([] {
    OpRegistry reg = test_registry();
    Executor ex(test_op_plan(reg, "EvalInside"), {true, 4});
    auto x = random_input(2);
    RunResult r = ex.run({x});
    EXPECT_TRUE(r.stats.fallback);
    EXPECT_FALSE(ex.compile_enabled());
    EXPECT_TRUE(mx::allclose(r.outputs[0], mx::tanh(mx::abs(mx::exp(x)))).item<bool>());
  });
}

TEST(Engine, BadInputIsAnErrorNotACompileFailure) {
  on_mlx([] {
    GraphBuilder b;
    b.input("a", f32({-1}));
    b.input("c", f32({-1}));
    b.node("Add", {"a", "c"}, {"y"});
    auto plan = build_plan(b.g, "add", {"a", "c"}, {"y"});
    Executor ex(plan, {true, 4});
    try {
      ex.run({mx::ones({3}), mx::ones({4})});
      FAIL() << "expected a broadcast error";
    } catch (const NodeError& e) {
      EXPECT_NE(std::string(e.what()).find("Add"), std::string::npos) << e.what();
    }
    EXPECT_TRUE(ex.compile_enabled());
    RunResult ok = ex.run({mx::ones({3}), mx::ones({3})});
    EXPECT_TRUE(ok.stats.compiled);
    EXPECT_EQ(ok.stats.cache, CacheOutcome::kMiss);
  });
}

// x -> Checked -> Checked -> y: four checks in one subgraph (the second node sees x + 1).
std::shared_ptr<Plan> checked_plan(const OpRegistry& reg) {
  GraphBuilder b;
  b.input("x", f32({-1}));
  b.node("Checked", {"x"}, {"a"}, "test");
  b.node("Checked", {"a"}, {"y"}, "test");
  return build_plan(b.g, "checked", {"x"}, {"y"}, reg);
}

mx::array vec(std::vector<float> v) {
  return mx::array(v.begin(), {static_cast<int>(v.size())});
}

// The NodeError of a run, or "" when it succeeds.
std::string run_error(Executor& ex, const mx::array& x) {
  try {
    ex.run({x});
  } catch (const NodeError& e) {
    return e.what();
  }
  return "";
}

TEST(Engine, RuntimeChecksRaiseNamingTheNodeCompiledAndEager) {
  on_mlx([] {
    OpRegistry reg = test_registry();
    for (bool compile : {true, false}) {
      SCOPED_TRACE(compile ? "compiled" : "eager");
      Executor ex(checked_plan(reg), {compile, 4});
      RunResult good = ex.run({vec({1.f, -2.f, 3.f})});
      ASSERT_EQ(good.outputs.size(), 1u);  // the checks are not outputs
      EXPECT_EQ(values(good.outputs[0]), (std::vector<float>{3.f, 0.f, 5.f}));
      EXPECT_EQ(good.stats.compiled, compile);
      // Same shape key (a cache hit when compiled): the first node's upper bound fails.
      std::string err = run_error(ex, vec({1.f, 12.f, 3.f}));
      EXPECT_NE(err.find("node 'Checked0' (test.Checked): x must be below 10"), std::string::npos)
          << err;
      // 9.5 passes the first node; the second sees 10.5.
      err = run_error(ex, vec({9.5f, 0.f, 0.f}));
      EXPECT_NE(err.find("node 'Checked1' (test.Checked): x must be below 10"), std::string::npos)
          << err;
      err = run_error(ex, vec({0.f, -10.5f, 0.f}));
      EXPECT_NE(err.find("node 'Checked0' (test.Checked): x must be above -10"), std::string::npos)
          << err;
      // The input was at fault, not compilation: the function stays cached and runs again.
      EXPECT_EQ(ex.compile_enabled(), compile);
      RunResult again = ex.run({vec({4.f, 5.f, 6.f})});
      EXPECT_EQ(values(again.outputs[0]), (std::vector<float>{6.f, 7.f, 8.f}));
      if (compile) {
        EXPECT_TRUE(again.stats.compiled);
        EXPECT_FALSE(again.stats.fallback);
        EXPECT_EQ(again.stats.cache, CacheOutcome::kHit);
        EXPECT_EQ(ex.cache().size(), 1u);
      }
      // A new shape key traces its own checks; an empty input passes every check.
      EXPECT_NE(run_error(ex, vec({0.f, 0.f, 0.f, 0.f, 20.f})).find("Checked0"), std::string::npos);
      EXPECT_EQ(run_error(ex, mx::zeros({0}, mx::float32)), "");
    }
  });
}

TEST(Engine, PathMarksAreReplayedOnCacheHits) {
  on_mlx([] {
    OpRegistry reg = test_registry();
    Executor ex(test_op_plan(reg, "Marked"), {true, 4});
    auto x = random_input(2);
    for (int i = 0; i < 3; ++i) {
      RunResult r = ex.run({x});
      EXPECT_TRUE(r.stats.compiled);
      EXPECT_EQ(r.stats.cache, i == 0 ? CacheOutcome::kMiss : CacheOutcome::kHit);
      ASSERT_EQ(r.marks.size(), 2u);
      EXPECT_TRUE(r.marks[0].fast);
      EXPECT_EQ(r.marks[0].label, "test_fast_kernel");
      EXPECT_FALSE(r.marks[1].fast);
      EXPECT_EQ(r.marks[1].label, "test composed reason");
      EXPECT_EQ(r.marks[0].node, "Marked1");
    }
  });
}

TEST(Engine, FootprintCountsAllocationsNotViews) {
  on_mlx([] {
    auto a = mx::ones({512, 1, 1});
    auto b = mx::ones({1, 256, 4});
    mx::eval(a, b);
    // The broadcasts inside add() are views of 2 KiB and 4 KiB inputs; the sum allocates 2 MiB;
    // its transpose is a view again; exp allocates another 2 MiB.
    auto s = mx::add(a, b);
    auto y = mx::exp(mx::transpose(s));
    FootprintWalk walk;
    walk.add(s);
    walk.add(y);  // reaches s again: counted once
    const GraphFootprint& fp = walk.result();
    EXPECT_EQ(fp.largest, size_t{512} * 256 * 4 * 4);
    EXPECT_EQ(fp.total, 2 * fp.largest);
    EXPECT_EQ(fp.shape, (mx::Shape{512, 256, 4}));
    // Arrays with data end the walk.
    mx::eval(s);
    FootprintWalk after;
    after.add(y);
    EXPECT_EQ(after.result().total, fp.largest);
    EXPECT_EQ(format_bytes(size_t{64} << 30), "64.0 GiB");
    EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  });
}

TEST(Engine, FootprintHeldTogetherIsALowerBoundOfThePeak) {
  on_mlx([] {
    constexpr size_t kMiB = size_t{1} << 20;
    auto a = mx::ones({1024});
    mx::eval(a);
    // Two 1 MiB results of a broadcast view (which allocates nothing): both outputs are alive at
    // the end. A reshape of one of them is a view: its buffer is not counted again.
    auto b = mx::broadcast_to(a, {256, 1024});
    auto y1 = mx::exp(b);
    auto y2 = mx::sin(b);
    FootprintWalk outputs;
    outputs.add_output(y1);
    outputs.add_output(y2);
    outputs.add_output(mx::reshape(y1, {1024, 256}));
    EXPECT_EQ(outputs.result().largest, kMiB);
    EXPECT_EQ(outputs.result().held_together, 2 * kMiB);
    EXPECT_EQ(outputs.result().held_what, "its 2 outputs together");
    // One kernel's inputs and output: the Add's output may take an input's buffer (donation).
    FootprintWalk kernel;
    kernel.add_output(mx::add(y1, y2));
    EXPECT_EQ(kernel.result().held_together, 2 * kMiB);
    EXPECT_NE(kernel.result().held_what.find("kernel's inputs and outputs"), std::string::npos);
    // A chain of same-size results may reuse one buffer: counted once, however many outputs.
    auto e1 = mx::exp(b);
    auto e2 = mx::exp(e1);
    FootprintWalk chain;
    chain.add_output(e1);
    chain.add_output(e2);
    EXPECT_EQ(chain.result().held_together, kMiB);
    // Outputs with data allocate nothing new.
    mx::eval(y1, y2);
    FootprintWalk done;
    done.add_output(y1);
    done.add_output(y2);
    EXPECT_EQ(done.result().held_together, 0u);
  });
}

TEST(Engine, FootprintSaturatesSizesThatOverflow) {
  on_mlx([] {
    // 2^64 bytes (MLX's nbytes wraps to 0) and 2^90 elements (its size wraps to 0): both count
    // as uncountable, the broadcast view included (MLX cannot index it either).
    constexpr int kBig = 1 << 30;
    auto one = mx::ones({1, 1, 1});
    mx::eval(one);
    auto bytes_wrap = mx::exp(mx::broadcast_to(one, {kBig, kBig, 4}));
    auto elements_wrap = mx::sum(mx::broadcast_to(one, {kBig, kBig, kBig}));
    for (const auto& y : {bytes_wrap, elements_wrap}) {
      FootprintWalk walk;
      walk.add(y);
      EXPECT_EQ(walk.result().largest, kUncountable);
      EXPECT_EQ(walk.result().total, kUncountable);  // saturates, never wraps
    }
    auto zero_dim = mx::exp(mx::broadcast_to(one, {kBig, 0, kBig}));
    FootprintWalk walk;
    walk.add(zero_dim);
    EXPECT_EQ(walk.result().largest, 0u);
    EXPECT_NE(format_bytes(kUncountable).find("overflows 64 bits"), std::string::npos);
  });
}

// MLX's memory limit lowered for one test (the guard never offers more than it): a 2 MiB tensor
// is then too big without any real allocation of note.
struct MemoryLimitScope {
  size_t previous;
  explicit MemoryLimitScope(size_t limit) : previous(mx::set_memory_limit(limit)) {}
  ~MemoryLimitScope() { mx::set_memory_limit(previous); }
};

TEST(Engine, OversizedRunIsAnErrorAndKeepsCompiling) {
  on_mlx([] {
    GraphBuilder b;
    b.input("a", f32({-1, -1}));
    b.input("c", f32({-1, -1}));
    b.node("Add", {"a", "c"}, {"s"});
    b.node("Exp", {"s"}, {"y"});
    auto plan = build_plan(b.g, "big", {"a", "c"}, {"y"});
    for (bool compile : {true, false}) {
      Executor ex(plan, {compile, 4});
      {
        MemoryLimitScope limit(size_t{1} << 20);
        const size_t before = mx::get_active_memory();
        try {
          ex.run({mx::ones({512, 1}), mx::ones({1, 1024})});
          FAIL() << "expected an out-of-memory error";
        } catch (const OutOfMemoryError& e) {
          const std::string msg = e.what();
          EXPECT_NE(msg.find("fused node big: node 'Add0' (Add) needs 2.0 MiB for one "
                             "float32[512,1024] tensor; 1.0 MiB available"),
                    std::string::npos)
              << msg;
        }
        // Nothing of the 2 MiB tensors was allocated.
        EXPECT_LT(mx::get_active_memory(), before + (size_t{1} << 20));
        EXPECT_TRUE(ex.compile_enabled() == compile);
      }
      RunResult r = ex.run({mx::ones({2, 1}), mx::ones({1, 3})});
      EXPECT_EQ(r.stats.compiled, compile);
      EXPECT_FALSE(r.stats.fallback);
      EXPECT_TRUE(mx::allclose(r.outputs[0], mx::full({2, 3}, std::exp(2.0f))).item<bool>());
    }
  });
}

TEST(Engine, TraceRecordsPhaseAndNodeSpans) {
  const std::string path = ::testing::TempDir() + "/ortmlx_engine_trace.json";
  auto sink = TraceSink::open(path);
  on_mlx([&] {
    Executor ex(chain_plan(), {true, 4});
    auto x = random_input(2);
    ex.run({x}, sink.get());
    ex.run({x}, sink.get());
    Executor eager(chain_plan(), {false, 4});
    eager.run({x}, sink.get());
  });
  sink->write();
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  EXPECT_EQ(text.rfind("{\"traceEvents\":[", 0), 0u);
  for (const char* needle :
       {"\"name\":\"mlx.compile\"", "\"name\":\"mlx.translate\"", "\"name\":\"mlx.eval\"",
        "\"cat\":\"op\"", "\"inputs\":\"float32[2,8], float32[8]\"", "\"cache\":\"HIT\"",
        "\"cache\":\"MISS\""})
    EXPECT_NE(text.find(needle), std::string::npos) << needle;
}

TEST(MlxThread, RunsJobsFromManyThreadsAndPropagatesErrors) {
  MlxThread& t = MlxThread::get();
  EXPECT_FALSE(t.on_thread());
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&, i] {
      for (int k = 0; k < 20; ++k) {
        int v = t.run([&] {
          if (!t.on_thread()) wrong++;
          // re-entry runs inline
          return t.run([&] { return i * 100 + k; });
        });
        if (v != i * 100 + k) wrong++;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_THROW(t.run([]() -> int { throw std::runtime_error("boom"); }), std::runtime_error);
  EXPECT_EQ(t.run([] { return 7; }), 7);
}

TEST(Options, DefaultsAndSessionValues) {
  EpOptions d = EpOptions::resolve_entries({});
  EXPECT_TRUE(d.compile_enabled());
  EXPECT_EQ(d.compile_cache_size, 16u);
  EpOptions o = EpOptions::resolve_entries({{"ep.mlxexecutionprovider.no_compile", "1"},
                                            {"ep.mlxexecutionprovider.compile_cache_size", "2"},
                                            {"ep.mlxexecutionprovider.verbose", "true"},
                                            {"ep.mlxexecutionprovider.trace", "/tmp/x.json"},
                                            {"session.disable_cpu_ep_fallback", "1"}});
  EXPECT_TRUE(o.no_compile);
  EXPECT_FALSE(o.compile_enabled());
  EXPECT_EQ(o.compile_cache_size, 2u);
  EXPECT_TRUE(o.verbose);
  EXPECT_EQ(o.trace_path, "/tmp/x.json");
}

TEST(Options, InvalidValuesAndUnknownKeysAreErrors) {
  auto err = [](std::vector<std::pair<std::string, std::string>> e) {
    try {
      EpOptions::resolve_entries(e);
    } catch (const std::invalid_argument& ex) {
      return std::string(ex.what());
    }
    return std::string();
  };
  EXPECT_NE(err({{"ep.mlxexecutionprovider.compile_cache_size", "0"}}).find("compile_cache_size"),
            std::string::npos);
  EXPECT_NE(err({{"ep.mlxexecutionprovider.compile_cache_size", "abc"}}).find("integer"),
            std::string::npos);
  EXPECT_NE(err({{"ep.mlxexecutionprovider.no_compile", "maybe"}}).find("no_compile"),
            std::string::npos);
  EXPECT_NE(
      err({{"ep.mlxexecutionprovider.attention_vjp_dense_limit_bytes", "-5"}}).find("integer"),
      std::string::npos);
  const std::string unknown = err({{"ep.mlxexecutionprovider.compile_cache", "4"}});
  EXPECT_NE(unknown.find("unknown provider option"), std::string::npos);
  EXPECT_NE(unknown.find(option_keys_text()), std::string::npos);
}

TEST(Options, EnvironmentFollowsTheReferenceAndTheOptionWins) {
  ::setenv("ONNXRUNTIME_EP_MLX_NO_COMPILE", "yes-please", 1);
  ::setenv("ONNXRUNTIME_EP_MLX_VERBOSE", "true", 1);  // reference: must be exactly 1
  EpOptions env = EpOptions::resolve_entries({});
  EXPECT_TRUE(env.no_compile);
  EXPECT_FALSE(env.verbose);
  EpOptions opt = EpOptions::resolve_entries({{"ep.mlxexecutionprovider.no_compile", "0"}});
  EXPECT_FALSE(opt.no_compile);
  ::unsetenv("ONNXRUNTIME_EP_MLX_NO_COMPILE");
  ::unsetenv("ONNXRUNTIME_EP_MLX_VERBOSE");
}

TEST(Report, SummaryNumbersAddUp) {
  SessionReport rep;
  ClaimSummary c;
  c.total_nodes = 4;
  c.claimed_nodes = 3;
  c.clusters = 1;
  c.refused["Sin"] = Refusal{1, "no MLX implementation of Sin", {"sin1"}};
  rep.record_claim("main", c);
  rep.record_fused("f", {"a", "b", "c"}, {"Exp", "Tanh", "Abs"});
  RunRecord miss;
  miss.compiled = true;
  miss.cache = "MISS";
  miss.compile_s = 0.002;
  miss.eval_s = 0.001;
  miss.total_s = 0.004;
  RunRecord hit = miss;
  hit.cache = "HIT";
  hit.compile_s = 0;
  hit.translate_s = 0.0001;
  RunRecord eager;
  eager.cache = "";
  eager.translate_s = 0.0002;
  eager.total_s = 0.001;
  RunRecord failed;
  failed.ok = false;
  rep.record_run("f", miss);
  rep.record_run("f", hit);
  rep.record_run("f", eager);
  rep.record_run("f", failed);
  EXPECT_EQ(rep.counter("compute.runs"), 4);
  EXPECT_EQ(
      rep.counter("compute.compiled") + rep.counter("compute.eager") + rep.counter("compute.error"),
      4);
  const std::string text = rep.summary_text();
  EXPECT_NE(text.find("3/4 nodes claimed (75.0%)"), std::string::npos) << text;
  EXPECT_NE(text.find("3/4 nodes ran on the EP (75.0%)"), std::string::npos) << text;
  EXPECT_NE(text.find("4 run(s): compiled=2 eager=1 failed=1"), std::string::npos) << text;
  EXPECT_NE(text.find("1 HIT / 1 MISS / 0 RETRACE"), std::string::npos) << text;
  EXPECT_NE(text.find("- Sin x1: no MLX implementation of Sin"), std::string::npos) << text;
}

}  // namespace
}  // namespace ortmlx
