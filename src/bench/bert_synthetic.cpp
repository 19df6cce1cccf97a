// BERT's synthetic instances (bench/bert_synthetic.h), moved out of bench.cpp unchanged so that
// the GPU bench draws the same batches.
#include "bench/bert_synthetic.h"

#include <algorithm>
#include <utility>

#include "core/rng.h"

namespace mptrain {

int bert_row_length(int b, int T) { return T - (b % 4) * (T / 8); }

int bert_row_masked(int length) {
  const int content = length - 3;  // [CLS] A [SEP] B [SEP]
  return std::max(1,
                  static_cast<int>(0.15 * content + 0.5));  // round half up (pytorch_bert.py does the same)
}

void BertSynthetic::next() {
  const int first = std::min(kFirstWord, vocab_ / 2);
  std::vector<int> content;
  for (int b = 0; b < B_; ++b) {
    int* tok = &tokens_[size_t(b) * T_];
    int* typ = &types_[size_t(b) * T_];
    int* msk = &mask_[size_t(b) * T_];
    int* lab = &labels_[size_t(b) * T_];
    const int len = bert_row_length(b, T_), a_len = (len - 3) / 2;
    content.clear();
    for (int t = 0; t < T_; ++t) {
      const bool sep = t == a_len + 1 || t == len - 1;
      tok[t] = t >= len ? kPad : t == 0 ? kCls : sep ? kSep : first + int(draw() * (vocab_ - first));
      tok[t] = std::min(tok[t], vocab_ - 1);
      typ[t] = t > a_len + 1 && t < len ? 1 : 0;
      msk[t] = t < len ? 1 : 0;
      lab[t] = -1;
      if (t > 0 && t < len - 1 && !sep) content.push_back(t);
    }
    // The masked positions: the first bert_row_masked of a partial Fisher-Yates shuffle.
    const int n_mask = bert_row_masked(len);
    for (int i = 0; i < n_mask; ++i) {
      const int j = i + std::min(int(draw() * (content.size() - i)), int(content.size()) - i - 1);
      std::swap(content[i], content[j]);
      lab[content[i]] = tok[content[i]];
      tok[content[i]] = kMask;
    }
    nsp_[b] = draw() < 0.5f ? 0 : 1;
  }
}

float BertSynthetic::draw() { return uniform01(42, 3, draw_++); }

}  // namespace mptrain
