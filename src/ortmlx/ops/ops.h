// Op families. Each family file holds, per op: claim predicate, translator, registration.
#pragma once

namespace ortmlx {

class OpRegistry;

void register_elementwise_ops(OpRegistry& r);  // arithmetic, unary math, activations
void register_activation_ops(OpRegistry& r);   // LeakyRelu..Mish, com.microsoft Gelu family
void register_logical_ops(OpRegistry& r);      // comparisons, logical, Where, IsNaN/IsInf, BitShift
void register_matmul_ops(OpRegistry& r);       // MatMul, Gemm
void register_einsum_ops(OpRegistry& r);       // Einsum (one or two operands, no ellipsis)
void register_generate_ops(OpRegistry& r);     // Shape, Size, ConstantOfShape, Range
void register_slice_ops(OpRegistry& r);        // Slice, Split, Pad, Tile, Expand
void register_index_ops(OpRegistry& r);        // Gather*, Scatter*, OneHot, Trilu
void register_shape_ops(
    OpRegistry& r);  // Reshape, Transpose, (Un)Squeeze, Flatten, Concat, Identity
void register_cast_ops(OpRegistry& r);            // Cast, CastLike
void register_reduce_ops(OpRegistry& r);          // the ten Reduce* ops
void register_arg_reduce_ops(OpRegistry& r);      // ArgMax, ArgMin, TopK, CumSum
void register_norm_ops(OpRegistry& r);            // Layer/RMSNormalization, (Log)Softmax
void register_attention_vjp_ops(OpRegistry& r);   // pkg.onnax AttentionVJP contracts
void register_contrib_norm_ops(OpRegistry& r);    // (Skip)SimplifiedLayerNorm, SkipLayerNorm
void register_attention_ops(OpRegistry& r);       // Attention, MHA, GQA
void register_rotary_ops(OpRegistry& r);          // RotaryEmbedding (com.microsoft, ONNX 23)
void register_quant_ops(OpRegistry& r);           // com.microsoft MatMulNBits
void register_quantize_ops(OpRegistry& r);        // Quantize/DequantizeLinear
void register_quant_integer_ops(OpRegistry& r);   // DynamicQuantizeLinear, *Integer, QLinear*
void register_contrib_matmul_ops(OpRegistry& r);  // com.microsoft FusedMatMul, BiasAdd
void register_conv_ops(OpRegistry& r);            // Conv, ConvTranspose
void register_pool_ops(OpRegistry& r);            // Max/AveragePool, GlobalAverage/MaxPool
void register_local_norm_ops(OpRegistry& r);      // LRN, MeanVarianceNormalization, ReverseSequence
void register_channel_norm_ops(OpRegistry& r);    // Batch/Instance/Group/LpNormalization
void register_resize_ops(OpRegistry& r);          // Resize, Upsample, DepthToSpace, SpaceToDepth
void register_bitwise_ops(OpRegistry& r);         // BitwiseAnd/Or/Xor/Not
void register_spectral_ops(OpRegistry& r);        // windows, DFT, STFT, MelWeightMatrix
void register_recurrent_ops(OpRegistry& r);       // RNN, GRU, LSTM
void register_loss_ops(OpRegistry& r);         // NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss
void register_grid_sample_ops(OpRegistry& r);  // GridSample
void register_roi_align_ops(OpRegistry& r);    // RoiAlign
void register_vision_ops(OpRegistry& r);       // CenterCropPad, Col2Im, MaxUnpool, ...
void register_ml_ops(OpRegistry& r);           // ai.onnx.ml: Binarizer..LinearClassifier
void register_ml_svm_ops(OpRegistry& r);       // ai.onnx.ml SVMRegressor, SVMClassifier

// Every family, in one place (called once to build OpRegistry::global()).
void register_control_flow_ops(OpRegistry& r);  // If, Loop, Scan (bodies translated inline)
void register_all_ops(OpRegistry& r);

}  // namespace ortmlx
