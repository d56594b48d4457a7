#include "ortmlx/graph/partitioner.h"

#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>

namespace ortmlx {

// Each node gets a level: the largest number of claimed->unclaimed transitions on any path from a
// graph source to it. Claimed nodes with equal levels form one cluster. Such a cluster is convex:
// a path a -> u -> ... -> b with u unclaimed crosses at least one transition after a, so b's level
// exceeds a's. Clusters may hold independent branches; that is fine (one MLX graph, one eval).
std::vector<std::vector<size_t>> partition_convex(
    const GraphView& graph, const std::vector<bool>& claimed,
    const std::vector<std::vector<std::string>>& extra_inputs) {
  const size_t n = graph.nodes.size();
  std::unordered_map<std::string, size_t> producer;
  for (size_t i = 0; i < n; ++i)
    for (const auto& out : graph.nodes[i].outputs)
      if (!out.empty()) producer[out] = i;

  std::vector<int> level(n, 0);
  for (size_t i = 0; i < n; ++i) {
    int lv = 0;
    auto visit = [&](const std::string& name) {
      if (name.empty()) return;
      auto it = producer.find(name);
      if (it == producer.end() || it->second >= i) return;
      const size_t p = it->second;
      lv = std::max(lv, level[p] + ((claimed[p] && !claimed[i]) ? 1 : 0));
    };
    for (const auto& in : graph.nodes[i].inputs) visit(in);
    if (i < extra_inputs.size())
      for (const auto& in : extra_inputs[i]) visit(in);
    level[i] = lv;
  }

  std::map<int, std::vector<size_t>> by_level;
  for (size_t i = 0; i < n; ++i)
    if (claimed[i]) by_level[level[i]].push_back(i);
  std::vector<std::vector<size_t>> clusters;
  for (auto& [lv, members] : by_level) clusters.push_back(std::move(members));
  return clusters;
}

}  // namespace ortmlx
