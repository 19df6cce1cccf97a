// Llama's block options on top of a preset (--mlp, --qk-norm), which `train` and `bench` take.
#pragma once
#include <CLI/CLI.hpp>
#include <string>

#include "model/llama_config.h"

namespace mptrain {

void add_llama_block_options(CLI::App* cmd, LlamaBlockOptions* o);

// One Error when the options were given for another family than llama.
void check_llama_block_options(const CLI::App* cmd, const std::string& model);

}  // namespace mptrain
