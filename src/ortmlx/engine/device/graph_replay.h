// Graph replay: a compiled run captured once as a CUDA graph and launched again for the later runs
// of its shape key (the CUDA flavour, on by default; ONNXRUNTIME_EP_MLX_GRAPH_REPLAY=0 turns it
// off; docs/GPU.md).
//
// Why: small and mid-sized models leave the GPU waiting for the host. Each run calls the compiled
// function (MLX rebuilds its graph of arrays) and evaluates it: every primitive's eval_gpu
// allocates, looks up its kernel, packs arguments and launches, several microseconds a kernel
// (bench/results/gpu_profile.md). A compiled function launches the same kernels with the same
// arguments on every run of a shape key except for the addresses of its inputs. So one run of
// the key is evaluated under stream capture on MLX's stream, each primitive's eval_gpu called in
// dependency order as mx::eval would; later runs copy their inputs into the captured run's input
// buffers, launch the graph and read the captured run's output buffers.
//
// Memory: a replay writes the buffers the capture saw, so a captured run owns every one of them
// for its lifetime: its inputs, every array of its graph (constants included), and the
// temporaries MLX's primitives handed to the command encoder during the capture (workspaces,
// contiguous copies). None of them goes back to MLX's cache while the graph can still be launched,
// so no later allocation (a constant of another session, say) shares memory with it. Allocations
// that miss MLX's cache during the capture are stream-ordered allocations on the capturing
// stream, which CUDA records as the graph's own memory (fixed addresses; instantiated with
// auto-free on launch, so each launch takes them again). The EP's own blocks (device_block: the
// outputs of its primitives, e.g. cuDNN convolutions) that miss its block cache are instead plain
// pool blocks taken outside the capture and owned by the captured run, so no launch allocates
// them; ONNXRUNTIME_EP_MLX_GRAPH_REPLAY_ALLOC=graph makes them memory nodes too (A/B).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <mlx/array.h>

namespace ortmlx::device {

class CapturedRun;
struct CapturedRunDeleter {
  void operator()(CapturedRun* run) const;  // waits for its last launch, then frees
};
using CapturedRunPtr = std::unique_ptr<CapturedRun, CapturedRunDeleter>;

// True when runs can be captured in this process: the CUDA flavour with MLX on the GPU, MLX's own
// CUDA graphs off (they would hold the launches back until MLX commits them) and
// ONNXRUNTIME_EP_MLX_GRAPH_REPLAY not 0 (read each time: an executor asks when it is made).
bool graph_replay_available();

// A capture that failed after it began: the outputs it was given are marked evaluated but hold
// nothing valid; the caller must build and evaluate them again. The buffers of the failed capture
// are kept for the life of the process (some may be addresses of a graph that never existed).
class CaptureFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Capture {
  CapturedRunPtr run;   // set: `outputs` are evaluated (their kernels queued on MLX's stream)
  std::string why_not;  // run unset: why the graph was not captured; nothing was evaluated
};

// Evaluates `outputs`, unevaluated arrays built from `inputs` by a compiled function, by capturing
// their kernels and launching the graph once. The graph's work is queued on MLX's stream; a copy
// queued there afterwards (device::copy_out) sees its results. Throws CaptureFailed (see above).
Capture capture_run(const std::vector<mlx::core::array>& outputs,
                    const std::vector<mlx::core::array>& inputs);

// Copies `inputs` (same shapes and dtypes as the captured ones) into the captured run's input
// buffers and launches the graph on MLX's stream. Returns the outputs: arrays over the captured
// run's buffers, valid until its next launch; read them through device::copy_out.
std::vector<mlx::core::array> replay_run(CapturedRun& run,
                                         const std::vector<mlx::core::array>& inputs);

// How many of the EP's blocks (device_block) the capture had to allocate, its block cache holding
// none of their size: the captured run holds them (graph_replay.capture_blocks in the report).
size_t capture_allocations(const CapturedRun& run);

// Seconds the GPU spent on the run's latest launch (CUDA events around the graph launch, the
// input copies before it not counted), or a negative value when unknown. Call after something
// waited for the launch (device::copy_out does): the run's report counts this as its evaluation,
// which the host does not wait for inside replay_run.
double replay_gpu_seconds(CapturedRun& run);

}  // namespace ortmlx::device
