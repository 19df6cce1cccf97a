// Either causal language model's checkpoint, for eval and generate (train/causal_lm_checkpoint.h).
#include "train/causal_lm_checkpoint.h"

#include "model/gpt2.h"
#include "model/llama.h"
#include "train/checkpoint.h"
#include "train/llama_checkpoint.h"

namespace mptrain {

std::string model_shape(const Gpt2Config& c) {
  return std::to_string(c.n_layer) + " layers, " + std::to_string(c.n_head) + " heads, " +
         std::to_string(c.n_embd) + " wide";
}

std::string model_shape(const LlamaConfig& c) {
  return std::to_string(c.n_layer) + " layers, " + std::to_string(c.n_head) + " heads over " +
         std::to_string(c.n_kv_head) + " key/value heads, " + std::to_string(c.n_embd) + " wide, MLP " +
         std::to_string(c.intermediate) + (c.tie_embeddings ? ", tied head" : ", untied head");
}

std::string CausalLmCheckpoint::describe() const {
  return llama ? "llama: " + model_shape(llama_config) : "gpt2: " + model_shape(gpt2);
}

std::unique_ptr<CausalLm> CausalLmCheckpoint::load(std::unique_ptr<Backend>&& be,
                                                   const Policy& policy) const {
  if (llama) {
    auto m = std::make_unique<Llama>(llama_config, std::move(be), policy);
    load_llama_checkpoint_model(dir, *m);
    return m;
  }
  auto m = std::make_unique<Gpt2>(gpt2, std::move(be), policy);
  load_checkpoint_model(dir, *m);
  return m;
}

CausalLmCheckpoint read_causal_lm_checkpoint(const std::string& dir) {
  CausalLmCheckpoint c;
  c.dir = dir;
  c.llama = is_llama_checkpoint(dir);
  if (c.llama)
    c.llama_config = load_llama_checkpoint_config(dir);
  else
    c.gpt2 = load_checkpoint_config(dir);
  return c;
}

}  // namespace mptrain
