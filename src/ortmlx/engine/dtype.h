// ONNX element types <-> MLX dtypes.
#pragma once

#include <optional>

#include <mlx/dtype.h>

#include "ortmlx/graph/graph_view.h"

namespace ortmlx {

// MLX dtype for an ONNX element type; nullopt where we do not run that type (string, float64).
std::optional<mlx::core::Dtype> to_mlx_dtype(ElemType t);
ElemType from_mlx_dtype(mlx::core::Dtype d);
inline bool mlx_supports(ElemType t) {
  return to_mlx_dtype(t).has_value();
}
inline bool is_float_type(ElemType t) {
  return t == ElemType::kFloat || t == ElemType::kFloat16 || t == ElemType::kBFloat16;
}
inline bool is_signed_int_type(ElemType t) {
  return t == ElemType::kInt8 || t == ElemType::kInt16 || t == ElemType::kInt32 ||
         t == ElemType::kInt64;
}
inline bool is_unsigned_int_type(ElemType t) {
  return t == ElemType::kUInt8 || t == ElemType::kUInt16 || t == ElemType::kUInt32 ||
         t == ElemType::kUInt64;
}
inline bool is_int_type(ElemType t) {
  return is_signed_int_type(t) || is_unsigned_int_type(t);
}

}  // namespace ortmlx
