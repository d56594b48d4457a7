#include "ortmlx/engine/executor.h"

#include <mlx/transforms.h>

#include "ortmlx/engine/dtype.h"

namespace ortmlx {

namespace mx = mlx::core;

std::mutex& mlx_mutex() {
  static std::mutex m;
  return m;
}

Executor::Executor(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {}

std::vector<mx::array> Executor::trace(const std::vector<mx::array>& inputs,
                                       std::vector<TranslationContext::PathMark>* marks) const {
  const Plan& plan = *plan_;
  if (inputs.size() != plan.input_names.size())
    throw NodeError("fused node " + plan.name + " expected " +
                    std::to_string(plan.input_names.size()) + " inputs, got " +
                    std::to_string(inputs.size()));
  TranslationContext ctx(plan);
  for (size_t i = 0; i < inputs.size(); ++i) ctx.bind(plan.input_names[i], inputs[i]);
  for (const auto& node : plan.nodes) {
    try {
      node.entry->translate(ctx, node);
      for (size_t i = 0; i < node.outputs.size(); ++i)
        if (!node.outputs[i].empty() && !ctx.has(node.outputs[i]))
          throw std::runtime_error("translator did not produce output '" + node.outputs[i] + "'");
    } catch (const NodeError&) {
      throw;
    } catch (const std::exception& e) {
      throw NodeError(node.label() + ": " + e.what());
    }
  }
  std::vector<mx::array> outputs;
  outputs.reserve(plan.output_names.size());
  for (size_t i = 0; i < plan.output_names.size(); ++i) {
    mx::array out = ctx.resolve(plan.output_names[i]);
    const ElemType want = plan.output_infos[i].dtype;
    if (want != ElemType::kUndefined && from_mlx_dtype(out.dtype()) != want)
      throw NodeError("fused node " + plan.name + ": output '" + plan.output_names[i] +
                      "' has type " + elem_type_name(from_mlx_dtype(out.dtype())) +
                      " but ONNX expects " + elem_type_name(want));
    outputs.push_back(mx::contiguous(out));
  }
  if (marks) *marks = ctx.path_marks();
  return outputs;
}

RunResult Executor::run(const std::vector<mx::array>& inputs) {
  RunResult result;
  result.outputs = trace(inputs, &result.marks);
  try {
    mx::eval(result.outputs);
  } catch (const std::exception& e) {
    throw NodeError("fused node " + plan_->name + ": MLX evaluation failed: " + e.what());
  }
  return result;
}

}  // namespace ortmlx
