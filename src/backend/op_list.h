// The ops of the interface, one entry each: the enumerator and the name refusals, profiles and
// tests print. Op and backend_op_name are generated from this list. A fused variant is an op of
// its own (its kernel is), reached through the same entry point and the same arguments as its
// plain form (a linear's epilogue, the loss's sampled labels): each Args struct's op() says which.
//
// The argument structs, one per entry point (backend/backend.h): each lists its views once
// (views(): name, how the op touches it), and that list is what supports() is asked about, what
// the CPU widens around an fp32 kernel and what the op profile counts as bytes. Every backend's
// run() hook is generated from this second list (Backend, CpuBackend, CudaBackend), so adding an
// op is its Args and entry point, a CPU and a CUDA run(), and a conformance case
// (docs/dev/adding_an_op.md).
#pragma once

#define MPTRAIN_OPS(X)                                          \
  X(Cast, "cast")                                               \
  X(Accumulate, "accumulate")                                   \
  X(Linear, "linear")                                           \
  X(LinearActivation, "linear_activation")                      \
  X(LinearResidual, "linear_residual")                          \
  X(LinearBackward, "linear_backward")                          \
  X(LinearActivationBackward, "linear_activation_backward")     \
  X(LayerNorm, "layernorm")                                     \
  X(LayerNormBackward, "layernorm_backward")                    \
  X(Attention, "attention")                                     \
  X(AttentionBackward, "attention_backward")                    \
  X(CrossEntropy, "cross_entropy")                              \
  X(SampledCrossEntropy, "sampled_cross_entropy")               \
  X(Embedding, "embedding")                                     \
  X(EmbeddingBackward, "embedding_backward")                    \
  X(GatherRows, "gather_rows")                                  \
  X(ScatterAddRows, "scatter_add_rows")                         \
  X(ArgmaxRows, "argmax_rows")                                  \
  X(ToOperand, "to_operand")                                    \
  X(AdamW, "adamw")                                             \
  X(Sophia, "sophia")                                           \
  X(SophiaHessian, "sophia_hessian")                            \
  X(CountUnclipped, "count_unclipped")                          \
  X(UnscaleCheck, "unscale_and_check")                          \
  X(SumSquares, "sum_squares")                                  \
  X(Scale, "scale")                                             \
  X(Matmul, "matmul")                                           \
  X(MuonMomentum, "muon_momentum")                              \
  X(MuonUpdate, "muon_update")                                  \
  X(RmsNorm, "rmsnorm")                                         \
  X(RmsNormBackward, "rmsnorm_backward")                        \
  X(Rope, "rope")                                               \
  X(Swiglu, "swiglu")                                           \
  X(SwigluBackward, "swiglu_backward")                          \
  X(Relu2, "relu2")                                             \
  X(Relu2Backward, "relu2_backward")

#define MPTRAIN_OP_ARGS(X)                                                                        \
  X(CastArgs) X(AccumulateArgs) X(ToOperandArgs) X(LinearArgs) X(LinearBackwardArgs)              \
  X(LayerNormArgs) X(LayerNormBackwardArgs) X(AttentionArgs) X(AttentionBackwardArgs)             \
  X(CrossEntropyArgs) X(EmbeddingArgs) X(EmbeddingBackwardArgs) X(GatherRowsArgs)                 \
  X(ScatterAddRowsArgs) X(ArgmaxRowsArgs) X(AdamWArgs) X(SophiaArgs) X(SophiaHessianArgs)          \
  X(CountUnclippedArgs) X(UnscaleCheckArgs) X(SumSquaresArgs) X(ScaleArgs) X(MatmulArgs)          \
  X(MuonMomentumArgs) X(MuonUpdateArgs) X(RopeArgs) X(SwigluArgs) X(SwigluBackwardArgs)           \
  X(Relu2Args) X(Relu2BackwardArgs)
