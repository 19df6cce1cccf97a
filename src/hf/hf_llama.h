// Llama as Hugging Face stores it (LlamaForCausalLM): the name map of io/hf_folder.h. The config
// translation both ways is train/llama_hf_config.h (checkpoints carry the same config.json).
// mptrain's parameter names are the hub's and its weights keep nn.Linear's [out, in] layout, so
// import and export are plain copies; only older files' rotary buffers and a tied head stored
// anyway need the map.
#pragma once
#include "io/hf_folder.h"

namespace mptrain {

// tied: the config ties the head to the embeddings (a file may still hold lm_head.weight: it must
// equal model.embed_tokens.weight).
const HfNameMap& llama_hf_name_map(bool tied);

}  // namespace mptrain
