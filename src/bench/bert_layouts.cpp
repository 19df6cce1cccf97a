// Padded against unpadded BERT batches on a real instance file (bench/bert_layouts.h).
#include "bench/bert_layouts.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/make_backend.h"
#include "core/error.h"
#include "core/quietness.h"
#include "core/stats.h"
#include "data/bert_instances.h"
#include "data/bert_loader.h"
#include "eval/bert_eval.h"
#include "model/bert.h"
#include "optim/make_optimizer.h"
#include "precision/loss_scaler.h"
#include "precision/policy.h"
#include "train/step.h"

namespace mptrain {

namespace {

constexpr double kLr = 1e-4;

struct Layout {
  const char* name;
  bool unpadded;
};

std::vector<Layout> layouts_of(const std::string& which) {
  MPT_CHECK(which == "padded" || which == "unpadded" || which == "both",
            "--batch-layout must be padded, unpadded or both, not '" + which + "'");
  std::vector<Layout> l;
  if (which != "unpadded") l.push_back({"padded", false});
  if (which != "padded") l.push_back({"unpadded", true});
  return l;
}

// One layout's steps of one round: time and real tokens.
struct RoundTally {
  double seconds = 0.0;
  double real_tokens = 0.0;
  int steps = 0;
};

}  // namespace

LayoutResult bench_bert_layouts(const BenchOptions& o) {
  const QuietnessMeter meter;  // first: the load average before anything of ours ran
  const std::vector<Layout> layouts = layouts_of(o.batch_layout);
  MPT_CHECK(o.steps > 0 && o.warmup >= 0 && o.rounds > 0, "--steps and --rounds must be positive");
  const Precision precision = o.precision;
  const BertInstanceFile probe(o.data);
  BertConfig config = bert_preset(o.preset, static_cast<int>(probe.header().vocab_size), o.vocab_multiple);
  config.pad_token_id = probe.header().pad_id;
  const int B = o.batch, T = o.seq;
  // The training run's default: the recipe's 20 masked positions per sequence, or 15% of T.
  const int max_predictions = std::max(20, static_cast<int>(std::ceil(0.15 * T)));

  std::unique_ptr<Backend> be = bench_backend(o);
  const Policy policy = plan_policy(precision, PolicyOf::Own, *be);
  Bert model(config, std::move(be), policy);
  model.init_weights(1337);
  model.plan(B, T, B * max_predictions);
  BertMaskingOptions masking;
  masking.max_predictions = max_predictions;
  BertLoader loader(o.data, B, T, config.vocab_size, masking);
  std::unique_ptr<Optimizer> optimizer =
      make_optimizer(OptimizerKind::AdamW, model.table(), AdamWHyper{}, SophiaHyper{},
                     static_cast<double>(B) * T, 1337, model.backend());
  std::unique_ptr<LossScaler> scaler;
  if (needs_loss_scaler(precision)) scaler = std::make_unique<LossScaler>();

  BertBatch batch;
  bool unpadded = false;
  double real = 0.0;  // the last batch's real tokens
  StepModel step = core_step_model(model);
  step.micro_step = [&](float grad_scale) {
    loader.next(batch);
    real = 0.0;
    for (int len : batch.lengths) real += len;
    if (unpadded) unpad(batch);
    return model.forward_backward(bert_inputs(batch, config), B, T, grad_scale).loss();
  };
  int64_t t = 0;
  const auto timed_step = [&](RoundTally* tally) {
    const auto t0 = std::chrono::steady_clock::now();
    train_step(step, *optimizer, 1, static_cast<float>(kLr), 1.0f, ++t, scaler.get());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (tally) tally->seconds += s, tally->real_tokens += real, ++tally->steps;
  };

  if (!o.quiet)
    std::printf(
        "bench: %s (%zu params) on %s, batch %d x %d, %s, adamw, %d threads; %d warmup + %d timed steps per "
        "layout and round, %d rounds, the same batches for every layout\n",
        o.preset.c_str(), model.num_params(), o.data.c_str(), B, T, precision_name(precision),
        omp_get_max_threads(), o.warmup, o.steps, o.rounds);
  const BertLoaderPosition start = loader.position();
  for (const Layout& l : layouts) {  // warm-up (primitive caches, the packed GEMM shapes)
    unpadded = l.unpadded;
    loader.set_position(start);
    for (int w = 0; w < o.warmup; ++w) timed_step(nullptr);
  }
  std::vector<std::vector<double>> ms(layouts.size()), tok_s(layouts.size());
  double real_sum = 0.0, slots = 0.0;
  for (int round = 0; round < o.rounds; ++round) {
    const BertLoaderPosition at = loader.position();
    std::string line = "round " + std::to_string(round + 1) + "/" + std::to_string(o.rounds) + ":";
    for (size_t k = 0; k < layouts.size(); ++k) {
      unpadded = layouts[k].unpadded;
      loader.set_position(at);  // every layout takes the round's same batches
      RoundTally tally;
      for (int s = 0; s < o.steps; ++s) timed_step(&tally);
      ms[k].push_back(1e3 * tally.seconds / tally.steps);
      tok_s[k].push_back(tally.real_tokens / tally.seconds);
      if (k == 0) real_sum += tally.real_tokens, slots += static_cast<double>(tally.steps) * B * T;
      char part[120];
      std::snprintf(part, sizeof(part), " %s %.1f ms/step, %.0f real tok/s;", layouts[k].name, ms[k].back(),
                    tok_s[k].back());
      line += part;
    }
    std::printf("%s\n", line.c_str());
  }
  std::vector<LayoutResult> results;
  for (size_t k = 0; k < layouts.size(); ++k) {
    results.push_back({median(ms[k]), median(tok_s[k]), real_sum / slots});
    std::printf("mptrain %s %s: %.1f ms/step | %.0f real tok/s (median of %d rounds of %d steps)\n",
                precision_name(precision), layouts[k].name, results[k].ms_per_step,
                results[k].real_tokens_per_s, o.rounds, o.steps);
  }
  std::printf("real tokens: %.1f%% of the batches' B x T positions\n", 100.0 * real_sum / slots);
  if (layouts.size() == 2)
    std::printf("ratio: unpadded is %.2fx the real tokens/s of padded (same batches, alternating rounds)\n",
                results[1].real_tokens_per_s / results[0].real_tokens_per_s);
  report_quietness(meter.finish(), layouts.size() == 2);
  std::fflush(stdout);
  return results.back();
}

}  // namespace mptrain
