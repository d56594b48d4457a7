// Compiled segments of eager runs (engine/segments.h): the nodes around a host read compile, a
// node whose trace fails runs on its own, a segment takes the runtime values of enclosing scopes
// as inputs (never as constants of its compiled function), runtime checks inside segments raise
// naming their node, a segment meeting more shapes than its cache keeps goes node by node, and
// the switch turns segments off.
#include <gtest/gtest.h>

#include <cmath>

#include <mlx/ops.h>
#include <mlx/transforms.h>

#include "ortmlx/engine/executor.h"
#include "ortmlx/engine/plan.h"
#include "plan_builder.h"

namespace ortmlx {
namespace {

namespace mx = mlx::core;
using namespace ortmlx::testing;

// The global ops plus "AddFirst" (adds its input's first value, read on the host: it cannot be
// traced) and "Checked" (a runtime check: every element below 10).
OpRegistry registry() {
  OpRegistry reg;
  for (const auto& e : OpRegistry::global().entries()) reg.add(e);
  reg.add(test_op("AddFirst", [](TranslationContext& ctx, const NodeDesc& n) {
    if (ctx.compiling()) throw NotCompilable("reads its input on the host");
    mx::array x = ctx.input(n, 0);
    mx::eval(x);
    ctx.bind_output(n, 0, mx::add(x, mx::array(x.data<float>()[0])));
  }));
  reg.add(test_op("Checked", [](TranslationContext& ctx, const NodeDesc& n) {
    mx::array x = ctx.input(n, 0);
    ctx.require(n, mx::less(x, mx::array(10.0f)), "x must be below 10");
    ctx.bind_output(n, 0, mx::multiply(x, mx::array(2.0f)));
  }));
  return reg;
}

// x -> Exp -> <middle> -> Tanh -> y, x of shape [3].
std::shared_ptr<Plan> around_plan(const OpRegistry& reg, const std::string& first,
                                  const std::string& middle, const std::string& last) {
  Builder b;
  b.input("x", info(ElemType::kFloat, {3}));
  auto add = [&](const std::string& name, const std::string& op, const std::string& in,
                 const std::string& out) {
    NodeView& n = b.node(name, op, {in}, {out});
    if (op == "AddFirst" || op == "Checked") n.domain = "test";
  };
  add("first", first, "x", "a");
  add("middle", middle, "a", "c");
  add("last", last, "c", "y");
  return build_plan(b.g, "around", {"x"}, {"y"}, reg);
}

mx::array vec(std::vector<float> v) {
  return mx::array(v.begin(), {static_cast<int>(v.size())});
}

void expect_near(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6f) << i;
}

TEST(Segments, NodesAroundAHostReadRunAsCompiledSegments) {
  on_mlx([] {
    OpRegistry reg = registry();
    Executor ex(around_plan(reg, "Exp", "AddFirst", "Tanh"), {true, 4});
    for (float base : {0.5f, -1.f}) {
      const std::vector<float> x{base, 0.25f, -0.5f};
      RunResult r = ex.run({vec(x)});
      EXPECT_FALSE(r.stats.compiled);
      EXPECT_EQ(r.stats.segment_calls, 2u);  // Exp, then Tanh; AddFirst on its own
      std::vector<float> want;
      for (float v : x) want.push_back(std::tanh(std::exp(v) + std::exp(x[0])));
      expect_near(values(r.outputs[0]), want);
    }
  });
}

TEST(Segments, MoreShapesThanTheCacheKeepsRunNodeByNode) {
  on_mlx([] {
    OpRegistry reg = registry();
    Executor ex(around_plan(reg, "Exp", "AddFirst", "Tanh"), {true, 2});  // 2 shape keys kept
    for (int n = 1; n <= 5; ++n) {
      std::vector<float> x(static_cast<size_t>(n), 0.5f);
      RunResult r = ex.run({vec(x)});
      // The third shape is one more than the cache keeps: both segments go node by node.
      EXPECT_EQ(r.stats.segment_calls, n <= 2 ? 2u : 0u) << n;
      expect_near(values(r.outputs[0]),
                  std::vector<float>(x.size(), std::tanh(2.f * std::exp(0.5f))));
    }
  });
}

TEST(Segments, SwitchedOffEveryNodeRunsOnItsOwn) {
  on_mlx([] {
    OpRegistry reg = registry();
    ExecConfig config{true, 4};
    config.segments = false;
    Executor ex(around_plan(reg, "Exp", "AddFirst", "Tanh"), config);
    RunResult r = ex.run({vec({1.f, 2.f, 3.f})});
    EXPECT_EQ(r.stats.segment_calls, 0u);
    std::vector<float> want;
    for (float v : {1.f, 2.f, 3.f}) want.push_back(std::tanh(std::exp(v) + std::exp(1.f)));
    expect_near(values(r.outputs[0]), want);
  });
}

TEST(Segments, ChecksInsideSegmentsRaiseNamingTheirNode) {
  on_mlx([] {
    OpRegistry reg = registry();
    Executor ex(around_plan(reg, "Checked", "AddFirst", "Checked"), {true, 4});
    RunResult ok = ex.run({vec({1.f, 2.f, 3.f})});
    EXPECT_EQ(ok.stats.segment_calls, 2u);
    expect_near(values(ok.outputs[0]), {8.f, 12.f, 16.f});  // 2 (2x + 2)
    try {
      ex.run({vec({1.f, 12.f, 3.f})});
      FAIL() << "expected the first check to fail";
    } catch (const NodeError& e) {
      EXPECT_NE(std::string(e.what()).find("node 'first' (test.Checked): x must be below 10"),
                std::string::npos)
          << e.what();
    }
    try {
      ex.run({vec({4.f, 0.f, 0.f})});  // the last node sees 2 * 4 + 8 = 16
      FAIL() << "expected the second check to fail";
    } catch (const NodeError& e) {
      EXPECT_NE(std::string(e.what()).find("node 'last' (test.Checked)"), std::string::npos)
          << e.what();
    }
    // The input was at fault: the segments stay.
    RunResult again = ex.run({vec({0.f, 1.f, 2.f})});
    EXPECT_EQ(again.stats.segment_calls, 2u);
    expect_near(values(again.outputs[0]), {0.f, 4.f, 8.f});
  });
}

TEST(Segments, ABodySegmentTakesOuterRuntimeValuesAsInputs) {
  on_mlx([] {
    Executor ex(loop_plan(300), {true, 4});  // past the unroll limit: eager
    for (const auto& w : {std::vector<float>{1.f, -1.f}, std::vector<float>{0.5f, 2.f}}) {
      RunResult r = ex.run({vec({1.f, 1.f}), vec(w)});
      EXPECT_FALSE(r.stats.compiled);
      EXPECT_EQ(r.stats.segment_calls, 300u);  // the body, once per iteration
      ASSERT_EQ(r.outputs[1].shape(), (mx::Shape{300, 2}));
      // The second run's w, not the first's kept inside a compiled function.
      const std::vector<float> scan = values(r.outputs[1]);
      EXPECT_EQ(scan[0], w[0]);
      EXPECT_EQ(scan[1], w[1]);
      EXPECT_EQ(scan[2], w[0] * w[0]);
    }
  });
}

}  // namespace
}  // namespace ortmlx
