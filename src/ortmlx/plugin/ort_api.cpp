#include "ortmlx/plugin/ort_api.h"

namespace ortmlx::plugin {

const OrtApi* g_ort = nullptr;
const OrtEpApi* g_ep_api = nullptr;

void check(OrtStatus* status, const char* what) {
  if (status == nullptr) return;
  const OrtErrorCode code = g_ort->GetErrorCode(status);
  std::string msg = g_ort->GetErrorMessage(status);
  g_ort->ReleaseStatus(status);
  throw OrtError(code, msg + " (in " + what + ")");
}

OrtStatus* make_status(OrtErrorCode code, const std::string& msg) {
  return g_ort->CreateStatus(code, msg.c_str());
}

}  // namespace ortmlx::plugin
