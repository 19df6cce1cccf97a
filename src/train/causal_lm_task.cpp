// The causal language models' part of the training loop (GPT-2, Llama): model, token loaders,
// evaluation, samples, checkpoints. One task over a family's traits (Gpt2Family, LlamaFamily):
// its config (preset or checkpoint), its model, its checkpoint files and its summary line.
#include "train/causal_lm_task.h"

#include <omp.h>

#include <optional>
#include <vector>

#include "core/error.h"
#include "data/gpt2_tokenizer.h"
#include "data/loader.h"
#include "dist/communicator.h"
#include "eval/sampler.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "train/bert_checkpoint.h"
#include "train/causal_lm_checkpoint.h"
#include "train/llama_checkpoint.h"
#include "train/run_monitor.h"

namespace mptrain {

namespace {

// What differs between GPT-2 and Llama in the task.
struct Gpt2Family {
  using Config = Gpt2Config;
  using Model = Gpt2;
  static constexpr const char* kName = "gpt2";
  static Config preset(const TaskSpec& s) { return gpt2_preset(s.preset, s.vocab_multiple); }
  static void set_recompute(Config& c, RecomputeSet r) { c.recompute = r; }
  static std::vector<RecomputeSet> recompute_choices() {
    return recompute_sets_by_cost(RecomputeFamily::Gpt2);
  }
  static Config load_config(const std::string& dir) { return load_checkpoint_config(dir); }
  static ModelFootprint footprint(const Config& c, const Policy& p, std::shared_ptr<const Backend> be) {
    return gpt2_footprint(c, p, std::move(be));
  }
  static double flops_per_token(const Config& c, int T) { return gpt2_flops_per_token(c, T); }
  static nlohmann::json model_json(const Config& c) { return gpt2_model_json(c); }
  static void load_weights(const std::string& dir, Model& m) { load_checkpoint_model(dir, m); }
  static void save(const std::string& run_dir, const Model& m, const Optimizer& o, const TrainState& s,
                   int keep, const ExtraFiles& extra) {
    save_checkpoint(run_dir, m, o, s, keep, extra);
  }
};

struct LlamaFamily {
  using Config = LlamaConfig;
  using Model = Llama;
  static constexpr const char* kName = "llama";
  static Config preset(const TaskSpec& s) { return llama_preset(s.preset, s.vocab_multiple, s.llama_block); }
  static std::vector<RecomputeSet> recompute_choices() {
    return recompute_sets_by_cost(RecomputeFamily::Llama);
  }
  static void set_recompute(Config& c, RecomputeSet r) {
    check_recompute(r, RecomputeFamily::Llama);
    c.recompute = r;
  }
  static Config load_config(const std::string& dir) { return load_llama_checkpoint_config(dir); }
  static ModelFootprint footprint(const Config& c, const Policy& p, std::shared_ptr<const Backend> be) {
    return llama_footprint(c, p, std::move(be));
  }
  static double flops_per_token(const Config& c, int T) { return llama_flops_per_token(c, T); }
  static nlohmann::json model_json(const Config& c) {
    return {{"family", "llama"},
            {"n_layer", c.n_layer},
            {"n_head", c.n_head},
            {"n_kv_head", c.n_kv_head},
            {"n_embd", c.n_embd},
            {"intermediate", c.intermediate},
            {"vocab_size", c.vocab_size},
            {"padded_vocab_size", c.padded_vocab_size},
            {"block_size", c.block_size},
            {"tie_embeddings", c.tie_embeddings},
            {"mlp", c.mlp == LlamaMlp::Relu2 ? "relu2" : "swiglu"},
            {"qk_norm", c.qk_norm}};
  }
  static void load_weights(const std::string& dir, Model& m) { load_llama_checkpoint_model(dir, m); }
  static void save(const std::string& run_dir, const Model& m, const Optimizer& o, const TrainState& s,
                   int keep, const ExtraFiles& extra) {
    save_llama_checkpoint(run_dir, m, o, s, keep, extra);
  }
};

// The family a checkpoint folder holds, by its model.safetensors' metadata.
const char* checkpoint_family(const std::string& dir) {
  if (is_bert_checkpoint(dir)) return "bert";
  return is_llama_checkpoint(dir) ? "llama" : "gpt2";
}

template <class F>
class CausalLmTask final : public TrainTask {
 public:
  explicit CausalLmTask(TaskSpec spec) : TrainTask(std::move(spec)) {}

  void configure(const std::string& ckpt_dir) override {
    const TaskSpec& s = spec_;
    MPT_CHECK(!s.train_data.empty(), "no training data: pass --train-data with a glob of token shards");
    if (!ckpt_dir.empty()) {
      const std::string family = checkpoint_family(ckpt_dir);
      MPT_CHECK(family == F::kName,
                "checkpoint '" + ckpt_dir + "' is a " + family + " model; train it with --model " + family);
    }
    config_ = ckpt_dir.empty() ? F::preset(s) : F::load_config(ckpt_dir);
    F::set_recompute(config_, s.recompute);
    // An imported model's tokenizer goes on with it into every checkpoint of the run.
    choose_tokenizer(ckpt_dir);
    // A model from scratch takes --vocab-size; a checkpoint's stays as saved (padding included).
    MPT_CHECK(s.vocab_size == 0 || ckpt_dir.empty() || s.vocab_size == config_.vocab_size,
              "--vocab-size " + std::to_string(s.vocab_size) + ": the model of '" + ckpt_dir + "' has " +
                  std::to_string(config_.vocab_size) + " tokens");
    if (s.vocab_size > 0 && ckpt_dir.empty()) {
      config_.vocab_size = s.vocab_size;
      config_.padded_vocab_size = pad_vocab(s.vocab_size, s.vocab_multiple);
    }
    MPT_CHECK(s.seq <= config_.block_size, "--seq " + std::to_string(s.seq) +
                                                 " is longer than the model's context of " +
                                                 std::to_string(config_.block_size) + " positions");
  }
  RunState read_state(const std::string& ckpt_dir) override {
    const TrainState s = load_checkpoint_state(ckpt_dir);
    pending_ = s.train_pos;
    return s;
  }
  std::vector<RecomputeSet> recompute_choices() const override { return F::recompute_choices(); }
  void set_memory_plan(int batch, RecomputeSet recompute) override {
    TrainTask::set_memory_plan(batch, recompute);
    F::set_recompute(config_, recompute);
  }
  ModelFootprint footprint(const Policy& policy, std::shared_ptr<const Backend> sizing) const override {
    return F::footprint(config_, policy, std::move(sizing));
  }
  double flops_per_token() const override { return F::flops_per_token(config_, spec_.seq); }
  nlohmann::json model_json() const override { return F::model_json(config_); }

  void build(std::unique_ptr<Backend> be, const Policy& policy) override {
    model_ = std::make_unique<typename F::Model>(config_, std::move(be), policy);
  }
  ModelCore& core() const override { return *model_; }
  void init_weights(uint64_t seed) override { model_->init_weights(seed); }
  void load_weights(const std::string& ckpt_dir) override { F::load_weights(ckpt_dir, *model_); }

  void open_data(const RunState& state, int rank, int world) override {
    B_ = spec_.batch, T_ = spec_.seq;
    model_->plan(B_, T_);
    model_->set_graphs(spec_.graphs);
    // The shuffled order follows the run's seed (a resumed run's: the checkpoint's).
    train_ = std::make_unique<TokenLoader>(spec_.train_data, B_, T_, config_.vocab_size, rank, world,
                                           TokenOrder{spec_.shuffle, state.seed});
    if (pending_) train_->set_position(*pending_);
    // Validation reads its first --val-steps batches every time: with --shuffle a fixed random sample
    // of the held-out sequences (the same for every seed and run, so runs compare on the same text),
    // drawn from all of them rather than the first documents of the first shard.
    if (!spec_.val_data.empty())
      val_ = std::make_unique<TokenLoader>(spec_.val_data, B_, T_, config_.vocab_size, 0, 1,
                                           TokenOrder{spec_.shuffle, kValidationSampleSeed});
    inputs_.resize(static_cast<size_t>(B_) * T_);
    targets_.resize(static_cast<size_t>(B_) * T_);
  }
  void seek_to_checkpoint() override {
    if (pending_) train_->set_position(*pending_);
  }
  void describe(RunMonitor& monitor, bool from_checkpoint, int accum, double tokens_per_step) const override {
    monitor.sayf("model %s: %zu parameters (%s, vocab %d padded to %d)\n",
                 from_checkpoint ? "from checkpoint" : spec_.preset.c_str(), model_->num_params(),
                 model_shape(config_).c_str(), config_.vocab_size, config_.padded_vocab_size);
    monitor.sayf(
        "batch %d x %d, %d accumulation step(s) = %.0f tokens/step; %d threads; train data %zu tokens in %zu "
        "shard(s)%s\n",
        B_, T_, accum, tokens_per_step, omp_get_max_threads(), train_->total_tokens(), train_->num_shards(),
        train_->shuffled() ? ", shuffled" : "");
    if (!tokenizer_)
      monitor.sayf("samples as ids: %s\n", no_tokenizer_.c_str());
    else if (!decodes_samples())
      monitor.sayf(
          "samples as ids: the tokenizer has %d tokens, the model %d (pass --vocab-dir with its own)\n",
          tokenizer_->vocab_size(), config_.vocab_size);
    if (model_->graphs())
      monitor.sayf(
          "graphs on: the micro-batch's forward and backward captured on its second run, then replayed "
          "(%s)\n",
          std::string(model_->backend().name()) == "cuda" ? "a CUDA graph" : "the recorded calls");
  }

  StepModel step_model() override {
    TokenLoader* train = train_.get();
    return causal_lm_step_model(
        *model_, [train](int* in, int* tg) { train->next(in, tg); }, B_, T_, inputs_.data(), targets_.data());
  }
  StepExtras step_extras(Communicator&) override { return {}; }

  bool has_validation() const override { return val_ != nullptr; }
  // Ranks take turns over the same `val_steps` windows, so the loss is the same whatever the world size.
  ValResult validate(Communicator& comm, int64_t step) override {
    val_->reset();
    double sum = 0.0;
    for (int i = 0; i < spec_.val_steps; ++i) {
      val_->next(inputs_.data(), targets_.data());
      if (i % comm.world_size() == comm.rank())
        sum += model_->forward(inputs_.data(), targets_.data(), val_->B(), val_->T());
    }
    ValResult r;
    r.loss = static_cast<float>(comm.sum(sum) / spec_.val_steps);
    char line[64];
    std::snprintf(line, sizeof(line), "step %6lld | val loss %.6f", static_cast<long long>(step), r.loss);
    r.line = line;
    r.metrics = {{"val_loss", r.loss}};
    return r;
  }
  std::string sample(uint64_t& counter) override {
    SampleOptions so;
    so.max_new_tokens = spec_.sample_tokens;
    so.temperature = 1.0f;
    so.top_k = 40;
    so.seed = spec_.seed;
    const int eot = tokenizer_ ? tokenizer_->eot() : 0;
    const int prompt = eot >= 0 && eot < config_.vocab_size ? eot : 0;
    std::vector<int> out = sample_tokens(*model_, {prompt}, so, counter);
    std::string text;
    if (decodes_samples()) {
      text = tokenizer_->decode(out);
    } else {
      for (int t : out) text += std::to_string(t) + " ";
    }
    return "---- sample ----\n" + text + "\n----------------";
  }
  void save(const std::string& run_dir, const Optimizer& optimizer, const RunState& state,
            int keep_last) override {
    TrainState s;
    static_cast<RunState&>(s) = state;
    s.train_pos = train_->position();
    F::save(run_dir, *model_, optimizer, s, keep_last, tokenizer_files_);
  }

 private:
  // A tokenizer smaller than the model's vocabulary would meet ids it has no text for.
  bool decodes_samples() const { return tokenizer_ && tokenizer_->vocab_size() >= config_.vocab_size; }

  // The run's tokenizer: --vocab-dir's (an error when it holds none), else the checkpoint's own
  // (an imported or earlier run's), else GPT-2's where the search finds it (else none: the samples
  // are ids, and describe says why). Every checkpoint carries the files of the one chosen: the
  // checkpoint's own when it has them, else the tokenizer's.
  void choose_tokenizer(const std::string& ckpt_dir) {
    const std::string flag_or_own = vocab_dir_for_checkpoint(spec_.vocab_dir, ckpt_dir);
    try {
      const std::string dir = find_vocab_dir(flag_or_own, nullptr);
      tokenizer_ = std::make_unique<Gpt2Tokenizer>(Gpt2Tokenizer::load(dir));
      tokenizer_files_ = tokenizer_files(dir);
    } catch (const Error& e) {
      if (!flag_or_own.empty()) throw;  // a vocabulary named, or the checkpoint's own, that does not load
      no_tokenizer_ = e.what();
    }
    if (!ckpt_dir.empty())
      if (ExtraFiles own = tokenizer_files(ckpt_dir); !own.empty()) tokenizer_files_ = std::move(own);
  }

  std::unique_ptr<Gpt2Tokenizer> tokenizer_;
  std::string no_tokenizer_;  // why there is none
  ExtraFiles tokenizer_files_;
  typename F::Config config_;
  std::unique_ptr<typename F::Model> model_;
  static constexpr uint64_t kValidationSampleSeed = 0;
  std::unique_ptr<TokenLoader> train_, val_;
  std::optional<LoaderPosition> pending_;  // the data position of the last read_state
  std::vector<int> inputs_, targets_;
  int B_ = 0, T_ = 0;
};

}  // namespace

std::unique_ptr<TrainTask> make_gpt2_task(const TaskSpec& spec) {
  return std::make_unique<CausalLmTask<Gpt2Family>>(spec);
}

std::unique_ptr<TrainTask> make_llama_task(const TaskSpec& spec) { return std::make_unique<CausalLmTask<LlamaFamily>>(spec); }

}  // namespace mptrain
