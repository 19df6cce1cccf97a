// `mptrain eval`: loss and perplexity of a checkpoint on token shards, and HellaSwag-style
// multiple-choice accuracy (eval/eval.h).
#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "cli/classify_options.h"
#include "cli/device_options.h"
#include "cli/subcommands.h"
#include "cli/validators.h"
#include "cli/vocab.h"
#include "data/bert_instances.h"
#include "data/loader.h"
#include "eval/bert_eval.h"
#include "eval/classify_eval.h"
#include "eval/eval.h"
#include "io/checkpoint_dir.h"
#include "model/gpt2.h"
#include "precision/precision.h"
#include "train/bert_checkpoint.h"
#include "train/causal_lm_checkpoint.h"
#include "train/checkpoint.h"

namespace mptrain {

namespace {
struct EvalOptions {
  std::string checkpoint;
  std::string data;
  int batch = 4;
  int seq = 256;
  int64_t steps = 0;
  std::string hellaswag;
  int64_t limit = 0;
  int64_t log_every = 500;
  bool verbose = false;
  std::string vocab_dir;
  Precision precision = Precision::Fp32;
  double mask_rate = 0.15;  // BERT: the masking the MLM loss is measured under
  DeviceOptions device;
  ClassifyColumns columns;  // a classifier's labelled file
  bool header = true;
};

// `mptrain eval` for a fine-tuned classifier: loss, accuracy, macro-F1 and the confusion matrix
// on a labelled TSV/JSONL file (T = --seq, at most the model's positions).
void run_classify_eval(const std::string& dir, const BertConfig& config, const EvalOptions& o,
                       Precision precision) {
  MPT_CHECK(!o.data.empty(), "nothing to evaluate: give --data with a labelled TSV or JSONL file");
  const int T = std::min(o.seq, config.max_position);
  LoadedClassifier c = load_classifier(dir, o.batch, T, o.device, precision, "eval");
  const int K = c.model->config().num_labels;
  ClassifyReadOptions read{o.columns, o.header, K, c.labels, T};
  const std::vector<ClassifyExample> examples = read_classify_file(o.data, *c.tokenizer, read);
  const ClassifyEval e = evaluate_classifier(*c.model, examples, o.batch, T);
  std::printf("model %s: %s, %d classes; device %s, %s\n", dir.c_str(),
              bert_hf_architecture(c.model->config()), K, c.model->backend().name(),
              precision_name(precision));
  std::printf("%zu examples | loss %.6f | accuracy %.4f | macro-F1 %.4f\n", examples.size(), e.loss,
              e.scores.accuracy, e.scores.macro_f1);
  std::printf("confusion (rows: true label, columns: predicted, in label order):\n");
  for (int k = 0; k < K; ++k) {
    std::printf("%16s", c.labels[static_cast<size_t>(k)].c_str());
    for (int p = 0; p < K; ++p) std::printf(" %5lld", static_cast<long long>(e.scores.confusion[k][p]));
    std::printf("\n");
  }
}

// `mptrain eval` for a BERT checkpoint (resolved dir): MLM and NSP loss and accuracy on an
// instance file (T = its max_seq_len), with the baselines. batches 0 = one pass.
void run_bert_eval(const std::string& dir, const std::string& data, int batch, int64_t batches,
                   double mask_rate, const DeviceOptions& device, Precision precision) {
  MPT_CHECK(!data.empty(), "nothing to evaluate: give --data with an instance file of 'prepare --task bert'");
  MPT_CHECK(batch > 0 && batches >= 0, "--batch must be positive and --steps >= 0");
  const BertConfig config = load_bert_checkpoint_config(dir);
  int T = 0;
  {
    const BertInstanceFile file(data);  // validated before the model is loaded
    T = file.max_seq_len();
  }
  MPT_CHECK(T <= config.max_position, "instance file '" + data + "' has sequences of " + std::to_string(T) +
                                          " tokens, more than the BERT model's " +
                                          std::to_string(config.max_position) + " positions");
  MPT_CHECK(mask_rate > 0.0 && mask_rate < 1.0,
            "--mask-rate " + std::to_string(mask_rate) + " is outside (0, 1)");
  // As training plans it: the recipe's 20 per sequence, or what the rate asks for.
  const int max_predictions = std::max(20, static_cast<int>(std::ceil(mask_rate * T)));
  BertMaskingOptions masking;
  masking.mask_prob = mask_rate;
  masking.max_predictions = max_predictions;
  masking.shuffle = false;
  BertLoader loader(data, batch, T, config.vocab_size, masking);
  ModelBackend on = model_backend(device, precision, "eval");
  Bert model(config, std::move(on.backend), on.policy);
  load_bert_checkpoint_model(dir, model);
  model.plan(batch, T, batch * max_predictions);
  std::printf("model %s: %zu parameters (%s; %d layers, %d heads, %d wide, vocab %d); %d threads\n",
              dir.c_str(), model.num_hf_params(), bert_hf_architecture(config), config.n_layer, config.n_head,
              config.hidden, config.vocab_size, omp_get_max_threads());
  std::printf("device %s, %s\n", model.backend().name(), precision_name(precision));
  const BertEvalResult r = evaluate_bert(model, loader, batches);
  std::printf(
      "mlm loss %.6f | mlm accuracy %.4f (most frequent token %.4f) | %lld masked positions (%.0f%% "
      "masking)\n",
      r.mlm_loss, r.mlm_accuracy(), r.mlm_baseline, (long long)r.mlm_count, 100.0 * mask_rate);
  if (config.nsp)
    std::printf(
        "nsp loss %.6f | nsp accuracy %.4f (majority label %.4f) | %lld sequences in %lld batches of %dx%d\n",
        r.nsp_loss, r.nsp_accuracy(), r.nsp_baseline, (long long)r.nsp_count, (long long)r.batches, batch, T);
}

void run_eval(const EvalOptions& o) {
  const Precision precision = o.precision;
  MPT_CHECK(!o.data.empty() || !o.hellaswag.empty(),
            "nothing to evaluate: give --data GLOB and/or --hellaswag FILE");
  MPT_CHECK(o.steps >= 0, "--steps must be >= 0 (0 = one pass over the data)");
  MPT_CHECK(o.limit >= 0, "--limit must be >= 0 (0 = every example)");
  const std::string dir = resolve_checkpoint(o.checkpoint);
  if (is_bert_checkpoint(dir)) {
    const BertConfig bert = load_bert_checkpoint_config(dir);
    if (bert.num_labels > 0)  // a classifier: accuracy, macro-F1 and confusion on a labelled file
      run_classify_eval(dir, bert, o, precision);
    else  // BERT: masked-LM and NSP accuracy on an instance file
      run_bert_eval(dir, o.data, o.batch, o.steps, o.mask_rate, o.device, precision);
    return;
  }
  const CausalLmCheckpoint ckpt = read_causal_lm_checkpoint(dir);
  MPT_CHECK(o.data.empty() || o.seq <= ckpt.block_size(),
            "--seq " + std::to_string(o.seq) + " is longer than the model's context of " +
                std::to_string(ckpt.block_size()) + " positions");

  // Open and check every input before the (possibly large) model is loaded: bad data fails
  // at once, with one error line and nothing printed before it.
  std::unique_ptr<TokenLoader> loader;
  int64_t batches = o.steps;
  if (!o.data.empty()) {
    loader = std::make_unique<TokenLoader>(o.data, o.batch, o.seq, ckpt.vocab_size());
    if (batches == 0) batches = windows_per_pass(o.data, o.batch, o.seq);
  }
  std::vector<McTokens> examples;
  if (!o.hellaswag.empty()) {
    std::vector<McExample> parsed = read_hellaswag(o.hellaswag);
    if (o.limit > 0 && static_cast<int64_t>(parsed.size()) > o.limit) parsed.resize(o.limit);
    examples = tokenize_multiple_choice(*load_gpt2_tokenizer(o.vocab_dir), ckpt.vocab_size(), ckpt.block_size(),
                                        parsed);
  }

  ModelBackend on = model_backend(o.device, precision, "eval");
  const std::unique_ptr<CausalLm> loaded = ckpt.load(std::move(on.backend), on.policy);
  CausalLm& model = *loaded;
  std::printf("model %s: %zu parameters (%s, vocab %d, context %d); %d threads; %s; device %s\n", dir.c_str(),
              model.num_params(), ckpt.describe().c_str(), ckpt.vocab_size(), ckpt.block_size(),
              omp_get_max_threads(), precision_name(precision), model.backend().name());
  std::fflush(stdout);

  if (loader) {
    const LossEval r = evaluate_loss(model, *loader, batches);
    std::printf("loss %.6f | perplexity %.4f | %lld batches of %dx%d = %lld tokens\n", r.loss, r.perplexity,
                (long long)r.batches, o.batch, o.seq, (long long)r.tokens);
    std::fflush(stdout);
  }

  if (!examples.empty()) {
    const int64_t total = static_cast<int64_t>(examples.size());
    auto report = [&](const McExample& ex, const McScore& s, const McResult& so_far) {
      if (o.verbose) {
        std::printf("line %lld: label %d | acc pick %d | acc_norm pick %d | loss per token",
                    (long long)ex.line, ex.label, s.pred_sum, s.pred_norm);
        for (double m : s.mean_loss) std::printf(" %.4f", m);
        std::printf("\n");
      }
      if (o.log_every > 0 && so_far.examples % o.log_every == 0 && so_far.examples < total)
        std::printf("hellaswag %lld/%lld | acc %.4f | acc_norm %.4f\n", (long long)so_far.examples,
                    (long long)total, so_far.acc(), so_far.acc_norm());
      std::fflush(stdout);
    };
    const McResult r = evaluate_multiple_choice(model, examples, report);
    std::printf(
        "hellaswag: %lld examples | acc %.4f (%lld, sum of log-likelihoods) | acc_norm %.4f (%lld, "
        "per-token average)\n",
        (long long)r.examples, r.acc(), (long long)r.correct_sum, r.acc_norm(), (long long)r.correct_norm);
  }
}
}  // namespace

void register_eval(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("eval",
                                 "Evaluate a checkpoint: loss/perplexity on shards, HellaSwag accuracy; "
                                 "BERT's MLM/NSP; a classifier's accuracy, macro-F1 and confusion");
  auto o = std::make_shared<EvalOptions>();
  cmd->add_option("--checkpoint", o->checkpoint, "Checkpoint or run directory")->required();
  cmd->add_option("--data", o->data,
                  "Glob of token shards for loss and perplexity, e.g. 'data/x/*_val_*.bin'");
  cmd->add_option("-b,--batch", o->batch, "Sequences per batch (B)")
      ->capture_default_str()
      ->check(cli::at_least(1));
  cmd->add_option("-t,--seq", o->seq, "Sequence length (T)")->capture_default_str()->check(cli::at_least(1));
  cmd->add_option("--steps", o->steps, "Batches to evaluate (0 = one pass over the data)")
      ->capture_default_str();
  cmd->add_option("--hellaswag", o->hellaswag,
                  "Multiple-choice file in HellaSwag's jsonl format (ctx, endings, label)");
  cmd->add_option("--limit", o->limit, "Score only the first N examples (0 = all)")->capture_default_str();
  cmd->add_option("--log-every", o->log_every, "Print running accuracy every N examples (0 = never)")
      ->capture_default_str();
  cmd->add_flag("--verbose", o->verbose, "Print each example's losses and picks");
  cmd->add_option("--vocab-dir", o->vocab_dir, "Folder with GPT-2's encoder.json and vocab.bpe");
  cmd->add_option(
         "--mask-rate", o->mask_rate,
         "BERT: fraction of each sequence's tokens masked for the MLM loss (0.15 the original recipe)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  cli::add_precision_option(cmd, &o->precision, "Forward precision: fp32, tf32, bf16 or fp16 (as in training)");
  add_device_options(cmd, &o->device);
  add_classify_columns(cmd, &o->columns, &o->header, "A classifier's labelled file: the label's column");
  cmd->callback([o, &exit_code]() {
    run_eval(*o);
    exit_code = 0;
  });
}

}  // namespace mptrain
