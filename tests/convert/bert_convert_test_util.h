// Shared set-up for the BERT conversion tests: a small BertForPreTraining with non-trivial
// weights, its WordPiece vocabulary, its checkpoint as the trainer saves it, its tensors under
// Hugging Face names, the config.json transformers' BertConfig.save_pretrained writes, and a
// small instance file for eval and train. The GPT-2 helpers (hand-built files, raw
// safetensors bytes) are in convert_test_util.h.
#pragma once
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "convert/convert_test_util.h"
#include "data/bert_instances.h"
#include "data/wordpiece.h"
#include "model/bert.h"
#include "optim/adamw.h"
#include "train/bert_checkpoint.h"

namespace mptrain::testing {

// V = 100 (padded to 128 by train's and convert's multiple of 64), 2 layers, 2 heads, 32 wide,
// an FFN of 48 (not 4·C, so a transposed [out, in] weight cannot pass), 24 positions, 3 types.
inline BertConfig small_bert_config() {
  BertConfig c;
  c.vocab_size = 100;
  c.padded_vocab_size = 128;
  c.max_position = 24;
  c.type_vocab_size = 3;
  c.n_layer = 2;
  c.n_head = 2;
  c.hidden = 32;
  c.intermediate = 48;
  c.pad_token_id = 0;
  return c;
}

// 100 WordPiece tokens, as many as the model's V (fill-mask names every id it ranks): the five
// specials ([PAD] 0, [UNK] 1, [CLS] 2, [SEP] 3, [MASK] 4), a few words and "wN" fillers.
inline std::string small_bert_vocab_text() {
  std::string text = "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n";
  const char* words[] = {"the", "cat", "sat", "on", "mat", "dog", "ran", "a", "big", "small", "house", "##s"};
  int n = 5;
  for (const char* w : words) text += std::string(w) + "\n", ++n;
  for (int i = 0; n < 100; ++i, ++n) text += "w" + std::to_string(i) + "\n";
  return text;
}

// HF initialisation plus offsets on LayerNorm weights and all biases, so that no tensor is
// all zeros or all ones (a swapped or dropped tensor would go unnoticed otherwise).
inline void init_nontrivial(Bert& model, uint64_t seed) {
  model.init_weights(seed);
  for (const auto& spec : model.table().specs()) {
    if (spec.init != InitRule::Zeros && spec.init != InitRule::Ones) continue;
    const size_t n = spec.hf_numel();  // padded rows of cls.predictions.bias stay zero
    for (size_t i = 0; i < n; ++i)
      model.params()[spec.offset + i] += 0.05f * static_cast<float>((i * 7919 + spec.offset) % 17) / 17.0f;
  }
}

// Saves the model through the trainer's own save_bert_checkpoint (AdamW state, state.json,
// vocab.txt and tokenizer_config.json) as run_dir/step_<step>; returns that directory.
inline std::string save_bert_run_checkpoint(const std::string& run_dir, const Bert& model, int64_t step,
                                            bool lower_case = true) {
  AdamW opt(model.table(), AdamWHyper{}, model.backend());
  BertTrainState state;
  state.step = step;
  state.vocab_text = small_bert_vocab_text();
  state.lower_case = lower_case;
  save_bert_checkpoint(run_dir, model, opt, state, 0);
  return run_dir + "/" + checkpoint_name(step);
}

// The model's parameters under their BertForPreTraining names (real vocabulary rows only).
inline std::vector<HfTensor> bert_hub_tensors(const Bert& model) {
  std::vector<HfTensor> out;
  for (const auto& spec : model.table().specs()) {
    const float* p = model.params().data() + spec.offset;
    out.push_back({spec.name, spec.hf_shape, std::vector<float>(p, p + spec.hf_numel())});
  }
  return out;
}

// config.json as transformers' BertConfig.save_pretrained writes it for `c`.
inline nlohmann::json hf_bert_config_for(const BertConfig& c) {
  return {{"architectures", {"BertForPreTraining"}},
          {"model_type", "bert"},
          {"attention_probs_dropout_prob", 0.1},
          {"classifier_dropout", nullptr},
          {"hidden_act", "gelu"},
          {"hidden_dropout_prob", 0.1},
          {"hidden_size", c.hidden},
          {"initializer_range", 0.02},
          {"intermediate_size", c.intermediate},
          {"layer_norm_eps", 1e-12},
          {"max_position_embeddings", c.max_position},
          {"num_attention_heads", c.n_head},
          {"num_hidden_layers", c.n_layer},
          {"pad_token_id", c.pad_token_id},
          {"position_embedding_type", "absolute"},
          {"torch_dtype", "float32"},
          {"transformers_version", "4.38.2"},
          {"type_vocab_size", c.type_vocab_size},
          {"use_cache", true},
          {"vocab_size", c.vocab_size}};
}

// An instance file over small_bert_vocab_text(): n pairs "[CLS] A [SEP] B [SEP]" of words,
// every other one NotNext, at most max_seq_len tokens.
inline void write_small_bert_instances(const std::string& path, int n = 64, uint32_t max_seq_len = 16) {
  const WordpieceVocab vocab = WordpieceVocab::parse(small_bert_vocab_text(), "test vocab");
  std::vector<BertInstance> instances;
  for (int i = 0; i < n; ++i) {
    BertInstance x;
    x.tokens.push_back(2);
    const int a = 2 + i % 5, b = 2 + (i * 3) % 6;
    for (int k = 0; k < a; ++k) x.tokens.push_back(static_cast<uint16_t>(5 + (i + k * 7) % 95));
    x.tokens.push_back(3);
    for (int k = 0; k < b; ++k) x.tokens.push_back(static_cast<uint16_t>(5 + (i * 5 + k * 11) % 95));
    x.tokens.push_back(3);
    x.nsp_label = static_cast<uint8_t>(i % 2);
    instances.push_back(std::move(x));
  }
  BertInstanceWriteInfo info;
  info.max_seq_len = max_seq_len;
  write_bert_instances(path, vocab, instances, info);
}

}  // namespace mptrain::testing
