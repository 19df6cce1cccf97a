// Saving and loading GPT-2 training checkpoints.
#include "train/checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "core/error.h"
#include "io/checkpoint_dir.h"
#include "io/checksum.h"
#include "io/fileutil.h"
#include "io/hf_folder.h"
#include "io/safetensors.h"
#include "train/numeric_guard.h"

namespace mptrain {

namespace fs = std::filesystem;

namespace {

constexpr const char* kOptimizerFile = "optimizer.safetensors";
constexpr const char* kStateFile = kCheckpointStateFile;
constexpr const char* kConfigFile = "config.json";

nlohmann::json config_json(const Gpt2Config& c) {
  return {
      {"block_size", c.block_size}, {"vocab_size", c.vocab_size}, {"padded_vocab_size", c.padded_vocab_size},
      {"n_layer", c.n_layer},       {"n_head", c.n_head},         {"n_embd", c.n_embd},
      {"ln_eps", c.ln_eps},         {"init_std", c.init_std}};
}

// The shortest decimal that reads back as x (1e-05, not 9.999999747378752e-06), for
// config files people read.
double short_decimal(float x) {
  char buf[32];
  for (int digits = 6; digits <= 9; ++digits) {  // 9 significant digits always round-trip a float
    std::snprintf(buf, sizeof(buf), "%.*g", digits, static_cast<double>(x));
    if (static_cast<float>(std::strtod(buf, nullptr)) == x) break;
  }
  return std::strtod(buf, nullptr);
}

// model.safetensors: every parameter under its name in checkpoint shapes, "format": "pt" and the
// family's metadata.
void write_model_file(const std::string& dir, const CheckpointContents& c) {
  SafetensorsWriter weights;
  for (const auto& spec : c.table->specs())
    weights.add(spec.name, DType::F32, spec.hf_shape, c.params + spec.offset);
  weights.set_metadata("format", "pt");
  for (const auto& [key, value] : c.model_metadata) weights.set_metadata(key, value);
  weights.write(dir + "/" + kCheckpointModelFile);
}

// config.json, state.json and the family's extra files.
void write_side_files(const std::string& dir, const CheckpointContents& c) {
  write_file_atomic(dir + "/" + kConfigFile, c.hf_config.dump(2) + "\n");
  write_file_atomic(dir + "/" + kStateFile, c.state.dump(2) + "\n");
  for (const auto& [name, contents] : c.extra_files) write_file_atomic(dir + "/" + name, contents);
}

}  // namespace

nlohmann::json hf_gpt2_config(const Gpt2Config& c) {
  return {{"architectures", {"GPT2LMHeadModel"}},
          {"model_type", "gpt2"},
          {"activation_function", "gelu_new"},
          {"n_layer", c.n_layer},
          {"n_head", c.n_head},
          {"n_embd", c.n_embd},
          {"n_positions", c.block_size},
          {"n_ctx", c.block_size},
          {"vocab_size", c.vocab_size},
          {"layer_norm_epsilon", short_decimal(c.ln_eps)},
          {"initializer_range", short_decimal(c.init_std)},
          {"bos_token_id", 50256},
          {"eos_token_id", 50256},
          {"tie_word_embeddings", true},
          {"torch_dtype", "float32"}};
}

namespace {

// What optimizer.safetensors holds: which optimizer, its per-parameter state by prefix,
// and its scalar state (metadata strings).
struct OptimizerFile {
  std::string name;
  std::vector<std::pair<std::string, const float*>> tensors;
  std::map<std::string, std::string> scalars;
  std::vector<StateHolds> holds = {};  // per tensors entry (absent: every parameter)
  bool held(size_t i, const ParamSpec& spec) const {
    return i >= holds.size() || mptrain::holds(holds[i], spec);
  }
};

void write_checkpoint(const std::string& run_dir, int64_t step, const CheckpointContents& c,
                      const OptimizerFile& optimizer, int keep_last) {
  const std::string dir = begin_checkpoint(run_dir, step);
  const ParamTable& table = *c.table;
  write_model_file(dir, c);

  SafetensorsWriter opt;
  for (const auto& spec : table.specs())
    for (size_t i = 0; i < optimizer.tensors.size(); ++i)
      if (optimizer.held(i, spec)) {
        const auto& [prefix, buffer] = optimizer.tensors[i];
        opt.add(prefix + "." + spec.name, DType::F32, spec.shape, buffer + spec.offset);
      }
  for (const auto& [key, value] : optimizer.scalars) opt.set_metadata(key, value);
  opt.set_metadata("optimizer", optimizer.name);
  opt.write(dir + "/" + kOptimizerFile);

  write_side_files(dir, c);
  commit_checkpoint(run_dir, step);
  if (keep_last > 0) prune_checkpoints(run_dir, keep_last);
}

// Hardening (docs/HARDENING.md): a checkpoint holding a NaN/inf is refused before anything is
// written; a failed write (full disk, EFBIG, EIO) removes the partial dir and says that the
// previous checkpoint is kept ('latest' still names it).
void save_checkpoint_impl(const std::string& run_dir, int64_t step, const CheckpointContents& contents,
                          const OptimizerFile& optimizer, int keep_last) {
  const std::string name = checkpoint_name(step);
  check_finite_before_save(name, *contents.table, contents.params, optimizer.tensors);
  try {
    write_checkpoint(run_dir, step, contents, optimizer, keep_last);
  } catch (const Error& e) {
    abort_checkpoint(run_dir, step);
    throw Error("saving checkpoint " + name + " in '" + run_dir +
                "' failed (the previous checkpoint is kept): " + e.what());
  }
}

// params: the parameters on the host (a HostMirror of model.params()).
CheckpointContents gpt2_contents(const Gpt2Config& config, const ParamTable& table, const float* params,
                                 const TrainState& state) {
  return {&table,
          params,
          {{"mptrain_config", config_json(config).dump()}},
          hf_gpt2_config(config),
          train_state_json(state),
          {}};
}

}  // namespace

nlohmann::json train_state_json(const TrainState& state) {
  nlohmann::json st = run_state_json(state);
  st["train_shard"] = state.train_pos.shard;
  st["train_offset"] = state.train_pos.offset;
  st["train_epoch"] = state.train_pos.epoch;
  if (state.train_pos.shuffled) {  // absent: the sequential order (and every older file)
    st["train_order"] = "shuffled";
    st["train_index"] = state.train_pos.index;
  }
  return st;
}

void save_training_checkpoint(const std::string& run_dir, int64_t step, const CheckpointContents& contents,
                              const Optimizer& optimizer, int keep_last) {
  OptimizerFile file{optimizer.name(), {}, optimizer.scalar_state()};
  std::vector<HostMirror<float>> host;  // the state on the host, wherever it lives
  host.reserve(optimizer.state().size());
  for (const auto& st : optimizer.state()) {
    host.emplace_back(st.buffer);
    file.tensors.emplace_back(st.prefix, host.back().data());
    file.holds.push_back(st.holds);
  }
  save_checkpoint_impl(run_dir, step, contents, file, keep_last);
}

void save_checkpoint(const std::string& run_dir, const Gpt2& model, const Optimizer& optimizer,
                     const TrainState& state, int keep_last, const ExtraFiles& extra_files) {
  const HostMirror<float> params(model.params());
  CheckpointContents contents = gpt2_contents(model.config(), model.table(), params.data(), state);
  contents.extra_files = extra_files;
  save_training_checkpoint(run_dir, state.step, contents, optimizer, keep_last);
}

void save_weights_checkpoint(const std::string& dir, const CheckpointContents& contents) {
  write_model_file(dir, contents);
  write_side_files(dir, contents);
  write_checksum_manifest(dir);  // verified when loaded, like a trainer's checkpoint
}

void save_weights_checkpoint(const std::string& dir, const Gpt2Config& config, const ParamTable& table,
                             const float* params, const TrainState& state, const ExtraFiles& extra_files) {
  CheckpointContents contents = gpt2_contents(config, table, params, state);
  contents.extra_files = extra_files;
  save_weights_checkpoint(dir, contents);
}

bool checkpoint_has_optimizer_state(const std::string& ckpt_dir) {
  return fs::exists(ckpt_dir + "/" + kOptimizerFile);
}

Gpt2Config load_checkpoint_config(const std::string& ckpt_dir) {
  SafetensorsFile file(ckpt_dir + "/" + kCheckpointModelFile);
  auto it = file.metadata().find("mptrain_config");
  if (it == file.metadata().end())
    throw Error("'" + file.path() +
                "' has no mptrain_config metadata; import Hugging Face folders with 'convert'");
  const std::string what = "the model config in '" + file.path() + "'";
  const Gpt2Config config = parse_checkpoint_config(it->second, what);
  // The config sizes the model: a corrupt one must not allocate before the tensors are read.
  check_layers_fit(file, config.n_layer, what);
  check_params_fit(file, gpt2_param_table(config), what);
  return config;
}

void load_checkpoint_params(const std::string& ckpt_dir, const ParamTable& table, FloatBuffer& params) {
  SafetensorsFile file(ckpt_dir + "/" + kCheckpointModelFile);
  HostMirror<float> host(params, false);
  float* p = host.data();
  for (const auto& spec : table.specs()) {
    // Rows beyond hf_shape (the padded vocabulary's) are zero, as at initialisation.
    std::fill(p + spec.offset, p + spec.offset + spec.numel, 0.0f);
    file.read_f32(spec.name, spec.hf_shape, p + spec.offset);
  }
  host.commit();
}

void load_checkpoint_model(const std::string& ckpt_dir, Gpt2& model) {
  load_checkpoint_params(ckpt_dir, model.table(), model.params());
}

void load_checkpoint_optimizer(const std::string& ckpt_dir, const ParamTable& table, Optimizer& optimizer) {
  SafetensorsFile file(ckpt_dir + "/" + kOptimizerFile);
  auto it = file.metadata().find("optimizer");
  const std::string written_by =
      it == file.metadata().end() ? "adamw" : it->second;  // before Sophia: AdamW's
  if (written_by != optimizer.name())
    throw Error("checkpoint '" + ckpt_dir + "' holds " + written_by +
                " optimizer state, but this run uses --optimizer " + optimizer.name() +
                "; resume with --optimizer " + written_by);
  for (auto& st : optimizer.state()) {
    HostMirror<float> host(st.buffer);
    for (const auto& spec : table.specs())
      if (holds(st.holds, spec))
        file.read_f32(st.prefix + "." + spec.name, spec.shape, host.data() + spec.offset);
    host.commit();
  }
  optimizer.set_scalar_state(file.metadata());
}

TrainState load_checkpoint_state(const std::string& ckpt_dir) {
  const std::string path = ckpt_dir + "/" + kStateFile;
  return parse_checkpoint_state(read_file(path), "'" + path + "'");
}

}  // namespace mptrain
