// A causal language model's checkpoint, whichever family wrote it (GPT-2 or Llama), for the
// commands that only run the model (eval, generate): its config read before anything large is
// allocated, then the model built on a backend and its weights loaded.
#pragma once
#include <memory>
#include <string>

#include "backend/backend.h"
#include "model/causal_lm.h"
#include "model/gpt2_config.h"
#include "model/llama_config.h"
#include "precision/policy.h"

namespace mptrain {

// The summary of a config: "6 layers, 6 heads, 384 wide"; Llama's with its key/value heads, MLP
// width and head ("..., MLP 688, untied head").
std::string model_shape(const Gpt2Config& config);
std::string model_shape(const LlamaConfig& config);

struct CausalLmCheckpoint {
  std::string dir;
  bool llama = false;  // else GPT-2
  Gpt2Config gpt2;     // the family's config
  LlamaConfig llama_config;

  int vocab_size() const { return llama ? llama_config.vocab_size : gpt2.vocab_size; }
  int block_size() const { return llama ? llama_config.block_size : gpt2.block_size; }
  // "gpt2: " or "llama: " and model_shape.
  std::string describe() const;
  // The model on `be` under `policy`, its weights loaded from dir.
  std::unique_ptr<CausalLm> load(std::unique_ptr<Backend>&& be, const Policy& policy) const;
};

// Reads the config of the GPT-2 or Llama checkpoint in dir (a checkpoint folder: resolve run
// dirs first); Error naming the file when it is neither.
CausalLmCheckpoint read_causal_lm_checkpoint(const std::string& dir);

}  // namespace mptrain
