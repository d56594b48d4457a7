// Prints the op registry as JSON lines (domain, op_type, opset range, prefix, shape-keyed).
// scripts/gen_op_coverage.py turns it into docs/OP_COVERAGE.md.
#include <iostream>

#include "ortmlx/diagnostics/report.h"
#include "ortmlx/registry/registry.h"

int main() {
  for (const auto& e : ortmlx::OpRegistry::global().entries()) {
    std::cout << "{\"domain\":\"" << ortmlx::json_escape(e.domain) << "\",\"op_type\":\""
              << ortmlx::json_escape(e.op_type) << "\",\"min_opset\":" << e.min_opset
              << ",\"max_opset\":" << e.max_opset
              << ",\"by_prefix\":" << (e.by_prefix ? "true" : "false")
              << ",\"shape_keyed\":" << (e.shape_keyed ? "true" : "false")
              << ",\"cpu_default\":" << (e.cpu_default ? "true" : "false") << "}\n";
  }
  return 0;
}
