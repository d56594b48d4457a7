// Builds without a GPU backend (MLX CPU, Metal): EP I/O stays in host memory.
#include <stdexcept>

#include "ortmlx/engine/device/device_memory.h"
#include "ortmlx/engine/device/graph_replay.h"

namespace ortmlx::device {

namespace {
[[noreturn]] void no_gpu() {
  throw std::runtime_error("device-resident I/O needs the CUDA flavour of ortmlx");
}
}  // namespace

bool gpu_io_available() {
  return false;
}
int gpu_ordinal() {
  return -1;
}
const char* gpu_name() {
  return "";
}
void* alloc_device(size_t) {
  return nullptr;
}
void free_device(void*) {}
void* alloc_pinned(size_t) {
  return nullptr;
}
void free_pinned(void*) {}
size_t device_free_bytes() {
  return 0;
}
void copy_bytes(void*, const void*, size_t) {
  no_gpu();
}
mlx::core::array new_device_array(const mlx::core::Shape&, mlx::core::Dtype) {
  no_gpu();
}
mlx::core::allocator::Data device_block(size_t, void*) {
  no_gpu();
}
const void* device_address(const mlx::core::array&) {
  no_gpu();
}
void* device_address(const mlx::core::allocator::Data&) {
  no_gpu();
}
void upload(const std::vector<Upload>&, bool) {
  no_gpu();
}
void wait_uploads() {}
void to_device(const mlx::core::array&, void*) {
  no_gpu();
}
void copy_out(const std::vector<CopyOut>& copies) {
  if (!copies.empty()) no_gpu();
}

class CapturedRun {};
void CapturedRunDeleter::operator()(CapturedRun* run) const {
  delete run;
}
bool graph_replay_available() {
  return false;
}
Capture capture_run(const std::vector<mlx::core::array>&, const std::vector<mlx::core::array>&) {
  return {nullptr, "graph replay needs the CUDA flavour of ortmlx"};
}
std::vector<mlx::core::array> replay_run(CapturedRun&, const std::vector<mlx::core::array>&) {
  no_gpu();
}
double replay_gpu_seconds(CapturedRun&) {
  return -1.0;
}
size_t capture_allocations(const CapturedRun&) {
  return 0;
}

}  // namespace ortmlx::device
