// Autoregressive sampling from a causal language model (GPT-2, Llama): temperature, top-k, counter-based RNG (so a
// seed reproduces the same text). The context slides when it exceeds the planned T.
#pragma once
#include <cstdint>
#include <vector>

#include "model/causal_lm.h"

namespace mptrain {

struct SampleOptions {
  int max_new_tokens = 64;
  float temperature = 1.0f;  // 0 = greedy (argmax)
  int top_k = 0;             // 0 = the whole vocabulary
  uint64_t seed = 1337;
  int stop_token = -1;  // stop after emitting this id (e.g. <|endoftext|>); -1 = never
};

// Returns only the new tokens. The model must be planned for B >= 1; the context used
// is the last planned_seq() tokens. `counter` is advanced by the number of draws.
std::vector<int> sample_tokens(CausalLm& model, const std::vector<int>& prompt, const SampleOptions& opt,
                               uint64_t& counter);

// Draws an index from probs[0..n) (which sum to ~1) using u in [0,1), restricted to the
// top_k largest entries when top_k > 0. Exposed for tests.
int sample_from_probs(const float* probs, int n, int top_k, float u);

}  // namespace mptrain
