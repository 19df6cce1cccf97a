// BERT's Hugging Face names, config fields, tokenizer files and imported checkpoints.
#include "hf/hf_bert.h"

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "data/wordpiece.h"
#include "io/checkpoint_dir.h"
#include "io/checksum.h"
#include "io/fileutil.h"
#include "io/safetensors.h"
#include "model/gpt2_config.h"  // pad_vocab
#include "train/bert_checkpoint.h"

namespace mptrain {

namespace fs = std::filesystem;

const HfNameMap& bert_hf_name_map() {
  static const HfNameMap map = [] {
    HfNameMap m;
    m.architecture = "BertForPreTraining";
    // BertForPreTraining's files prefix the body with "bert."; a bare body (BertModel's
    // naming) spells the same tensors without it. The table's own names carry the prefix.
    m.optional_prefix = "bert.";
    m.renamed_suffixes = {{"gamma", "weight"}, {"beta", "bias"}};  // TF-converted LayerNorms
    // Registered buffers, saved by some transformers versions: arange(max_positions) and zeros.
    m.ignored = {"embeddings.position_ids", "embeddings.token_type_ids"};
    // The MLM decoder is the word embedding matrix plus cls.predictions.bias (transformers
    // assigns decoder.bias = bias). Either name of each pair loads in transformers, so either does here.
    m.tied = {{"cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight"},
              {"cls.predictions.decoder.bias", "cls.predictions.bias"}};
    m.stand_ins = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"};
    return m;
  }();
  return map;
}

BertConfig bert_config_from_hf(const nlohmann::json& cfg, const std::string& what, int vocab_multiple) {
  const std::string type = hf_config_string(cfg, "model_type", "bert", what);
  MPT_CHECK(type == "bert", what + ": model_type '" + type + "' is not BERT");
  // Any BERT class: the hub's bert-base-uncased says BertForMaskedLM, yet its file holds both
  // pretraining heads. What the weights lack (e.g. a BertModel's heads) is a missing tensor.
  hf_check_architectures(
      cfg, [](const std::string& a) { return a.rfind("Bert", 0) == 0; }, what, "BERT class (BertForPreTraining)");

  BertConfig c;
  c.vocab_size = hf_config_int(cfg, "vocab_size", what);
  c.hidden = hf_config_int(cfg, "hidden_size", what);
  c.n_layer = hf_config_int(cfg, "num_hidden_layers", what);
  c.n_head = hf_config_int(cfg, "num_attention_heads", what);
  c.intermediate = hf_config_int(cfg, "intermediate_size", what);
  c.max_position =
      cfg.contains("max_position_embeddings") ? hf_config_int(cfg, "max_position_embeddings", what) : 512;
  c.type_vocab_size = cfg.contains("type_vocab_size") ? hf_config_int(cfg, "type_vocab_size", what) : 2;
  c.ln_eps = static_cast<float>(hf_config_number(cfg, "layer_norm_eps", 1e-12, what));
  c.init_std = static_cast<float>(hf_config_number(cfg, "initializer_range", 0.02, what));
  // Finite too: 1e300 in the file becomes an infinite float, and every layer norm a NaN.
  MPT_CHECK(std::isfinite(c.ln_eps) && c.ln_eps > 0.0f,
            what + ": layer_norm_eps must be positive and finite");
  MPT_CHECK(std::isfinite(c.init_std), what + ": initializer_range must be finite");
  if (auto it = cfg.find("pad_token_id"); it != cfg.end()) {
    // [PAD]'s word row takes no gradient (nn.Embedding's padding_idx); it must be a real row.
    MPT_CHECK(it->is_number_integer() && it->get<int64_t>() >= 0 && it->get<int64_t>() < c.vocab_size,
              what + ": pad_token_id " + it->dump() + " is not a token id below vocab_size " +
                  std::to_string(c.vocab_size));
    c.pad_token_id = static_cast<int>(it->get<int64_t>());
  }

  const std::string act = hf_config_string(cfg, "hidden_act", "gelu", what);
  MPT_CHECK(act == "gelu", what + ": hidden_act '" + act +
                               "' is not supported (mptrain's BERT uses \"gelu\", the exact erf form)");
  const std::string pos = hf_config_string(cfg, "position_embedding_type", "absolute", what);
  MPT_CHECK(pos == "absolute", what + ": position_embedding_type '" + pos +
                                   "' is not supported (mptrain's BERT has absolute position embeddings)");
  MPT_CHECK(!hf_config_bool(cfg, "is_decoder", false, what),
            what + ": is_decoder is not supported (mptrain's BERT is a bidirectional encoder)");
  MPT_CHECK(!hf_config_bool(cfg, "add_cross_attention", false, what),
            what + ": add_cross_attention is not supported");
  MPT_CHECK(
      hf_config_bool(cfg, "tie_word_embeddings", true, what),
      what + ": tie_word_embeddings false is not supported (the MLM decoder is tied to the word embeddings)");

  c.padded_vocab_size = pad_vocab(c.vocab_size, vocab_multiple);
  return hf_validated(c, what);
}

HfBertVocab read_hf_bert_vocab(const std::string& hf_dir, const std::string& vocab_file, int vocab_size) {
  HfBertVocab v;
  v.source = !vocab_file.empty() ? vocab_file : hf_dir + "/vocab.txt";
  if (vocab_file.empty() && !fs::exists(v.source)) {
    v.source.clear();
    return v;
  }
  MPT_CHECK(fs::is_regular_file(v.source), "vocabulary '" + v.source + "' not found");
  v.text = read_file(v.source);
  const WordpieceVocab vocab = WordpieceVocab::parse(v.text, v.source);  // the checks fill-mask relies on
  v.size = vocab.size();
  MPT_CHECK(v.size <= vocab_size, "vocabulary '" + v.source + "' has " + std::to_string(v.size) +
                                      " tokens, more than the model's vocab_size " +
                                      std::to_string(vocab_size));

  const std::string tok_config = hf_dir + "/tokenizer_config.json";
  if (fs::exists(tok_config)) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_file(tok_config));
    } catch (const nlohmann::json::exception& e) {
      throw Error("'" + tok_config + "' is not valid JSON: " + e.what());
    }
    MPT_CHECK(j.is_object(), "'" + tok_config + "' is not a JSON object");
    v.lower_case = hf_config_bool(j, "do_lower_case", true, "'" + tok_config + "'");
  }
  return v;
}

void save_bert_weights_checkpoint(const std::string& dir, const BertConfig& config, const ParamTable& table,
                                  const float* params, const HfBertVocab& vocab,
                                  const std::string& imported_from, const std::vector<std::string>& labels) {
  BertTrainState state;  // step 0, the data position at the start
  state.options = {{"imported_from", imported_from}};
  state.vocab_text = vocab.text;
  state.lower_case = vocab.lower_case;
  state.labels = labels;
  save_bert_weights(dir, config, table, params, state);
}

std::vector<std::string> hf_id2label(const nlohmann::json& cfg, int num_labels, const std::string& what) {
  std::vector<std::string> labels;
  const auto it = cfg.find("id2label");
  for (int i = 0; i < num_labels; ++i) {
    const std::string key = std::to_string(i);
    if (it != cfg.end() && it->is_object() && it->contains(key)) {
      MPT_CHECK((*it)[key].is_string(), what + ": id2label[\"" + key + "\"] is not a string");
      labels.push_back((*it)[key].get<std::string>());
    } else {
      labels.push_back("LABEL_" + key);  // transformers' default names
    }
  }
  return labels;
}

}  // namespace mptrain
