// BERT presets and config validation.
#include "model/bert_config.h"

#include <map>

#include "core/error.h"
#include "model/gpt2_config.h"  // pad_vocab
#include "model/presets.h"

namespace mptrain {

namespace {
struct Shape {
  int n_layer, n_head, hidden;
};
const std::map<std::string, Shape>& preset_table() {
  static const std::map<std::string, Shape> table = {
      {"bert-base", {12, 12, 768}}, {"bert-large", {24, 16, 1024}}, {"bert-tiny", {2, 2, 128}},
      {"bert-mini", {4, 4, 256}},   {"bert-small", {4, 8, 512}},    {"bert-medium", {8, 8, 512}},
  };
  return table;
}
}  // namespace

std::vector<std::string> bert_preset_names() { return preset_names(preset_table()); }

BertConfig bert_preset(const std::string& name, int vocab_size, int vocab_multiple) {
  const Shape& s = preset_shape(preset_table(), name, "BERT");
  BertConfig c;
  c.n_layer = s.n_layer;
  c.n_head = s.n_head;
  c.hidden = s.hidden;
  c.intermediate = 4 * c.hidden;
  c.vocab_size = vocab_size;
  c.padded_vocab_size = pad_vocab(vocab_size, vocab_multiple);
  validate(c);
  return c;
}

void validate(const BertConfig& c) {
  MPT_CHECK(c.n_layer > 0 && c.n_head > 0 && c.hidden > 0 && c.intermediate > 0 && c.max_position > 0 &&
                c.vocab_size > 0 && c.type_vocab_size > 0,
            "BERT model sizes must be positive");
  MPT_CHECK(c.hidden % c.n_head == 0, "BERT hidden size (" + std::to_string(c.hidden) +
                                          ") is not divisible by the number of heads (" +
                                          std::to_string(c.n_head) + ")");
  MPT_CHECK(c.padded_vocab_size >= c.vocab_size, "BERT padded vocabulary smaller than the vocabulary");
  MPT_CHECK(c.num_labels >= 0, "BERT num_labels is negative (" + std::to_string(c.num_labels) + ")");
  MPT_CHECK(c.num_labels == 0 || !c.nsp, "a BERT classifier (num_labels > 0) has no next-sentence head");
}

}  // namespace mptrain
