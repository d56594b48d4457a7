// Copies what we need out of an OrtGraph into a GraphView (valid only during the ORT callback).
#pragma once

#include <string>
#include <vector>

#include "ortmlx/graph/graph_view.h"
#include "ortmlx/plugin/ort_api.h"

namespace ortmlx::plugin {

struct ReadGraph {
  GraphView view;
  std::vector<const OrtNode*> ort_nodes;  // parallel to view.nodes (valid during the callback)
  std::vector<std::vector<std::string>> implicit_inputs;  // per node, for the partitioner
};

// Constant initializers up to `max_constant_bytes` get their data copied (all of them at Compile,
// small ones at GetCapability where claim predicates need shape/axes inputs).
ReadGraph read_graph(const OrtGraph* graph, size_t max_constant_bytes);

std::string value_name(const OrtValueInfo* value_info);

// One node (with its subgraphs, read recursively); its values' infos are noted in `view` and its
// implicit (outer-scope) inputs listed in `implicit`.
NodeView read_node(const OrtNode* node, size_t index, GraphView& view, size_t max_constant_bytes,
                   std::vector<std::string>& implicit);

}  // namespace ortmlx::plugin
