// GPT-2 hyper-parameters and the named presets users expect.
#pragma once
#include <string>
#include <vector>

#include "model/recompute.h"

namespace mptrain {

struct Gpt2Config {
  int block_size = 1024;  // maximum sequence length (wpe rows)
  int vocab_size = 50257;  // V, the real vocabulary
  int padded_vocab_size = 50304;  // Vp: V rounded up to vocab_multiple (see core/glossary.h)
  int n_layer = 12;
  int n_head = 12;
  int n_embd = 768;
  float ln_eps = 1e-5f;
  float init_std = 0.02f;
  // A training-time choice, not the architecture (never written into a checkpoint): what the
  // backward recomputes instead of keeping (model/recompute.h).
  RecomputeSet recompute;
};

// Rounds V up to a multiple of `multiple` (1 = no padding).
int pad_vocab(int vocab_size, int multiple);

// Presets: gpt2 (124M), gpt2-medium (350M), gpt2-large (774M), gpt2-xl (1558M), and
// small ones for CPU work: d2 (tests), d4, d6, d8, d12 (dN = N layers, 64·N wide, N heads;
// block size 1024). Throws Error listing the known names for an unknown one.
Gpt2Config gpt2_preset(const std::string& name, int vocab_multiple = 128);
std::vector<std::string> gpt2_preset_names();

// Checks the invariants (heads divide width, positive sizes); throws Error naming the problem.
void validate(const Gpt2Config& config);

}  // namespace mptrain
