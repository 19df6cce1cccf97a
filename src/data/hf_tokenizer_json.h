// Hugging Face's tokenizer.json for byte-level BPE (GPT-2's kind, which SmolLM-style Llama folders
// ship): its model.vocab and model.merges are encoder.json's and vocab.bpe's contents in another
// wrapping, so reading it is a translation into Gpt2Tokenizer::parse's inputs, and writing it the
// reverse. Only what GPT-2's tokenizer does is accepted — a BPE model without dropout, subword
// prefixes or byte fallback, no normalizer, the ByteLevel pre-tokenizer with GPT-2's regex and no
// prefix space, optionally after a Digits step (SmolLM's: numbers cut digit by digit) — and
// anything else is one Error naming the setting (a SentencePiece model: Unigram,
// Metaspace, or a folder with only tokenizer.model, among them). Written by hand: no C++ library
// reads tokenizer.json (the tokenizers crate is Rust).
#pragma once
#include <string>
#include <string_view>

#include "data/pretokenize.h"

namespace mptrain {

struct Gpt2Files {
  std::string encoder_json;  // {"token": id, ...}
  std::string vocab_bpe;     // "#version: 0.2" then one merge "left right" a line
  DigitSplit digits = DigitSplit::kNone;  // a Digits step before ByteLevel (SmolLM's)
};

// tokenizer.json's text → encoder.json and vocab.bpe (path names the file in errors).
Gpt2Files gpt2_files_from_tokenizer_json(std::string_view text, const std::string& path);

// encoder.json and vocab.bpe → tokenizer.json as transformers writes GPT-2's (<|endoftext|> the
// one added, special token).
std::string tokenizer_json_from_gpt2_files(std::string_view encoder_json, std::string_view vocab_bpe);

}  // namespace mptrain
