// Lets device/cuda.cpp include MLX's <mlx/backend/cuda/device.h> (for its command encoder's CUDA
// stream): that header reaches <mlx/backend/cuda/lru_cache.h>, which includes <fmt/format.h>
// for one error message inside a member template that this project never instantiates, and the
// MLX wheel ships no fmt headers. A declaration is all that the template's definition needs;
// nothing here is ever called (a call would fail to link). Only cuda.cpp sees this folder.
#pragma once

#include <string>

namespace fmt {
template <typename... Args>
std::string format(const char* pattern, Args&&... args);
}  // namespace fmt
