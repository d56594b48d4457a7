// Runs an ONNX model on MLXExecutionProvider from C++, the way an application would:
//   ortmlx_run_model /abs/path/libortmlx.so model.onnx [key=value ...]
// registers the plugin library, appends the EP's device with provider options
// (SessionOptionsAppendExecutionProvider_V2), feeds every input with data of its declared shape
// (symbolic dimensions = 1) and prints which execution provider ran each node.
#include <onnxruntime_cxx_api.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

constexpr const char* kEpName = "MLXExecutionProvider";

// Input data of the declared shape: a ramp in [-1, 1) for floats, small integers for int64.
Ort::Value make_input(const Ort::TypeInfo& info, std::vector<std::vector<float>>& floats,
                      std::vector<std::vector<int64_t>>& ints) {
  auto tensor = info.GetTensorTypeAndShapeInfo();
  std::vector<int64_t> shape = tensor.GetShape();
  size_t count = 1;
  for (int64_t& d : shape) {
    if (d < 0) d = 1;  // symbolic dimension
    count *= static_cast<size_t>(d);
  }
  auto memory = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  switch (tensor.GetElementType()) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: {
      auto& v = floats.emplace_back(count);
      for (size_t i = 0; i < count; ++i) v[i] = -1.0f + 2.0f * static_cast<float>(i % 97) / 97.0f;
      return Ort::Value::CreateTensor<float>(memory, v.data(), v.size(), shape.data(), shape.size());
    }
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: {
      auto& v = ints.emplace_back(count);
      for (size_t i = 0; i < count; ++i) v[i] = static_cast<int64_t>(i % 4);
      return Ort::Value::CreateTensor<int64_t>(memory, v.data(), v.size(), shape.data(),
                                               shape.size());
    }
    default:
      throw std::runtime_error("this example feeds float and int64 inputs only");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s /abs/path/libortmlx.so model.onnx [key=value ...]\n", argv[0]);
    return 2;
  }
  try {
    Ort::Env env(ORT_LOGGING_LEVEL_WARNING, "ortmlx_example");
    // ORT resolves a relative library path next to libonnxruntime, not the working directory.
    env.RegisterExecutionProviderLibrary(kEpName, argv[1]);

    std::vector<Ort::ConstEpDevice> devices;
    for (Ort::ConstEpDevice d : env.GetEpDevices())
      if (std::string(d.EpName()) == kEpName) devices.push_back(d);
    if (devices.empty()) throw std::runtime_error("ONNX Runtime offers no MLXExecutionProvider device");

    std::unordered_map<std::string, std::string> options;
    for (int i = 3; i < argc; ++i) {
      std::string kv = argv[i];
      size_t eq = kv.find('=');
      if (eq == std::string::npos) throw std::runtime_error("options are key=value: " + kv);
      options[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    Ort::SessionOptions so;
    so.AppendExecutionProvider_V2(env, {devices.front()}, options);
    // Lets the application ask afterwards which EP got which node.
    so.AddConfigEntry("session.record_ep_graph_assignment_info", "1");

    {
      Ort::Session session(env, argv[2], so);
      Ort::AllocatorWithDefaultOptions alloc;
      std::vector<std::vector<float>> floats;
      std::vector<std::vector<int64_t>> ints;
      std::vector<Ort::AllocatedStringPtr> name_holders;
      std::vector<const char*> in_names, out_names;
      std::vector<Ort::Value> inputs;
      floats.reserve(session.GetInputCount());
      ints.reserve(session.GetInputCount());
      for (size_t i = 0; i < session.GetInputCount(); ++i) {
        name_holders.push_back(session.GetInputNameAllocated(i, alloc));
        in_names.push_back(name_holders.back().get());
        inputs.push_back(make_input(session.GetInputTypeInfo(i), floats, ints));
      }
      for (size_t i = 0; i < session.GetOutputCount(); ++i) {
        name_holders.push_back(session.GetOutputNameAllocated(i, alloc));
        out_names.push_back(name_holders.back().get());
      }
      auto outputs = session.Run(Ort::RunOptions{nullptr}, in_names.data(), inputs.data(),
                                 inputs.size(), out_names.data(), out_names.size());

      std::map<std::string, size_t> per_ep;
      for (const auto& subgraph : session.GetEpGraphAssignmentInfo()) {
        std::string ep = subgraph.GetEpName();
        for (const auto& node : subgraph.GetNodes()) {
          std::printf("node %s (%s) ran on %s\n", node.GetName().c_str(),
                      node.GetOperatorType().c_str(), ep.c_str());
          ++per_ep[ep];
        }
      }
      for (const auto& [ep, n] : per_ep) std::printf("%s: %zu nodes\n", ep.c_str(), n);
      for (size_t i = 0; i < outputs.size(); ++i) {
        auto shape = outputs[i].GetTensorTypeAndShapeInfo().GetShape();
        std::printf("output %s: rank %zu\n", out_names[i], shape.size());
      }
    }
    // Sessions first, then the library (ORT forbids unregistering a library in use).
    env.UnregisterExecutionProviderLibrary(kEpName);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
