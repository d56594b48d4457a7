// Graph replay on MLX's CUDA backend (graph_replay.h says what and why).
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <mlx/backend/cuda/allocator.h>
#include <mlx/backend/cuda/device.h>
#include <mlx/device.h>
#include <mlx/primitives.h>
#include <mlx/stream.h>

#include "ortmlx/engine/device/cuda_internal.h"
#include "ortmlx/engine/device/device_memory.h"
#include "ortmlx/engine/device/graph_replay.h"
#include "ortmlx/engine/options.h"

namespace ortmlx::device {

namespace mx = mlx::core;

using Temporaries = std::vector<std::shared_ptr<mx::array::Data>>;

class CapturedRun {
 public:
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::vector<mx::array> held;  // inputs, constants and every array of the graph
  Temporaries temporaries;      // what the primitives gave the command encoder to keep
  std::vector<const void*> input_addresses;
  std::vector<size_t> input_bytes;
  std::vector<mx::array> outputs;
  std::vector<void*> blocks;  // device_block()'s allocations in the capture (cuda_internal.h)
  // Around each launch, for the report's evaluation time (replay_gpu_seconds); null when their
  // creation failed (the time is then unknown, the replay unaffected).
  cudaEvent_t launch_start = nullptr, launch_end = nullptr;
};

namespace {

// The command encoder's temporaries are private in MLX 0.32. A template argument of an explicit
// instantiation may name a private member, which gives this one accessor to the list.
Temporaries& encoder_temporaries(mx::cu::CommandEncoder& encoder);
template <Temporaries mx::cu::CommandEncoder::*Member>
struct TemporariesOf {
  friend Temporaries& encoder_temporaries(mx::cu::CommandEncoder& encoder) {
    return encoder.*Member;
  }
};
template struct TemporariesOf<&mx::cu::CommandEncoder::temporaries_>;

// The arrays a failed capture touched, never released: some hold addresses that the abandoned
// graph reserved and never backed, which must not reach MLX's cache.
void quarantine(std::vector<mx::array> arrays, Temporaries temporaries) {
  static std::mutex mu;
  static auto* kept = new std::vector<std::pair<std::vector<mx::array>, Temporaries>>();
  const std::lock_guard<std::mutex> lock(mu);
  kept->emplace_back(std::move(arrays), std::move(temporaries));
}

// Lists device_block()'s allocations for the capture in flight on this thread.
class CaptureBlocksScope {
 public:
  explicit CaptureBlocksScope(std::vector<void*>& blocks) { set_capture_blocks(&blocks); }
  ~CaptureBlocksScope() { set_capture_blocks(nullptr); }
  CaptureBlocksScope(const CaptureBlocksScope&) = delete;
  CaptureBlocksScope& operator=(const CaptureBlocksScope&) = delete;
};

// The unevaluated arrays behind `outputs` in dependency order (one entry per primitive: siblings
// come out of their first array's evaluation), and the evaluated arrays they read.
struct Tape {
  std::vector<mx::array> order;
  std::vector<mx::array> leaves;
};

Tape build_tape(const std::vector<mx::array>& outputs) {
  Tape tape;
  std::unordered_set<std::uintptr_t> seen;
  struct Frame {
    mx::array a;
    size_t next;
  };
  std::vector<Frame> stack;
  auto visit = [&](const mx::array& a) {
    if (!seen.insert(a.id()).second) return;
    if (a.status() != mx::array::Status::unscheduled) {
      tape.leaves.push_back(a);
      return;
    }
    for (const auto& s : a.siblings()) seen.insert(s.id());
    stack.push_back({a, 0});
  };
  for (const auto& o : outputs) {
    visit(o);
    while (!stack.empty()) {
      Frame& f = stack.back();
      if (f.next < f.a.inputs().size()) {
        const mx::array in = f.a.inputs()[f.next++];
        visit(in);  // may grow the stack: `f` is not used after this
      } else {
        tape.order.push_back(f.a);
        stack.pop_back();
      }
    }
  }
  return tape;
}

// Primitives whose eval_gpu may launch an instantiated CUDA graph: MLX runs cuDNN's fused SDPA
// (float16/bfloat16 only; the backward always) by populating a CUDA graph from cuDNN's plan and,
// with its own CUDA graphs off, launching it on the stream (DnnGraph::encode_graph). A capturing
// stream refuses the launch ("operation not permitted when stream is capturing", seen on an
// H100), and a capture that fails keeps its buffers for the life of the process: such tapes are
// not captured at all. (cuDNN's convolutions are captured: MLX runs them by stream capture.)
bool launches_graph_of_its_own(const mx::array& a) {
  const std::string_view name = a.primitive().name();
  if (name == "ScaledDotProductAttentionVJP") return true;
  if (name != "ScaledDotProductAttention" || a.inputs().empty()) return false;
  const mx::Dtype t = a.inputs()[0].dtype();
  return t == mx::float16 || t == mx::bfloat16;
}

// Why the tape cannot be captured ("" when it can). Nothing is evaluated here.
std::string refusal(const Tape& tape, const std::vector<mx::array>& inputs, const mx::Stream& s) {
  if (tape.order.empty()) return "nothing to launch";
  for (const auto& a : tape.order) {
    if (!a.has_primitive()) return "an array without a primitive";
    // mx::eval is never handed an empty array either (engine/executor.cpp, eval_outputs).
    for (const auto& o : a.outputs())
      if (o.size() == 0) return "an empty tensor";
    if (a.primitive().device() != mx::Device::gpu || a.primitive().stream() != s)
      return std::string(a.primitive().name()) + " runs off MLX's default GPU stream";
    if (launches_graph_of_its_own(a))
      return std::string(a.primitive().name()) +
             " may run cuDNN's SDPA, which MLX launches as a CUDA graph of its own";
  }
  for (const auto& a : inputs) {
    if (a.size() == 0) return "an empty input";
    if (a.status() == mx::array::Status::unscheduled || a.buffer().ptr() == nullptr)
      return "an input without a buffer";
  }
  return "";
}

// Node types a replay may launch: kernels, copies and fills, the graph's own allocations, and
// child graphs made of the same (host callbacks or events would belong to one run only).
bool launchable(cudaGraph_t graph, std::string& why) {
  size_t n = 0;
  check(cudaGraphGetNodes(graph, nullptr, &n), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> nodes(n);
  if (n) check(cudaGraphGetNodes(graph, nodes.data(), &n), "cudaGraphGetNodes");
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type{};
    check(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType");
    switch (type) {
      case cudaGraphNodeTypeKernel:
      case cudaGraphNodeTypeMemcpy:
      case cudaGraphNodeTypeMemset:
      case cudaGraphNodeTypeEmpty:
      case cudaGraphNodeTypeMemAlloc:
      case cudaGraphNodeTypeMemFree:
        break;
      case cudaGraphNodeTypeGraph: {
        cudaGraph_t child = nullptr;
        check(cudaGraphChildGraphNodeGetGraph(node, &child), "cudaGraphChildGraphNodeGetGraph");
        if (!launchable(child, why)) return false;
        break;
      }
      default:
        why =
            "the captured graph has a node of CUDA type " + std::to_string(static_cast<int>(type));
        return false;
    }
  }
  return true;
}

}  // namespace

void CapturedRunDeleter::operator()(CapturedRun* run) const {
  if (run == nullptr) return;
  // Its last launch may still be running; the buffers go back to MLX's cache afterwards. MLX's
  // stream is known on the MLX thread only (where executors are destroyed); elsewhere, the device.
  cudaStream_t s = nullptr;
  try {
    s = mlx_stream();
  } catch (...) {
  }
  (void)(s != nullptr ? cudaStreamSynchronize(s) : cudaDeviceSynchronize());
  if (run->launch_start != nullptr) (void)cudaEventDestroy(run->launch_start);
  if (run->launch_end != nullptr) (void)cudaEventDestroy(run->launch_end);
  if (run->exec != nullptr) (void)cudaGraphExecDestroy(run->exec);
  if (run->graph != nullptr) (void)cudaGraphDestroy(run->graph);
  // The graph's allocations outlive it until freed (CUDA's graph memory nodes); the last launch
  // has finished.
  for (void* p : run->blocks) (void)(s != nullptr ? cudaFreeAsync(p, s) : cudaFree(p));
  (void)cudaGetLastError();
  delete run;
}

bool graph_replay_available() {
  // Read for each fused node when its executor is made (a session's compile), so one process can
  // hold sessions with and without replay (bench/gpu_peer.py --ab).
  const char* e = std::getenv("ONNXRUNTIME_EP_MLX_GRAPH_REPLAY");
  // On unless the variable turns it off (0, false, off).
  return (e == nullptr || parse_flag(e)) && gpu_io_available() && !cuda_graphs_enabled();
}

Capture capture_run(const std::vector<mx::array>& outputs, const std::vector<mx::array>& inputs) {
  Capture result;
  const mx::Stream stream = mx::default_stream(mx::Device::gpu);
  Tape tape = build_tape(outputs);
  result.why_not = refusal(tape, inputs, stream);
  if (!result.why_not.empty()) return result;

  auto& encoder = mx::cu::get_command_encoder(stream);
  const cudaStream_t s = encoder.stream();
  Temporaries& temporaries = encoder_temporaries(encoder);
  const size_t temporaries_before = temporaries.size();
  CapturedRunPtr run(new CapturedRun);
  run->held = inputs;
  for (auto& a : tape.leaves) run->held.push_back(std::move(a));
  for (const auto& a : tape.order)
    for (auto& o : a.outputs()) run->held.push_back(std::move(o));

  // Relaxed mode: MLX's allocator asks the memory pool for its figures on a cache miss, which the
  // stricter modes refuse while any stream captures (seen on an H100). A synchronisation of the
  // capturing stream still fails the capture, and so does anything the graph cannot hold.
  const cudaError_t begun = cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
  if (begun != cudaSuccess) {
    (void)cudaGetLastError();
    result.why_not = std::string("the capture did not begin: ") + cudaGetErrorString(begun);
    return result;
  }
  std::string failure;
  try {
    const CaptureBlocksScope blocks(run->blocks);
    // What mx::eval does for each array of a GPU stream, minus the commits: each primitive
    // queues its kernels on the encoder's stream (MLX's CUDA graphs are off) and the outputs are
    // marked evaluated. The inputs stay referenced by `held`, so nothing is donated or freed.
    for (const auto& a : tape.order) {
      std::vector<mx::array> outs = a.outputs();
      a.primitive().eval_gpu(a.inputs(), outs);
      for (auto& o : outs) o.set_status(mx::array::Status::evaluated);
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t ended = cudaStreamEndCapture(s, &graph);
  if (failure.empty() && ended != cudaSuccess)
    failure = std::string("the capture ended with ") + cudaGetErrorString(ended);
  (void)cudaGetLastError();
  run->graph = graph;
  if (failure.empty() && temporaries.size() < temporaries_before)
    failure = "MLX committed its command buffer during the capture";
  if (temporaries.size() > temporaries_before)
    run->temporaries.assign(temporaries.begin() + static_cast<std::ptrdiff_t>(temporaries_before),
                            temporaries.end());
  if (failure.empty() && graph == nullptr) failure = "the capture returned no graph";
  try {
    if (failure.empty() && launchable(graph, failure)) {
      check(cudaGraphInstantiateWithFlags(&run->exec, graph,
                                          cudaGraphInstantiateFlagAutoFreeOnLaunch),
            "cudaGraphInstantiateWithFlags");
      check(cudaGraphLaunch(run->exec, s), "cudaGraphLaunch");
    } else if (failure.empty()) {
      failure = "the captured graph cannot be launched again";
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!failure.empty()) {
    if (run->exec != nullptr) (void)cudaGraphExecDestroy(run->exec);
    run->exec = nullptr;
    run->blocks.clear();  // never freed: addresses of a graph that may never have existed
    quarantine(std::move(run->held), std::move(run->temporaries));
    throw CaptureFailed("CUDA graph capture failed: " + failure);
  }

  for (const auto& a : inputs) {
    run->input_addresses.push_back(device_address(a));
    run->input_bytes.push_back(a.nbytes());
  }
  run->outputs = outputs;
  // As mx::eval does once an array is computed: drop the graph's edges (the buffers stay held).
  for (auto& a : tape.order) a.detach();
  result.run = std::move(run);
  return result;
}

std::vector<mx::array> replay_run(CapturedRun& run, const std::vector<mx::array>& inputs) {
  if (inputs.size() != run.input_addresses.size())
    throw std::runtime_error("graph replay: " + std::to_string(inputs.size()) +
                             " inputs for a run captured with " +
                             std::to_string(run.input_addresses.size()));
  std::vector<void*> dsts;
  std::vector<const void*> srcs;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].nbytes() != run.input_bytes[i])
      throw std::runtime_error("graph replay: input " + std::to_string(i) + " has " +
                               std::to_string(inputs[i].nbytes()) + " bytes, the capture had " +
                               std::to_string(run.input_bytes[i]));
    const void* src = device_address(inputs[i]);
    if (src == run.input_addresses[i]) continue;
    dsts.push_back(const_cast<void*>(run.input_addresses[i]));
    srcs.push_back(src);
    sizes.push_back(run.input_bytes[i]);
  }
  const cudaStream_t s = mlx_stream();
  if (!dsts.empty()) queue_copies(dsts, srcs, sizes, s);
  if (run.launch_start == nullptr && (cudaEventCreate(&run.launch_start) != cudaSuccess ||
                                      cudaEventCreate(&run.launch_end) != cudaSuccess)) {
    (void)cudaGetLastError();
    if (run.launch_start != nullptr) (void)cudaEventDestroy(run.launch_start);
    run.launch_start = run.launch_end = nullptr;
  }
  const bool timed =
      run.launch_end != nullptr && cudaEventRecord(run.launch_start, s) == cudaSuccess;
  check(cudaGraphLaunch(run.exec, s), "cudaGraphLaunch");
  if (timed) (void)cudaEventRecord(run.launch_end, s);
  (void)cudaGetLastError();
  return run.outputs;
}

size_t capture_allocations(const CapturedRun& run) {
  return run.blocks.size();
}

double replay_gpu_seconds(CapturedRun& run) {
  if (run.launch_end == nullptr || cudaEventQuery(run.launch_end) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1.0;
  }
  float ms = 0.0f;
  if (cudaEventElapsedTime(&ms, run.launch_start, run.launch_end) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1.0;
  }
  return static_cast<double>(ms) * 1e-3;
}

}  // namespace ortmlx::device
