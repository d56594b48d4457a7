// How the one-kernel LayerNorm (ops/norm/cuda/layer_norm.h) reads its input's graph: the residual
// Add and the projection's bias folded into the kernel must be exactly the graph's operands, in
// its order, and anything else must leave X whole. Graph inspection only (no kernel), so it runs
// on every flavour; the kernel itself is checked on the CPU emulation
// (tests/ops/test_norm_cuda_emu.py) and on the GPU.
#include "ortmlx/ops/norm/cuda/layer_norm.h"

#include <gtest/gtest.h>

#include <mlx/ops.h>

namespace ortmlx::ops {
namespace {

namespace mx = mlx::core;

const mx::Shape kRows{2, 3, 8};

mx::array rows(float v) {
  return mx::full(kRows, v, mx::float32);
}
mx::array vec(float v) {
  return mx::full({8}, v, mx::float32);
}

bool same(const mx::array& a, const mx::array& b) {
  return a.id() == b.id();
}

TEST(LayerNormParts, ResidualWithBiasFirst) {
  const mx::array m = rows(1), r = rows(2), b = vec(3);
  for (bool bias_left : {false, true})
    for (bool residual_left : {false, true}) {
      const mx::array mb = bias_left ? mx::add(b, m) : mx::add(m, b);
      const mx::array x = residual_left ? mx::add(r, mb) : mx::add(mb, r);
      const LayerNormSum p = layer_norm_sum_parts(x);
      EXPECT_TRUE(same(p.m, m));
      ASSERT_TRUE(p.bias && p.residual);
      EXPECT_TRUE(same(*p.bias, b));
      EXPECT_TRUE(same(*p.residual, r));
    }
}

TEST(LayerNormParts, ResidualWithoutBias) {
  const mx::array a = rows(1), r = rows(2);
  const LayerNormSum p = layer_norm_sum_parts(mx::add(a, r));
  EXPECT_TRUE(same(p.m, a));
  EXPECT_FALSE(p.bias);
  ASSERT_TRUE(p.residual);
  EXPECT_TRUE(same(*p.residual, r));
}

TEST(LayerNormParts, OtherGraphsLeaveXWhole) {
  const mx::array m = rows(1), r = rows(2), b = vec(3);
  // The bias added last, (m + r) + b: another float32 sum than (m + b) + r. Its inner Add has no
  // broadcast operand, so it is the residual's m, and the broadcast bias is not a residual.
  const mx::array late_bias = mx::add(mx::add(m, r), b);
  EXPECT_TRUE(same(layer_norm_sum_parts(late_bias).m, late_bias));
  // X + bias alone, a product, a leaf, a float16 sum: X whole.
  for (const mx::array& x : {mx::add(m, b), mx::multiply(m, r), m,
                             mx::add(mx::astype(m, mx::float16), mx::astype(r, mx::float16))}) {
    const LayerNormSum p = layer_norm_sum_parts(x);
    EXPECT_TRUE(same(p.m, x));
    EXPECT_FALSE(p.bias);
    EXPECT_FALSE(p.residual);
  }
  // A bias of another length than the rows (broadcast along another axis) is no bias.
  const mx::array column = mx::full({3, 1}, 3.0f, mx::float32);
  const mx::array x = mx::add(mx::add(m, column), r);
  const LayerNormSum p = layer_norm_sum_parts(x);
  EXPECT_FALSE(p.bias);
  ASSERT_TRUE(p.residual);
  EXPECT_TRUE(same(*p.residual, r));
}

TEST(LayerNormParts, GemmRowsGivenBackTheirBatchDims) {
  // x.reshape(-1, 8) @ W + b, reshaped to the residual's shape (a Gemm as ORT fuses it): the
  // bias folds, and m is the product's rows reshaped (a view of the same elements).
  const mx::array product = mx::full({6, 8}, 1.0f, mx::float32), r = rows(2), b = vec(3);
  const mx::array y = mx::reshape(mx::add(product, b), kRows);
  for (bool residual_left : {false, true}) {
    const LayerNormSum p = layer_norm_sum_parts(residual_left ? mx::add(r, y) : mx::add(y, r));
    ASSERT_TRUE(p.bias && p.residual);
    EXPECT_TRUE(same(*p.bias, b));
    EXPECT_TRUE(same(*p.residual, r));
    EXPECT_EQ(p.m.shape(), kRows);
    ASSERT_EQ(p.m.inputs().size(), 1u);
    EXPECT_TRUE(same(p.m.inputs()[0], product));
  }
  // A reshape that moves the last axis (rows of 4) is another row layout: no bias.
  const mx::array moved =
      mx::reshape(mx::add(mx::full({3, 16}, 1.0f, mx::float32), mx::full({16}, 3.0f)), kRows);
  const LayerNormSum q = layer_norm_sum_parts(mx::add(moved, r));
  EXPECT_FALSE(q.bias);
  ASSERT_TRUE(q.residual);
  EXPECT_TRUE(same(q.m, moved));
}

TEST(LayerNormParts, NotForTheCpuFlavourOrStream) {
  // The kernel never applies on a CPU stream (nor anywhere in the CPU flavour).
  EXPECT_FALSE(cuda_layer_norm_applies(rows(1), mx::Device::cpu));
}

}  // namespace
}  // namespace ortmlx::ops
