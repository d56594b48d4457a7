// The ORT C API handles, and the exception <-> OrtStatus boundary. Only src/ortmlx/plugin/ sees
// Ort*.
#pragma once

// onnxruntime_ep_c_api.h has no include guard and is included by onnxruntime_c_api.h.
#include <onnxruntime_c_api.h>

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>

namespace ortmlx::plugin {

// Set once in CreateEpFactories; read-only afterwards.
extern const OrtApi* g_ort;
extern const OrtEpApi* g_ep_api;

// An error carrying an ORT error code, thrown inside the plugin and turned into an OrtStatus.
class OrtError : public std::runtime_error {
 public:
  OrtError(OrtErrorCode code, const std::string& msg) : std::runtime_error(msg), code_(code) {}
  OrtErrorCode code() const { return code_; }

 private:
  OrtErrorCode code_;
};

// Throws OrtError when an ORT call failed (releasing the status).
void check(OrtStatus* status, const char* what);
#define ORTMLX_CHECK(expr) ::ortmlx::plugin::check((expr), #expr)

OrtStatus* make_status(OrtErrorCode code, const std::string& msg);

// Runs `body` and converts any exception into an OrtStatus; nothing crosses the C ABI.
template <typename F>
OrtStatus* guard(const char* where, F&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (const OrtError& e) {
    return make_status(e.code(), std::string("[MLXExecutionProvider] ") + where + ": " + e.what());
  } catch (const std::bad_alloc&) {
    return make_status(ORT_FAIL,
                       std::string("[MLXExecutionProvider] ") + where + ": out of memory");
  } catch (const std::exception& e) {
    return make_status(ORT_FAIL, std::string("[MLXExecutionProvider] ") + where + ": " + e.what());
  } catch (...) {
    return make_status(ORT_FAIL,
                       std::string("[MLXExecutionProvider] ") + where + ": unknown exception");
  }
}

// RAII owners for ORT objects the plugin creates.
struct KeyValuePairsDeleter {
  void operator()(OrtKeyValuePairs* p) const { g_ort->ReleaseKeyValuePairs(p); }
};
struct ValueDeleter {
  void operator()(OrtValue* p) const { g_ort->ReleaseValue(p); }
};
struct TensorInfoDeleter {
  void operator()(OrtTensorTypeAndShapeInfo* p) const { g_ort->ReleaseTensorTypeAndShapeInfo(p); }
};

}  // namespace ortmlx::plugin
