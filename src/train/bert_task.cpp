// BERT's part of the training loop: model, instance loaders, MLM/NSP statistics, evaluation,
// checkpoints.
#include "train/bert_task.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <utility>

#include "core/error.h"
#include "data/bert_instances.h"
#include "data/bert_loader.h"
#include "dist/communicator.h"
#include "eval/bert_eval.h"
#include "model/bert.h"
#include "precision/policy.h"
#include "train/bert_checkpoint.h"
#include "train/run_monitor.h"

namespace mptrain {

namespace {

class BertTask final : public BertTaskBase {
 public:
  BertTask(TaskSpec spec, const BertTrainOptions& bert) : BertTaskBase(std::move(spec)), bert_(bert) {
    MPT_CHECK(bert.max_predictions >= 0, "--max-predictions must be positive");
    MPT_CHECK(bert.mask_rate > 0.0 && bert.mask_rate < 1.0,
              "--mask-rate " + std::to_string(bert.mask_rate) + " is outside (0, 1)");
  }

  // Model config: the checkpoint's when resuming or initialising from one, else the preset
  // sized to the instance file's vocabulary.
  void configure(const std::string& ckpt_dir) override {
    TaskSpec& s = spec_;
    MPT_CHECK(!s.train_data.empty(),
              "no training data: pass --train-data with an instance file of 'prepare --task bert'");
    MPT_CHECK(!s.graphs, std::string("--graphs on: ") + Bert::kNoGraphs + "; use --graphs off");
    const BertInstanceFile probe(s.train_data);  // validates the file (format version included)
    if (!ckpt_dir.empty()) {
      config_ = load_bert_checkpoint_config(ckpt_dir);
      // The objective follows the model: an MLM-only checkpoint trains MLM-only; a model with the
      // NSP head would keep (and decay) a head no loss trains.
      MPT_CHECK(bert_.nsp || !config_.nsp, "--no-nsp: the checkpoint '" + ckpt_dir +
                                               "' has the NSP head (BertForPreTraining); MLM-only runs start "
                                               "from a preset or an MLM-only checkpoint");
    } else {
      config_ = bert_preset(s.preset, static_cast<int>(probe.header().vocab_size));
      config_.pad_token_id = probe.header().pad_id;
      config_.nsp = bert_.nsp;
    }
    MPT_CHECK(static_cast<int>(probe.header().vocab_size) <= config_.vocab_size,
              "instance file '" + s.train_data + "' has a vocabulary of " +
                  std::to_string(probe.header().vocab_size) + " tokens, more than the model's " +
                  std::to_string(config_.vocab_size));
    if (!bert_.seq_given) s.seq = probe.max_seq_len();
    MPT_CHECK(s.seq <= config_.max_position, "sequence length " + std::to_string(s.seq) +
                                                   " is longer than the BERT model's " +
                                                   std::to_string(config_.max_position) + " positions");
    vocab_text_ = probe.vocab().to_text();
    lower_case_ = probe.lower_case();
    bert_.max_predictions = bert_max_predictions(bert_, s.seq);
    take_recompute();
  }
  ModelFootprint footprint(const Policy& policy, std::shared_ptr<const Backend> sizing) const override {
    return bert_footprint(config_, policy, bert_.max_predictions, std::move(sizing));
  }
  double flops_per_token() const override { return bert_flops_per_token(config_, spec_.seq, bert_.mask_rate); }
  void load_weights(const std::string& ckpt_dir) override { load_bert_checkpoint_model(ckpt_dir, *model_); }

  void open_data(const RunState& state, int rank, int world) override {
    B_ = spec_.batch, T_ = spec_.seq;
    model_->plan(B_, T_, B_ * bert_.max_predictions);
    // Masking is seeded by the run's seed: a resumed run draws the same masks.
    BertMaskingOptions masking;
    masking.mask_prob = bert_.mask_rate;
    masking.max_predictions = bert_.max_predictions;
    masking.seed = state.seed;
    train_ = std::make_unique<BertLoader>(spec_.train_data, B_, T_, config_.vocab_size, masking, rank, world);
    if (pending_) train_->set_position(*pending_);
    if (!spec_.val_data.empty()) {
      BertMaskingOptions val_masking = masking;
      val_masking.shuffle = false;
      val_ = std::make_unique<BertLoader>(spec_.val_data, B_, T_, config_.vocab_size, val_masking);
    }
  }
  void seek_to_checkpoint() override {
    if (pending_) train_->set_position(*pending_);
  }
  void describe(RunMonitor& monitor, bool from_checkpoint, int accum, double tokens_per_step) const override {
    monitor.sayf(
        "model %s: %zu parameters (%s; %d layers, %d heads, %d wide, vocab %d padded to "
        "%d)\n",
        from_checkpoint ? "from checkpoint" : spec_.preset.c_str(), model_->num_hf_params(),
        bert_hf_architecture(config_), config_.n_layer, config_.n_head, config_.hidden, config_.vocab_size,
        config_.padded_vocab_size);
    monitor.sayf(
        "batch %d x %d (%s), %d accumulation step(s) = %.0f positions/step (tok/s counts the real "
        "tokens); %d threads; %zu training instances; %s, %.0f%% of tokens masked, %d per sequence at "
        "most\n",
        B_, T_, bert_.unpadded ? "unpadded" : "padded", accum, tokens_per_step, omp_get_max_threads(),
        train_->num_instances(), config_.nsp ? "MLM + NSP" : "MLM only", 100.0 * bert_.mask_rate,
        bert_.max_predictions);
  }

  StepModel step_model() override {
    StepModel m = bert_step_model();
    m.micro_step = [this](float grad_scale) {
      train_->next(batch_);
      for (int len : batch_.lengths) tokens_ += len;
      if (bert_.unpadded) unpad(batch_);
      const BertStats st = model_->forward_backward(bert_inputs(batch_, config_), B_, T_, grad_scale);
      record(st);
      return st.loss();
    };
    // Sophia's estimate on the step's last micro-batch (batch_ still holds it): MLM and NSP labels
    // drawn from the model's own softmax (model/bert.h).
    m.curvature = [this](float grad_scale, uint64_t seed, uint64_t counter) {
      return model_->forward_backward_sampled(bert_inputs(batch_, config_), B_, T_, grad_scale, seed, counter)
          .loss();
    };
    return m;
  }
  void begin_step() override { mlm_sum_ = nsp_sum_ = mlm_n_ = nsp_n_ = nsp_ok_ = tokens_ = 0.0; }
  // The step's MLM and NSP means over its micro-batches, combined over ranks.
  StepExtras step_extras(Communicator& comm) override {
    double mlm_sum = mlm_sum_, mlm_n = mlm_n_, nsp_sum = nsp_sum_, nsp_n = nsp_n_, nsp_ok = nsp_ok_;
    double tokens = tokens_;
    if (comm.world_size() > 1) {
      mlm_sum = comm.sum(mlm_sum), mlm_n = comm.sum(mlm_n), nsp_sum = comm.sum(nsp_sum);
      nsp_n = comm.sum(nsp_n), nsp_ok = comm.sum(nsp_ok), tokens = comm.sum(tokens);
    }
    const double mlm_loss = mlm_n > 0 ? mlm_sum / mlm_n : 0.0, nsp_loss = nsp_n > 0 ? nsp_sum / nsp_n : 0.0;
    const double nsp_acc = nsp_n > 0 ? nsp_ok / nsp_n : 0.0;
    char extra[96];
    // tok/s and MFU count the real tokens, padded or not: the work done, comparable across layouts.
    if (!config_.nsp) {
      std::snprintf(extra, sizeof(extra), " | mlm %.4f", mlm_loss);
      return {extra, {{"mlm_loss", mlm_loss}, {"real_tokens", tokens}}, tokens};
    }
    std::snprintf(extra, sizeof(extra), " | mlm %.4f | nsp %.4f | nsp acc %.3f", mlm_loss, nsp_loss, nsp_acc);
    return {extra,
            {{"mlm_loss", mlm_loss}, {"nsp_loss", nsp_loss}, {"nsp_acc", nsp_acc}, {"real_tokens", tokens}},
            tokens};
  }

  bool has_validation() const override { return val_ != nullptr; }
  ValResult validate(Communicator& comm, int64_t step) override {
    const BertEvalResult v = evaluate_bert(*model_, *val_, spec_.val_steps, &comm);
    char line[256];
    if (!config_.nsp) {
      std::snprintf(line, sizeof(line),
                    "step %6lld | val mlm loss %.4f | mlm acc %.4f (most frequent token %.4f)",
                    static_cast<long long>(step), v.mlm_loss, v.mlm_accuracy(), v.mlm_baseline);
      return {static_cast<float>(v.mlm_loss),
              line,
              {{"val_loss", v.mlm_loss}, {"val_mlm_loss", v.mlm_loss}, {"val_mlm_acc", v.mlm_accuracy()}}};
    }
    std::snprintf(
        line, sizeof(line),
        "step %6lld | val mlm loss %.4f | mlm acc %.4f (most frequent token %.4f) | nsp loss %.4f | "
        "nsp acc %.4f",
        static_cast<long long>(step), v.mlm_loss, v.mlm_accuracy(), v.mlm_baseline, v.nsp_loss,
        v.nsp_accuracy());
    return {static_cast<float>(v.mlm_loss + v.nsp_loss),
            line,
            {{"val_loss", v.mlm_loss + v.nsp_loss},
             {"val_mlm_loss", v.mlm_loss},
             {"val_mlm_acc", v.mlm_accuracy()},
             {"val_nsp_loss", v.nsp_loss},
             {"val_nsp_acc", v.nsp_accuracy()}}};
  }
  void save(const std::string& run_dir, const Optimizer& optimizer, const RunState& state,
            int keep_last) override {
    save_bert_checkpoint(run_dir, *model_, optimizer, checkpoint_state(state, train_->position()), keep_last);
  }

 private:
  BertTrainOptions bert_;
  // One micro-batch's stats into this step's MLM/NSP sums (the log line's mlm, nsp, nsp acc).
  void record(const BertStats& st) {
    mlm_sum_ += static_cast<double>(st.mlm_loss) * st.mlm_count;
    mlm_n_ += st.mlm_count;
    nsp_sum_ += static_cast<double>(st.nsp_loss) * st.nsp_count;
    nsp_n_ += st.nsp_count;
    nsp_ok_ += st.nsp_correct;
  }

  std::unique_ptr<BertLoader> train_, val_;
  BertBatch batch_;
  int B_ = 0, T_ = 0;
  double mlm_sum_ = 0.0, nsp_sum_ = 0.0, mlm_n_ = 0.0, nsp_n_ = 0.0, nsp_ok_ = 0.0,
         tokens_ = 0.0;  // this step's, this rank's (tokens_: real ones)
};

}  // namespace

ModelFootprint bert_footprint(const BertConfig& config, Precision precision, int max_predictions) {
  // fp16 GEMMs assumed not native (fp32 operands, the larger), as for GPT-2
  // (train/memory_estimate.cpp).
  return bert_footprint(config, make_policy(precision, {}, BackendCaps{.fp16_gemm = false}), max_predictions);
}

ModelFootprint bert_footprint(const BertConfig& config, const Policy& policy, int max_predictions,
                              std::shared_ptr<const Backend> sizing) {
  // The model's own plan and weight copies (model/bert.h), built without allocating.
  ModelFootprint f;
  const ParamTable table = bert_param_table(config);
  f.num_params = table.total();
  f.grad_groups = gradient_groups(table);
  f.lowp_grad_bytes = lowp_grad_floats(f.num_params, policy) * sizeof(float);
  f.weight_copy_bytes = bert_weight_copy_bytes(config, policy);
  f.activation_bytes = [config, policy, max_predictions, be = std::move(sizing)](int B, int T) {
    return bert_activation_plan(config, policy, *be, B, T, B * max_predictions).total_bytes();
  };
  return f;
}

int bert_max_predictions(const BertTrainOptions& bert, int T) {
  if (bert.max_predictions > 0) return bert.max_predictions;
  return std::max(20, static_cast<int>(std::ceil(bert.mask_rate * T)));
}

std::unique_ptr<TrainTask> make_bert_task(const TaskSpec& spec, const BertTrainOptions& bert) {
  return std::make_unique<BertTask>(spec, bert);
}

}  // namespace mptrain
