// BERT's synthetic pre-training instances for `mptrain bench` (the recipe in bench/bench.h's
// BenchOptions::model, the same in bench/pytorch_bert.py): the CPU bench and the GPU bench
// (backend/cuda/bert_bench.cpp) time the same work.
#pragma once
#include <cstdint>
#include <vector>

#include "model/bert.h"

namespace mptrain {

// Row b of a B×T batch has this many real tokens ([CLS] A [SEP] B [SEP], then [PAD]s).
int bert_row_length(int b, int T);
// Masked positions in a row of `length` real tokens: round(15%) of its content, at least 1.
int bert_row_masked(int length);

// Fresh instances every next(), as the views Bert reads.
class BertSynthetic {
 public:
  static constexpr int kPad = 0, kCls = 101, kSep = 102, kMask = 103, kFirstWord = 999;
  BertSynthetic(int B, int T, int vocab)
      : B_(B),
        T_(T),
        vocab_(vocab),
        tokens_(size_t(B) * T),
        types_(tokens_.size()),
        mask_(tokens_.size()),
        labels_(tokens_.size()),
        nsp_(B) {}

  void next();
  BertInputs inputs() const {
    return {tokens_.data(), types_.data(), mask_.data(), labels_.data(), nsp_.data()};
  }

 private:
  float draw();
  int B_, T_, vocab_;
  std::vector<int> tokens_, types_, mask_, labels_, nsp_;
  uint64_t draw_ = 0;
};

}  // namespace mptrain
