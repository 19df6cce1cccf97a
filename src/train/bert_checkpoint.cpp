// Saving and loading BERT training checkpoints.
#include "train/bert_checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "data/classify_data.h"
#include "io/checkpoint_dir.h"
#include "io/checksum.h"
#include "io/fileutil.h"
#include "io/hf_folder.h"
#include "io/safetensors.h"
#include "train/checkpoint.h"
#include "train/checkpoint_json.h"

namespace mptrain {

namespace {

constexpr const char* kStateFile = kCheckpointStateFile;
constexpr const char* kModelKey = "mptrain_model";

// How a BERT model's tensors may be spelled in files (see the header comment).
HfNameMap bert_name_map(const BertConfig& c) {
  HfNameMap map;
  map.architecture = bert_hf_architecture(c);
  map.renamed_suffixes = {{"gamma", "weight"}, {"beta", "bias"}};
  map.ignored = {"bert.embeddings.position_ids"};
  map.tied = {{"cls.predictions.decoder.weight", "bert.embeddings.word_embeddings.weight"},
              {"cls.predictions.decoder.bias", "cls.predictions.bias"}};
  return map;
}

// state.json of a BERT checkpoint: the run state, "model": "bert" and the loader's position.
nlohmann::json bert_state_json(const BertTrainState& state) {
  nlohmann::json st = run_state_json(state);
  st["model"] = "bert";
  st["train_index"] = state.train_pos.index;
  st["train_epoch"] = state.train_pos.epoch;
  return st;
}

}  // namespace

nlohmann::json bert_config_json(const BertConfig& c) {
  return {{"vocab_size", c.vocab_size},
          {"padded_vocab_size", c.padded_vocab_size},
          {"max_position", c.max_position},
          {"type_vocab_size", c.type_vocab_size},
          {"n_layer", c.n_layer},
          {"n_head", c.n_head},
          {"hidden", c.hidden},
          {"intermediate", c.intermediate},
          {"pad_token_id", c.pad_token_id},
          {"ln_eps", c.ln_eps},
          {"init_std", c.init_std},
          {"nsp", c.nsp},
          {"num_labels", c.num_labels}};
}

BertConfig bert_config_from_json(const nlohmann::json& j, const std::string& what) {
  BertConfig c;
  c.vocab_size = json_get<int>(j, "vocab_size", what);
  c.padded_vocab_size = json_get<int>(j, "padded_vocab_size", what);
  c.max_position = json_get<int>(j, "max_position", what);
  c.type_vocab_size = json_get<int>(j, "type_vocab_size", what);
  c.n_layer = json_get<int>(j, "n_layer", what);
  c.n_head = json_get<int>(j, "n_head", what);
  c.hidden = json_get<int>(j, "hidden", what);
  c.intermediate = json_get<int>(j, "intermediate", what);
  c.pad_token_id = json_get<int>(j, "pad_token_id", what);
  c.ln_eps = json_get<float>(j, "ln_eps", what);
  c.init_std = json_get<float>(j, "init_std", what);
  c.nsp = j.contains("nsp") ? json_get<bool>(j, "nsp", what) : true;  // checkpoints before MLM-only runs
  c.num_labels = j.contains("num_labels") ? json_get<int>(j, "num_labels", what) : 0;  // before classifiers
  validate(c);
  return c;
}

const char* bert_hf_architecture(const BertConfig& c) {
  return c.num_labels > 0 ? "BertForSequenceClassification"
         : c.nsp          ? "BertForPreTraining"
                          : "BertForMaskedLM";
}

nlohmann::json hf_bert_config(const BertConfig& c, const std::vector<std::string>& labels) {
  nlohmann::json j = hf_bert_config(c);
  if (c.num_labels == 0) return j;
  // transformers' PretrainedConfig: id2label's keys are strings, label2id maps back; num_labels
  // is implied by id2label's size.
  nlohmann::json id2label = nlohmann::json::object(), label2id = nlohmann::json::object();
  for (int i = 0; i < c.num_labels; ++i) {
    const std::string name = i < static_cast<int>(labels.size()) ? labels[i] : "LABEL_" + std::to_string(i);
    id2label[std::to_string(i)] = name;
    label2id[name] = i;
  }
  j["id2label"] = id2label;
  j["label2id"] = label2id;
  j["problem_type"] = "single_label_classification";
  j["classifier_dropout"] = nullptr;
  return j;
}

nlohmann::json hf_bert_config(const BertConfig& c) {
  return {{"architectures", {bert_hf_architecture(c)}},
          {"model_type", "bert"},
          {"hidden_act", "gelu"},
          {"hidden_size", c.hidden},
          {"num_hidden_layers", c.n_layer},
          {"num_attention_heads", c.n_head},
          {"intermediate_size", c.intermediate},
          {"max_position_embeddings", c.max_position},
          {"type_vocab_size", c.type_vocab_size},
          {"vocab_size", c.vocab_size},
          {"pad_token_id", c.pad_token_id},
          {"layer_norm_eps", static_cast<double>(c.ln_eps)},
          {"initializer_range", static_cast<double>(c.init_std)},
          {"hidden_dropout_prob", 0.0},
          {"attention_probs_dropout_prob", 0.0},
          {"position_embedding_type", "absolute"},
          {"tie_word_embeddings", true},
          {"torch_dtype", "float32"}};
}

namespace {

// The files beside a BERT checkpoint's weights: its tokenizer's (vocab.txt and BertTokenizer's
// tokenizer_config.json) and a classifier's labels.txt, where the run has them.
std::vector<std::pair<std::string, std::string>> bert_side_files(const BertConfig& config,
                                                                 const BertTrainState& state) {
  std::vector<std::pair<std::string, std::string>> files;
  if (!state.vocab_text.empty()) {
    files.emplace_back("vocab.txt", state.vocab_text);
    files.emplace_back("tokenizer_config.json",
                       bert_tokenizer_config(state.lower_case, config.max_position).dump(2) + "\n");
  }
  if (!state.labels.empty()) files.emplace_back("labels.txt", labels_text(state.labels));
  return files;
}

}  // namespace

void save_bert_checkpoint(const std::string& run_dir, const Bert& model, const Optimizer& optimizer,
                          const BertTrainState& state, int keep_last) {
  const nlohmann::json st = bert_state_json(state);
  const HostMirror<float> params(model.params());
  CheckpointContents c{&model.table(),
                       params.data(),
                       {{kModelKey, "bert"}, {"mptrain_config", bert_config_json(model.config()).dump()}},
                       hf_bert_config(model.config(), state.labels),
                       std::move(st),
                       {}};
  c.extra_files = bert_side_files(model.config(), state);
  save_training_checkpoint(run_dir, state.step, c, optimizer, keep_last);
}

void save_bert_weights(const std::string& dir, const Bert& model, const BertTrainState& state) {
  const HostMirror<float> params(model.params());
  save_bert_weights(dir, model.config(), model.table(), params.data(), state);
}

void save_bert_weights(const std::string& dir, const BertConfig& config, const ParamTable& table,
                       const float* params, const BertTrainState& state) {
  // Written beside, then renamed over the old copy: a crash leaves one whole set of weights.
  const std::string tmp = dir + ".tmp";
  std::filesystem::remove_all(tmp);
  std::filesystem::create_directories(tmp);
  SafetensorsWriter weights;
  for (const auto& spec : table.specs())
    weights.add(spec.name, DType::F32, spec.hf_shape, params + spec.offset);
  weights.set_metadata("format", "pt");
  weights.set_metadata(kModelKey, "bert");
  weights.set_metadata("mptrain_config", bert_config_json(config).dump());
  weights.write(tmp + "/" + kCheckpointModelFile);
  write_file_atomic(tmp + "/config.json", hf_bert_config(config, state.labels).dump(2) + "\n");
  const nlohmann::json st = bert_state_json(state);
  write_file_atomic(tmp + "/" + kStateFile, st.dump(2) + "\n");
  for (const auto& [name, text] : bert_side_files(config, state)) write_file_atomic(tmp + "/" + name, text);
  write_checksum_manifest(tmp);
  std::filesystem::remove_all(dir);
  std::filesystem::rename(tmp, dir);
}

nlohmann::json bert_tokenizer_config(bool lower_case, int max_position) {
  return {{"do_lower_case", lower_case},
          {"tokenizer_class", "BertTokenizer"},
          {"model_max_length", max_position}};
}

bool is_bert_checkpoint(const std::string& ckpt_dir) {
  SafetensorsFile file(ckpt_dir + "/" + kCheckpointModelFile);
  auto it = file.metadata().find(kModelKey);
  return it != file.metadata().end() && it->second == "bert";
}

BertConfig load_bert_checkpoint_config(const std::string& ckpt_dir) {
  SafetensorsFile file(ckpt_dir + "/" + kCheckpointModelFile);
  auto model = file.metadata().find(kModelKey);
  MPT_CHECK(model != file.metadata().end() && model->second == "bert",
            "'" + file.path() + "' is not a BERT checkpoint (no mptrain_model = bert metadata)");
  auto it = file.metadata().find("mptrain_config");
  MPT_CHECK(it != file.metadata().end(), "'" + file.path() + "' has no mptrain_config metadata");
  const std::string what = "the model config in '" + file.path() + "'";
  const BertConfig config = bert_config_from_json(parse_json(it->second, what), what);
  // The config sizes the model: a corrupt one must not allocate before the tensors are read.
  check_layers_fit(file, config.n_layer, what);
  check_params_fit(file, bert_param_table(config), what);
  return config;
}

void load_bert_checkpoint_model(const std::string& ckpt_dir, Bert& model) {
  SafetensorsFile file(ckpt_dir + "/" + kCheckpointModelFile);
  HostMirror<float> host(model.params());
  load_hf_params(file, bert_name_map(model.config()), model.table(), host.data());
  host.commit();
}

std::vector<std::string> load_bert_body(const std::string& ckpt_dir, Bert& model) {
  SafetensorsFile file(ckpt_dir + "/" + kCheckpointModelFile);
  const BertConfig& c = model.config();
  const std::string head = std::string(bert_seq_head_name(c)) + ".";
  HostMirror<float> host(model.params());  // the model's own initialisation for what stays new
  std::vector<std::string> fresh;
  for (const ParamSpec& spec : model.table().specs()) {
    const bool own = spec.name.starts_with(head) || spec.name.starts_with("bert.pooler.");
    if (!file.contains(spec.name)) {
      MPT_CHECK(own, "'" + file.path() + "' has no " + spec.name + ": it is not a BERT body of this shape");
      fresh.push_back(spec.name);
      continue;
    }
    if (spec.name.starts_with(head)) {  // another task's head: its classes are not this one's
      fresh.push_back(spec.name);
      continue;
    }
    float* dst = host.data() + spec.offset;
    std::fill(dst, dst + spec.numel, 0.0f);  // rows beyond hf_shape (the padded vocabulary) stay 0
    file.read_f32(spec.name, spec.hf_shape, dst);
  }
  host.commit();
  return fresh;
}

std::vector<std::string> bert_checkpoint_labels(const std::string& ckpt_dir) {
  const std::string path = ckpt_dir + "/labels.txt";
  if (!std::filesystem::exists(path)) return {};
  return parse_labels_text(read_file(path), "'" + path + "'");
}

BertTrainState parse_bert_checkpoint_state(const std::string& text, const std::string& what) {
  const nlohmann::json j = parse_json(text, what);
  MPT_CHECK(j.is_object() && j.contains("model") && j["model"].is_string() && j["model"] == "bert",
            what + " is not the state of a BERT run");
  BertTrainState s;
  parse_run_state(j, what, s);
  s.train_pos.index = json_get<int64_t>(j, "train_index", what);
  s.train_pos.epoch = json_get<int64_t>(j, "train_epoch", what);
  MPT_CHECK(s.step >= 0 && s.train_pos.index >= 0 && s.train_pos.epoch >= 0,
            what + ": step, train_index and train_epoch must be non-negative");
  return s;
}

BertTrainState load_bert_checkpoint_state(const std::string& ckpt_dir) {
  const std::string path = ckpt_dir + "/" + kStateFile;
  return parse_bert_checkpoint_state(read_file(path), "'" + path + "'");
}

std::string bert_checkpoint_vocab(const std::string& ckpt_dir) {
  const std::string path = ckpt_dir + "/vocab.txt";
  MPT_CHECK(std::filesystem::exists(path),
            "checkpoint '" + ckpt_dir + "' has no vocab.txt; pass --vocab vocab.txt");
  return path;
}

bool bert_checkpoint_lower_case(const std::string& ckpt_dir) {
  const std::string path = ckpt_dir + "/tokenizer_config.json";
  if (!std::filesystem::exists(path)) return true;
  const nlohmann::json j = parse_json(read_file(path), "'" + path + "'");
  return j.is_object() && j.contains("do_lower_case") && j["do_lower_case"].is_boolean()
             ? j["do_lower_case"].get<bool>()
             : true;
}

}  // namespace mptrain
