// Read-only view of an ONNX graph, copied out of ORT's OrtGraph during a callback.
// Nothing here refers to ORT types: the plugin layer fills these structs, everything else reads
// them.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ortmlx {

// ONNX TensorProto.DataType codes (same numbering as ONNXTensorElementDataType).
enum class ElemType : int32_t {
  kUndefined = 0,
  kFloat = 1,
  kUInt8 = 2,
  kInt8 = 3,
  kUInt16 = 4,
  kInt16 = 5,
  kInt32 = 6,
  kInt64 = 7,
  kString = 8,
  kBool = 9,
  kFloat16 = 10,
  kDouble = 11,
  kUInt32 = 12,
  kUInt64 = 13,
  kBFloat16 = 16,
};

const char* elem_type_name(ElemType t);
size_t elem_type_size(ElemType t);  // 0 for unsupported/variable-size types

// Static type and shape of a value as ORT knows it at partition/compile time.
struct TensorInfo {
  ElemType dtype = ElemType::kUndefined;
  bool has_shape = false;      // false: rank unknown
  std::vector<int64_t> shape;  // -1 for a dynamic (symbolic or unknown) dimension

  int64_t rank() const { return has_shape ? static_cast<int64_t>(shape.size()) : -1; }
  bool is_static() const;
};

// A constant tensor copied out of the graph (initializer or tensor attribute).
struct ConstTensor {
  ElemType dtype = ElemType::kUndefined;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // row-major, densely packed

  int64_t numel() const;
  // Values converted to int64 (integer types only); nullopt for other types.
  std::optional<std::vector<int64_t>> as_int64() const;
  std::optional<std::vector<double>> as_double() const;
};

struct GraphView;

using AttrValue =
    std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>,
                 std::vector<std::string>, std::shared_ptr<const ConstTensor>>;

struct NodeView {
  size_t index = 0;  // position in GraphView::nodes (topological order)
  std::string name;
  std::string op_type;
  std::string domain;  // "" for the default ONNX domain
  int since_version = 0;
  std::vector<std::string> inputs;  // "" marks an absent optional input
  std::vector<std::string> outputs;
  std::map<std::string, AttrValue> attrs;
  bool has_subgraphs = false;
  // Graph-typed attributes (If's then_branch/else_branch, Loop's and Scan's body), by attribute
  // name, read recursively: control-flow ops translate their bodies like a fused graph.
  std::map<std::string, std::shared_ptr<const GraphView>> subgraphs;

  bool has_attr(const std::string& key) const { return attrs.count(key) != 0; }
  int64_t attr_int(const std::string& key, int64_t fallback) const;
  float attr_float(const std::string& key, float fallback) const;
  std::string attr_string(const std::string& key, const std::string& fallback) const;
  std::optional<std::vector<int64_t>> attr_ints(const std::string& key) const;
  std::optional<std::vector<float>> attr_floats(const std::string& key) const;
  // Qualified op name for messages: "Add", "com.microsoft.Attention".
  std::string qualified_op() const;
};

struct GraphView {
  std::vector<NodeView> nodes;  // topological order
  std::map<std::string, TensorInfo> value_infos;
  // Constant initializers whose data was copied (all of them at Compile; small ones at claim time).
  std::map<std::string, std::shared_ptr<const ConstTensor>> constants;
  // Names of all constant initializers, including those whose data was not copied.
  std::map<std::string, TensorInfo> constant_names;
  std::vector<std::string> graph_inputs;
  std::vector<std::string> graph_outputs;

  const TensorInfo* info(const std::string& name) const;
  const ConstTensor* constant(const std::string& name) const;
  bool is_constant(const std::string& name) const { return constant_names.count(name) != 0; }
};

}  // namespace ortmlx
