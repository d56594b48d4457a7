// TranslationContext: the value environment while a Plan's nodes are turned into MLX ops.
// Translators resolve input names to arrays, build MLX ops, and bind their outputs.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <mlx/array.h>
#include <mlx/ops.h>

#include "ortmlx/engine/plan.h"

namespace ortmlx {

// Thrown by a translator that cannot be traced for mlx::compile (e.g. it needs input data on
// the host, or a custom kernel refuses placeholders): the executor runs that plan eagerly.
class NotCompilable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown while tracing for mlx::compile where an eager run must come first: a Loop whose
// condition is a runtime value compiles unrolled on the iteration count of its latest eager run
// (ops/control_flow.cpp), which the plan has not seen yet. The executor runs that run eagerly
// and keeps compilation on.
class NotCompilableYet : public NotCompilable {
 public:
  using NotCompilable::NotCompilable;
};

class SegmentStore;

class TranslationContext {
 public:
  TranslationContext(const Plan& plan, mlx::core::StreamOrDevice stream = {});
  // The scope of a control-flow body inside `enclosing`: names the body does not bind resolve in
  // the enclosing scopes (outer-scope values); runtime checks and path marks go to the outermost
  // context, which the executor reads.
  TranslationContext(const Plan& body, TranslationContext& enclosing);
  // A compiled segment of `plan` inside the eager scope `eager` (engine/segments.h): a root of
  // its own (compiling, its own path marks and checks) that takes constants from the enclosing
  // scopes but never their runtime values, which a compiled function would keep as constants:
  // the segment binds those it reads as its inputs, and resolving any other throws.
  struct Sealed {};
  TranslationContext(const Plan& plan, const TranslationContext& eager, Sealed);
  TranslationContext(const TranslationContext&) = delete;
  TranslationContext& operator=(const TranslationContext&) = delete;

  // The array bound to a value name (fused input, constant, or an earlier node's output).
  mlx::core::array resolve(const std::string& name) const;
  // Input i of a node; throws with the node's label when absent.
  mlx::core::array input(const NodeDesc& node, size_t i) const;
  bool has(const std::string& name) const;
  // The runtime value `name` resolves to (bound in this scope or an enclosing one), or nothing
  // when it resolves to a constant or to nothing.
  std::optional<mlx::core::array> runtime_value(const std::string& name) const;
  void bind(const std::string& name, mlx::core::array value);
  // The value bound to `name` by bind() (not a constant's), and its removal: for passes that
  // rebind a node's inputs around its translation (engine/layout.h).
  std::optional<mlx::core::array> bound(const std::string& name) const;
  void unbind(const std::string& name);
  // Binds output i of a node (absent optional outputs are skipped).
  void bind_output(const NodeDesc& node, size_t i, mlx::core::array value);

  // A value computed from constants only, by `make`, evaluated once per plan and kept with it:
  // later traces and runs get the stored array. mlx::compile does not fold constants, so a
  // compiled graph would otherwise redo the derivation (e.g. a convolution weight's transpose
  // and its contiguous copy) on every run. `key` names the value within the plan.
  mlx::core::array derived_constant(const std::string& key,
                                    const std::function<mlx::core::array()>& make) const;

  // Host copy of a constant value, or nullptr when the value is not a constant.
  const ConstTensor* constant(const std::string& name) const;
  const ConstTensor* constant_input(const NodeDesc& node, size_t i) const;

  mlx::core::StreamOrDevice stream() const { return stream_; }
  // The session's knobs (e.g. the AttentionVJP dense byte budget).
  const EpOptions& options() const { return root_->plan_.options; }

  // The plan (or body) this scope translates.
  const Plan& plan() const { return plan_; }

  // True while the plan is traced for mlx::compile: inputs are placeholders without data and
  // must not be evaluated or read. A translator that needs them throws NotCompilable.
  bool compiling() const { return root_->compiling_; }
  void set_compiling(bool compiling) { root_->compiling_ = compiling; }

  // The compiled segments of eager translation (engine/segments.h), set on the root by the
  // executor; null: every node translates on its own.
  SegmentStore* segments() const { return root_->compiling_ ? nullptr : root_->segments_; }
  void set_segments(SegmentStore* store) { root_->segments_ = store; }

  // Records that a fused fast path ran (e.g. "onnax GEMM attention VJP"); read by diagnostics.
  void mark_fast(const NodeDesc& node, std::string label);
  // Records that a composed fallback ran where a fast path exists, with the reason.
  void mark_composed(const NodeDesc& node, std::string reason);
  struct PathMark {
    std::string node;
    std::string label;
    bool fast;
  };
  const std::vector<PathMark>& path_marks() const { return root_->marks_; }
  // Marks recorded when a compiled segment was traced, replayed by each call of it.
  void add_marks(const std::vector<PathMark>& marks);

  // Records a runtime check: every element of `ok` (any shape and dtype; nonzero = true) must
  // hold on the live inputs, or the run fails with `message` after node's label. The check is
  // evaluated with the outputs, in the same evaluation (compiled or eager), and read on the host
  // afterwards: translators keep their ops memory-safe on bad input (e.g. clamped indices) and
  // raise through this. The message may depend on shapes and attributes, not on input values
  // (a compiled function replays it for every run of its shape key).
  void require(const NodeDesc& node, const mlx::core::array& ok, std::string message);
  struct Check {
    std::string node;  // the node's label
    std::string message;
    // An assumption of the compiled trace (speculate()), not an error of the input: when it
    // fails, the run is redone eagerly.
    bool speculation = false;
  };
  const std::vector<Check>& checks() const { return root_->checks_; }
  // One boolean scalar per check, in checks() order.
  const std::vector<mlx::core::array>& check_values() const { return root_->check_values_; }
  // A check a compiled segment computed: its recorded node label and message, `ok` one bool.
  void add_check(Check check, mlx::core::array ok);
  // The checks recorded from index `first` on hold vacuously where the boolean scalar `taken`
  // is false: those of an If branch translated for both conditions (ops/control_flow.cpp), which
  // must not fail a run that takes the other branch.
  void guard_checks(size_t first, const mlx::core::array& taken);

  // Records an assumption the trace made about runtime values (a Loop unrolled on its latest
  // iteration count): every element of `holds` must be true, else the executor throws
  // SpeculationMissed and redoes the run eagerly. Ordered with the runtime checks: a check
  // recorded after a failed assumption may have seen values of iterations that did not run.
  void speculate(const NodeDesc& node, const mlx::core::array& holds, std::string assumption);
  // Whether a Loop whose condition is a runtime value may be unrolled on its latest eager run's
  // iteration count while tracing (off after the executor saw such traces miss too often).
  bool unrolls_loops_on_history() const { return root_->unroll_on_history_; }
  void set_unrolls_loops_on_history(bool on) { root_->unroll_on_history_ = on; }

  // Small helpers translators share.
  mlx::core::array reshape(const mlx::core::array& a, const mlx::core::Shape& shape) const;
  mlx::core::array transpose(const mlx::core::array& a, const std::vector<int>& axes) const;
  mlx::core::array contiguous(const mlx::core::array& a) const;
  mlx::core::array zeros(const mlx::core::Shape& shape, mlx::core::Dtype dtype) const;

 private:
  const Plan& plan_;
  mlx::core::StreamOrDevice stream_;
  // Constants (and, unless sealed_, values) not bound here resolve in the enclosing scopes.
  mlx::core::array resolve_constant(const std::string& name) const;
  bool has_constant(const std::string& name) const;

  const TranslationContext* enclosing_ = nullptr;  // null for the fused node's own scope
  TranslationContext* root_ = this;
  bool sealed_ = false;  // a compiled segment: enclosing scopes give constants only
  SegmentStore* segments_ = nullptr;
  std::map<std::string, mlx::core::array> values_;
  std::vector<PathMark> marks_;
  std::vector<Check> checks_;
  std::vector<mlx::core::array> check_values_;
  bool compiling_ = false;
  bool unroll_on_history_ = true;
};

// Translates a control-flow body in a scope inside `enclosing`, its formal inputs bound to
// `inputs`; returns its outputs (unevaluated, in the body's output order). Errors name the body
// node that raised them.
std::vector<mlx::core::array> translate_body(TranslationContext& enclosing, const Plan& body,
                                             const std::vector<mlx::core::array>& inputs);

// Normalises a possibly negative axis against a rank; throws when out of range.
int normalize_axis(int64_t axis, int rank);

// Names rebound for one translation (a pass that hands a node other arrays for its inputs, e.g.
// engine/layout.h), restored when it leaves scope, also on an exception.
class Rebinding {
 public:
  explicit Rebinding(TranslationContext& ctx) : ctx_(ctx) {}
  Rebinding(const Rebinding&) = delete;
  Rebinding& operator=(const Rebinding&) = delete;
  ~Rebinding() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        ctx_.bind(it->first, *it->second);
      else
        ctx_.unbind(it->first);
    }
  }
  void bind(const std::string& name, mlx::core::array value) {
    saved_.emplace_back(name, ctx_.bound(name));
    ctx_.bind(name, std::move(value));
  }

 private:
  TranslationContext& ctx_;
  std::vector<std::pair<std::string, std::optional<mlx::core::array>>> saved_;
};

}  // namespace ortmlx
