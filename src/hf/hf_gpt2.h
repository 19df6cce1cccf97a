// GPT-2 as Hugging Face stores it (GPT2LMHeadModel): the name map of io/hf_folder.h and the
// translation of config.json's GPT2Config fields into a Gpt2Config. The other direction,
// Gpt2Config → GPT2Config JSON, is hf_gpt2_config() in train/checkpoint.h (checkpoints carry
// the same config.json).
//
// mptrain's parameter names ARE the Hugging Face names of the hub's model.safetensors (no
// "transformer." prefix) and its weights use the same Conv1D [in, out] layouts, so import and
// export are plain copies; only the optional prefix, the attention-mask buffers and the tied
// lm_head.weight need the map.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "io/hf_folder.h"
#include "model/gpt2_config.h"

namespace mptrain {

const HfNameMap& gpt2_hf_name_map();

// A Gpt2Config from config.json's fields (n_layer, n_head, n_embd, vocab_size, n_positions or
// n_ctx; layer_norm_epsilon, initializer_range), with the vocabulary padded to a multiple of
// vocab_multiple. Settings this GPT-2 does not implement (another activation, an inner width
// other than 4·n_embd, unscaled or layer-scaled attention, untied embeddings, cross-attention)
// are errors that say so. `what` names the file in messages.
Gpt2Config gpt2_config_from_hf(const nlohmann::json& cfg, const std::string& what, int vocab_multiple);

}  // namespace mptrain
