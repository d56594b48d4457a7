// How the one-kernel Softmax (ops/norm/cuda/softmax.h) reads its input's graph: the scores' scale
// and additive mask it folds in must be exactly the graph's operands in its order (a product or a
// quotient by one value, then the mask), and anything else must leave T whole. Graph inspection
// only (no kernel), so it runs on every flavour; the kernel itself is checked on the CPU
// emulation (tests/ops/test_norm_cuda_emu.py) and on the GPU.
#include "ortmlx/ops/norm/cuda/softmax.h"

#include <gtest/gtest.h>

#include <mlx/ops.h>

namespace ortmlx::ops {
namespace {

namespace mx = mlx::core;

const mx::Shape kScores{2, 3, 4, 8};

mx::array scores(float v) {
  return mx::full(kScores, v, mx::float32);
}

bool same(const mx::array& a, const mx::array& b) {
  return a.id() == b.id();
}

TEST(SoftmaxParts, ScaleEitherSideOfAProduct) {
  const mx::array x = scores(1), c = mx::array(0.125f);
  for (bool left : {false, true}) {
    const SoftmaxScores p = softmax_score_parts(left ? mx::multiply(c, x) : mx::multiply(x, c));
    EXPECT_TRUE(same(p.x, x));
    ASSERT_TRUE(p.scale);
    EXPECT_EQ(*p.scale, 0.125f);
    EXPECT_FALSE(p.divides);
    EXPECT_FALSE(p.mask);
  }
}

TEST(SoftmaxParts, DivisorOnlyOnTheRight) {
  const mx::array x = scores(1), c = mx::array(8.0f);
  const SoftmaxScores p = softmax_score_parts(mx::divide(x, c));
  EXPECT_TRUE(same(p.x, x));
  ASSERT_TRUE(p.scale);
  EXPECT_EQ(*p.scale, 8.0f);
  EXPECT_TRUE(p.divides);
  // c / x is no scale of x.
  const mx::array inverse = mx::divide(c, x);
  const SoftmaxScores q = softmax_score_parts(inverse);
  EXPECT_TRUE(same(q.x, inverse));
  EXPECT_FALSE(q.scale);
}

TEST(SoftmaxParts, ScaledScoresPlusAMask) {
  const mx::array x = scores(1), c = mx::array(0.5f);
  // Masks broadcast over heads and queries, over the batch, or full.
  for (const mx::Shape& ms : {mx::Shape{2, 1, 1, 8}, mx::Shape{1, 1, 4, 8}, mx::Shape{4, 8},
                              mx::Shape{2, 3, 4, 8}, mx::Shape{8}}) {
    const mx::array mask = mx::full(ms, -1.0f, mx::float32);
    for (bool mask_left : {false, true}) {
      const mx::array scaled = mx::multiply(x, c);
      const mx::array t = mask_left ? mx::add(mask, scaled) : mx::add(scaled, mask);
      const SoftmaxScores p = softmax_score_parts(t);
      EXPECT_TRUE(same(p.x, x));
      ASSERT_TRUE(p.scale && p.mask);
      EXPECT_TRUE(same(*p.mask, mask));  // as given, before MLX broadcast it
    }
  }
  // A mask without a scale.
  const mx::array mask = mx::full({2, 1, 1, 8}, -1.0f, mx::float32);
  const SoftmaxScores p = softmax_score_parts(mx::add(x, mask));
  EXPECT_TRUE(same(p.x, x));
  EXPECT_FALSE(p.scale);
  ASSERT_TRUE(p.mask);
  EXPECT_TRUE(same(*p.mask, mask));
}

TEST(SoftmaxParts, AComputedScaleStaysInTheGraph) {
  // A scale the graph computes (not an evaluated constant) is not read on the host: T whole.
  const mx::array x = scores(1);
  const mx::array t = mx::multiply(x, mx::sqrt(mx::array(4.0f)));
  const SoftmaxScores p = softmax_score_parts(t);
  EXPECT_TRUE(same(p.x, t));
  EXPECT_FALSE(p.scale);
}

TEST(SoftmaxParts, OtherGraphsLeaveTWhole) {
  const mx::array x = scores(1), y = scores(2);
  // A scale applied after the mask is another float32 computation: the mask is the Add's, the
  // product stays outside, so T is whole.
  const mx::array late_scale = mx::multiply(mx::add(x, mx::full({8}, 1.0f)), mx::array(0.5f));
  const SoftmaxScores p = softmax_score_parts(late_scale);
  EXPECT_FALSE(p.mask);
  // A product of two full arrays, a float16 scale, a leaf: T whole.
  for (const mx::array& t :
       {mx::multiply(x, y), x,
        mx::multiply(mx::astype(x, mx::float16), mx::array(0.5f, mx::float16))}) {
    const SoftmaxScores q = softmax_score_parts(t);
    EXPECT_TRUE(same(q.x, t));
    EXPECT_FALSE(q.scale);
    EXPECT_FALSE(q.mask);
  }
}

TEST(SoftmaxParts, NotForTheCpuFlavourOrStream) {
  EXPECT_FALSE(cuda_softmax_applies(scores(1), mx::Device::cpu));
}

}  // namespace
}  // namespace ortmlx::ops
