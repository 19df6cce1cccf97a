// BERT pretraining (masked LM + next-sentence prediction) as a TrainTask (train/train_task.h),
// from an instance file of `mptrain prepare --task bert` with dynamic masking
// (data/bert_loader.h). The shared loop (train/trainer.cpp) gives it everything GPT-2 has:
// accumulation, clipping, AdamW and Sophia (whose curvature pass is Bert::forward_backward_sampled),
// data parallelism, every precision (one pass, in the policy's dtypes; fp16 with the loss scaler), the memory
// check and the numeric guards.
// BERT's own parts: the log line adds MLM loss, NSP loss and NSP accuracy; validation reports
// MLM and NSP accuracy (eval/bert_eval.h); checkpoints use Hugging Face BertForPreTraining
// names (train/bert_checkpoint.h) and resume exactly.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/bert_loader.h"
#include "model/bert.h"
#include "model/bert_config.h"
#include "train/bert_checkpoint.h"
#include "train/train_task.h"

namespace mptrain {

// What BERT's tasks (pretraining, classification: train/classify_task.h) share: the config and
// the model, built and initialised alike, and the run state of a BERT checkpoint with the
// training data's position (kept for open_data and seek_to_checkpoint).
class BertTaskBase : public TrainTask {
 public:
  explicit BertTaskBase(TaskSpec spec) : TrainTask(std::move(spec)) {}
  RunState read_state(const std::string& ckpt_dir) override {
    const BertTrainState s = load_bert_checkpoint_state(ckpt_dir);
    pending_ = s.train_pos;
    return s;
  }
  nlohmann::json model_json() const override {
    nlohmann::json j = bert_config_json(config_);
    j["model"] = "bert";
    return j;
  }
  const char* decay_note() const override { return " (not on biases and LayerNorm)"; }
  void build(std::unique_ptr<Backend> be, const Policy& policy) override {
    model_ = std::make_unique<Bert>(config_, std::move(be), policy);
  }
  ModelCore& core() const override { return *model_; }
  void init_weights(uint64_t seed) override { model_->init_weights(seed); }
  std::vector<RecomputeSet> recompute_choices() const override {
    return recompute_sets_by_cost(RecomputeFamily::Bert);
  }
  void set_memory_plan(int batch, RecomputeSet recompute) override {
    TrainTask::set_memory_plan(batch, recompute);
    take_recompute();
  }

 protected:
  // The run's --recompute into the config (gelu, mlp; an Error for what BERT does not refill): after
  // configure() has set the config, before the footprint and the model read it.
  void take_recompute() {
    check_recompute(spec_.recompute, RecomputeFamily::Bert);
    config_.recompute = spec_.recompute;
  }
  // The step model's parts every BERT task fills alike; the task adds micro_step and curvature.
  StepModel bert_step_model() {
    return core_step_model(*model_);
  }
  // What a checkpoint of this run records: the run state, the training data's position, and the
  // vocabulary, casing and label names written beside the weights.
  BertTrainState checkpoint_state(const RunState& run, const BertLoaderPosition& pos) const {
    BertTrainState s;
    static_cast<RunState&>(s) = run;
    s.train_pos = pos;
    s.vocab_text = vocab_text_;
    s.lower_case = lower_case_;
    s.labels = labels_;
    return s;
  }

  BertConfig config_;
  std::unique_ptr<Bert> model_;
  std::optional<BertLoaderPosition> pending_;  // the data position of the last read_state
  std::string vocab_text_;                     // the WordPiece vocabulary (vocab.txt) and its casing
  bool lower_case_ = true;
  std::vector<std::string> labels_;  // a classifier's label names by class id (none in pretraining)
};

struct BertTrainOptions {
  // Masked positions per sequence at most; 0: max(20, ceil(mask_rate·T)), the recipe's 20 at
  // 15% of 128 and never fewer than the masking rate asks for.
  int max_predictions = 0;
  double mask_rate = 0.15;  // of each sequence's maskable tokens (MosaicBERT: 0.30), 80/10/10 kept
  bool nsp = true;          // false: MLM-only pretraining, a model without pooler and NSP head
  bool unpadded = true;     // packed batches (model/bert.h's cu_seqlens): no work on padding
  bool seq_given = false;   // --seq given: T is that; else the instance file's max_seq_len
};
// The masked positions per sequence a run plans for (BertTrainOptions::max_predictions).
int bert_max_predictions(const BertTrainOptions& bert, int T);

// spec.preset names a BERT preset; spec.train_data is an instance file (val_data optional). A
// sequence length T over the model's positions, or a file of another format version: clear errors.
std::unique_ptr<TrainTask> make_bert_task(const TaskSpec& spec, const BertTrainOptions& bert);

// BERT's memory footprint (train/memory_estimate.h): its parameters, weight copies and
// activation plan (model/bert.h, max_predictions masked positions per sequence), as Bert
// allocates them.
ModelFootprint bert_footprint(const BertConfig& config, Precision precision, int max_predictions);
ModelFootprint bert_footprint(const BertConfig& config, const Policy& policy, int max_predictions,
                              std::shared_ptr<const Backend> sizing = cpu_sizing_backend());

}  // namespace mptrain
