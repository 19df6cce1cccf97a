// What every causal language model (GPT-2, Llama) does around its blocks, written once: the
// micro-batch's ids staged in the backend's memory, the fused loss over the LM head's logits (on
// the targets, or on labels drawn from the model's own softmax for Sophia), the mean loss read
// back, the pass captured as a graph and replayed, and the LM head's backward. A family supplies
// its activation plan (with the head's four buffers), its forward up to the logits, and its
// backward from dlogits.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "backend/backend.h"
#include "core/buffer.h"
#include "core/param_table.h"
#include "model/activation_plan.h"
#include "model/model_core.h"
#include "precision/policy.h"

namespace mptrain {

// The head's buffers in a family's activation plan: logits [B·T, Vp] (dlogits in place when they
// share a dtype), the per-row losses and loss gradients, and dlogits beside fp32 logits (kNone
// when written in place).
struct LmHeadActs {
  ActivationPlan::Handle logits = ActivationPlan::kNone, losses = ActivationPlan::kNone,
                         dloss = ActivationPlan::kNone, dlogits_lp = ActivationPlan::kNone;
};

class CausalLm : public ModelCore {
 public:
  virtual ~CausalLm();  // owned as a CausalLm by the commands that load either family
  // The family's initialisation from a seed (counter-based: independent of threads).
  virtual void init_weights(uint64_t seed) = 0;

  // Plans and allocates activations for micro-batches of up to B×T tokens.
  void plan(int B, int T);

  // Forward pass. tokens[B,T] must be valid ids (< V); targets may be null (logits only).
  // Returns the mean loss over targets != -1 (0 when targets is null).
  float forward(const int* tokens, const int* targets, int B, int T);

  // Forward, then backward with gradients ACCUMULATED (+=) into grads(): the mean loss is
  // scaled by grad_scale (1/accumulation steps) before differentiation. Returns the mean loss.
  float forward_backward(const int* tokens, const int* targets, int B, int T, float grad_scale);

  // Sophia's Gauss-Newton-Bartlett pass: forward, labels drawn from the model's own softmax
  // inside the fused loss (RNG (seed, counter)), then backward with gradients ACCUMULATED (+=)
  // into grads() of grad_scale · the mean loss over all B·T positions on those labels.
  // sampled[B*T] (=) the labels. Returns that mean loss.
  float forward_backward_sampled(const int* tokens, int* sampled, int B, int T, float grad_scale,
                                 uint64_t seed, uint64_t counter);

  // Logits of the last forward, [B,T,Vp] in fp32 on the host (valid until the next forward
  // overwrites them): the backend's own buffer when it is host memory and fp32, else widened
  // and/or downloaded into a host copy (the pass's download point).
  const float* logits();
  const float* losses();  // per-token losses [B,T] of the last forward with targets, likewise

  int vocab() const { return vocab_; }                // V: the ids a batch may hold
  int padded_vocab() const { return padded_vocab_; }  // Vp: the logits' row length

  // Graphs (backend/backend.h): forward_backward's ops captured once per shape and replayed
  // (CUDA graphs on a GPU); the gradient-ready hook then runs after each replay, range by range
  // in the backward's order, instead of during the backward. Off by default.
  void set_graphs(bool on);
  bool graphs() const { return graphs_; }

 protected:
  CausalLm(ParamTable table, std::unique_ptr<Backend> be, const Policy& policy, int vocab, int padded_vocab);

  // The family's activation plan for B×T, its handles kept (the head's in head_).
  virtual ActivationPlan plan_activations(int B, int T) = 0;
  // The ops from the staged ids to the logits, and from dlogits back to every gradient: no host
  // transfer (a GPU captures them in a graph).
  virtual void forward_impl(int B, int T) = 0;
  virtual void backward_impl(int B, int T) = 0;

  // GPT-2's initialisation, which Llama shares: every matrix N(0, std), the projections into the
  // residual stream N(0, std / sqrt(2·n_layer)), the table's constants; the weight copies stale.
  void init_params_scaled(uint64_t seed, float std, int n_layer);

  // The LM head's backward: dx (=) dlogits · w_t^T, dw_t (+=) dlogits^T · x, from where the loss
  // wrote dlogits (in place in the logits, or their 16-bit operand), w_t and dw_t the head's
  // weight and gradient as the forward's product read them ([C, Vp] views).
  void head_backward(const View& dx, const View& dw_t, const View& x, const View& w_t, int N);

  View ids() const { return View::ints(tokens_.data(), last_tokens_); }  // the staged ids, [B·T]

  LmHeadActs head_{};
  int vocab_, padded_vocab_;

 private:
  // Sophia's labels drawn from the model's own softmax inside the fused loss, into sampled[B·T].
  struct LabelDraw {
    int* sampled;
    uint64_t seed, counter;
  };
  // A pass is staged, enqueued, then read (so a GPU can capture the enqueued part in a graph):
  //   stage      refreshes stale weight copies and uploads the ids, the targets and each row's
  //              loss gradient; returns the labelled positions (targets != -1; all when drawn)
  //   forward_impl, loss_impl (the fused loss on targets, or on drawn labels; with backward,
  //              dlogits for backward_impl), backward_impl: the ops, no host transfer
  //   read_loss  the download point: the mean loss over the labelled positions
  int stage(const int* tokens, const int* targets, int B, int T, float grad_scale, bool backward, bool drawn);
  void loss_impl(int B, int T, bool targets, bool backward, const LabelDraw* draw = nullptr);
  float read_loss(int count);
  // forward_impl, loss_impl and backward_impl on targets: through the captured graph with
  // graphs on (captured on a shape's second run, its first eager), else enqueued.
  void training_pass(int B, int T);
  void enqueue_training_pass(int B, int T);

  FloatBuffer logits32_, losses32_;  // logits() and losses() on the host
  // The batch's ids staged in the backend's memory (forward uploads them; the kernels read
  // these), and the host side of the loss's per-row gradient and losses.
  IndexBuffer tokens_, targets_;
  std::vector<float> dloss_host_;
  int last_tokens_ = 0;  // B·T of the last forward
  // The last loss wrote dlogits into the 16-bit LM-head operand (acts dlogits_lp) directly.
  bool dlogits_lp_ready_ = false;
  // Graphs: the captured training pass and its shape, and the shape whose eager first run came.
  bool graphs_ = false;
  std::unique_ptr<Graph> graph_;
  int graph_B_ = 0, graph_T_ = 0, eager_B_ = 0, eager_T_ = 0;
};

}  // namespace mptrain
