// What a GPT-2 training checkpoint holds, on top of the directory protocol of
// io/checkpoint_dir.h:
//   model.safetensors      parameters under Hugging Face GPT-2 names and layouts (wte with the
//                          real V rows); metadata: format "pt" and the model config
//   config.json            the Hugging Face GPT2Config fields, so the folder reads like a HF model
//   optimizer.safetensors  the optimizer's per-parameter state "<prefix>.<name>" (memory shapes):
//                          AdamW "exp_avg", "exp_avg_sq"; Sophia "exp_avg", "hessian"; metadata
//                          "optimizer" = adamw|sophia (absent in older files: adamw) and the
//                          optimizer's scalar state (Sophia: "hessian_updates", its RNG counter)
//                          (absent from weights-only checkpoints, e.g. imported ones)
//   state.json             step, data position, seeds and counters: everything needed to resume;
//                          "precision" (fp32|tf32|bf16|fp16; absent in older files: fp32) and,
//                          for fp16, "loss_scaler": {scale, growth_tracker, skipped_steps};
//                          "lr_scale", "nan_rollbacks" (--on-nan rollback; absent: 1, 0)
//   checksums.json         XXH3-64 of each file above (io/checksum.h), verified on load
// BERT's checkpoints (train/bert_checkpoint.h) are written by the same save_training_checkpoint
// and carry the same run state.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "data/loader.h"
#include "model/gpt2.h"
#include "optim/optimizer.h"

namespace mptrain {

// What every training run's state.json records beside its data position (GPT-2 and BERT alike;
// train/trainer.cpp's loop keeps it).
struct RunState {
  int64_t step = 0;  // optimizer steps completed
  uint64_t seed = 0;
  uint64_t sample_counter = 0;  // RNG counter of the sampler (GPT-2's samples; 0 for BERT)
  // --on-nan rollback (train/numeric_guard.h): the schedule's learning rate is multiplied by
  // lr_scale (1 until a rollback lowers it); nan_rollbacks counts the rollbacks so far.
  float lr_scale = 1.0f;
  int nan_rollbacks = 0;
  std::string precision = "fp32";  // the precision the run trained in (precision/precision.h)
  // fp16's dynamic loss scaler (precision/loss_scaler.h), restored exactly on resume.
  bool has_loss_scaler = false;
  float loss_scale = 0.0f;
  int growth_tracker = 0;
  int64_t skipped_steps = 0;
  nlohmann::json options;  // the training options of the run that wrote it (informational)
};

// GPT-2's state: the run state and where the next training window starts.
struct TrainState : RunState {
  LoaderPosition train_pos;
};

// The run state's fields of state.json (both directions; the reader checks every field,
// accepts the older files without precision, loss_scaler, lr_scale, nan_rollbacks or
// sample_counter, and throws Error naming `what`).
nlohmann::json run_state_json(const RunState& state);
void parse_run_state(const nlohmann::json& j, const std::string& what, RunState& state);

// state.json of a token-stream run (GPT-2, Llama): the run state and the data position.
nlohmann::json train_state_json(const TrainState& state);

// Everything but the optimizer state that a training checkpoint of any model writes.
struct CheckpointContents {
  const ParamTable* table = nullptr;  // names and shapes (hf_shape: the rows files hold)
  const float* params = nullptr;
  std::vector<std::pair<std::string, std::string>>
      model_metadata;                                            // model.safetensors' besides "format": "pt"
  nlohmann::json hf_config;                                      // config.json
  nlohmann::json state;                                          // state.json
  std::vector<std::pair<std::string, std::string>> extra_files;  // (name, contents), e.g. BERT's vocab.txt
};
// Writes a complete checkpoint for `step` into run_dir with the directory protocol (atomic,
// checksummed), refusing non-finite parameters or optimizer state first (numeric_guard.h); a
// failed write removes the partial dir and says that the previous checkpoint is kept. Then
// keeps only the newest keep_last (0 = all).
void save_training_checkpoint(const std::string& run_dir, int64_t step, const CheckpointContents& contents,
                              const Optimizer& optimizer, int keep_last);

// Writes a weights-only checkpoint (model.safetensors, config.json, state.json, the extra files;
// no optimizer state) into the existing directory dir, e.g. for a model imported from Hugging
// Face. `generate`, `eval` and `train --init-from` accept it; `train --resume` refuses it.
void save_weights_checkpoint(const std::string& dir, const CheckpointContents& contents);

// The files a causal LM's checkpoint keeps beside its weights: its tokenizer's (data/gpt2_tokenizer.h's
// tokenizer_files: an imported folder's tokenizer.json and tokenizer_config.json, or GPT-2's
// vocab.json and merges.txt), which generate, eval and a resumed run read and export writes back.
using ExtraFiles = std::vector<std::pair<std::string, std::string>>;  // (name, contents)

// GPT-2's, with `extra_files`.
void save_weights_checkpoint(const std::string& dir, const Gpt2Config& config, const ParamTable& table,
                             const float* params, const TrainState& state, const ExtraFiles& extra_files = {});
// False for weights-only checkpoints (nothing to resume the optimizer from).
bool checkpoint_has_optimizer_state(const std::string& ckpt_dir);

// GPT-2's save_training_checkpoint for `state.step` (the optimizer's state: optim/optimizer.h),
// with `extra_files` (the run's tokenizer files) beside it.
void save_checkpoint(const std::string& run_dir, const Gpt2& model, const Optimizer& optimizer,
                     const TrainState& state, int keep_last, const ExtraFiles& extra_files = {});

// Reads the model config stored in a checkpoint directory (not a run dir: resolve first).
Gpt2Config load_checkpoint_config(const std::string& ckpt_dir);
// Loads every parameter of `table` from ckpt_dir's model.safetensors by name (checkpoint shapes)
// into params, the padded vocabulary's rows zeroed; Error naming a missing or misshapen tensor.
void load_checkpoint_params(const std::string& ckpt_dir, const ParamTable& table, FloatBuffer& params);
// load_checkpoint_params into a GPT-2 (whose config must match).
void load_checkpoint_model(const std::string& ckpt_dir, Gpt2& model);
// Restores an optimizer's state; throws Error when the checkpoint was written by another
// optimizer (its name is in the file) — its state cannot seed this one.
void load_checkpoint_optimizer(const std::string& ckpt_dir, const ParamTable& table, Optimizer& optimizer);
TrainState load_checkpoint_state(const std::string& ckpt_dir);
// The parsers behind those two, on text already read (`what` names the source in errors):
// model.safetensors' "mptrain_config" metadata and state.json. Also the fuzz targets' entry points.
Gpt2Config parse_checkpoint_config(const std::string& text, const std::string& what);
TrainState parse_checkpoint_state(const std::string& text, const std::string& what);

// The Hugging Face GPT2Config JSON for a config.
nlohmann::json hf_gpt2_config(const Gpt2Config& config);

}  // namespace mptrain
