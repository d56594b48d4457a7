// Groups claimed nodes into convex clusters: no path leaves a cluster through an unclaimed node
// and comes back in (ORT would otherwise drop the group and run it on CPU without telling us).
#pragma once

#include <vector>

#include "ortmlx/graph/graph_view.h"

namespace ortmlx {

// claimed[i] refers to graph.nodes[i]. Returns clusters of node indices, each in topological order.
// Each node's implicit inputs (subgraph captures) must be listed in NodeView::inputs' tail or in
// `extra_inputs[i]` so that the data flow through control-flow nodes is seen.
std::vector<std::vector<size_t>> partition_convex(
    const GraphView& graph, const std::vector<bool>& claimed,
    const std::vector<std::vector<std::string>>& extra_inputs = {});

}  // namespace ortmlx
