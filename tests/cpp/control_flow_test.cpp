// Control-flow bodies in the engine: plans of subgraphs, body scopes that read enclosing values,
// compiled (trace-time decisions) vs eager (runtime conditions) execution, and errors that name
// the body node.
#include <gtest/gtest.h>

#include <cstring>

#include <mlx/ops.h>

#include "ortmlx/engine/executor.h"
#include "ortmlx/engine/plan.h"
#include "plan_builder.h"

namespace ortmlx {
namespace {

namespace mx = mlx::core;
using namespace ortmlx::testing;

// out = If(c) then x + y (both outer scope) else -x (or ReduceSum(x), shape [1], when
// `same_outputs` is false); `c` a graph input or a constant.
std::shared_ptr<Plan> if_plan(std::optional<bool> constant_cond, bool same_outputs = true) {
  auto then_g = std::make_shared<GraphView>();
  {
    Builder b;
    b.g.value_infos["x"] = info(ElemType::kFloat, {3});
    b.g.value_infos["y"] = info(ElemType::kFloat, {3});
    b.node("then/add", "Add", {"x", "y"}, {"t"});
    b.g.graph_outputs = {"t"};
    *then_g = std::move(b.g);
  }
  auto else_g = std::make_shared<GraphView>();
  {
    Builder b;
    b.g.value_infos["x"] = info(ElemType::kFloat, {3});
    b.node("else/neg", same_outputs ? "Neg" : "ReduceSum", {"x"}, {"e"});
    b.g.graph_outputs = {"e"};
    *else_g = std::move(b.g);
  }
  Builder b;
  b.input("x", info(ElemType::kFloat, {3}));
  b.input("y", info(ElemType::kFloat, {3}));
  if (constant_cond) {
    const uint8_t v = *constant_cond ? 1 : 0;
    b.constant("c", ElemType::kBool, &v, 1, {});
  } else {
    b.input("c", info(ElemType::kBool, {}));
  }
  NodeView& n = b.node("if", "If", {"c"}, {"out"});
  n.has_subgraphs = true;
  n.subgraphs["then_branch"] = then_g;
  n.subgraphs["else_branch"] = else_g;
  std::vector<std::string> live{"x", "y"};
  if (!constant_cond) live.push_back("c");
  return build_plan(b.g, "fused_if", live, {"out"});
}

TEST(ControlFlow, RuntimeConditionStaysCompiledAndSelectsTheBranchPerRun) {
  on_mlx([] {
    // Small branches with the same output shape: both traced, the output selected on the device.
    Executor ex(if_plan(std::nullopt), {true, 4});
    mx::array x({1.f, 2.f, 3.f});
    mx::array y({10.f, 20.f, 30.f});
    RunResult r1 = ex.run({x, y, mx::array(true)});
    EXPECT_TRUE(r1.stats.compiled);
    EXPECT_TRUE(ex.compile_enabled());
    EXPECT_EQ(values(r1.outputs[0]), (std::vector<float>{11.f, 22.f, 33.f}));
    RunResult r2 = ex.run({x, y, mx::array(false)});
    EXPECT_TRUE(r2.stats.compiled);
    EXPECT_EQ(values(r2.outputs[0]), (std::vector<float>{-1.f, -2.f, -3.f}));
  });
}

TEST(ControlFlow, RuntimeConditionWithBranchesOfOtherOutputsRunsEagerly) {
  on_mlx([] {
    Executor ex(if_plan(std::nullopt, /*same_outputs=*/false), {true, 4});
    mx::array x({1.f, 2.f, 3.f});
    mx::array y({10.f, 20.f, 30.f});
    RunResult r1 = ex.run({x, y, mx::array(true)});
    EXPECT_FALSE(r1.stats.compiled);
    EXPECT_FALSE(ex.compile_enabled());  // the condition is read on the host from now on
    EXPECT_EQ(values(r1.outputs[0]), (std::vector<float>{11.f, 22.f, 33.f}));
    RunResult r2 = ex.run({x, y, mx::array(false)});
    EXPECT_EQ(values(r2.outputs[0]), (std::vector<float>{6.f}));
  });
}

TEST(ControlFlow, ConstantConditionStaysCompiled) {
  on_mlx([] {
    for (bool cond : {true, false}) {
      Executor ex(if_plan(cond), {true, 4});
      mx::array x({1.f, 2.f, 3.f});
      mx::array y({10.f, 20.f, 30.f});
      RunResult r = ex.run({x, y});
      EXPECT_TRUE(r.stats.compiled);
      EXPECT_EQ(values(r.outputs[0]), cond ? (std::vector<float>{11.f, 22.f, 33.f})
                                           : (std::vector<float>{-1.f, -2.f, -3.f}));
    }
  });
}

TEST(ControlFlow, ConstantTripCountUnrollsIntoTheCompiledGraph) {
  on_mlx([] {
    Executor ex(loop_plan(3), {true, 4});
    RunResult r = ex.run({mx::array({1.f, -1.f}), mx::array({2.f, 3.f})});
    EXPECT_TRUE(r.stats.compiled);
    EXPECT_EQ(values(r.outputs[0]), (std::vector<float>{8.f, -27.f}));
    EXPECT_EQ(r.outputs[1].shape(), (mx::Shape{3, 2}));
    EXPECT_EQ(values(r.outputs[1]), (std::vector<float>{2.f, -3.f, 4.f, -9.f, 8.f, -27.f}));
  });
}

TEST(ControlFlow, TripCountPastTheUnrollLimitRunsEagerly) {
  on_mlx([] {
    Executor ex(loop_plan(300), {true, 4});
    RunResult r = ex.run({mx::array({1.f, -1.f}), mx::array({1.f, 1.f})});
    EXPECT_FALSE(r.stats.compiled);
    EXPECT_EQ(r.outputs[1].shape(), (mx::Shape{300, 2}));
    EXPECT_EQ(values(r.outputs[0]), (std::vector<float>{1.f, -1.f}));
  });
}

TEST(ControlFlow, EagerLoopRecordsItsIterationCount) {
  on_mlx([] {
    // Past the unroll limit: eager, one iteration at a time; the count is kept with the plan
    // (what a compiled trace unrolls when a Loop's condition is a runtime value).
    auto plan = loop_plan(300);
    Executor ex(plan, {true, 4});
    RunResult r = ex.run({mx::array({1.f, -1.f}), mx::array({1.f, 1.f})});
    EXPECT_FALSE(r.stats.compiled);
    EXPECT_EQ(r.outputs[1].shape(), (mx::Shape{300, 2}));
    ASSERT_EQ(plan->loop_history.size(), 1u);
    EXPECT_TRUE(plan->loop_history.begin()->second.observed);
    EXPECT_EQ(plan->loop_history.begin()->second.iterations, 300);
  });
}

TEST(ControlFlow, RuntimeConditionCompilesOnTheLatestIterationCount) {
  on_mlx([] {
    Executor ex(loop_plan(8, /*until_limit=*/true), {true, 4});
    auto run = [&](int64_t limit) {
      return ex.run({mx::array({1.f, -1.f}), mx::array({2.f, 3.f}), mx::array(limit)});
    };
    // First run: eager (the count is not known yet), compilation stays on.
    RunResult r = run(3);
    EXPECT_FALSE(r.stats.compiled);
    EXPECT_TRUE(ex.compile_enabled());
    EXPECT_EQ(values(r.outputs[0]), (std::vector<float>{8.f, -27.f}));
    // Compiled on 3 iterations.
    r = run(3);
    EXPECT_TRUE(r.stats.compiled);
    EXPECT_EQ(r.outputs[1].shape(), (mx::Shape{3, 2}));
    EXPECT_EQ(values(r.outputs[0]), (std::vector<float>{8.f, -27.f}));
    // Two iterations: the assumption misses, the run is redone eagerly, then compiled on 2.
    r = run(2);
    EXPECT_TRUE(r.stats.speculation_missed);
    EXPECT_FALSE(r.stats.compiled);
    EXPECT_EQ(r.outputs[1].shape(), (mx::Shape{2, 2}));
    EXPECT_EQ(values(r.outputs[0]), (std::vector<float>{4.f, -9.f}));
    r = run(2);
    EXPECT_TRUE(r.stats.compiled);
    EXPECT_EQ(values(r.outputs[0]), (std::vector<float>{4.f, -9.f}));
    // Past the trip count: the trip count ends it (8 iterations), no condition checked there.
    r = run(20);
    EXPECT_TRUE(r.stats.speculation_missed);
    EXPECT_EQ(r.outputs[1].shape(), (mx::Shape{8, 2}));
    r = run(20);
    EXPECT_TRUE(r.stats.compiled);
    EXPECT_EQ(r.outputs[1].shape(), (mx::Shape{8, 2}));
    // Misses past kMaxSpeculationMisses: the plan runs eagerly from then on, still exact.
    for (int limit : {1, 5, 1, 5}) {
      r = run(limit);
      EXPECT_EQ(r.outputs[1].shape(), (mx::Shape{limit, 2}));
    }
    EXPECT_FALSE(ex.compile_enabled());
    r = run(3);
    EXPECT_FALSE(r.stats.compiled);
    EXPECT_EQ(values(r.outputs[0]), (std::vector<float>{8.f, -27.f}));
  });
}

TEST(ControlFlow, ErrorsNameTheBodyNode) {
  on_mlx([] {
    // Eager, and with compilation on: the branch then runs as a compiled segment.
    for (bool compile : {false, true}) {
      Executor ex(if_plan(std::nullopt), {compile, 4});
      try {
        // x and y of shapes that do not broadcast: the then branch's Add fails.
        ex.run({mx::array({1.f, 2.f, 3.f}), mx::array({1.f, 2.f}), mx::array(true)});
        FAIL() << "expected an error";
      } catch (const NodeError& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("node 'if' (If)"), std::string::npos) << msg;
        EXPECT_NE(msg.find("node 'then/add' (Add)"), std::string::npos) << msg;
      }
      // The input was at fault: the next run works.
      RunResult r =
          ex.run({mx::array({1.f, 2.f, 3.f}), mx::array({1.f, 2.f, 3.f}), mx::array(true)});
      EXPECT_EQ(values(r.outputs[0]), (std::vector<float>{2.f, 4.f, 6.f}));
    }
  });
}

}  // namespace
}  // namespace ortmlx
