// Channels-last propagation through elementwise ops.
//
// MLX convolutions and pools are channels-last; their ONNX (NCHW) outputs are NCHW *views* of
// NHWC arrays (a transpose is a view). A unary op keeps its input's strides, but a binary op on
// such a view (a per-channel scale, a residual add), and any op inside a kernel that
// mlx::compile fuses, writes a new row-contiguous NCHW array, which the next convolution copies
// back to NHWC. So an elementwise node whose inputs include such views runs on the NHWC arrays
// themselves (the other operands, right-aligned to rank 4, permuted the same way as views) and
// its output is bound as an NCHW view again: the data stays NHWC from one convolution to the
// next, and the one transpose copy happens where a layout-dependent op (Reshape, Flatten, a
// fused output) reads it. Elementwise results do not depend on the memory layout, so this
// changes no value. On unless fast_patterns=0.
#pragma once

#include <optional>

#include <mlx/array.h>

#include "ortmlx/engine/translation_context.h"

namespace ortmlx {

// The NHWC array `a` is an NCHW view of (a rank-4 Transpose with axes {0, 3, 1, 2}).
std::optional<mlx::core::array> channels_last_source(const mlx::core::array& a);

// The NCHW view of an NHWC array.
mlx::core::array channels_first_view(const mlx::core::array& nhwc, mlx::core::StreamOrDevice s);

// Translates `node` on channels-last arrays when it is a default-domain elementwise op with at
// least one input that is an NCHW view of an NHWC array (and no input of rank above 4), a
// GlobalAveragePool of a float32 such view, or a Concat of rank-4 inputs with such a view among
// them; returns false, having done nothing, otherwise.
bool translate_channels_last(TranslationContext& ctx, const NodeDesc& node);

}  // namespace ortmlx
