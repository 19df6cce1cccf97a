// Llama's Hugging Face names (hf/hf_llama.h).
#include "hf/hf_llama.h"

namespace mptrain {

const HfNameMap& llama_hf_name_map(bool tied) {
  // Older transformers saved each layer's rotary inv_freq as a buffer.
  static const HfNameMap untied = {
      "LlamaForCausalLM", "", {}, {"model.layers.#.self_attn.rotary_emb.inv_freq"}, {}};
  static const HfNameMap tied_head = {"LlamaForCausalLM",
                                      "",
                                      {},
                                      {"model.layers.#.self_attn.rotary_emb.inv_freq"},
                                      {{"lm_head.weight", "model.embed_tokens.weight"}}};
  return tied ? tied_head : untied;
}

}  // namespace mptrain
