// Hugging Face's tokenizer.json for byte-level BPE (GPT-2's kind, which SmolLM-style Llama folders
// ship): its model.vocab and model.merges are encoder.json's and vocab.bpe's contents in another
// wrapping, so reading it is a translation into Gpt2Tokenizer::parse's inputs, and writing it the
// reverse. Accepted are the byte-level BPE settings GPT-2, SmolLM, Llama 3 and Qwen2 use (a vocabulary
// of any size: Llama 3's 128,256 tokens, Qwen2's 151,646): a BPE model without dropout, subword
// prefixes or byte fallback (ignore_merges kept); no normalizer or one
// Unicode normal form (Qwen2's NFC); and a pre-tokenizer of Split steps with a regex and behavior
// Isolated (Llama 3's and Qwen2's pattern), Digits steps (SmolLM's) and last ByteLevel without prefix
// space, with or without its own regex (GPT-2's). Anything else is one Error naming the setting
// (a SentencePiece model: Unigram, Metaspace, or a folder with only tokenizer.model, among them).
// Written by hand: no C++ library reads tokenizer.json (the tokenizers crate is Rust).
#pragma once
#include <string>
#include <string_view>

#include "data/gpt2_tokenizer.h"

namespace mptrain {

struct Gpt2Files {
  std::string encoder_json;      // {"token": id, ...}
  std::string vocab_bpe;         // "#version: 0.2" then one merge "left right" a line
  Gpt2TokenizerOptions options;  // the normalizer, pre-tokenizer and ignore_merges
};

// tokenizer.json's text → encoder.json and vocab.bpe (path names the file in errors).
Gpt2Files gpt2_files_from_tokenizer_json(std::string_view text, const std::string& path);

// tokenizer_config.json's eos_token (a string, or an AddedToken object's content): the token that
// ends a text, which tokenizer.json does not name; "" where the file sets none.
std::string eos_token_from_tokenizer_config(std::string_view text, const std::string& path);

// encoder.json and vocab.bpe → tokenizer.json as transformers writes GPT-2's (<|endoftext|> the
// one added, special token).
std::string tokenizer_json_from_gpt2_files(std::string_view encoder_json, std::string_view vocab_bpe);

}  // namespace mptrain
