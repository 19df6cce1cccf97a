// Llama's training checkpoints (train/llama_checkpoint.h).
#include "train/llama_checkpoint.h"

#include "core/buffer.h"
#include "core/error.h"
#include "io/checkpoint_dir.h"
#include "io/hf_folder.h"
#include "io/safetensors.h"
#include "train/checkpoint_json.h"
#include "train/llama_hf_config.h"

namespace mptrain {

namespace {

constexpr const char* kModelKey = "mptrain_model";

// config.json's fields, and what they do not carry: the padded vocabulary and the init scale.
nlohmann::json llama_config_json(const LlamaConfig& c) {
  nlohmann::json j = hf_llama_config(c);
  j["padded_vocab_size"] = c.padded_vocab_size;
  j["init_std"] = c.init_std;
  return j;
}

CheckpointContents llama_contents(const LlamaConfig& c, const ParamTable& table, const float* params,
                                  const TrainState& state) {
  return {&table,
          params,
          {{kModelKey, "llama"}, {"mptrain_config", llama_config_json(c).dump()}},
          hf_llama_config(c),
          train_state_json(state),
          {}};
}

}  // namespace

void save_llama_checkpoint(const std::string& run_dir, const Llama& model, const Optimizer& optimizer,
                           const TrainState& state, int keep_last, const ExtraFiles& extra_files) {
  const HostMirror<float> params(model.params());
  CheckpointContents contents = llama_contents(model.config(), model.table(), params.data(), state);
  contents.extra_files = extra_files;
  save_training_checkpoint(run_dir, state.step, contents, optimizer, keep_last);
}

void save_llama_weights_checkpoint(const std::string& dir, const LlamaConfig& config, const ParamTable& table,
                                   const float* params, const TrainState& state,
                                   const ExtraFiles& extra_files) {
  CheckpointContents contents = llama_contents(config, table, params, state);
  contents.extra_files = extra_files;
  save_weights_checkpoint(dir, contents);
}

bool is_llama_checkpoint(const std::string& ckpt_dir) {
  SafetensorsFile file(ckpt_dir + "/" + kCheckpointModelFile);
  auto it = file.metadata().find(kModelKey);
  return it != file.metadata().end() && it->second == "llama";
}

LlamaConfig load_llama_checkpoint_config(const std::string& ckpt_dir) {
  SafetensorsFile file(ckpt_dir + "/" + kCheckpointModelFile);
  auto model = file.metadata().find(kModelKey);
  MPT_CHECK(model != file.metadata().end() && model->second == "llama",
            "'" + file.path() + "' is not a Llama checkpoint (no mptrain_model = llama metadata)");
  auto it = file.metadata().find("mptrain_config");
  MPT_CHECK(it != file.metadata().end(), "'" + file.path() + "' has no mptrain_config metadata");
  const std::string what = "the model config in '" + file.path() + "'";
  const nlohmann::json j = parse_json(it->second, what);
  LlamaConfig config = llama_config_from_hf(j, what, 1);
  MPT_CHECK(j.contains("padded_vocab_size") && j["padded_vocab_size"].is_number_integer() &&
                j.contains("init_std") && j["init_std"].is_number(),
            what + ": padded_vocab_size and init_std are required");
  config.padded_vocab_size = j["padded_vocab_size"].get<int>();
  config.init_std = j["init_std"].get<float>();
  validate(config);
  // The config sizes the model: a corrupt one must not allocate before the tensors are read.
  check_layers_fit(file, config.n_layer, what);
  check_params_fit(file, llama_param_table(config), what);
  return config;
}

void load_llama_checkpoint_model(const std::string& ckpt_dir, Llama& model) {
  load_checkpoint_params(ckpt_dir, model.table(), model.params());
}

}  // namespace mptrain
