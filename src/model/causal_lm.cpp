// The causal language models' shared pass around their blocks (model/causal_lm.h).
#include "model/causal_lm.h"

#include <cmath>
#include <string>

#include "core/error.h"

namespace mptrain {

CausalLm::CausalLm(ParamTable table, std::unique_ptr<Backend> be, const Policy& policy, int vocab,
                   int padded_vocab)
    : ModelCore(std::move(table), std::move(be), policy), vocab_(vocab), padded_vocab_(padded_vocab) {}

CausalLm::~CausalLm() = default;

void CausalLm::init_params_scaled(uint64_t seed, float std, int n_layer) {
  copies_.mark_stale();
  init_params(table_, params_, seed, std, std / std::sqrt(2.0f * static_cast<float>(n_layer)));
}

void CausalLm::plan(int B, int T) {
  acts_ = plan_activations(B, T);
  acts_.allocate(be_->memory());
  const size_t n = static_cast<size_t>(B) * T;
  tokens_.resize(n, be_->memory());
  targets_.resize(n, be_->memory());
  plan_B_ = B;
  plan_T_ = T;
  set_graphs(graphs_);  // a graph holds the old plan's addresses
}

float CausalLm::forward(const int* tokens, const int* targets, int B, int T) {
  const int count = stage(tokens, targets, B, T, 1.0f, false, false);
  forward_impl(B, T);
  if (!targets) return 0.0f;
  loss_impl(B, T, true, false);
  return read_loss(count);
}

float CausalLm::forward_backward(const int* tokens, const int* targets, int B, int T, float grad_scale) {
  MPT_CHECK(targets != nullptr, "forward_backward needs targets");
  const int count = stage(tokens, targets, B, T, grad_scale, true, false);
  training_pass(B, T);
  return read_loss(count);
}

float CausalLm::forward_backward_sampled(const int* tokens, int* sampled, int B, int T, float grad_scale,
                                         uint64_t seed, uint64_t counter) {
  MPT_CHECK(sampled != nullptr, "forward_backward_sampled needs a buffer for the sampled labels");
  const int count = stage(tokens, nullptr, B, T, grad_scale, true, true);
  forward_impl(B, T);
  const LabelDraw draw{sampled, seed, counter};
  loss_impl(B, T, false, true, &draw);
  backward_impl(B, T);
  targets_.download(sampled, static_cast<size_t>(B) * T);  // the drawn labels
  return read_loss(count);
}

void CausalLm::set_graphs(bool on) {
  graphs_ = on;
  graph_.reset();
  eager_B_ = eager_T_ = 0;
}

void CausalLm::enqueue_training_pass(int B, int T) {
  forward_impl(B, T);
  loss_impl(B, T, true, true);
  backward_impl(B, T);
}

void CausalLm::training_pass(int B, int T) {
  if (!graphs_) return enqueue_training_pass(B, T);
  if (!graph_ || graph_B_ != B || graph_T_ != T) {
    graph_.reset();
    // A shape's first run is eager: it sizes the backend's own scratch, which a graph's
    // pointers must not see move.
    if (eager_B_ != B || eager_T_ != T) {
      eager_B_ = B;
      eager_T_ = T;
      return enqueue_training_pass(B, T);
    }
    be_->begin_capture();
    try {
      enqueue_training_pass(B, T);
    } catch (...) {
      try {
        be_->end_capture();  // the backend leaves capture; the partial graph is dropped
      } catch (const Error&) {
        // a broken capture's own error: the first one is the one reported
      }
      throw;
    }
    graph_ = be_->end_capture();
    graph_B_ = B;
    graph_T_ = T;
  }
  graph_->replay();
  wgrads_.replay_hooks();  // the captured backward handed its ranges to no hook
}

const float* CausalLm::logits() {
  return acts_.read_f32(head_.logits, static_cast<size_t>(last_tokens_) * padded_vocab_, *be_, logits32_);
}
const float* CausalLm::losses() {
  return acts_.read_f32(head_.losses, static_cast<size_t>(last_tokens_), *be_, losses32_);
}

int CausalLm::stage(const int* tokens, const int* targets, int B, int T, float grad_scale, bool backward,
                    bool drawn) {
  MPT_CHECK(B <= plan_B_ && T <= plan_T_, "batch " + std::to_string(B) + "x" + std::to_string(T) +
                                              " exceeds the planned " + std::to_string(plan_B_) + "x" +
                                              std::to_string(plan_T_));
  copies_.refresh_if_stale(params_.data(), *be_);
  const int N = B * T;
  last_tokens_ = N;
  tokens_.upload(tokens, static_cast<size_t>(N));  // the kernels read the backend's copy
  if (targets) targets_.upload(targets, static_cast<size_t>(N));
  // The mean runs over the labelled positions: targets != -1, or every position for drawn labels.
  int count = drawn ? N : 0;
  if (targets)
    for (int i = 0; i < N; ++i) count += targets[i] != -1;
  if (backward) {  // each row's gradient of the mean loss
    dloss_host_.assign(static_cast<size_t>(N), count > 0 ? grad_scale / static_cast<float>(count) : 0.0f);
    be_->upload(acts_.row(head_.dloss, N), dloss_host_.data());
  }
  return count;
}

float CausalLm::read_loss(int count) {
  const float* losses = this->losses();  // the download point (the buffer itself on the CPU)
  double sum = 0.0;                      // fixed order: deterministic
  for (int i = 0; i < last_tokens_; ++i) sum += losses[i];
  return count > 0 ? static_cast<float>(sum / count) : 0.0f;
}

void CausalLm::loss_impl(int B, int T, bool targets, bool backward, const LabelDraw* draw) {
  const int N = B * T;
  // dlogits in place in the logits when they share a dtype (fp32, or a GPU plan's 16 bits), or,
  // beside fp32 logits, straight into the 16-bit LM head operand (one rounding, no fp32 dlogits
  // pass; the sampled pass writes in place only); head_backward reads whichever was written.
  dlogits_lp_ready_ = backward && !draw && policy_.dlogits != policy_.logits;
  CrossEntropyArgs a;
  a.losses = acts_.row(head_.losses, N);
  a.logits = acts_.view(head_.logits, N, padded_vocab_);
  if (backward) {
    a.dlogits = dlogits_lp_ready_ ? acts_.view(head_.dlogits_lp, N, padded_vocab_) : a.logits;
    a.dloss = acts_.row(head_.dloss, N);  // staged
  }
  if (targets) a.targets = View::ints(targets_.data(), N);
  a.vocab = vocab_;
  if (draw) {
    a.sampled = View::ints(targets_.data(), N);  // the drawn labels, downloaded after the pass
    a.seed = draw->seed;
    a.counter = draw->counter;
  }
  be_->cross_entropy(a);
}

void CausalLm::head_backward(const View& dx, const View& dw_t, const View& x, const View& w_t, int N) {
  const int Vp = padded_vocab_;
  // The gradient is where the loss wrote it; converted once into dlogits_lp otherwise.
  linear_backward(
      {.dx = dx,
       .dw = dw_t,
       .dy = dlogits_lp_ready_ ? acts_.view(head_.dlogits_lp, N, Vp) : acts_.view(head_.logits, N, Vp),
       .x = x,
       .w = w_t,
       .scratch = dlogits_lp_ready_ ? View{} : acts_.work(head_.dlogits_lp)},
      OpRole::LmHead);
}

}  // namespace mptrain
