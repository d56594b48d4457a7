// Convolution pieces shared by the float Conv family (ops/conv.cpp) and the integer ones
// (ops/quant_integer.cpp: ConvInteger, QLinearConv).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "ortmlx/ops/common.h"

namespace ortmlx::ops {

// Conv's attribute checks (strides, dilations, pads, kernel_shape, auto_pad, group) for an X of
// rank `rank` (3 to 5) with the weight as input `w_input`; `transpose` for ConvTranspose.
ClaimResult claim_conv_attributes(const ClaimContext& c, int64_t rank, size_t w_input,
                                  bool transpose = false);

// Convolution of X (N, C, s...) with W (M, C/groups, k...), both float32, under the node's
// strides, dilations and pads (auto_pad included): the result channels-last (N, s'..., M).
// `w_cl`: W already channels-last and contiguous, when the caller keeps one. Checks the ranks,
// kernel_shape and channel counts against the live shapes.
mx::array conv_forward_cl(const NodeDesc& n, const mx::array& x, const mx::array& w, int groups,
                          const std::optional<mx::array>& w_cl, mx::StreamOrDevice s);

// (N, C, s...) <-> (N, s..., C) permutations.
std::vector<int> to_channels_last(size_t rank);
std::vector<int> to_channels_first(size_t rank);

}  // namespace ortmlx::ops
