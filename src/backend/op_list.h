// The ops of the interface, one entry each: the enumerator; the name refusals, profiles and
// tests print; the Args struct its entry point takes (backend/backend.h); and the precision
// role(s) whose rule in the policy decides its dtypes (precision/op_role.h's names, joined by |:
// the attention's one op has three). Op, backend_op_name,
// op_roles and the Args behind each op (with_op_args) are generated from this list. A fused
// variant is an op of its own (its kernel is), reached through the same entry point and the same
// arguments as its plain form (a linear's epilogue, the loss's sampled labels): each Args struct's
// op() says which.
//
// The argument structs, one per entry point: each lists its views once (views(): name, how the op
// touches it), and that list is what supports() is asked about, what the CPU widens around an fp32
// kernel, what the op profile counts as bytes and what conformance enumerates dtypes over. Every
// backend's run() hook is generated from the second list (Backend, CpuBackend, CudaBackend), so
// adding an op is its line here, its Args and entry point, a CPU and a CUDA run(), and a
// conformance case (docs/dev/adding_an_op.md).
#pragma once

#define MPTRAIN_OPS(X)                                                                                 \
  X(Cast, "cast", CastArgs, Copy)                                                                      \
  X(Accumulate, "accumulate", AccumulateArgs, Copy)                                                    \
  X(Linear, "linear", LinearArgs, Linear | LmHead)                                                     \
  X(LinearActivation, "linear_activation", LinearArgs, Linear | Gelu)                                  \
  X(LinearResidual, "linear_residual", LinearArgs, Linear | Residual)                                  \
  X(LinearBackward, "linear_backward", LinearBackwardArgs, Linear | LmHead)                            \
  X(LinearActivationBackward, "linear_activation_backward", LinearBackwardArgs, Linear | Gelu)         \
  X(LayerNorm, "layernorm", LayerNormArgs, LayerNorm)                                                  \
  X(LayerNormBackward, "layernorm_backward", LayerNormBackwardArgs, LayerNorm)                         \
  X(Attention, "attention", AttentionArgs, AttnScores | Softmax | AttnValues)                          \
  X(AttentionBackward, "attention_backward", AttentionBackwardArgs, AttnScores | Softmax | AttnValues) \
  X(CrossEntropy, "cross_entropy", CrossEntropyArgs, Loss)                                             \
  X(SampledCrossEntropy, "sampled_cross_entropy", CrossEntropyArgs, Loss)                              \
  X(Embedding, "embedding", EmbeddingArgs, Embedding)                                                  \
  X(EmbeddingBackward, "embedding_backward", EmbeddingBackwardArgs, Embedding)                         \
  X(GatherRows, "gather_rows", GatherRowsArgs, Copy)                                                   \
  X(ScatterAddRows, "scatter_add_rows", ScatterAddRowsArgs, Copy)                                      \
  X(ArgmaxRows, "argmax_rows", ArgmaxRowsArgs, Loss)                                                   \
  X(ToOperand, "to_operand", ToOperandArgs, Copy)                                                      \
  X(AdamW, "adamw", AdamWArgs, Optimizer)                                                              \
  X(Sophia, "sophia", SophiaArgs, Optimizer)                                                           \
  X(SophiaHessian, "sophia_hessian", SophiaHessianArgs, Optimizer)                                     \
  X(CountUnclipped, "count_unclipped", CountUnclippedArgs, Optimizer)                                  \
  X(UnscaleCheck, "unscale_and_check", UnscaleCheckArgs, GradNorm)                                     \
  X(SumSquares, "sum_squares", SumSquaresArgs, GradNorm)                                               \
  X(Scale, "scale", ScaleArgs, GradNorm)                                                               \
  X(Matmul, "matmul", MatmulArgs, NewtonSchulz)                                                        \
  X(MuonMomentum, "muon_momentum", MuonMomentumArgs, Optimizer)                                        \
  X(MuonUpdate, "muon_update", MuonUpdateArgs, Optimizer)                                              \
  X(RmsNorm, "rmsnorm", LayerNormArgs, RmsNorm)                                                        \
  X(RmsNormBackward, "rmsnorm_backward", LayerNormBackwardArgs, RmsNorm)                               \
  X(Rope, "rope", RopeArgs, Rope)                                                                      \
  X(Swiglu, "swiglu", SwigluArgs, Swiglu)                                                              \
  X(SwigluBackward, "swiglu_backward", SwigluBackwardArgs, Swiglu)                                     \
  X(Relu2, "relu2", Relu2Args, Relu2)                                                                  \
  X(Relu2Backward, "relu2_backward", Relu2BackwardArgs, Relu2)                                         \
  X(Gelu, "gelu", GeluArgs, Gelu)                                                                      \
  X(Fp8Cast, "fp8_cast", Fp8CastArgs, Copy)                                                            \
  X(Amax, "amax", AmaxArgs, Copy)

#define MPTRAIN_OP_ARGS(X)                                                                        \
  X(CastArgs) X(AccumulateArgs) X(ToOperandArgs) X(LinearArgs) X(LinearBackwardArgs)              \
  X(LayerNormArgs) X(LayerNormBackwardArgs) X(AttentionArgs) X(AttentionBackwardArgs)             \
  X(CrossEntropyArgs) X(EmbeddingArgs) X(EmbeddingBackwardArgs) X(GatherRowsArgs)                 \
  X(ScatterAddRowsArgs) X(ArgmaxRowsArgs) X(AdamWArgs) X(SophiaArgs) X(SophiaHessianArgs)          \
  X(CountUnclippedArgs) X(UnscaleCheckArgs) X(SumSquaresArgs) X(ScaleArgs) X(MatmulArgs)          \
  X(MuonMomentumArgs) X(MuonUpdateArgs) X(RopeArgs) X(SwigluArgs) X(SwigluBackwardArgs)           \
  X(Relu2Args) X(Relu2BackwardArgs) X(GeluArgs) X(Fp8CastArgs) X(AmaxArgs)
