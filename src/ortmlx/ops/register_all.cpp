#include "ortmlx/ops/ops.h"

#include "ortmlx/registry/registry.h"

namespace ortmlx {

void register_all_ops(OpRegistry& r) {
  register_elementwise_ops(r);
  register_activation_ops(r);
  register_logical_ops(r);
  register_matmul_ops(r);
  register_einsum_ops(r);
  register_shape_ops(r);
  register_generate_ops(r);
  register_slice_ops(r);
  register_index_ops(r);
  register_cast_ops(r);
  register_reduce_ops(r);
  register_arg_reduce_ops(r);
  register_norm_ops(r);
  register_attention_vjp_ops(r);
  register_contrib_norm_ops(r);
  register_attention_ops(r);
  register_rotary_ops(r);
  register_quant_ops(r);
  register_quantize_ops(r);
  register_quant_integer_ops(r);
  register_contrib_matmul_ops(r);
  register_conv_ops(r);
  register_pool_ops(r);
  register_local_norm_ops(r);
  register_channel_norm_ops(r);
  register_resize_ops(r);
  register_bitwise_ops(r);
  register_control_flow_ops(r);
  register_spectral_ops(r);
  register_recurrent_ops(r);
  register_loss_ops(r);
  register_vision_ops(r);
  register_grid_sample_ops(r);
  register_roi_align_ops(r);
  register_ml_ops(r);
}

}  // namespace ortmlx
