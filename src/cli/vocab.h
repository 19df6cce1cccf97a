// Finding and loading GPT-2's vocabulary for the subcommands that print text.
#pragma once
#include <memory>
#include <string>

#include "data/gpt2_tokenizer.h"

namespace mptrain {

// The tokenizer from --vocab-dir (or the default search path, data/gpt2_tokenizer.h's
// find_vocab_dir); a missing vocabulary is an error.
std::shared_ptr<const Gpt2Tokenizer> load_gpt2_tokenizer(const std::string& vocab_dir_flag);

}  // namespace mptrain
