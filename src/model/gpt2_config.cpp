// GPT-2 presets and config validation.
#include "model/gpt2_config.h"

#include <map>

#include "core/error.h"
#include "model/presets.h"

namespace mptrain {

int pad_vocab(int vocab_size, int multiple) {
  MPT_CHECK(multiple >= 1, "vocab multiple must be >= 1, got " + std::to_string(multiple));
  return (vocab_size + multiple - 1) / multiple * multiple;
}

namespace {
struct Shape {
  int n_layer, n_head, n_embd;
};
const std::map<std::string, Shape>& preset_table() {
  static const std::map<std::string, Shape> table = {
      {"gpt2", {12, 12, 768}},   {"gpt2-medium", {24, 16, 1024}}, {"gpt2-large", {36, 20, 1280}},
      {"gpt2-xl", {48, 25, 1600}}, {"d2", {2, 2, 64}},           {"d4", {4, 4, 256}},
      {"d6", {6, 6, 384}},       {"d8", {8, 8, 512}},             {"d12", {12, 12, 768}},
  };
  return table;
}
}  // namespace

std::vector<std::string> gpt2_preset_names() { return preset_names(preset_table()); }

Gpt2Config gpt2_preset(const std::string& name, int vocab_multiple) {
  const Shape& s = preset_shape(preset_table(), name, "GPT-2");
  Gpt2Config c;
  c.n_layer = s.n_layer;
  c.n_head = s.n_head;
  c.n_embd = s.n_embd;
  c.padded_vocab_size = pad_vocab(c.vocab_size, vocab_multiple);
  return c;
}

void validate(const Gpt2Config& c) {
  MPT_CHECK(c.n_layer > 0 && c.n_head > 0 && c.n_embd > 0 && c.block_size > 0 && c.vocab_size > 0,
            "model sizes must be positive");
  MPT_CHECK(c.n_embd % c.n_head == 0, "n_embd (" + std::to_string(c.n_embd) + ") is not divisible by n_head (" +
                                          std::to_string(c.n_head) + ")");
  MPT_CHECK(c.padded_vocab_size >= c.vocab_size, "padded vocab smaller than the vocabulary");
}

}  // namespace mptrain
