// Executor: runs a Plan on live inputs. v0 traces the plan eagerly through a TranslationContext
// and evaluates all outputs with ONE mlx::eval at the subgraph boundary.
#pragma once

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include <mlx/array.h>

#include "ortmlx/engine/plan.h"
#include "ortmlx/engine/translation_context.h"

namespace ortmlx {

// An error raised while building or running one node; the message names the node.
class NodeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// MLX evaluation is not re-entrant across threads for one graph; all EP work on MLX arrays
// (Compile-time constant upload and every Compute) holds this process-wide lock.
std::mutex& mlx_mutex();

struct RunResult {
  std::vector<mlx::core::array> outputs;  // evaluated, row-contiguous, in plan output order
  std::vector<TranslationContext::PathMark> marks;
};

class Executor {
 public:
  explicit Executor(std::shared_ptr<const Plan> plan);
  const Plan& plan() const { return *plan_; }

  // inputs follow plan().input_names. Throws NodeError naming the failing node.
  RunResult run(const std::vector<mlx::core::array>& inputs);

  // Traces the plan into output arrays without evaluating them (also used by compiled paths).
  std::vector<mlx::core::array> trace(const std::vector<mlx::core::array>& inputs,
                                      std::vector<TranslationContext::PathMark>* marks) const;

 private:
  std::shared_ptr<const Plan> plan_;
};

}  // namespace ortmlx
