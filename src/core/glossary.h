// Dimension letters used throughout mptrain, defined once.
//   B  batch size (sequences per micro-batch)
//   T  sequence length (tokens per sequence)
//   C  channels (model width, n_embd)
//   NH number of attention heads;  HS = C / NH head size
//   V  real vocabulary size (50257 for GPT-2)
//   Vp padded vocabulary size (V rounded up to a multiple, 50304 by default):
//      GEMMs run over Vp because multiples of 128 tile well; columns V..Vp-1 are
//      never part of the softmax or the loss.
//   L  number of transformer layers
//   OC output channels of a linear layer
// Sizes are `int` at op interfaces (every dimension fits); products that index
// memory are formed in `size_t` (B*T*Vp for gpt2-xl exceeds 2^31).
#pragma once
