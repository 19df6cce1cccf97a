// Hugging Face folders ⇄ mptrain checkpoints (see hf_convert.h).
#include "hf/hf_convert.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "core/error.h"
#include "data/gpt2_tokenizer.h"
#include "data/hf_tokenizer_json.h"
#include "hf/hf_bert.h"
#include "hf/hf_gpt2.h"
#include "hf/hf_llama.h"
#include "io/checkpoint_dir.h"
#include "io/fileutil.h"
#include "io/hf_folder.h"
#include "io/safetensors.h"
#include "model/bert.h"
#include "model/gpt2.h"
#include "train/bert_checkpoint.h"
#include "train/checkpoint.h"
#include "train/llama_checkpoint.h"
#include "train/llama_hf_config.h"

namespace mptrain {

namespace fs = std::filesystem;

namespace {

constexpr int kGpt2Vocab = 50257;        // the vocabulary of GPT-2's encoder.json
constexpr int kGpt2VocabMultiple = 128;  // train's --vocab-multiple default
constexpr const char* kTokenizerJson = "tokenizer.json";
constexpr const char* kTokenizerConfig = "tokenizer_config.json";

// An output folder built under a hidden sibling name and renamed into place by commit();
// removed again if commit() is never reached.
class StagedDir {
 public:
  explicit StagedDir(const std::string& out) {
    fs::path p(out);
    if (!p.has_filename()) p = p.parent_path();  // "dir/" → "dir"
    MPT_CHECK(!p.empty(), "no output folder given");
    final_ = p;
    std::error_code ec;
    if (fs::exists(final_, ec)) {
      MPT_CHECK(fs::is_directory(final_, ec), "output '" + out + "' exists and is not a folder");
      MPT_CHECK(fs::is_empty(final_, ec),
                "output folder '" + out + "' exists and is not empty; choose a new one");
    }
    const fs::path parent = final_.has_parent_path() ? final_.parent_path() : fs::path(".");
    fs::create_directories(parent, ec);
    if (ec) throw Error("cannot create '" + parent.string() + "': " + ec.message());
    staging_ = parent / ("." + final_.filename().string() + ".partial." + std::to_string(::getpid()));
    fs::remove_all(staging_, ec);
    fs::create_directory(staging_, ec);
    if (ec) throw Error("cannot create '" + staging_.string() + "': " + ec.message());
  }
  ~StagedDir() {
    std::error_code ec;
    if (!committed_) fs::remove_all(staging_, ec);
  }
  StagedDir(const StagedDir&) = delete;
  StagedDir& operator=(const StagedDir&) = delete;

  std::string path() const { return staging_.string(); }

  void commit() {
    fsync_dir(staging_.string());
    std::error_code ec;
    fs::rename(staging_, final_, ec);  // replaces an empty folder of that name
    if (ec)
      throw Error("cannot rename '" + staging_.string() + "' to '" + final_.string() + "': " + ec.message());
    committed_ = true;
    fsync_dir(final_.has_parent_path() ? final_.parent_path().string() : ".");
  }

 private:
  fs::path final_, staging_;
  bool committed_ = false;
};

std::string model_file_of(const std::string& hf_dir) {
  const std::string path = hf_dir + "/" + kHfModelFile;
  if (fs::exists(path)) return path;
  if (fs::exists(hf_dir + "/model.safetensors.index.json"))
    throw Error("'" + hf_dir +
                "' holds a sharded model (model.safetensors.index.json); only a single model.safetensors "
                "can be imported");
  if (fs::exists(hf_dir + "/pytorch_model.bin"))
    throw Error("'" + hf_dir +
                "' holds pytorch_model.bin but no model.safetensors; save the model with "
                "safe_serialization=True (the default in recent transformers) and convert that");
  throw Error("'" + path +
              "' not found: a Hugging Face model folder holds config.json and model.safetensors");
}

// What every family's import does with the folder's model.safetensors: the parameters laid
// out by `table`, filled through the family's name map, and the report copied into r.
std::vector<float> load_hf_folder_params(const std::string& hf_dir, const HfNameMap& map,
                                         const ParamTable& table, HfImportResult& r) {
  SafetensorsFile file(model_file_of(hf_dir));
  check_params_fit(file, table, kHfConfigFile);
  std::vector<float> params(table.total());
  const HfLoadReport report = load_hf_params(file, map, table, params.data());
  r.ignored = report.ignored;
  r.tied_copies = report.tied_copies;
  r.stand_ins = report.stand_ins;
  r.dtypes = report.dtypes;
  for (const auto& spec : table.specs()) r.num_params += spec.hf_numel();
  return params;
}

std::string absolute_path(const std::string& dir) { return fs::absolute(dir).lexically_normal().string(); }

// A causal LM's import written out: a weights-only checkpoint at step 0 (the data position at the
// start) that records where it came from, staged and renamed into place. save(dir, state) writes
// the family's files.
template <class Save>
void write_imported(const std::string& hf_dir, const std::string& out_dir, Save save) {
  StagedDir out(out_dir);
  TrainState state;
  state.options = {{"imported_from", absolute_path(hf_dir)}};
  save(out.path(), state);
  out.commit();
}

HfImportResult import_gpt2(const nlohmann::json& cfg, const std::string& hf_dir, const std::string& out_dir,
                           int vocab_multiple) {
  HfImportResult r;
  r.model_type = "gpt2";
  r.config = gpt2_config_from_hf(cfg, "'" + hf_dir + "/" + kHfConfigFile + "'",
                                 vocab_multiple > 0 ? vocab_multiple : kGpt2VocabMultiple);
  check_layers_fit(SafetensorsFile(model_file_of(hf_dir)), r.config.n_layer,
                   "'" + hf_dir + "/" + kHfConfigFile + "'");
  const ParamTable table = gpt2_param_table(r.config);
  const std::vector<float> params = load_hf_folder_params(hf_dir, gpt2_hf_name_map(), table, r);

  write_imported(hf_dir, out_dir, [&](const std::string& dir, const TrainState& state) {
    // The folder's own tokenizer goes with the model (generate reads it; export writes it back).
    save_weights_checkpoint(dir, r.config, table, params.data(), state, tokenizer_files(hf_dir));
  });
  return r;
}

HfImportResult import_llama(const nlohmann::json& cfg, const std::string& hf_dir, const std::string& out_dir,
                            int vocab_multiple) {
  HfImportResult r;
  r.model_type = "llama";
  const std::string what = "'" + hf_dir + "/" + kHfConfigFile + "'";
  r.llama = llama_config_from_hf(cfg, what, vocab_multiple > 0 ? vocab_multiple : kGpt2VocabMultiple);
  check_layers_fit(SafetensorsFile(model_file_of(hf_dir)), r.llama.n_layer, what);
  const ParamTable table = llama_param_table(r.llama);
  const std::vector<float> params =
      load_hf_folder_params(hf_dir, llama_hf_name_map(r.llama.tie_embeddings), table, r);

  write_imported(hf_dir, out_dir, [&](const std::string& dir, const TrainState& state) {
    // The folder's own tokenizer goes with the model (generate reads it; export writes it back).
    save_llama_weights_checkpoint(dir, r.llama, table, params.data(), state, tokenizer_files(hf_dir));
  });
  return r;
}

HfImportResult import_bert(const nlohmann::json& cfg, const std::string& hf_dir, const std::string& out_dir,
                           int vocab_multiple, const std::string& vocab_file) {
  HfImportResult r;
  r.model_type = "bert";
  r.bert = bert_config_from_hf(cfg, "'" + hf_dir + "/" + kHfConfigFile + "'",
                               vocab_multiple > 0 ? vocab_multiple : kBertVocabMultiple);
  // The vocabulary first: a bad vocab.txt fails before the (possibly large) weights are read.
  const HfBertVocab vocab = read_hf_bert_vocab(hf_dir, vocab_file, r.bert.vocab_size);
  r.vocab_source = vocab.source;
  r.vocab_tokens = vocab.size;
  r.lower_case = vocab.lower_case;
  const SafetensorsFile file(model_file_of(hf_dir));
  check_layers_fit(file, r.bert.n_layer, "'" + hf_dir + "/" + kHfConfigFile + "'");
  // A file without the next-sentence head is an MLM-only model (BertForMaskedLM: no pooler either);
  // one with it keeps both heads, whatever class config.json names (the hub's bert-base-uncased
  // says BertForMaskedLM yet holds both).
  r.bert.nsp = file.contains("cls.seq_relationship.weight");
  // BertForSequenceClassification: the pooler and classifier [num_labels, C], no pretraining heads.
  std::vector<std::string> labels;
  if (file.contains("classifier.weight")) {
    const TensorView& w = file.get("classifier.weight");
    MPT_CHECK(w.shape.size() == 2 && w.shape[0] > 0,
              "'" + hf_dir + "': classifier.weight is not [num_labels, hidden]");
    r.bert.num_labels = static_cast<int>(w.shape[0]);
    r.bert.nsp = false;
    labels = hf_id2label(cfg, r.bert.num_labels, "'" + hf_dir + "/" + kHfConfigFile + "'");
  }
  const ParamTable table = bert_param_table(r.bert);
  const std::vector<float> params = load_hf_folder_params(hf_dir, bert_hf_name_map(), table, r);

  StagedDir out(out_dir);
  save_bert_weights_checkpoint(out.path(), r.bert, table, params.data(), vocab, absolute_path(hf_dir),
                               labels);
  out.commit();
  return r;
}

// config.json's family: model_type, or, in configs without one, the architectures named.
std::string hf_model_type(const nlohmann::json& cfg, const std::string& what) {
  if (cfg.contains("model_type")) return hf_config_string(cfg, "model_type", "", what);
  if (auto it = cfg.find("architectures"); it != cfg.end() && it->is_array())
    for (const auto& a : *it)
      if (a.is_string() && a.get<std::string>().rfind("Bert", 0) == 0) return "bert";
  return "gpt2";  // what the GPT-2 importer always assumed
}

// The checkpoint's parameters as a Hugging Face file: every spec under its (HF) name with its
// hf_shape, in fp32. Reading through hf_read_f32 keeps export working whatever dtype a
// checkpoint stores; `values` owns the data the writer references.
SafetensorsWriter hf_weights_of(const std::string& ckpt, const ParamTable& table,
                                std::vector<float>& values) {
  SafetensorsFile file(ckpt + "/" + kCheckpointModelFile);
  std::vector<size_t> offsets;
  size_t total = 0;
  for (const auto& spec : table.specs()) offsets.push_back(std::exchange(total, total + spec.hf_numel()));
  values.assign(total, 0.0f);
  SafetensorsWriter weights;
  for (size_t i = 0; i < table.specs().size(); ++i) {
    const ParamSpec& spec = table.specs()[i];
    hf_read_f32(file, file.get(spec.name), spec.hf_shape, values.data() + offsets[i]);
    weights.add(spec.name, DType::F32, spec.hf_shape, values.data() + offsets[i]);
  }
  weights.set_metadata("format", "pt");
  return weights;
}

// GPT-2's vocabulary folder for a model over vocab_size tokens: the given one (an error when it
// lacks the files), else the installed one, else none ("": the folder still loads as a model).
std::string gpt2_vocab_for(int vocab_size, const std::string& vocab_dir) {
  std::string vocab;
  if (vocab_size == kGpt2Vocab) {
    if (!vocab_dir.empty()) {
      vocab = find_vocab_dir(vocab_dir, nullptr);
    } else {
      try {
        vocab = find_vocab_dir("", nullptr);
      } catch (const Error&) {
        vocab.clear();  // not installed: the folder still loads as a model
      }
    }
  }
  return vocab;
}

// A causal LM's folder: model.safetensors, config.json, and the tokenizer the checkpoint carries
// (an imported model's tokenizer.json and tokenizer_config.json, or a trained run's GPT-2 files),
// else GPT-2's as installed (when the model uses GPT-2's vocabulary): GPT-2's files under the names
// Hugging Face's GPT2Tokenizer reads, and as tokenizer.json.
void write_causal_lm_folder(HfExportResult& r, const std::string& out_dir, const SafetensorsWriter& weights,
                            const nlohmann::json& config, const std::string& vocab) {
  StagedDir out(out_dir);
  weights.write(out.path() + "/" + kHfModelFile);
  write_file_atomic(out.path() + "/" + kHfConfigFile, config.dump(2) + "\n");
  ExtraFiles files = tokenizer_files(r.checkpoint);
  if (files.empty() && !vocab.empty()) files = tokenizer_files(vocab);
  for (const auto& [name, contents] : files) write_file_atomic(out.path() + "/" + name, contents);
  if (files.size() == 2 && files[0].first == "vocab.json")  // GPT-2's pair: tokenizer.json too
    write_file_atomic(out.path() + "/" + kTokenizerJson, tokenizer_json_from_gpt2_files(files[0].second,
                                                                                         files[1].second));
  r.tokenizer_files = !files.empty();
  out.commit();
}

void export_gpt2(HfExportResult& r, const std::string& out_dir, const std::string& vocab_dir) {
  r.model_type = "gpt2";
  r.config = load_checkpoint_config(r.checkpoint);
  std::vector<float> values;
  const SafetensorsWriter weights = hf_weights_of(r.checkpoint, gpt2_param_table(r.config), values);
  r.num_params = values.size();
  write_causal_lm_folder(r, out_dir, weights, hf_gpt2_config(r.config),
                         gpt2_vocab_for(r.config.vocab_size, vocab_dir));
}

void export_llama(HfExportResult& r, const std::string& out_dir, const std::string& vocab_dir) {
  r.model_type = "llama";
  r.llama = load_llama_checkpoint_config(r.checkpoint);
  MPT_CHECK(has_hf_form(r.llama), r.checkpoint +
                                      ": a ReLU² MLP has no Hugging Face form (transformers' Llama MLP is "
                                      "gated); the checkpoint folder keeps it as model_type mptrain_llama");
  std::vector<float> values;
  const SafetensorsWriter weights = hf_weights_of(r.checkpoint, llama_param_table(r.llama), values);
  r.num_params = values.size();
  write_causal_lm_folder(r, out_dir, weights, hf_llama_config(r.llama),
                         gpt2_vocab_for(r.llama.vocab_size, vocab_dir));
}

void export_bert(HfExportResult& r, const std::string& out_dir, const std::string& vocab_file) {
  r.model_type = "bert";
  r.bert = load_bert_checkpoint_config(r.checkpoint);
  std::vector<float> values;
  const SafetensorsWriter weights = hf_weights_of(r.checkpoint, bert_param_table(r.bert), values);
  r.num_params = values.size();
  // The checkpoint's vocab.txt (or --vocab) and casing, as BertTokenizer reads them.
  const HfBertVocab vocab = read_hf_bert_vocab(r.checkpoint, vocab_file, r.bert.vocab_size);

  StagedDir out(out_dir);
  weights.write(out.path() + "/" + kHfModelFile);
  write_file_atomic(out.path() + "/" + kHfConfigFile,
                    hf_bert_config(r.bert, bert_checkpoint_labels(r.checkpoint)).dump(2) + "\n");
  if (!vocab.text.empty()) {
    write_file_atomic(out.path() + "/vocab.txt", vocab.text);
    write_file_atomic(out.path() + "/" + kTokenizerConfig,
                      bert_tokenizer_config(vocab.lower_case, r.bert.max_position).dump(2) + "\n");
    r.tokenizer_files = true;
  }
  out.commit();
}

}  // namespace

HfImportResult import_hf_folder(const std::string& hf_dir, const std::string& out_dir, int vocab_multiple,
                                const std::string& bert_vocab) {
  MPT_CHECK(fs::is_directory(hf_dir),
            "'" + hf_dir + "' is not a folder (expected a Hugging Face model folder)");
  const nlohmann::json cfg = read_hf_config(hf_dir);
  const std::string what = "'" + hf_dir + "/" + kHfConfigFile + "'";
  const std::string type = hf_model_type(cfg, what);
  if (type == "bert") return import_bert(cfg, hf_dir, out_dir, vocab_multiple, bert_vocab);
  // Qwen3 is Llama with QK-norm; mptrain_llama is the ReLU² form mptrain writes (train/llama_hf_config.h).
  const bool llama = type == "llama" || type == "qwen3" || type == "mptrain_llama";
  if (type != "gpt2" && !llama)
    throw Error(what + ": model_type '" + type +
                "' cannot be imported (supported: gpt2, llama, qwen3 (QK-norm), mptrain_llama, bert)");
  MPT_CHECK(bert_vocab.empty(), "--vocab is a BERT vocab.txt; " + type + " imports take none");
  return llama ? import_llama(cfg, hf_dir, out_dir, vocab_multiple)
               : import_gpt2(cfg, hf_dir, out_dir, vocab_multiple);
}

HfExportResult export_hf_folder(const std::string& ckpt_or_run_dir, const std::string& out_dir,
                                const std::string& vocab_dir, const std::string& bert_vocab) {
  HfExportResult r;
  r.checkpoint = resolve_checkpoint(ckpt_or_run_dir);
  if (is_bert_checkpoint(r.checkpoint)) {
    MPT_CHECK(vocab_dir.empty(), "--vocab-dir names GPT-2's vocabulary; '" + r.checkpoint +
                                     "' is a BERT checkpoint (give its vocab.txt with --vocab)");
    export_bert(r, out_dir, bert_vocab);
  } else {
    const bool llama = is_llama_checkpoint(r.checkpoint);
    MPT_CHECK(bert_vocab.empty(), "--vocab is a BERT vocab.txt; '" + r.checkpoint + "' is a " +
                                      (llama ? "Llama" : "GPT-2") + " checkpoint");
    if (llama)
      export_llama(r, out_dir, vocab_dir);
    else
      export_gpt2(r, out_dir, vocab_dir);
  }
  return r;
}

}  // namespace mptrain
