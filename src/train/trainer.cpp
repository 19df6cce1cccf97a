// The GPT-2 training loop on the CPU backend.
#include "train/trainer.h"

#include <omp.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <vector>

#include "backend/cpu/context.h"
#include "core/error.h"
#include "data/loader.h"
#include "io/checkpoint_dir.h"
#include "model/gpt2.h"
#include "optim/adamw.h"
#include "optim/make_optimizer.h"
#include "optim/schedule.h"
#include "train/checkpoint.h"
#include "train/sampler.h"
#include "train/step.h"

namespace mptrain {

namespace fs = std::filesystem;

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

float evaluate(Gpt2& model, TokenLoader& loader, int steps, std::vector<int>& inputs, std::vector<int>& targets) {
  loader.reset();
  double sum = 0.0;
  for (int i = 0; i < steps; ++i) {
    loader.next(inputs.data(), targets.data());
    sum += model.forward(inputs.data(), targets.data(), loader.B(), loader.T());
  }
  return static_cast<float>(sum / steps);
}

void print_sample(Gpt2& model, int eot, const DecodeFn& decode, int n, uint64_t seed, uint64_t& counter) {
  SampleOptions so;
  so.max_new_tokens = n;
  so.temperature = 1.0f;
  so.top_k = 40;
  so.seed = seed;
  const int prompt = eot >= 0 && eot < model.config().vocab_size ? eot : 0;
  std::vector<int> out = sample_tokens(model, {prompt}, so, counter);
  std::string text;
  if (decode) {
    text = decode(out);
  } else {
    for (int t : out) text += std::to_string(t) + " ";
  }
  std::printf("---- sample ----\n%s\n----------------\n", text.c_str());
  std::fflush(stdout);
}

}  // namespace

TrainSummary run_training(const TrainOptions& opt, const DecodeFn& decode, int eot_token) {
  MPT_CHECK(!opt.train_data.empty(), "no training data: pass --train-data with a glob of token shards");
  MPT_CHECK(opt.steps > 0, "--steps must be positive");
  MPT_CHECK(opt.lr > 0.0f, "--lr must be positive");
  MPT_CHECK(opt.log_every > 0, "--log-every must be positive");
  const OptimizerKind optimizer_kind = parse_optimizer_kind(opt.optimizer);
  if (optimizer_kind == OptimizerKind::Sophia) validate(opt.sophia);
  if (opt.threads > 0) omp_set_num_threads(opt.threads);
  if (opt.deterministic) omp_set_dynamic(0);
  const int accum = opt.grad_accum_steps();
  const int B = opt.batch, T = opt.seq;

  // Model: from a checkpoint when resuming, its weights alone with --init-from, else a fresh
  // initialisation.
  MPT_CHECK(opt.resume.empty() || opt.init_from.empty(),
            "--resume continues a run and --init-from starts a new one from a checkpoint's weights; give one of them");
  std::string resume_dir, init_dir;
  Gpt2Config config;
  if (!opt.resume.empty()) {
    resume_dir = resolve_checkpoint(opt.resume);
    MPT_CHECK(checkpoint_has_optimizer_state(resume_dir),
              "checkpoint '" + resume_dir + "' holds weights only (no optimizer state), so it cannot be resumed; "
              "start a new run from its weights with --init-from " + opt.resume);
    config = load_checkpoint_config(resume_dir);
  } else if (!opt.init_from.empty()) {
    init_dir = resolve_checkpoint(opt.init_from);
    config = load_checkpoint_config(init_dir);
  } else {
    config = gpt2_preset(opt.preset, opt.vocab_multiple);
  }
  MPT_CHECK(T <= config.block_size, "--seq " + std::to_string(T) + " is longer than the model's context of " +
                                        std::to_string(config.block_size) + " positions");
  cpu::Context ctx;
  Gpt2 model(config, ctx);
  // Sophia's b (tokens per optimizer step) and its label-sampling seed (the run's seed).
  std::unique_ptr<Optimizer> optimizer = make_optimizer(optimizer_kind, model.table(), opt.adamw, opt.sophia,
                                                        static_cast<double>(B) * T * accum, opt.seed);
  TrainState state;
  state.seed = opt.seed;
  if (!resume_dir.empty()) {
    load_checkpoint_model(resume_dir, model);
    load_checkpoint_optimizer(resume_dir, model.table(), *optimizer);
    state = load_checkpoint_state(resume_dir);
  } else if (!init_dir.empty()) {
    load_checkpoint_model(init_dir, model);
  } else {
    model.init_weights(opt.seed);
  }
  state.options = opt.to_json();
  model.plan(B, T);

  TokenLoader train_loader(opt.train_data, B, T, config.vocab_size);
  if (!resume_dir.empty()) train_loader.set_position(state.train_pos);
  std::unique_ptr<TokenLoader> val_loader;
  if (!opt.val_data.empty()) val_loader = std::make_unique<TokenLoader>(opt.val_data, B, T, config.vocab_size);

  LrSchedule schedule{opt.lr, opt.min_lr_frac, opt.warmup, opt.steps};
  fs::create_directories(opt.run_dir);
  std::ofstream metrics(opt.run_dir + "/metrics.jsonl", std::ios::app);

  const double tokens_per_step = static_cast<double>(B) * T * accum;
  const double flops_per_step = gpt2_flops_per_token(config, T) * tokens_per_step;
  std::printf("model %s: %zu parameters (%d layers, %d heads, %d wide, vocab %d padded to %d)\n",
              resume_dir.empty() && init_dir.empty() ? opt.preset.c_str() : "from checkpoint", model.num_params(),
              config.n_layer, config.n_head, config.n_embd, config.vocab_size, config.padded_vocab_size);
  std::printf("batch %d x %d, %d accumulation step(s) = %.0f tokens/step; %d threads; train data %zu tokens in %zu shard(s)\n",
              B, T, accum, tokens_per_step, omp_get_max_threads(), train_loader.total_tokens(),
              train_loader.num_shards());
  if (optimizer_kind == OptimizerKind::Sophia)
    std::printf("optimizer sophia: beta1 %g, beta2 %g, rho %g, weight decay %g, Hessian every %lld steps, b = %.0f\n",
                opt.sophia.beta1, opt.sophia.beta2, opt.sophia.rho, opt.sophia.weight_decay, (long long)opt.sophia.k,
                tokens_per_step);
  else
    std::printf("optimizer adamw: beta1 %g, beta2 %g, eps %g, weight decay %g\n", opt.adamw.beta1, opt.adamw.beta2,
                opt.adamw.eps, opt.adamw.weight_decay);
  if (!resume_dir.empty()) std::printf("resumed from %s at step %lld\n", resume_dir.c_str(), (long long)state.step);
  if (!init_dir.empty()) std::printf("initialised from the weights of %s; starting at step 0\n", init_dir.c_str());
  std::fflush(stdout);

  std::vector<int> inputs(static_cast<size_t>(B) * T), targets(static_cast<size_t>(B) * T);
  TrainSummary summary;
  const int64_t first_step = state.step;
  for (int64_t step = state.step; step < opt.steps; ++step) {
    const double t0 = now_seconds();
    const float lr = schedule.at(step);
    const StepStats stats = train_step(
        model, *optimizer, [&](int* in, int* tg) { train_loader.next(in, tg); }, B, T, accum, lr, opt.grad_clip, step + 1,
        inputs.data(), targets.data());
    const float loss = stats.loss;
    const double norm = stats.grad_norm;
    const double dt = now_seconds() - t0;
    const int64_t done = step + 1;
    state.step = done;
    state.train_pos = train_loader.position();
    summary.final_train_loss = loss;
    summary.steps_done = done;

    const bool last = done == opt.steps;
    if (done % opt.log_every == 0 || last || step == first_step) {
      // Sophia's Hessian steps add the win rate: the fraction of unclipped coordinates.
      char curvature[64] = "";
      if (stats.curvature) std::snprintf(curvature, sizeof(curvature), " | win rate %.3f", stats.win_rate);
      std::printf("step %6lld/%lld | loss %.6f | lr %.3e | norm %.4f | %8.1f ms | %9.0f tok/s | %.3f TFLOP/s%s\n",
                  (long long)done, (long long)opt.steps, loss, lr, norm, dt * 1e3, tokens_per_step / dt,
                  flops_per_step / dt / 1e12, curvature);
      std::fflush(stdout);
    }
    char line[320];
    std::snprintf(line, sizeof(line),
                  "{\"step\":%lld,\"tokens\":%.0f,\"train_loss\":%.9g,\"lr\":%.9g,\"grad_norm\":%.9g,\"ms\":%.3f,"
                  "\"tokens_per_s\":%.1f",
                  (long long)done, tokens_per_step * done, loss, lr, norm, dt * 1e3, tokens_per_step / dt);
    std::string record = line;
    if (stats.curvature) {
      std::snprintf(line, sizeof(line), ",\"win_rate\":%.9g,\"hessian_loss\":%.9g,\"hessian_grad_norm\":%.9g",
                    stats.win_rate, stats.curvature_loss, stats.curvature_norm);
      record += line;
    }
    if (val_loader && ((opt.val_every > 0 && done % opt.val_every == 0) || last)) {
      const float val = evaluate(model, *val_loader, opt.val_steps, inputs, targets);
      std::printf("step %6lld | val loss %.6f\n", (long long)done, val);
      summary.final_val_loss = val;
      std::snprintf(line, sizeof(line), ",\"val_loss\":%.9g", val);
      record += line;
    }
    metrics << record << "}\n";
    metrics.flush();
    if ((opt.sample_every > 0 && done % opt.sample_every == 0) || last)
      print_sample(model, eot_token, decode, opt.sample_tokens, opt.seed, state.sample_counter);
    if ((opt.save_every > 0 && done % opt.save_every == 0) || last) {
      save_checkpoint(opt.run_dir, model, *optimizer, state, opt.keep_last);
      summary.last_checkpoint = opt.run_dir + "/" + checkpoint_name(done);
      std::printf("saved checkpoint %s\n", summary.last_checkpoint.c_str());
      std::fflush(stdout);
    }
  }
  return summary;
}

}  // namespace mptrain
