#include "ortmlx/graph/partitioner.h"

#include <gtest/gtest.h>

namespace ortmlx {
namespace {

NodeView node(size_t index, std::vector<std::string> in, std::vector<std::string> out) {
  NodeView n;
  n.index = index;
  n.name = "n" + std::to_string(index);
  n.op_type = "Op";
  n.inputs = std::move(in);
  n.outputs = std::move(out);
  return n;
}

TEST(Partitioner, ChainOfClaimedNodesIsOneCluster) {
  GraphView g;
  g.nodes = {node(0, {"x"}, {"a"}), node(1, {"a"}, {"b"}), node(2, {"b"}, {"c"})};
  auto clusters = partition_convex(g, {true, true, true});
  ASSERT_EQ(clusters.size(), 1u);
  EXPECT_EQ(clusters[0], (std::vector<size_t>{0, 1, 2}));
}

TEST(Partitioner, UnclaimedNodeBetweenTwoClaimedSplitsThem) {
  // 0 -> 1 (unclaimed) -> 2, and 0 -> 2 directly: {0, 2} would not be convex.
  GraphView g;
  g.nodes = {node(0, {"x"}, {"a"}), node(1, {"a"}, {"b"}), node(2, {"a", "b"}, {"c"})};
  auto clusters = partition_convex(g, {true, false, true});
  ASSERT_EQ(clusters.size(), 2u);
  EXPECT_EQ(clusters[0], (std::vector<size_t>{0}));
  EXPECT_EQ(clusters[1], (std::vector<size_t>{2}));
}

TEST(Partitioner, IndependentBranchesShareACluster) {
  GraphView g;
  g.nodes = {node(0, {"x"}, {"a"}), node(1, {"y"}, {"b"}), node(2, {"x"}, {"c"})};
  auto clusters = partition_convex(g, {true, false, true});
  ASSERT_EQ(clusters.size(), 1u);
  EXPECT_EQ(clusters[0], (std::vector<size_t>{0, 2}));
}

TEST(Partitioner, ImplicitInputsCountAsEdges) {
  // 0 -> If(1, captures a) -> 2 : 0 and 2 must be split through the implicit edge.
  GraphView g;
  g.nodes = {node(0, {"x"}, {"a"}), node(1, {"cond"}, {"b"}), node(2, {"a", "b"}, {"c"})};
  auto clusters = partition_convex(g, {true, false, true}, {{}, {"a"}, {}});
  EXPECT_EQ(clusters.size(), 2u);
}

TEST(Partitioner, ClustersAreConvexOnRandomDags) {
  // Property check on pseudo-random DAGs: no path claimed(A) -> unclaimed -> claimed(A).
  for (unsigned seed = 1; seed < 200; ++seed) {
    unsigned state = seed;
    auto rnd = [&] { return state = state * 1103515245u + 12345u, (state >> 16) & 0x7fff; };
    const size_t n = 12;
    GraphView g;
    std::vector<bool> claimed(n);
    for (size_t i = 0; i < n; ++i) {
      std::vector<std::string> ins;
      for (size_t j = 0; j < i; ++j)
        if (rnd() % 4 == 0) ins.push_back("v" + std::to_string(j));
      g.nodes.push_back(node(i, ins, {"v" + std::to_string(i)}));
      claimed[i] = rnd() % 3 != 0;
    }
    auto clusters = partition_convex(g, claimed);
    std::vector<int> cluster_of(n, -1);
    for (size_t c = 0; c < clusters.size(); ++c)
      for (size_t i : clusters[c]) cluster_of[i] = static_cast<int>(c);
    // reach[i][j]: j reachable from i through at least one unclaimed node
    for (size_t a = 0; a < n; ++a) {
      if (cluster_of[a] < 0) continue;
      std::vector<int> state_of(n, 0);  // 0 unseen, 1 reached directly, 2 via unclaimed
      state_of[a] = 1;
      for (size_t j = a + 1; j < n; ++j) {
        for (const auto& in : g.nodes[j].inputs) {
          const size_t p = static_cast<size_t>(std::stoi(in.substr(1)));
          if (!state_of[p]) continue;
          int s = (state_of[p] == 2 || !claimed[p]) ? 2 : 1;
          state_of[j] = std::max(state_of[j], s);
        }
        if (state_of[j] == 2) {
          EXPECT_NE(cluster_of[j], cluster_of[a]) << "seed " << seed;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ortmlx
