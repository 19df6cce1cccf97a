// Locating GPT-2's vocabulary for the subcommands that turn ids into text.
#include "cli/vocab.h"

#include <filesystem>

#include "core/error.h"

namespace mptrain {

std::shared_ptr<const Gpt2Tokenizer> load_gpt2_tokenizer(const std::string& vocab_dir_flag) {
  return std::make_shared<const Gpt2Tokenizer>(Gpt2Tokenizer::load(find_vocab_dir(vocab_dir_flag, nullptr)));
}

std::shared_ptr<const Gpt2Tokenizer> try_load_gpt2_tokenizer(const std::string& vocab_dir_flag) {
  if (!vocab_dir_flag.empty()) return load_gpt2_tokenizer(vocab_dir_flag);
  try {
    return load_gpt2_tokenizer("");
  } catch (const Error&) {
    return nullptr;  // no vocabulary installed: samples are printed as ids
  }
}

std::string vocab_dir_for_checkpoint(const std::string& vocab_dir_flag, const std::string& ckpt_dir) {
  if (!vocab_dir_flag.empty() || ckpt_dir.empty()) return vocab_dir_flag;
  return std::filesystem::exists(ckpt_dir + "/tokenizer.json") ? ckpt_dir : "";
}

}  // namespace mptrain
