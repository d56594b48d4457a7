#include "ortmlx/graph/graph_view.h"

#include <cstring>
#include <type_traits>

namespace ortmlx {

const char* elem_type_name(ElemType t) {
  switch (t) {
    case ElemType::kFloat:
      return "float32";
    case ElemType::kUInt8:
      return "uint8";
    case ElemType::kInt8:
      return "int8";
    case ElemType::kUInt16:
      return "uint16";
    case ElemType::kInt16:
      return "int16";
    case ElemType::kInt32:
      return "int32";
    case ElemType::kInt64:
      return "int64";
    case ElemType::kString:
      return "string";
    case ElemType::kBool:
      return "bool";
    case ElemType::kFloat16:
      return "float16";
    case ElemType::kDouble:
      return "float64";
    case ElemType::kUInt32:
      return "uint32";
    case ElemType::kUInt64:
      return "uint64";
    case ElemType::kBFloat16:
      return "bfloat16";
    default:
      return "undefined";
  }
}

size_t elem_type_size(ElemType t) {
  switch (t) {
    case ElemType::kBool:
    case ElemType::kUInt8:
    case ElemType::kInt8:
      return 1;
    case ElemType::kUInt16:
    case ElemType::kInt16:
    case ElemType::kFloat16:
    case ElemType::kBFloat16:
      return 2;
    case ElemType::kFloat:
    case ElemType::kInt32:
    case ElemType::kUInt32:
      return 4;
    case ElemType::kDouble:
    case ElemType::kInt64:
    case ElemType::kUInt64:
      return 8;
    default:
      return 0;
  }
}

bool TensorInfo::is_static() const {
  if (!has_shape) return false;
  for (int64_t d : shape)
    if (d < 0) return false;
  return true;
}

int64_t ConstTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {
template <typename Out>
std::optional<std::vector<Out>> convert(const ConstTensor& t, bool allow_float) {
  const int64_t n = t.numel();
  std::vector<Out> out(static_cast<size_t>(n));
  auto read = [&](auto tag) {
    using T = decltype(tag);
    if (t.bytes.size() != static_cast<size_t>(n) * sizeof(T)) return false;
    for (int64_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, t.bytes.data() + i * sizeof(T), sizeof(T));
      out[static_cast<size_t>(i)] = static_cast<Out>(v);
    }
    return true;
  };
  bool ok = false;
  switch (t.dtype) {
    case ElemType::kInt64:
      ok = read(int64_t{});
      break;
    case ElemType::kInt32:
      ok = read(int32_t{});
      break;
    case ElemType::kInt16:
      ok = read(int16_t{});
      break;
    case ElemType::kInt8:
      ok = read(int8_t{});
      break;
    case ElemType::kUInt8:
      ok = read(uint8_t{});
      break;
    case ElemType::kUInt16:
      ok = read(uint16_t{});
      break;
    case ElemType::kUInt32:
      ok = read(uint32_t{});
      break;
    case ElemType::kUInt64:
      ok = read(uint64_t{});
      break;
    case ElemType::kBool:
      ok = read(uint8_t{});
      break;
    case ElemType::kFloat:
      ok = allow_float && read(float{});
      break;
    case ElemType::kDouble:
      ok = allow_float && read(double{});
      break;
    default:
      ok = false;
  }
  if (!ok) return std::nullopt;
  return out;
}
}  // namespace

std::optional<std::vector<int64_t>> ConstTensor::as_int64() const {
  return convert<int64_t>(*this, false);
}
std::optional<std::vector<double>> ConstTensor::as_double() const {
  return convert<double>(*this, true);
}

namespace {
// The attribute `key` when present with type T, else nullptr.
template <typename T>
const T* find_attr(const NodeView& n, const std::string& key) {
  auto it = n.attrs.find(key);
  return it == n.attrs.end() ? nullptr : std::get_if<T>(&it->second);
}
}  // namespace

int64_t NodeView::attr_int(const std::string& key, int64_t fallback) const {
  const auto* v = find_attr<int64_t>(*this, key);
  return v ? *v : fallback;
}

float NodeView::attr_float(const std::string& key, float fallback) const {
  const auto* v = find_attr<float>(*this, key);
  return v ? *v : fallback;
}

std::string NodeView::attr_string(const std::string& key, const std::string& fallback) const {
  const auto* v = find_attr<std::string>(*this, key);
  return v ? *v : fallback;
}

std::optional<std::vector<int64_t>> NodeView::attr_ints(const std::string& key) const {
  const auto* v = find_attr<std::vector<int64_t>>(*this, key);
  return v ? std::optional(*v) : std::nullopt;
}

std::optional<std::vector<float>> NodeView::attr_floats(const std::string& key) const {
  const auto* v = find_attr<std::vector<float>>(*this, key);
  return v ? std::optional(*v) : std::nullopt;
}

std::string NodeView::qualified_op() const {
  if (domain.empty() || domain == "ai.onnx") return op_type;
  return domain + "." + op_type;
}

const TensorInfo* GraphView::info(const std::string& name) const {
  auto it = value_infos.find(name);
  return it == value_infos.end() ? nullptr : &it->second;
}

const ConstTensor* GraphView::constant(const std::string& name) const {
  auto it = constants.find(name);
  return it == constants.end() ? nullptr : it->second.get();
}

}  // namespace ortmlx
