// Builds a WordPiece vocabulary (vocab.txt) from a corpus: what `mptrain tokenizer
// train-wordpiece` runs, because no standard BERT vocabulary can be installed here.
//
// Algorithm (the one Hugging Face's `tokenizers` WordPieceTrainer uses: BPE merges over
// words, with "##" marking pieces that continue a word):
//   1. every document goes through BERT's basic tokenizer (data/wordpiece_basic.h) and
//      the words are counted; words longer than max_input_chars_per_word are skipped
//      (the tokenizer turns them into [UNK] anyway);
//   2. each word starts as its characters: the first as "c", the others as "##c";
//      the alphabet holds BOTH forms of every character seen, so any word made of seen
//      characters has a cover and nothing common becomes [UNK];
//   3. repeatedly the most frequent adjacent pair of pieces (counted over all word
//      occurrences) is merged: "t" + "##h" -> "th", "##i" + "##ng" -> "##ing"; ties go
//      to the pair whose (left, right) strings sort first, so the result is
//      deterministic; a merge whose string already is a token adds nothing new;
//   4. until the vocabulary reaches vocab_size, or no pair occurs min_frequency times.
// Layout of the written vocabulary (Hugging Face's bert-base-uncased layout):
//   0 [PAD], 1..99 [unused0]..[unused98], 100 [UNK], 101 [CLS], 102 [SEP], 103 [MASK],
//   then the alphabet (word-initial characters in code point order, then their "##"
//   forms), then the merged pieces in the order they were learned.
// With unused_tokens = 0: [PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/wordpiece.h"

namespace mptrain {

struct WordpieceTrainOptions {
  int vocab_size = 8192;
  int min_frequency = 2;   // a pair seen fewer times is never merged
  int unused_tokens = 99;  // [unusedN] slots between [PAD] and [UNK]
  BasicTokenizerOptions basic;
};

struct WordpieceTrainSummary {
  uint64_t words = 0;  // word occurrences counted
  uint64_t distinct_words = 0;
  uint64_t skipped_long = 0;  // occurrences longer than max_input_chars_per_word
  int alphabet = 0;           // both forms
  int merges = 0;             // merges applied (some add no new token)
  int vocab_size = 0;         // what was reached
  bool stopped_at_min_frequency = false;
  double seconds = 0;
};

// Throws Error when vocab_size cannot hold the special tokens and the alphabet, or
// when the texts hold no words.
WordpieceVocab train_wordpiece(const std::vector<std::string_view>& texts, const WordpieceTrainOptions& opt,
                               WordpieceTrainSummary* summary = nullptr);

// One line for the terminal.
std::string describe(const WordpieceTrainSummary& s);

}  // namespace mptrain
