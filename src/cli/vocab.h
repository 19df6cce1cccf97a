// Finding and loading GPT-2's vocabulary for the subcommands that print text.
#pragma once
#include <memory>
#include <string>

#include "data/gpt2_tokenizer.h"

namespace mptrain {

// The tokenizer from --vocab-dir (or the default search path); an explicit --vocab-dir
// that fails is an error, while a missing default vocabulary returns null (ids are
// printed instead of text).
std::shared_ptr<const Gpt2Tokenizer> try_load_gpt2_tokenizer(const std::string& vocab_dir_flag);

// Same, but a missing vocabulary is an error.
std::shared_ptr<const Gpt2Tokenizer> load_gpt2_tokenizer(const std::string& vocab_dir_flag);

// The vocabulary of the model in the checkpoint folder ckpt_dir: --vocab-dir when given, else the
// checkpoint itself where it keeps an imported model's tokenizer.json, else "" (the default search).
std::string vocab_dir_for_checkpoint(const std::string& vocab_dir_flag, const std::string& ckpt_dir);

}  // namespace mptrain
