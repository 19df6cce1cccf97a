// BERT sequence classification's part of the training loop (train/classify_task.h).
#include "train/classify_task.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <optional>
#include <span>
#include <utility>

#include "core/error.h"
#include "core/rng_int.h"
#include "data/classify_data.h"
#include "data/wordpiece.h"
#include "dist/communicator.h"
#include "eval/classify_eval.h"
#include "io/fileutil.h"
#include "model/bert.h"
#include "train/bert_checkpoint.h"
#include "train/bert_task.h"
#include "train/run_monitor.h"

namespace mptrain {

namespace {

// A data position as BERT's loader keeps it: the next example of an epoch's order.
using Position = BertLoaderPosition;

// The examples in a shuffled order per epoch (a function of the seed and the epoch), each rank
// taking its B of every B·world in turn; packed into one micro-batch (model/bert.h's cu_seqlens).
class ClassifyLoader {
 public:
  ClassifyLoader(const std::vector<ClassifyExample>& examples, int B, uint64_t seed, int rank, int world)
      : examples_(examples), B_(B), seed_(seed), rank_(rank), world_(world) {
    MPT_CHECK(!examples.empty(), "no training examples");
    shuffle();
  }
  const Position& position() const { return pos_; }
  void set_position(const Position& p) {
    pos_ = p;
    shuffle();
  }
  // The next B examples of this rank.
  std::vector<const ClassifyExample*> next() {
    std::vector<const ClassifyExample*> batch;
    for (int i = 0; i < B_ * world_; ++i) {
      if (pos_.index >= static_cast<int64_t>(order_.size())) {
        ++pos_.epoch;
        pos_.index = 0;
        shuffle();
      }
      const int64_t k = order_[static_cast<size_t>(pos_.index++)];
      if (i / B_ == rank_) batch.push_back(&examples_[static_cast<size_t>(k)]);
    }
    return batch;
  }

 private:
  void shuffle() {  // on the seed and the epoch
    order_.resize(examples_.size());
    std::iota(order_.begin(), order_.end(), 0);
    shuffle_counter_based(std::span<int64_t>(order_), seed_, static_cast<uint64_t>(pos_.epoch));
  }
  const std::vector<ClassifyExample>& examples_;
  int B_;
  uint64_t seed_;
  int rank_, world_;
  Position pos_;
  std::vector<int64_t> order_;
};

class ClassifyTask final : public BertTaskBase {
 public:
  ClassifyTask(TaskSpec spec, const ClassifyTrainOptions& o) : BertTaskBase(std::move(spec)), o_(o) {
    MPT_CHECK(o.labels_path.empty() || o.num_labels == 0, "give --labels or --num-labels, not both");
    MPT_CHECK(!o.columns.label.empty(), "--label-column: training reads a label for every example");
  }

  // The vocabulary, the labels and the model config: a classifier checkpoint's own, a body's
  // with this task's classes, or the preset's; then the examples, tokenised once.
  void configure(const std::string& ckpt_dir) override {
    const TaskSpec& s = spec_;
    MPT_CHECK(!s.train_data.empty(), "no training data: pass --train-data with a TSV or JSONL file");
    MPT_CHECK(!s.graphs, std::string("--graphs on: ") + Bert::kNoGraphs + "; use --graphs off");
    seed_ = s.seed;
    std::string vocab_path = o_.vocab_path;
    bool lower_case = o_.lower_case;
    if (vocab_path.empty()) {
      MPT_CHECK(!ckpt_dir.empty(),
                "no vocabulary: pass --vocab vocab.txt (or --init-from a BERT checkpoint)");
      vocab_path = bert_checkpoint_vocab(ckpt_dir);
      lower_case = bert_checkpoint_lower_case(ckpt_dir);
    }
    vocab_text_ = read_file(vocab_path);
    lower_case_ = lower_case;
    tokenizer_ = std::make_unique<WordpieceTokenizer>(WordpieceVocab::parse(vocab_text_, vocab_path),
                                                      BasicTokenizerOptions{.lower_case = lower_case});
    labels_ = o_.labels_path.empty()
                  ? std::vector<std::string>{}
                  : parse_labels_text(read_file(o_.labels_path), "'" + o_.labels_path + "'");
    if (!ckpt_dir.empty()) {
      config_ = load_bert_checkpoint_config(ckpt_dir);
      if (config_.num_labels > 0) {  // a classifier: its classes (and names) go on
        const std::vector<std::string> own = bert_checkpoint_labels(ckpt_dir);
        if (labels_.empty() && o_.num_labels == 0) labels_ = own;
        const int want = labels_.empty() ? (o_.num_labels > 0 ? o_.num_labels : config_.num_labels)
                                         : static_cast<int>(labels_.size());
        MPT_CHECK(want == config_.num_labels, "checkpoint '" + ckpt_dir + "' classifies into " +
                                                  std::to_string(config_.num_labels) +
                                                  " classes, this task " + std::to_string(want));
      } else {
        config_.nsp = false;  // a body (pretraining, MLM-only): this task's head goes on the pooled row
        from_body_ = true;
      }
    } else {
      config_ = bert_preset(s.preset, tokenizer_->vocab_size());
      config_.pad_token_id = tokenizer_->special().pad;
      config_.nsp = false;
    }
    if (config_.num_labels == 0) {
      config_.num_labels = labels_.empty() ? o_.num_labels : static_cast<int>(labels_.size());
      MPT_CHECK(config_.num_labels > 0, "no classes: pass --labels labels.txt or --num-labels N");
    }
    mptrain::validate(config_);
    take_recompute();
    MPT_CHECK(tokenizer_->vocab_size() <= config_.vocab_size,
              "vocabulary '" + vocab_path + "' has " + std::to_string(tokenizer_->vocab_size()) +
                  " tokens, more than the model's " + std::to_string(config_.vocab_size));
    MPT_CHECK(s.seq <= config_.max_position, "sequence length " + std::to_string(s.seq) +
                                                   " is longer than the BERT model's " +
                                                   std::to_string(config_.max_position) + " positions");
    ClassifyReadOptions read{o_.columns, o_.header, config_.num_labels, labels_, s.seq};
    train_examples_ = read_classify_file(s.train_data, *tokenizer_, read);
    if (!s.val_data.empty()) val_examples_ = read_classify_file(s.val_data, *tokenizer_, read);
  }
  ModelFootprint footprint(const Policy& policy, std::shared_ptr<const Backend> sizing) const override {
    return bert_footprint(config_, policy, 0, std::move(sizing));
  }
  double flops_per_token() const override { return bert_flops_per_token(config_, spec_.seq, 0.0); }
  // A classifier's weights whole; a body's under a new head, initialised from the run's seed.
  // (ckpt_dir is the one configure read: the trainer's --resume or --init-from.)
  void load_weights(const std::string& ckpt_dir) override {
    if (!from_body_) {
      load_bert_checkpoint_model(ckpt_dir, *model_);
      return;
    }
    model_->init_weights(seed_);
    fresh_ = load_bert_body(ckpt_dir, *model_);
  }

  void open_data(const RunState& state, int rank, int world) override {
    B_ = spec_.batch, T_ = spec_.seq;
    model_->plan(B_, T_);
    train_ = std::make_unique<ClassifyLoader>(train_examples_, B_, state.seed, rank, world);
    if (pending_) train_->set_position(*pending_);
    run_dir_ = spec_.run_dir;
  }
  void seek_to_checkpoint() override {
    if (pending_) train_->set_position(*pending_);
  }
  void describe(RunMonitor& monitor, bool from_checkpoint, int accum, double tokens_per_step) const override {
    monitor.sayf("model %s: %zu parameters (%s, %d classes; %d layers, %d heads, %d wide, vocab %d)\n",
                 from_checkpoint ? "from checkpoint" : spec_.preset.c_str(), model_->num_hf_params(),
                 bert_hf_architecture(config_), config_.num_labels, config_.n_layer, config_.n_head,
                 config_.hidden, config_.vocab_size);
    if (!fresh_.empty()) {
      std::string names;
      for (const std::string& n : fresh_) names += (names.empty() ? "" : ", ") + n;
      monitor.sayf("newly initialised (not in the checkpoint's body): %s\n", names.c_str());
    }
    monitor.sayf(
        "batch %d examples (unpadded, at most %d tokens each), %d accumulation step(s) = %.0f examples/step; "
        "%d threads; %zu training and %zu validation examples\n",
        B_, T_, accum, tokens_per_step / T_, omp_get_max_threads(), train_examples_.size(),
        val_examples_.size());
  }

  StepModel step_model() override {
    StepModel m = bert_step_model();
    m.micro_step = [this](float grad_scale) {
      batch_ = pack_examples(train_->next());
      tokens_ += static_cast<double>(batch_.ids.size());
      const BertStats st = model_->forward_backward(batch_.inputs(), batch_.size(), T_, grad_scale);
      n_ += st.nsp_count;
      right_ += st.nsp_correct;
      return st.loss();
    };
    // Sophia's estimate on the step's last micro-batch: labels drawn from the model's softmax.
    m.curvature = [this](float grad_scale, uint64_t seed, uint64_t counter) {
      return model_->forward_backward_sampled(batch_.inputs(), batch_.size(), T_, grad_scale, seed, counter)
          .loss();
    };
    return m;
  }
  void begin_step() override { n_ = right_ = tokens_ = 0.0; }
  StepExtras step_extras(Communicator& comm) override {
    double n = n_, right = right_, tokens = tokens_;
    if (comm.world_size() > 1) n = comm.sum(n), right = comm.sum(right), tokens = comm.sum(tokens);
    const double acc = n > 0 ? right / n : 0.0;
    char extra[48];
    std::snprintf(extra, sizeof(extra), " | acc %.3f", acc);
    return {extra, {{"train_acc", acc}, {"real_tokens", tokens}}, tokens};
  }

  bool has_validation() const override { return !val_examples_.empty(); }
  // The whole validation file on every rank alike (it is small); the best weights kept by rank 0.
  ValResult validate(Communicator& comm, int64_t step) override {
    const ClassifyEval e = evaluate_classifier(*model_, val_examples_, B_, T_);
    const ClassifyScores& s = e.scores;
    const double loss = e.loss;
    std::string best_note;
    if (s.macro_f1 > best_f1_) {
      best_f1_ = s.macro_f1;
      best_step_ = step;
      if (comm.is_root() && !run_dir_.empty()) {
        RunState run;
        run.step = step;
        run.seed = seed_;
        save_bert_weights(run_dir_ + "/best", *model_, checkpoint_state(run, train_->position()));
        write_file_atomic(run_dir_ + "/confusion.json", confusion_json(s, step).dump(2) + "\n");
      }
      best_note = " (best so far: " + run_dir_ + "/best)";
    }
    char line[256];
    std::snprintf(line, sizeof(line),
                  "step %6lld | val loss %.4f | acc %.4f | macro-F1 %.4f | best macro-F1 %.4f at step %lld%s",
                  static_cast<long long>(step), loss, s.accuracy, s.macro_f1, best_f1_,
                  static_cast<long long>(best_step_), best_note.c_str());
    return {static_cast<float>(loss),
            line,
            {{"val_loss", loss},
             {"val_acc", s.accuracy},
             {"val_macro_f1", s.macro_f1},
             {"best_macro_f1", best_f1_}}};
  }
  void save(const std::string& run_dir, const Optimizer& optimizer, const RunState& state,
            int keep_last) override {
    save_bert_checkpoint(run_dir, *model_, optimizer, checkpoint_state(state, train_->position()), keep_last);
  }

 private:
  // The confusion matrix by class name (rows: true, columns: predicted) with the scores.
  nlohmann::json confusion_json(const ClassifyScores& s, int64_t step) const {
    nlohmann::json names = nlohmann::json::array();
    for (int c = 0; c < config_.num_labels; ++c)
      names.push_back(c < static_cast<int>(labels_.size()) ? labels_[static_cast<size_t>(c)]
                                                           : std::to_string(c));
    return {{"step", step},
            {"accuracy", s.accuracy},
            {"macro_f1", s.macro_f1},
            {"labels", names},
            {"confusion", s.confusion}};
  }

  ClassifyTrainOptions o_;
  uint64_t seed_ = 0;
  bool from_body_ = false;          // configure's checkpoint is a body, not a classifier
  std::vector<std::string> fresh_;  // what load_bert_body left newly initialised
  std::unique_ptr<WordpieceTokenizer> tokenizer_;
  std::vector<ClassifyExample> train_examples_, val_examples_;
  std::unique_ptr<ClassifyLoader> train_;
  ClassifyBatch batch_;
  int B_ = 0, T_ = 0;
  std::string run_dir_;
  double best_f1_ = -1.0;
  int64_t best_step_ = 0;
  double n_ = 0.0, right_ = 0.0, tokens_ = 0.0;  // this step's, this rank's
};

}  // namespace

std::unique_ptr<TrainTask> make_classify_task(const TaskSpec& spec, const ClassifyTrainOptions& options) {
  return std::make_unique<ClassifyTask>(spec, options);
}

}  // namespace mptrain
