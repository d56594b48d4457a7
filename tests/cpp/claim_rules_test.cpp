// Claim refusals for node forms ORT itself rejects before partitioning (so no Python test can
// reach them): the predicates must still refuse them with a reason rather than claim them.
#include <gtest/gtest.h>

#include <cstring>

#include "ortmlx/registry/registry.h"
#include "plan_builder.h"

namespace ortmlx {
namespace {

using testing::info;

struct OneNode {
  GraphView g;
  NodeView n;

  OneNode(std::string op, int opset) {
    n.name = "node";
    n.op_type = std::move(op);
    n.since_version = opset;
  }
  OneNode& input(const std::string& name, TensorInfo ti) {
    n.inputs.push_back(name);
    g.value_infos[name] = std::move(ti);
    return *this;
  }
  OneNode& const_ints(const std::string& name, const std::vector<int64_t>& v) {
    auto t = std::make_shared<ConstTensor>();
    t->dtype = ElemType::kInt64;
    t->shape = {static_cast<int64_t>(v.size())};
    t->bytes.resize(v.size() * sizeof(int64_t));
    if (!v.empty()) std::memcpy(t->bytes.data(), v.data(), t->bytes.size());
    TensorInfo ti = info(ElemType::kInt64, t->shape);
    g.constants[name] = t;
    g.constant_names[name] = ti;
    return input(name, ti);
  }
  OneNode& output(const std::string& name, TensorInfo ti) {
    n.outputs.push_back(name);
    g.value_infos[name] = std::move(ti);
    return *this;
  }
  OneNode& attr(const std::string& k, AttrValue v) {
    n.attrs[k] = std::move(v);
    return *this;
  }
  ClaimResult claim() const { return OpRegistry::global().claim(g, n); }
};

TensorInfo f32(std::vector<int64_t> s) {
  return info(ElemType::kFloat, std::move(s));
}

void expect_refused(const OneNode& o, const std::string& needle) {
  ClaimResult r = o.claim();
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.reason.find(needle), std::string::npos) << "reason: " << r.reason;
}

TEST(ClaimRules, ReshapeBaseFormIsClaimed) {
  OneNode o("Reshape", 14);
  o.input("x", f32({2, 6})).const_ints("shape", {3, -1}).output("y", f32({3, 4}));
  EXPECT_TRUE(o.claim().ok) << o.claim().reason;
}

TEST(ClaimRules, ReshapeAllowzeroWithZeroAndMinusOne) {
  OneNode o("Reshape", 14);
  o.input("x", f32({2, 6})).const_ints("shape", {0, -1}).output("y", f32({-1, -1}));
  o.attr("allowzero", int64_t{1});
  expect_refused(o, "allowzero=1 with both 0 and -1");
}

TEST(ClaimRules, ReshapeTwoMinusOnes) {
  OneNode o("Reshape", 13);
  o.input("x", f32({2, 6})).const_ints("shape", {-1, -1}).output("y", f32({-1, -1}));
  expect_refused(o, "more than one -1");
}

TEST(ClaimRules, ReshapeCopyBeyondRank) {
  OneNode o("Reshape", 13);
  o.input("x", f32({12})).const_ints("shape", {3, 0}).output("y", f32({-1, -1}));
  expect_refused(o, "beyond the input rank");
}

TEST(ClaimRules, ReshapeOldAttributeFormNeedsItsShapeAttribute) {
  OneNode o("Reshape", 1);
  o.input("x", f32({2, 6})).output("y", f32({12}));
  expect_refused(o, "the shape attribute is required");
}

TEST(ClaimRules, SqueezeNonUnitAxis) {
  OneNode o("Squeeze", 13);
  o.input("x", f32({2, 3})).const_ints("axes", {0}).output("y", f32({3}));
  expect_refused(o, "cannot squeeze axis 0 of size 2");
}

TEST(ClaimRules, UnsqueezeRepeatedAxis) {
  OneNode o("Unsqueeze", 11);
  o.input("x", f32({2, 3})).output("y", f32({1, 2, 3}));
  o.attr("axes", std::vector<int64_t>{0, -4});
  expect_refused(o, "repeated");
}

TEST(ClaimRules, UnsqueezeWithoutAxes) {
  OneNode o("Unsqueeze", 11);
  o.input("x", f32({2, 3})).output("y", f32({1, 2, 3}));
  expect_refused(o, "axes are required");
}

TEST(ClaimRules, TransposeBadPerm) {
  OneNode o("Transpose", 13);
  o.input("x", f32({2, 3})).output("y", f32({3, 2}));
  o.attr("perm", std::vector<int64_t>{0, 0});
  expect_refused(o, "not a permutation");
}

TEST(ClaimRules, GemmLegacyBroadcastAttribute) {
  OneNode o("Gemm", 13);
  o.input("a", f32({2, 3})).input("b", f32({3, 4})).output("y", f32({2, 4}));
  o.attr("broadcast", int64_t{1});
  expect_refused(o, "attribute 'broadcast'");
}

TEST(ClaimRules, GemmThreeDimensional) {
  OneNode o("Gemm", 13);
  o.input("a", f32({2, 2, 3})).input("b", f32({3, 4})).output("y", f32({2, 4}));
  expect_refused(o, "2-D");
}

// round_mode only applies to float8e8m0 targets (ONNX Cast 24/25), which are never claimed;
// ORT's inliner writes it on the Cast that replaces CastLike.
TEST(ClaimRules, CastRoundModeOnlyMattersForFloat8) {
  OneNode o("Cast", 24);
  o.input("x", f32({3})).output("y", info(ElemType::kFloat16, {3}));
  o.attr("to", int64_t{10}).attr("round_mode", std::string("up"));
  EXPECT_TRUE(o.claim().ok) << o.claim().reason;
}

TEST(ClaimRules, ReduceRepeatedAxes) {
  OneNode o("ReduceSum", 13);
  o.input("x", f32({2, 3})).const_ints("axes", {1, -1}).output("y", f32({2, 1}));
  expect_refused(o, "repeated");
}

TEST(ClaimRules, ReduceAxisOutOfRange) {
  OneNode o("ReduceMean", 11);
  o.input("x", f32({2, 3})).output("y", f32({2, 1}));
  o.attr("axes", std::vector<int64_t>{2});
  expect_refused(o, "out of range");
}

TEST(ClaimRules, LayerNormBfloat16Stats) {
  OneNode o("LayerNormalization", 17);
  o.input("x", f32({2, 4})).input("s", f32({4})).output("y", f32({2, 4}));
  o.output("mean", info(ElemType::kBFloat16, {2, 1}));
  expect_refused(o, "not float32");
}

TEST(ClaimRules, SoftmaxAxisOutOfRange) {
  OneNode o("Softmax", 13);
  o.input("x", f32({2, 4})).output("y", f32({2, 4}));
  o.attr("axis", int64_t{2});
  expect_refused(o, "out of range");
}

}  // namespace
}  // namespace ortmlx
