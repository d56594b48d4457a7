#include "ortmlx/ops/ops.h"
#include "ortmlx/registry/registry.h"
namespace ortmlx {
void register_attention_vjp_ops(OpRegistry&) {}
}  // namespace ortmlx
