// The JSON a checkpoint carries that mptrain reads back: state.json (RunState, and GPT-2's
// TrainState) and the "mptrain_config" metadata of model.safetensors (Gpt2Config). Kept apart from checkpoint.cpp
// so that these parsers link without the model (fuzz/checkpoint_state_fuzz.cpp,
// fuzz/model_config_fuzz.cpp).
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "train/checkpoint.h"
#include "train/checkpoint_json.h"

namespace mptrain {

Gpt2Config parse_checkpoint_config(const std::string& text, const std::string& what) {
  nlohmann::json j = parse_json(text, what);
  Gpt2Config c;
  c.block_size = json_get<int>(j, "block_size", what);
  c.vocab_size = json_get<int>(j, "vocab_size", what);
  c.padded_vocab_size = json_get<int>(j, "padded_vocab_size", what);
  c.n_layer = json_get<int>(j, "n_layer", what);
  c.n_head = json_get<int>(j, "n_head", what);
  c.n_embd = json_get<int>(j, "n_embd", what);
  if (j.contains("ln_eps")) c.ln_eps = json_get<float>(j, "ln_eps", what);  // older checkpoints: the default
  if (j.contains("init_std")) c.init_std = json_get<float>(j, "init_std", what);
  validate(c);
  return c;
}

nlohmann::json run_state_json(const RunState& state) {
  nlohmann::json st = {{"step", state.step},
                       {"seed", state.seed},
                       {"sample_counter", state.sample_counter},
                       {"lr_scale", state.lr_scale},
                       {"nan_rollbacks", state.nan_rollbacks},
                       {"precision", state.precision},
                       {"options", state.options}};
  if (state.has_loss_scaler)
    st["loss_scaler"] = {{"scale", state.loss_scale},
                         {"growth_tracker", state.growth_tracker},
                         {"skipped_steps", state.skipped_steps}};
  return st;
}

void parse_run_state(const nlohmann::json& j, const std::string& what, RunState& s) {
  s.step = json_get<int64_t>(j, "step", what);
  s.seed = json_get<uint64_t>(j, "seed", what);
  if (j.contains("sample_counter")) s.sample_counter = json_get<uint64_t>(j, "sample_counter", what);
  if (j.contains("options")) s.options = j["options"];
  if (j.contains("precision")) {  // older checkpoints and imported ones: fp32
    s.precision = json_get<std::string>(j, "precision", what);
    try {
      parse_precision(s.precision);
    } catch (const Error& e) {
      throw Error(what + ": " + e.what());
    }
  }
  if (j.contains("loss_scaler")) {
    const nlohmann::json& ls = j["loss_scaler"];
    const std::string lwhat = what + " loss_scaler";
    s.has_loss_scaler = true;
    s.loss_scale = json_get<float>(ls, "scale", lwhat);
    s.growth_tracker = json_get<int>(ls, "growth_tracker", lwhat);
    s.skipped_steps = json_get<int64_t>(ls, "skipped_steps", lwhat);
    MPT_CHECK(std::isfinite(s.loss_scale) && s.loss_scale > 0.0f && s.growth_tracker >= 0 && s.skipped_steps >= 0,
              lwhat + ": scale must be finite and positive, growth_tracker and skipped_steps non-negative");
  }
  if (j.contains("lr_scale")) {  // --on-nan rollback (train/numeric_guard.h); older checkpoints: 1
    s.lr_scale = json_get<float>(j, "lr_scale", what);
    MPT_CHECK(std::isfinite(s.lr_scale) && s.lr_scale > 0.0f && s.lr_scale <= 1.0f,
              what + ": lr_scale must be in (0, 1]");
  }
  if (j.contains("nan_rollbacks")) {
    s.nan_rollbacks = json_get<int>(j, "nan_rollbacks", what);
    MPT_CHECK(s.nan_rollbacks >= 0, what + ": nan_rollbacks must be >= 0");
  }
}

TrainState parse_checkpoint_state(const std::string& text, const std::string& what) {
  nlohmann::json j = parse_json(text, what);
  MPT_CHECK(j.is_object(), what + " is not a JSON object");
  MPT_CHECK(!j.contains("model") || (j["model"].is_string() && j["model"] == "gpt2"),
            what + " is the state of a " + (j["model"].is_string() ? j["model"].get<std::string>() : "non-GPT-2") +
                " run, not a GPT-2 one");
  TrainState s;
  parse_run_state(j, what, s);
  (void)json_get<uint64_t>(j, "sample_counter", what);  // required in GPT-2 states (the sampler resumes from it)
  s.train_pos.shard = json_get<int64_t>(j, "train_shard", what);
  s.train_pos.offset = json_get<int64_t>(j, "train_offset", what);
  s.train_pos.epoch = json_get<int64_t>(j, "train_epoch", what);
  if (j.contains("train_order")) {
    const auto order = json_get<std::string>(j, "train_order", what);
    MPT_CHECK(order == "shuffled" || order == "sequential",
              what + ": train_order '" + order + "' is neither 'shuffled' nor 'sequential'");
    s.train_pos.shuffled = order == "shuffled";
    if (s.train_pos.shuffled) s.train_pos.index = json_get<int64_t>(j, "train_index", what);
  }
  return s;
}

}  // namespace mptrain
