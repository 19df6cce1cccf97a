// The ops of the interface, one entry each: the enumerator, the name refusals, profiles and tests
// print, and the tensors whose storage types supports() is asked about, in that order (a GEMM-like
// op is also asked its products' arithmetic). Op, backend_op_name and op_tensors are generated
// from this list, so the three cannot drift apart; adding an op starts here
// (docs/dev/adding_an_op.md). A fused variant is an op of its own (its kernel is), reached through
// the same entry point as its plain form (a linear's epilogue, the loss's sampled labels).
// Tensors the list does not name take a named one's type: a linear's db is dw's, no dx puts dy's
// type in dx's place, a LayerNorm's beta is gamma's, the embeddings' pos and type tables are
// word's, a tanh epilogue puts out's type in pre's place, no dlogits puts logits' in its place.
#pragma once

#define MPTRAIN_OPS(X)                                                              \
  X(Cast, "cast", "dst src")                                                        \
  X(Accumulate, "accumulate", "dst src")                                            \
  X(Linear, "linear", "out x w")                                                    \
  X(LinearActivation, "linear_activation", "out x w pre")                           \
  X(LinearResidual, "linear_residual", "out x w residual")                          \
  X(LinearBackward, "linear_backward", "dx dw dy x w")                              \
  X(LinearActivationBackward, "linear_activation_backward", "dx dw dy x w pre")     \
  X(LayerNorm, "layernorm", "out x gamma")                                          \
  X(LayerNormBackward, "layernorm_backward", "dx dgamma dout x gamma")              \
  X(Attention, "attention", "qkv probs out")                                        \
  X(AttentionBackward, "attention_backward", "qkv probs out")                       \
  X(CrossEntropy, "cross_entropy", "dlogits logits")                                \
  X(SampledCrossEntropy, "sampled_cross_entropy", "dlogits logits")                 \
  X(Embedding, "embedding", "out word")                                             \
  X(EmbeddingBackward, "embedding_backward", "dword dout")                          \
  X(GatherRows, "gather_rows", "dst src")                                           \
  X(ScatterAddRows, "scatter_add_rows", "dst src")                                  \
  X(ArgmaxRows, "argmax_rows", "x")                                                 \
  X(ToOperand, "to_operand", "dst src")                                             \
  X(AdamW, "adamw", "params grads m v")                                             \
  X(Sophia, "sophia", "params grads m h")                                           \
  X(SophiaHessian, "sophia_hessian", "h ghat")                                      \
  X(CountUnclipped, "count_unclipped", "m h")                                       \
  X(UnscaleCheck, "unscale_and_check", "grads")                                     \
  X(SumSquares, "sum_squares", "x")                                                 \
  X(Scale, "scale", "x")                                                            \
  X(Matmul, "matmul", "c a b")                                                      \
  X(MuonMomentum, "muon_momentum", "m grads u")                                     \
  X(MuonUpdate, "muon_update", "params o")
