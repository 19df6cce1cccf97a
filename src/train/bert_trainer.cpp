// The BERT pretraining loop on the CPU backend.
#include "train/bert_trainer.h"

#include <omp.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <memory>
#include <vector>

#include "backend/cpu/context.h"
#include "core/error.h"
#include "data/bert_instances.h"
#include "data/bert_loader.h"
#include "dist/communicator.h"
#include "dist/data_parallel.h"
#include "io/checkpoint_dir.h"
#include "model/bert.h"
#include "optim/make_optimizer.h"
#include "optim/schedule.h"
#include "train/bert_checkpoint.h"
#include "train/bert_eval.h"
#include "train/checkpoint.h"  // load_checkpoint_optimizer: the same optimizer file as GPT-2
#include "train/run_monitor.h"
#include "train/step.h"

namespace mptrain {

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

BertInputs inputs_of(const BertBatch& b) {
  return {b.input_ids.data(), b.token_type_ids.data(), b.attention_mask.data(), b.mlm_labels.data(),
          b.nsp_labels.data()};
}

// The model's words for config.json's "model" object.
// The instance file's vocabulary (vocab.txt text) and casing, for the checkpoints.
std::string train_loader_vocab(const std::string& path, bool& lower_case) {
  const BertInstanceFile file(path);
  lower_case = file.lower_case();
  return file.vocab().to_text();
}

nlohmann::json model_json(const BertConfig& c) {
  nlohmann::json j = bert_config_json(c);
  j["model"] = "bert";
  return j;
}

}  // namespace

TrainSummary run_bert_training(const TrainOptions& options, const BertTrainOptions& bert) {
  TrainOptions opt = options;
  MPT_CHECK(!opt.train_data.empty(), "no training data: pass --train-data with an instance file of 'prepare --task bert'");
  MPT_CHECK(opt.steps > 0, "--steps must be positive");
  MPT_CHECK(opt.lr > 0.0f, "--lr must be positive");
  MPT_CHECK(opt.log_every > 0, "--log-every must be positive");
  MPT_CHECK(opt.optimizer == "adamw", "BERT trains with --optimizer adamw (Sophia's Hessian estimate is GPT-2's only)");
  MPT_CHECK(opt.precision.empty() || opt.precision == "fp32",
            "BERT trains in fp32 for now (--precision " + opt.precision + " is GPT-2's only)");
  MPT_CHECK(bert.max_predictions > 0, "--max-predictions must be positive");
  opt.precision = "fp32";
  if (opt.threads > 0) omp_set_num_threads(opt.threads);
  if (opt.deterministic) omp_set_dynamic(0);
  std::unique_ptr<Communicator> comm = make_host_communicator(opt.collective_timeout);
  const int world = comm->world_size();
  const int B = opt.batch;

  // Model config: the checkpoint's when resuming or initialising from one, else the preset
  // sized to the instance file's vocabulary.
  MPT_CHECK(opt.resume.empty() || opt.init_from.empty(),
            "--resume continues a run and --init-from starts a new one from a checkpoint's weights; give one of them");
  std::string resume_dir, init_dir;
  BertConfig config;
  int file_seq = 0;
  {
    const BertInstanceFile probe(opt.train_data);  // validates the file (format version included)
    file_seq = probe.max_seq_len();
    if (!opt.resume.empty()) {
      resume_dir = resolve_checkpoint(opt.resume);
      config = load_bert_checkpoint_config(resume_dir);
    } else if (!opt.init_from.empty()) {
      init_dir = resolve_checkpoint(opt.init_from);
      config = load_bert_checkpoint_config(init_dir);
    } else {
      if (opt.preset.rfind("bert", 0) != 0) opt.preset = "bert-mini";
      config = bert_preset(opt.preset, static_cast<int>(probe.header().vocab_size));
      config.pad_token_id = probe.header().pad_id;
    }
    MPT_CHECK(static_cast<int>(probe.header().vocab_size) <= config.vocab_size,
              "instance file '" + opt.train_data + "' has a vocabulary of " +
                  std::to_string(probe.header().vocab_size) + " tokens, more than the model's " +
                  std::to_string(config.vocab_size));
  }
  const int T = bert.seq_given ? opt.seq : file_seq;
  opt.seq = T;
  MPT_CHECK(T <= config.max_position, "sequence length " + std::to_string(T) + " is longer than the BERT model's " +
                                          std::to_string(config.max_position) + " positions");
  const int accum = opt.grad_accum_steps(world);
  const double tokens_per_step = static_cast<double>(B) * T * accum * world;

  cpu::Context ctx;
  Bert model(config, ctx);
  const OptimizerFactory make_opt = [&](const ParamTable& table) {
    return make_optimizer(OptimizerKind::AdamW, table, opt.adamw, opt.sophia, tokens_per_step, opt.seed);
  };
  DataParallel dp(*comm, model.table(), zero_stage_from_int(opt.zero));
  std::unique_ptr<Optimizer> optimizer = make_opt(dp.optimizer_table());
  BertTrainState state;
  state.seed = opt.seed;
  if (!resume_dir.empty()) {
    load_bert_checkpoint_model(resume_dir, model);
    if (dp.zero() == ZeroStage::Off) {
      load_checkpoint_optimizer(resume_dir, model.table(), *optimizer);
    } else {
      std::unique_ptr<Optimizer> whole = make_opt(model.table());
      load_checkpoint_optimizer(resume_dir, model.table(), *whole);
      dp.scatter_optimizer(*whole, *optimizer);
    }
    state = load_bert_checkpoint_state(resume_dir);
  } else if (!init_dir.empty()) {
    load_bert_checkpoint_model(init_dir, model);
  } else {
    model.init_weights(opt.seed);
  }
  dp.broadcast_params(model.params().data());
  state.options = opt.to_json();
  state.vocab_text = train_loader_vocab(opt.train_data, state.lower_case);
  model.plan(B, T, B * bert.max_predictions);

  // Masking is seeded by the run's seed: a resumed run draws the same masks.
  BertMaskingOptions masking;
  masking.max_predictions = bert.max_predictions;
  masking.seed = state.seed;
  BertLoader train_loader(opt.train_data, B, T, config.vocab_size, masking, comm->rank(), world);
  if (!resume_dir.empty()) train_loader.set_position(state.train_pos);
  std::unique_ptr<BertLoader> val_loader;
  if (!opt.val_data.empty()) {
    BertMaskingOptions val_masking = masking;
    val_masking.shuffle = false;
    val_loader = std::make_unique<BertLoader>(opt.val_data, B, T, config.vocab_size, val_masking);
  }

  LrSchedule schedule{opt.lr, opt.min_lr_frac, opt.warmup, opt.steps};
  const double flops_per_step = bert_flops_per_token(config, T) * tokens_per_step;
  RunMonitor monitor(opt, model_json(config),
                     {model.num_params(), tokens_per_step, flops_per_step, omp_get_max_threads(), state.step,
                      resume_dir, comm->rank(), world});
  monitor.sayf("model %s: %zu parameters (BertForPreTraining; %d layers, %d heads, %d wide, vocab %d padded to %d)\n",
               resume_dir.empty() && init_dir.empty() ? opt.preset.c_str() : "from checkpoint", model.num_hf_params(),
               config.n_layer, config.n_head, config.hidden, config.vocab_size, config.padded_vocab_size);
  monitor.sayf("batch %d x %d, %d accumulation step(s) = %.0f tokens/step; %d threads; %zu training instances, "
               "%d masked positions per sequence at most\n",
               B, T, accum, tokens_per_step, omp_get_max_threads(), train_loader.num_instances(), bert.max_predictions);
  monitor.sayf("optimizer adamw: beta1 %g, beta2 %g, eps %g, weight decay %g (not on biases and LayerNorm)\n",
               opt.adamw.beta1, opt.adamw.beta2, opt.adamw.eps, opt.adamw.weight_decay);
  if (!resume_dir.empty()) monitor.sayf("resumed from %s at step %lld\n", resume_dir.c_str(), (long long)state.step);
  if (!init_dir.empty()) monitor.sayf("initialised from the weights of %s; starting at step 0\n", init_dir.c_str());
  monitor.start();

  BertBatch batch;
  TrainSummary summary;
  for (int64_t step = state.step; step < opt.steps; ++step) {
    const double t0 = now_seconds();
    const float lr = schedule.at(step);
    // The step's MLM and NSP sums over its micro-batches (this rank's; combined below).
    double mlm_sum = 0.0, nsp_sum = 0.0, mlm_n = 0.0, nsp_n = 0.0, nsp_ok = 0.0;
    StepModel sm;
    sm.table = &model.table();
    sm.params = [&model]() -> FloatBuffer& { return model.params(); };
    sm.grads = &model.grads();
    sm.micro_step = [&](float grad_scale) {
      train_loader.next(batch);
      const BertStats st = model.forward_backward(inputs_of(batch), B, T, grad_scale);
      mlm_sum += static_cast<double>(st.mlm_loss) * st.mlm_count;
      mlm_n += st.mlm_count;
      nsp_sum += static_cast<double>(st.nsp_loss) * st.nsp_count;
      nsp_n += st.nsp_count;
      nsp_ok += st.nsp_correct;
      return st.loss();
    };
    const StepStats stats = train_step(sm, *optimizer, accum, lr, opt.grad_clip, step + 1, nullptr, &dp);
    MPT_CHECK(!stats.non_finite, "step " + std::to_string(step + 1) +
                                     ": the loss or the gradient norm is not finite; the weights were not "
                                     "updated (lower --lr, or resume from the last checkpoint)");
    if (world > 1) {
      mlm_sum = comm->sum(mlm_sum), mlm_n = comm->sum(mlm_n), nsp_sum = comm->sum(nsp_sum);
      nsp_n = comm->sum(nsp_n), nsp_ok = comm->sum(nsp_ok);
    }
    const double mlm_loss = mlm_n > 0 ? mlm_sum / mlm_n : 0.0, nsp_loss = nsp_n > 0 ? nsp_sum / nsp_n : 0.0;
    const double nsp_acc = nsp_n > 0 ? nsp_ok / nsp_n : 0.0;
    const double dt = now_seconds() - t0;
    const int64_t done = step + 1;
    state.step = done;
    state.train_pos = train_loader.position();
    summary.final_train_loss = stats.loss;
    summary.steps_done = done;

    const bool last = done == opt.steps;
    if (monitor.log_due(done)) {
      char extra[96];
      std::snprintf(extra, sizeof(extra), " | mlm %.4f | nsp %.4f | nsp acc %.3f", mlm_loss, nsp_loss, nsp_acc);
      monitor.log(monitor.step_line(done, stats.loss, lr, stats.grad_norm, dt) + extra);
    }
    MetricsRecord record = monitor.record(done, stats.loss, lr, stats.grad_norm, dt);
    record.add("mlm_loss", mlm_loss).add("nsp_loss", nsp_loss).add("nsp_acc", nsp_acc);
    if (world > 1) record.add("comm_ms", dp.take_comm_seconds() * 1e3);
    if (val_loader && ((opt.val_every > 0 && done % opt.val_every == 0) || last)) {
      const BertEvalResult v = evaluate_bert(model, *val_loader, opt.val_steps, comm.get());
      monitor.sayf("step %6lld | val mlm loss %.4f | mlm acc %.4f (most frequent token %.4f) | nsp loss %.4f | "
                   "nsp acc %.4f",
                   (long long)done, v.mlm_loss, v.mlm_accuracy(), v.mlm_baseline, v.nsp_loss, v.nsp_accuracy());
      summary.final_val_loss = static_cast<float>(v.mlm_loss + v.nsp_loss);
      record.add("val_loss", v.mlm_loss + v.nsp_loss)
          .add("val_mlm_loss", v.mlm_loss)
          .add("val_mlm_acc", v.mlm_accuracy())
          .add("val_nsp_loss", v.nsp_loss)
          .add("val_nsp_acc", v.nsp_accuracy());
    }
    monitor.step_done(done, stats.loss, dt, record);
    int stop = last ? 0 : monitor.stop_requested();
    if (world > 1 && !last && comm->any(stop != 0) && !stop) stop = SIGTERM;
    if ((opt.save_every > 0 && done % opt.save_every == 0) || last || stop) {
      std::unique_ptr<Optimizer> whole = dp.gather_optimizer(*optimizer, make_opt);
      if (comm->is_root()) save_bert_checkpoint(opt.run_dir, model, whole ? *whole : *optimizer, state, opt.keep_last);
      summary.last_checkpoint = opt.run_dir + "/" + checkpoint_name(done);
      monitor.sayf("saved checkpoint %s", summary.last_checkpoint.c_str());
    }
    if (stop) {
      summary.stopped_by_signal = stop;
      break;
    }
  }
  monitor.finish(summary);
  return summary;
}

}  // namespace mptrain
