#include "ortmlx/plugin/graph_reader.h"

#include <cstring>
#include <memory>

namespace ortmlx::plugin {

std::string value_name(const OrtValueInfo* vi) {
  if (vi == nullptr) return {};
  const char* name = nullptr;
  ORTMLX_CHECK(g_ort->GetValueInfoName(vi, &name));
  return name ? name : "";
}

namespace {

TensorInfo read_tensor_shape(const OrtTensorTypeAndShapeInfo* tsi) {
  TensorInfo info;
  ONNXTensorElementDataType et{};
  ORTMLX_CHECK(g_ort->GetTensorElementType(tsi, &et));
  info.dtype = static_cast<ElemType>(et);
  info.has_shape = g_ort->TensorTypeAndShape_HasShape(tsi);
  if (info.has_shape) {
    size_t rank = 0;
    ORTMLX_CHECK(g_ort->GetDimensionsCount(tsi, &rank));
    info.shape.resize(rank);
    if (rank) ORTMLX_CHECK(g_ort->GetDimensions(tsi, info.shape.data(), rank));
    for (auto& d : info.shape)
      if (d < 0) d = -1;
  }
  return info;
}

std::shared_ptr<ConstTensor> copy_tensor(const OrtValue* value) {
  auto t = std::make_shared<ConstTensor>();
  OrtTensorTypeAndShapeInfo* raw = nullptr;
  ORTMLX_CHECK(g_ort->GetTensorTypeAndShape(value, &raw));
  std::unique_ptr<OrtTensorTypeAndShapeInfo, TensorInfoDeleter> tsi(raw);
  TensorInfo info = read_tensor_shape(tsi.get());
  t->dtype = info.dtype;
  t->shape = info.shape;
  const size_t esize = elem_type_size(t->dtype);
  if (esize == 0) return t;  // strings etc.: keep type and shape only
  const size_t bytes = static_cast<size_t>(t->numel()) * esize;
  t->bytes.resize(bytes);
  if (bytes) {
    const void* data = nullptr;
    ORTMLX_CHECK(g_ort->GetTensorData(value, &data));
    std::memcpy(t->bytes.data(), data, bytes);
  }
  return t;
}

AttrValue read_attr(const OrtOpAttr* attr, OrtOpAttrType type) {
  size_t size = 0;
  auto read_raw = [&](std::vector<char>& buf) {
    OrtStatus* st = g_ort->ReadOpAttr(attr, type, nullptr, 0, &size);
    if (st) g_ort->ReleaseStatus(st);  // expected: reports the size needed
    buf.resize(size);
    if (size) ORTMLX_CHECK(g_ort->ReadOpAttr(attr, type, buf.data(), size, &size));
    buf.resize(size);
  };
  switch (type) {
    case ORT_OP_ATTR_INT: {
      int64_t v = 0;
      ORTMLX_CHECK(g_ort->ReadOpAttr(attr, type, &v, sizeof(v), &size));
      return v;
    }
    case ORT_OP_ATTR_FLOAT: {
      float v = 0;
      ORTMLX_CHECK(g_ort->ReadOpAttr(attr, type, &v, sizeof(v), &size));
      return v;
    }
    case ORT_OP_ATTR_INTS: {
      std::vector<char> buf;
      read_raw(buf);
      std::vector<int64_t> v(buf.size() / sizeof(int64_t));
      if (!v.empty()) std::memcpy(v.data(), buf.data(), v.size() * sizeof(int64_t));
      return v;
    }
    case ORT_OP_ATTR_FLOATS: {
      std::vector<char> buf;
      read_raw(buf);
      std::vector<float> v(buf.size() / sizeof(float));
      if (!v.empty()) std::memcpy(v.data(), buf.data(), v.size() * sizeof(float));
      return v;
    }
    case ORT_OP_ATTR_STRING: {
      std::vector<char> buf;
      read_raw(buf);
      std::string s(buf.begin(), buf.end());
      while (!s.empty() && s.back() == '\0') s.pop_back();
      return s;
    }
    case ORT_OP_ATTR_STRINGS: {
      std::vector<char> buf;
      read_raw(buf);
      std::vector<std::string> v;
      std::string cur;
      for (char c : buf) {
        if (c == '\0') {
          v.push_back(cur);
          cur.clear();
        } else {
          cur.push_back(c);
        }
      }
      if (!cur.empty()) v.push_back(cur);
      return v;
    }
    case ORT_OP_ATTR_TENSOR: {
      OrtValue* raw = nullptr;
      ORTMLX_CHECK(g_ort->OpAttr_GetTensorAttributeAsOrtValue(attr, &raw));
      std::unique_ptr<OrtValue, ValueDeleter> value(raw);
      return std::shared_ptr<const ConstTensor>(copy_tensor(value.get()));
    }
    default:
      return std::string("<unsupported attribute type>");
  }
}

void note_value(GraphView& view, const OrtValueInfo* vi, size_t max_constant_bytes) {
  if (vi == nullptr) return;
  const std::string name = value_name(vi);
  if (name.empty() || view.value_infos.count(name)) return;
  const OrtTypeInfo* type_info = nullptr;
  ORTMLX_CHECK(g_ort->GetValueInfoTypeInfo(vi, &type_info));
  TensorInfo info;
  if (type_info) {
    ONNXType onnx_type{};
    ORTMLX_CHECK(g_ort->GetOnnxTypeFromTypeInfo(type_info, &onnx_type));
    if (onnx_type == ONNX_TYPE_TENSOR) {
      const OrtTensorTypeAndShapeInfo* tsi = nullptr;
      ORTMLX_CHECK(g_ort->CastTypeInfoToTensorInfo(type_info, &tsi));
      if (tsi) info = read_tensor_shape(tsi);
    }
  }
  view.value_infos[name] = info;
  bool is_const = false;
  ORTMLX_CHECK(g_ort->ValueInfo_IsConstantInitializer(vi, &is_const));
  if (!is_const) return;
  view.constant_names[name] = info;
  const size_t esize = elem_type_size(info.dtype);
  int64_t numel = 1;
  for (int64_t d : info.shape) numel = d < 0 ? -1 : numel * d;
  if (esize == 0 || numel < 0 || static_cast<size_t>(numel) * esize > max_constant_bytes) return;
  const OrtValue* value = nullptr;
  ORTMLX_CHECK(g_ort->ValueInfo_GetInitializerValue(vi, &value));
  if (value) view.constants[name] = copy_tensor(value);
}

template <typename CountFn, typename GetFn>
std::vector<const OrtValueInfo*> read_list(CountFn count_fn, GetFn get_fn) {
  size_t n = 0;
  ORTMLX_CHECK(count_fn(&n));
  std::vector<const OrtValueInfo*> v(n, nullptr);
  if (n) ORTMLX_CHECK(get_fn(v.data(), n));
  return v;
}

}  // namespace

NodeView read_node(const OrtNode* n, size_t index, GraphView& view, size_t max_constant_bytes,
                   std::vector<std::string>& implicit) {
  NodeView node;
  node.index = index;
  const char* s = nullptr;
  ORTMLX_CHECK(g_ort->Node_GetName(n, &s));
  node.name = s ? s : "";
  ORTMLX_CHECK(g_ort->Node_GetOperatorType(n, &s));
  node.op_type = s ? s : "";
  ORTMLX_CHECK(g_ort->Node_GetDomain(n, &s));
  node.domain = s ? s : "";
  if (node.domain == "ai.onnx") node.domain.clear();
  ORTMLX_CHECK(g_ort->Node_GetSinceVersion(n, &node.since_version));

  for (const OrtValueInfo* vi :
       read_list([&](size_t*c) { return g_ort->Node_GetNumInputs(n, c); },
                 [&](const OrtValueInfo**v, size_t c) { return g_ort->Node_GetInputs(n, v, c); })) {
    note_value(view, vi, max_constant_bytes);
    node.inputs.push_back(value_name(vi));
  }
  for (const OrtValueInfo* vi : read_list(
           [&](size_t*c) { return g_ort->Node_GetNumOutputs(n, c); },
           [&](const OrtValueInfo**v, size_t c) { return g_ort->Node_GetOutputs(n, v, c); })) {
    note_value(view, vi, max_constant_bytes);
    node.outputs.push_back(value_name(vi));
  }
  // Outer-scope values a subgraph reads: noted here too, so that the enclosing graph knows their
  // types and constant data (a body translated by the EP resolves them in the enclosing scope).
  for (const OrtValueInfo* vi :
       read_list([&](size_t*c) { return g_ort->Node_GetNumImplicitInputs(n, c); },
                 [&](const OrtValueInfo**v, size_t c) {
                   return g_ort->Node_GetImplicitInputs(n, v, c);
                 })) {
    note_value(view, vi, max_constant_bytes);
    implicit.push_back(value_name(vi));
  }

  size_t num_subgraphs = 0;
  ORTMLX_CHECK(g_ort->Node_GetNumSubgraphs(n, &num_subgraphs));
  node.has_subgraphs = num_subgraphs > 0;
  if (num_subgraphs) {
    std::vector<const OrtGraph*> graphs(num_subgraphs, nullptr);
    std::vector<const char*> names(num_subgraphs, nullptr);
    ORTMLX_CHECK(g_ort->Node_GetSubgraphs(n, graphs.data(), num_subgraphs, names.data()));
    for (size_t g = 0; g < num_subgraphs; ++g)
      node.subgraphs[names[g] ? names[g] : ""] =
          std::make_shared<const GraphView>(read_graph(graphs[g], max_constant_bytes).view);
  }

  size_t num_attrs = 0;
  ORTMLX_CHECK(g_ort->Node_GetNumAttributes(n, &num_attrs));
  std::vector<const OrtOpAttr*> attrs(num_attrs, nullptr);
  if (num_attrs) ORTMLX_CHECK(g_ort->Node_GetAttributes(n, attrs.data(), num_attrs));
  for (const OrtOpAttr* a : attrs) {
    const char* an = nullptr;
    ORTMLX_CHECK(g_ort->OpAttr_GetName(a, &an));
    OrtOpAttrType type{};
    // Attribute types the C API cannot name (TypeProto, sparse tensors: e.g. Optional's `type`)
    // are kept as unreadable, so that claims refuse them instead of the whole graph failing.
    if (OrtStatus* st = g_ort->OpAttr_GetType(a, &type)) {
      g_ort->ReleaseStatus(st);
      node.attrs[an ? an : ""] = std::string("<unsupported attribute type>");
      continue;
    }
    if (type == ORT_OP_ATTR_GRAPH) continue;  // read above, through Node_GetSubgraphs
    node.attrs[an ? an : ""] = read_attr(a, type);
  }
  return node;
}

ReadGraph read_graph(const OrtGraph* graph, size_t max_constant_bytes) {
  ReadGraph out;
  GraphView& view = out.view;

  for (const OrtValueInfo* vi : read_list(
           [&](size_t*n) { return g_ort->Graph_GetNumInputs(graph, n); },
           [&](const OrtValueInfo**v, size_t n) { return g_ort->Graph_GetInputs(graph, v, n); })) {
    note_value(view, vi, max_constant_bytes);
    view.graph_inputs.push_back(value_name(vi));
  }
  for (const OrtValueInfo* vi : read_list(
           [&](size_t*n) { return g_ort->Graph_GetNumOutputs(graph, n); },
           [&](const OrtValueInfo**v, size_t n) { return g_ort->Graph_GetOutputs(graph, v, n); })) {
    note_value(view, vi, max_constant_bytes);
    view.graph_outputs.push_back(value_name(vi));
  }

  size_t num_nodes = 0;
  ORTMLX_CHECK(g_ort->Graph_GetNumNodes(graph, &num_nodes));
  out.ort_nodes.resize(num_nodes);
  if (num_nodes) ORTMLX_CHECK(g_ort->Graph_GetNodes(graph, out.ort_nodes.data(), num_nodes));

  for (size_t i = 0; i < num_nodes; ++i) {
    std::vector<std::string> implicit;
    view.nodes.push_back(read_node(out.ort_nodes[i], i, view, max_constant_bytes, implicit));
    out.implicit_inputs.push_back(std::move(implicit));
  }
  return out;
}

}  // namespace ortmlx::plugin
