#include "ortmlx/engine/dtype.h"

namespace ortmlx {

namespace mx = mlx::core;

std::optional<mx::Dtype> to_mlx_dtype(ElemType t) {
  switch (t) {
    case ElemType::kFloat:
      return mx::float32;
    case ElemType::kFloat16:
      return mx::float16;
    case ElemType::kBFloat16:
      return mx::bfloat16;
    case ElemType::kBool:
      return mx::bool_;
    case ElemType::kInt8:
      return mx::int8;
    case ElemType::kInt16:
      return mx::int16;
    case ElemType::kInt32:
      return mx::int32;
    case ElemType::kInt64:
      return mx::int64;
    case ElemType::kUInt8:
      return mx::uint8;
    case ElemType::kUInt16:
      return mx::uint16;
    case ElemType::kUInt32:
      return mx::uint32;
    case ElemType::kUInt64:
      return mx::uint64;
    default:
      return std::nullopt;  // float64 is CPU-only in MLX; strings are not arrays
  }
}

ElemType from_mlx_dtype(mx::Dtype d) {
  if (d == mx::float32) return ElemType::kFloat;
  if (d == mx::float16) return ElemType::kFloat16;
  if (d == mx::bfloat16) return ElemType::kBFloat16;
  if (d == mx::bool_) return ElemType::kBool;
  if (d == mx::int8) return ElemType::kInt8;
  if (d == mx::int16) return ElemType::kInt16;
  if (d == mx::int32) return ElemType::kInt32;
  if (d == mx::int64) return ElemType::kInt64;
  if (d == mx::uint8) return ElemType::kUInt8;
  if (d == mx::uint16) return ElemType::kUInt16;
  if (d == mx::uint32) return ElemType::kUInt32;
  if (d == mx::uint64) return ElemType::kUInt64;
  if (d == mx::float64) return ElemType::kDouble;
  return ElemType::kUndefined;
}

}  // namespace ortmlx
