// OrtEp for MLXExecutionProvider: GetCapability (claim + convex partition) and Compile (Plans).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "ortmlx/diagnostics/report.h"
#include "ortmlx/diagnostics/trace.h"
#include "ortmlx/engine/options.h"
#include "ortmlx/plugin/ort_api.h"

namespace ortmlx::plugin {

class MlxEpFactory;

class MlxEp : public OrtEp {
 public:
  MlxEp(MlxEpFactory& factory, const OrtSessionOptions* session_options, const OrtLogger* logger);
  ~MlxEp();

  const EpOptions& options() const { return options_; }
  SessionReport& report() { return *report_; }
  // The trace sink (ONNXRUNTIME_EP_MLX_TRACE / provider option "trace"), or nullptr when off.
  TraceSink* trace() const { return trace_.get(); }
  // Distinguishes the sessions of a process in traces.
  uint64_t session_id() const { return session_id_; }
  // Rewrites the JSON report when one was requested (after Compile and each Compute).
  void flush_report() const;

 private:
  static const char* ORT_API_CALL GetNameImpl(const OrtEp* self) noexcept;
  static OrtStatus* ORT_API_CALL GetCapabilityImpl(OrtEp* self, const OrtGraph* graph,
                                                   OrtEpGraphSupportInfo* info) noexcept;
  static OrtStatus* ORT_API_CALL CompileImpl(OrtEp* self, const OrtGraph** graphs,
                                             const OrtNode** fused_nodes, size_t count,
                                             OrtNodeComputeInfo** node_compute_infos,
                                             OrtNode** ep_context_nodes) noexcept;
  static void ORT_API_CALL ReleaseNodeComputeInfosImpl(OrtEp* self, OrtNodeComputeInfo** infos,
                                                       size_t count) noexcept;
  static OrtStatus* ORT_API_CALL IsConcurrentRunSupportedImpl(OrtEp* self,
                                                              bool* supported) noexcept;

  void get_capability(const OrtGraph* graph, OrtEpGraphSupportInfo* info);
  void compile(const OrtGraph** graphs, const OrtNode** fused_nodes, size_t count,
               OrtNodeComputeInfo** node_compute_infos);

  MlxEpFactory& factory_;
  const OrtLogger* logger_;
  EpOptions options_;
  std::unique_ptr<SessionReport> report_;
  std::shared_ptr<TraceSink> trace_;
  uint64_t session_id_ = 0;
};

}  // namespace ortmlx::plugin
