#include "ortmlx/ops/lazy_graph.h"

#include <cstdint>
#include <cstring>

#include <mlx/ops.h>
#include <mlx/primitives.h>

namespace ortmlx::ops {

bool made_by(const mx::array& a, const char* primitive) {
  return a.has_primitive() && std::strcmp(a.primitive().name(), primitive) == 0;
}

bool same_float_shape(const mx::array& a, const mx::array& like) {
  return a.dtype() == mx::float32 && a.shape() == like.shape();
}

std::optional<mx::array> broadcast_source(const mx::array& a, const mx::array& like) {
  if (!same_float_shape(a, like)) return std::nullopt;
  if (!made_by(a, "Broadcast")) return a;
  if (a.inputs().size() != 1) return std::nullopt;
  const mx::array& src = a.inputs()[0];
  if (src.dtype() != mx::float32 || src.ndim() > like.ndim()) return std::nullopt;
  const size_t pad = like.ndim() - src.ndim();
  for (size_t i = 0; i < src.ndim(); ++i)
    if (src.shape(static_cast<int>(i)) != 1 &&
        src.shape(static_cast<int>(i)) != like.shape(static_cast<int>(i + pad)))
      return std::nullopt;
  return src;
}

std::optional<mx::array> broadcast_vector(const mx::array& a, const mx::array& like) {
  if (!made_by(a, "Broadcast") || like.ndim() < 1) return std::nullopt;
  auto v = broadcast_source(a, like);
  if (!v || v->ndim() < 1 || v->shape(-1) != like.shape(-1) ||
      static_cast<int64_t>(v->size()) != like.shape(-1))
    return std::nullopt;
  return v;
}

std::optional<BiasAdd> bias_add(const mx::array& a, const mx::array& like) {
  // A 2-D Gemm's biased result given back its batch dims (x.reshape(-1, K) @ W + b, reshaped):
  // the same rows, so the bias stays a vector of the last axis.
  if (made_by(a, "Reshape") && a.inputs().size() == 1 && same_float_shape(a, like)) {
    const mx::array& rows = a.inputs()[0];
    if (rows.ndim() < 1 || rows.shape(-1) != a.shape(-1)) return std::nullopt;
    auto inner = bias_add(rows, rows);
    if (!inner) return std::nullopt;
    return BiasAdd{mx::reshape(inner->m, a.shape(), a.primitive().stream()), inner->bias};
  }
  if (!made_by(a, "Add") || a.inputs().size() != 2 || !same_float_shape(a, like))
    return std::nullopt;
  const mx::array &p = a.inputs()[0], &q = a.inputs()[1];
  if (auto v = broadcast_vector(q, like);
      v && same_float_shape(p, like) && !broadcast_vector(p, like))
    return BiasAdd{p, *v};
  if (auto v = broadcast_vector(p, like);
      v && same_float_shape(q, like) && !broadcast_vector(q, like))
    return BiasAdd{q, *v};
  return std::nullopt;
}

}  // namespace ortmlx::ops
