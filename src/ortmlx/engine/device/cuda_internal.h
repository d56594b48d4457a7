// What device/cuda.cpp shares with device/cuda_graph_replay.cpp (the CUDA flavour only).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <vector>

namespace ortmlx::device {

// Throws std::runtime_error naming `what` when `err` is an error (and clears CUDA's last error).
void check(cudaError_t err, const char* what);
// MLX's CUDA stream for the default GPU stream: work queued there is ordered with MLX's kernels.
cudaStream_t mlx_stream();
// Queues plain copies on `s` (one batched call where the driver takes it); no wait.
void queue_copies(std::vector<void*>& dsts, std::vector<const void*>& srcs,
                  std::vector<size_t>& sizes, cudaStream_t s);

// While a graph capture runs on this thread (graph_replay.h), device_block() takes the blocks it
// cannot reuse from the pool as the graph's own allocations and lists them here instead of in
// its block cache: the captured run owns them (its launches write them), and frees them when it
// is dropped. nullptr: no capture.
void set_capture_blocks(std::vector<void*>* blocks);

}  // namespace ortmlx::device
