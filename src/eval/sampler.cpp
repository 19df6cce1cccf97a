// Sampling loop: full forward over the (sliding) context for each new token. No KV
// cache: sampling is a small part of a training run, and the full forward keeps one code path.
#include "eval/sampler.h"

#include <algorithm>
#include <numeric>

#include "backend/ops/crossentropy.h"
#include "core/error.h"
#include "core/rng.h"

namespace mptrain {

int sample_from_probs(const float* probs, int n, int top_k, float u) {
  if (top_k <= 0 || top_k >= n) {
    double cdf = 0.0;
    for (int i = 0; i < n; ++i) {
      cdf += probs[i];
      if (u < cdf) return i;
    }
    return n - 1;  // rounding left u above the last cdf value
  }
  std::vector<int> idx(n);
  std::iota(idx.begin(), idx.end(), 0);
  std::partial_sort(idx.begin(), idx.begin() + top_k, idx.end(),
                    [&](int a, int b) { return probs[a] > probs[b] || (probs[a] == probs[b] && a < b); });
  double mass = 0.0;
  for (int i = 0; i < top_k; ++i) mass += probs[idx[i]];
  double cdf = 0.0;
  for (int i = 0; i < top_k; ++i) {
    cdf += probs[idx[i]] / mass;
    if (u < cdf) return idx[i];
  }
  return idx[top_k - 1];
}

std::vector<int> sample_tokens(CausalLm& model, const std::vector<int>& prompt, const SampleOptions& opt,
                               uint64_t& counter) {
  MPT_CHECK(!prompt.empty(), "sampling needs a non-empty prompt");
  MPT_CHECK(model.planned_batch() >= 1, "model is not planned");
  const int V = model.vocab(), Vp = model.padded_vocab();
  for (int t : prompt)
    MPT_CHECK(t >= 0 && t < V, "prompt token id " + std::to_string(t) +
                                              " is out of range for a vocabulary of " +
                                              std::to_string(V));
  std::vector<int> context = prompt, out;
  std::vector<float> probs(Vp);
  const int window = model.planned_seq();
  for (int i = 0; i < opt.max_new_tokens; ++i) {
    const int T = std::min<int>(static_cast<int>(context.size()), window);
    const int* tokens = context.data() + context.size() - T;
    model.forward(tokens, nullptr, 1, T);
    const float* last = model.logits() + static_cast<size_t>(T - 1) * Vp;
    int next;
    if (opt.temperature <= 0.0f) {
      next = static_cast<int>(std::max_element(last, last + V) - last);
    } else {
      cpu::softmax_forward(probs.data(), last, 1, V, Vp, opt.temperature);
      next = sample_from_probs(probs.data(), V, opt.top_k, uniform01(opt.seed, 0x5a4d, counter++));
    }
    context.push_back(next);
    out.push_back(next);
    if (next == opt.stop_token) break;
  }
  return out;
}

}  // namespace mptrain
