// Locating GPT-2's vocabulary for the subcommands that turn ids into text.
#include "cli/vocab.h"

#include "core/error.h"

namespace mptrain {

std::shared_ptr<const Gpt2Tokenizer> load_gpt2_tokenizer(const std::string& vocab_dir_flag) {
  return std::make_shared<const Gpt2Tokenizer>(Gpt2Tokenizer::load(find_vocab_dir(vocab_dir_flag, nullptr)));
}

}  // namespace mptrain
