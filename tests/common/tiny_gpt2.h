// The smallest GPT-2 the model and step tests build: 2 heads 32 wide, 61 tokens padded to 64,
// 16 positions; `layers` blocks.
#pragma once
#include "model/gpt2_config.h"

namespace mptrain::test {

inline Gpt2Config tiny_gpt2_config(int layers = 2) {
  Gpt2Config c;
  c.n_layer = layers;
  c.n_head = 2;
  c.n_embd = 32;
  c.vocab_size = 61;
  c.padded_vocab_size = 64;
  c.block_size = 16;
  return c;
}

}  // namespace mptrain::test
