// The training run, one for every model family (what differs between GPT-2 and BERT is a
// TrainTask, train/train_task.h), in three parts: the options' values checked together
// (check_options; their names are typed where the CLI reads them), everything the loop runs on built once
// (build_run: ranks, backend, model, weights, optimizer, data parallelism, loss scaler, data), and the loop
// (run_loop).
#include "train/trainer.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <vector>

#include "backend/device.h"
#include "backend/make_backend.h"
#include "core/error.h"
#include "dist/communicator.h"
#include "dist/data_parallel.h"
#include "dist/nccl_communicator.h"
#include "io/checkpoint_dir.h"
#include "optim/adamw.h"
#include "optim/make_optimizer.h"
#include "optim/schedule.h"
#include "precision/loss_scaler.h"
#include "precision/policy.h"
#include "precision/precision.h"
#include "train/checkpoint.h"
#include "train/memory_estimate.h"
#include "train/numeric_guard.h"
#include "train/rollback.h"
#include "train/run_monitor.h"
#include "train/step.h"
#include "train/train_task.h"

namespace mptrain {

namespace fs = std::filesystem;

namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The communicator the gradients are reduced over: NCCL between GPU ranks (--dist-backend nccl,
// or auto with several --device cuda ranks; its id travels over `host`), else `host` itself (MPI,
// or the single process). Null means `host`.
std::unique_ptr<Communicator> make_grad_communicator(const TrainOptions& opt, Communicator& host,
                                                     Backend& compute) {
  const bool nccl = opt.dist_backend == DistBackend::Nccl ||
                    (opt.dist_backend == DistBackend::Auto && opt.device == Device::Cuda && host.world_size() > 1);
  return nccl ? make_nccl_communicator(host, opt.collective_timeout, &compute) : nullptr;
}

// --- the trainer's three parts: the options' values checked, the run built once, the loop.

// (1) The options' values checked together before anything is read or built (their names were
// parsed into typed values where they were read: the CLI, the recipe): a bad value fails here,
// before any output. Returns the NaN guard's options, checked.
NanGuardOptions check_options(const TrainOptions& opt) {
  MPT_CHECK(opt.steps > 0, "--steps must be positive");
  MPT_CHECK(opt.lr > 0.0f, "--lr must be positive");
  MPT_CHECK(opt.log_every > 0, "--log-every must be positive");
  if (opt.optimizer == OptimizerKind::Sophia) validate(opt.sophia);
  if (opt.optimizer == OptimizerKind::Muon) validate(opt.muon);
  if (opt.threads > 0) check_thread_count(opt.threads);  // train/memory_estimate.h
  MPT_CHECK(opt.zero != 2 || opt.overlap_grad_reduce != Toggle::Off,
            "--zero 2 reduces each range of the gradients as the backward hands it (its memory saving): "
            "--overlap-grad-reduce off does not go with it");
  const NanGuardOptions nan_guard{opt.on_nan, opt.nan_lr_factor, opt.nan_max_rollbacks};
  validate(nan_guard);
  return nan_guard;
}

// (2) Everything the loop runs on, built once by build_run: the ranks, the backend, the model (the
// task's) with its resumed, imported or initial weights, the optimizer over this rank's share, the
// loss scaler, the data at its position. Built in place and never moved: dp and make_opt refer to
// members.
struct Run {
  Run(TrainOptions& o, TrainTask& t) : opt(o), task(t) {}
  Run(const Run&) = delete;
  Run& operator=(const Run&) = delete;
  TrainOptions& opt;  // with its precision and device resolved (config.json records what ran)
  TrainTask& task;
  NanGuardOptions nan_guard;
  std::unique_ptr<Communicator> comm;  // the launcher's ranks (MPI), or a single process
  int world = 1;
  std::string device_note;  // --device auto's choice and why
  bool on_cuda = false;
  int gpu = -1;
  std::string resume_dir, init_dir;
  RunState resumed;  // the checkpoint's state when resuming
  RunState state;    // the run's, from its first step on
  int accum = 1;
  double tokens_per_step = 0.0;  // global
  Precision precision = Precision::Fp32, ckpt_precision = Precision::Fp32;
  std::unique_ptr<LossScaler> scaler;  // fp16's
  MuonHyper muon;
  OptimizerFactory make_opt;
  std::unique_ptr<Communicator> nccl;  // the gradients' communicator between GPU ranks, or null
  std::unique_ptr<DataParallel> dp;
  std::unique_ptr<Optimizer> optimizer;
  std::optional<TrainSummary> complete;  // a resumed run already at its last step: nothing to train
};

// --batch auto: the micro-batch and recompute set (choose_batch; a --recompute given fixes the
// set), handed to the task and recorded in the options (config.json), and one line saying what
// was chosen and why.
void choose_memory_plan(Run& r, const Policy& policy, const std::shared_ptr<const Backend>& sizing,
                        const MemoryBudget& budget) {
  TrainOptions& opt = r.opt;
  TrainTask& task = r.task;
  const std::vector<RecomputeSet> choices =
      opt.recompute.none() ? task.recompute_choices() : std::vector<RecomputeSet>{opt.recompute};
  const BatchChoice c = choose_batch(
      opt, choices,
      [&](RecomputeSet s) {
        task.set_memory_plan(1, s);
        return task.footprint(policy, sizing);
      },
      r.world, budget);
  task.set_memory_plan(c.batch, c.recompute);
  opt.batch = c.batch;
  opt.recompute = c.recompute;
  if (r.comm->is_root()) std::printf("%s\n", describe_batch_choice(c, opt, r.world, budget).c_str());
}

std::unique_ptr<Run> build_run(TrainOptions& opt, TrainTask& task) {
  auto run = std::make_unique<Run>(opt, task);
  Run& r = *run;
  r.nan_guard = check_options(opt);
  if (opt.deterministic) omp_set_dynamic(0);
  r.comm = make_host_communicator(opt.collective_timeout);
  r.world = r.comm->world_size();
  // --device auto resolved once: opt.device is what ran from here on (config.json records it).
  const ResolvedDevice device = resolve_device(opt.device, opt.policy_of);
  opt.device = device.device;
  r.device_note = device.note;
  check_device(opt.device, opt.policy_of, "train");
  MPT_CHECK(opt.dist_backend != DistBackend::Nccl || opt.device == Device::Cuda,
            "--dist-backend nccl needs --device cuda (CPU ranks communicate over MPI)");
  r.on_cuda = opt.device == Device::Cuda;
  // Model: from a checkpoint when resuming, its weights alone with --init-from, else a fresh
  // initialisation.
  MPT_CHECK(opt.resume.empty() || opt.init_from.empty(),
            "--resume continues a run and --init-from starts a new one from a checkpoint's weights; give one "
            "of them");
  if (!opt.resume.empty()) {
    r.resume_dir = resolve_checkpoint(opt.resume);
    MPT_CHECK(checkpoint_has_optimizer_state(r.resume_dir),
              "checkpoint '" + r.resume_dir +
                  "' holds weights only (no optimizer state), so it cannot be resumed; "
                  "start a new run from its weights with --init-from " +
                  opt.resume);
  } else if (!opt.init_from.empty()) {
    r.init_dir = resolve_checkpoint(opt.init_from);
  }
  // The config (and, for BERT, the sequence length), then the resumed state.
  task.configure(r.resume_dir.empty() ? r.init_dir : r.resume_dir);
  opt.seq = task.seq();  // BERT's T may be its instance file's: config.json records the run's
  if (!r.resume_dir.empty()) r.resumed = task.read_state(r.resume_dir);
  // A run resumed at (or past) its last step has nothing to train: say so, name the checkpoint
  // and return, without a step, a metrics record or a zero-filled summary.
  if (!r.resume_dir.empty() && r.resumed.step >= opt.steps) {
    if (r.comm->is_root())
      std::printf(
          "run complete: checkpoint %s is at step %lld of --steps %lld; nothing to train "
          "(raise --steps to continue it)\n",
          r.resume_dir.c_str(), static_cast<long long>(r.resumed.step), static_cast<long long>(opt.steps));
    r.complete = TrainSummary{};
    r.complete->steps_done = r.resumed.step;
    r.complete->last_checkpoint = r.resume_dir;
    return run;
  }
  // Precision: --precision when given, else the resumed run's own, else fp32. Master weights,
  // gradients and optimizer state are fp32 in every precision, so a checkpoint resumes (or
  // --init-from starts) in any of them; only the loss scaler is fp16's alone.
  r.ckpt_precision = r.resume_dir.empty() ? Precision::Fp32 : parse_precision(r.resumed.precision);
  r.precision = opt.precision.value_or(r.ckpt_precision);
  opt.precision = r.precision;
  // The GPU's plan run on the CPU (--policy-of cuda) goes on in a resumed CPU run unless
  // --policy-of says otherwise: the trajectory continues in the dtypes it had.
  if (opt.policy_of == PolicyOf::Own && !r.resume_dir.empty() && opt.device == Device::Cpu &&
      r.resumed.options.is_object() && r.resumed.options.value("policy_of", std::string()) == "cuda")
    opt.policy_of = PolicyOf::Cuda;
  MPT_CHECK(opt.fault_inf_grad_steps.empty() || needs_loss_scaler(r.precision),
            "--fault-inf-grad simulates an fp16 overflow; it needs --precision fp16");
  MPT_CHECK(
      !needs_loss_scaler(r.precision) || (std::isfinite(opt.loss_scale_init) && opt.loss_scale_init > 0.0f),
      "--loss-scale-init must be finite and positive");
  MPT_CHECK(opt.loss_scale_growth_interval > 0, "--loss-scale-growth-interval must be positive");
  // The backend the model and the step run on: the CPU's, or (--device cuda) the local rank's GPU
  // (one process per GPU) — the same model, loss, backward and step code either way.
  r.gpu = r.on_cuda ? r.comm->local_rank() % std::max(1, cuda_device_count()) : -1;
  std::unique_ptr<Backend> backend = make_backend(opt.device, opt.threads, r.gpu);
  // The dtypes of every tensor: the backend's plan, or (--policy-of cuda) the one a GPU runs,
  // served on the CPU by widening around the fp32 kernels (backend/cpu/widening.h).
  const Policy policy = plan_policy(r.precision, opt.policy_of, *backend);
  // Refuse a run that cannot fit before allocating it (train/memory_estimate.h): host memory, or
  // the GPU's, with the attention's share as this backend keeps it (not owned: the estimate is
  // done before the task takes the backend). Under --batch auto the micro-batch and the recompute
  // set are chosen against the same budget first.
  const MemoryBudget budget =
      r.on_cuda ? gpu_memory_budget(opt.memory_limit, r.gpu) : available_memory(opt.memory_limit);
  const std::shared_ptr<const Backend> sizing(std::shared_ptr<const Backend>(), backend.get());
  if (opt.batch_auto) choose_memory_plan(r, policy, sizing, budget);
  r.accum = opt.grad_accum_steps(r.world);
  r.tokens_per_step = static_cast<double>(opt.batch) * opt.seq * r.accum * r.world;
  const ModelFootprint footprint = task.footprint(policy, sizing);
  if (footprint.activation_bytes) check_memory_fits(opt, footprint, r.world, budget);
  task.build(std::move(backend), policy);
  // fp16: dynamic loss scaling, with the checkpoint's scale, counter and skip count on resume.
  if (needs_loss_scaler(r.precision)) {
    r.scaler = std::make_unique<LossScaler>(LossScalerConfig{
        .init_scale = opt.loss_scale_init, .growth_interval = opt.loss_scale_growth_interval});
    if (r.resumed.has_loss_scaler)
      r.scaler->restore(r.resumed.loss_scale, r.resumed.growth_tracker, r.resumed.skipped_steps);
  }
  // Sophia's b (tokens per optimizer step) and its label-sampling seed (the run's seed); Muon's
  // Newton–Schulz arithmetic (the policy's) and its AdamW group's lr relative to the schedule's.
  r.muon = opt.muon;
  r.muon.ns_math = policy.rule(OpRole::NewtonSchulz).compute;
  if (opt.muon_adamw_lr > 0.0f) r.muon.adamw_lr_ratio = opt.muon_adamw_lr / opt.lr;
  r.make_opt = [&r](const ParamTable& table) {
    return make_optimizer(r.opt.optimizer, table, r.opt.adamw, r.opt.sophia, r.tokens_per_step, r.opt.seed,
                          r.task.backend(), r.muon);
  };
  // With --zero 1 or 2 this rank's optimizer covers only its shard (dist/data_parallel.h); Muon's
  // shards hold whole matrices.
  r.nccl = make_grad_communicator(opt, *r.comm, task.backend());
  r.dp = std::make_unique<DataParallel>(
      r.nccl ? *r.nccl : *r.comm, task.table(), zero_stage_from_int(opt.zero),
      r.opt.optimizer == OptimizerKind::Muon ? muon_whole_ranges(task.table(), r.muon.qkv)
                                             : std::vector<ParamRange>{});
  // Reducing each range as the backward finishes it pays where communication runs beside the
  // compute (NCCL); a host communicator would only cut one reduction into many.
  r.dp->set_overlap(toggle_on(opt.overlap_grad_reduce, r.nccl != nullptr), task.grads());
  // ZeRO-2 hands the gradient buffer's memory back before the optimizer state and activations
  // are allocated (the allocation wrote it whole: zero-filled), so the peak holds only the shard.
  r.dp->zero_gradients(task.grads());
  r.optimizer = r.make_opt(r.dp->optimizer_table());
  r.state.seed = opt.seed;
  if (!r.resume_dir.empty()) {
    // Every rank reads the checkpoint (written whole by rank 0, whatever the world size then)
    // and keeps its range of the optimizer state.
    task.load_weights(r.resume_dir);
    load_optimizer_state(r.resume_dir, task, *r.optimizer, *r.dp, r.make_opt);
    r.state = r.resumed;
  } else if (!r.init_dir.empty()) {
    task.load_weights(r.init_dir);
  } else {
    task.init_weights(opt.seed);
  }
  r.dp->broadcast_params(task.params());  // every rank starts from rank 0's bits
  r.state.options = opt.to_json();
  r.state.precision = precision_name(r.precision);
  r.state.has_loss_scaler =
      false;  // set after each fp16 step (a resumed fp16 state does not carry over to bf16)
  task.open_data(r.state, r.comm->rank(), r.world);  // plans activations; at the resumed position

  return run;
}

// What each rank holds of the gradients under ZeRO-2 (train/memory_estimate.h), against the whole
// buffer every rank holds under ZeRO-1.
void describe_zero2_gradients(RunMonitor& monitor, const Run& r) {
  const std::vector<ParamRange> groups = gradient_groups(r.task.table());
  std::string ranks;
  for (int rank = 0; rank < r.world; ++rank)
    ranks += (rank ? ", " : "") + std::to_string(rank) + ": " +
             format_bytes(zero2_gradient_floats(groups, r.dp->partition(), rank) * sizeof(float));
  monitor.sayf(
      "ZeRO-2 gradients per rank at most (rank %s) against %s under ZeRO-1: the rank's shard, the largest "
      "group of other ranks' gradients (held through the backward) and one other group\n",
      ranks.c_str(), format_bytes(r.task.table().total() * sizeof(float)).c_str());
}

// What the run is, said once before the first step.
void describe_run(RunMonitor& monitor, const Run& r) {
  const TrainOptions& opt = r.opt;
  const TrainTask& task = r.task;
  task.describe(monitor, !r.resume_dir.empty() || !r.init_dir.empty(), r.accum, r.tokens_per_step);
  if (r.opt.optimizer == OptimizerKind::Sophia)
    monitor.sayf(
        "optimizer sophia: beta1 %g, beta2 %g, rho %g, weight decay %g%s, Hessian every %lld steps, b = "
        "%.0f\n",
        opt.sophia.beta1, opt.sophia.beta2, opt.sophia.rho, opt.sophia.weight_decay, task.decay_note(),
        (long long)opt.sophia.k, r.tokens_per_step);
  else if (r.opt.optimizer == OptimizerKind::Muon)
    monitor.sayf(
        "optimizer muon: %zu hidden matrices (q, k, v as %s), momentum %g%s, %d Newton-Schulz steps in %s, "
        "lr "
        "scale %s, weight decay %g; AdamW (beta1 %g, beta2 %g, eps %g, lr %g) for the other tensors%s\n",
        muon_matrices(task.table(), r.muon.qkv).size(), muon_qkv_name(r.muon.qkv), r.muon.momentum,
        r.muon.nesterov ? " (Nesterov)" : "", r.muon.ns_steps, compute_name(r.muon.ns_math),
        muon_adjust_name(r.muon.adjust), opt.adamw.weight_decay, opt.adamw.beta1, opt.adamw.beta2,
        opt.adamw.eps, static_cast<double>(opt.lr * r.muon.adamw_lr_ratio), task.decay_note());
  else
    monitor.sayf("optimizer adamw: beta1 %g, beta2 %g, eps %g, weight decay %g%s\n", opt.adamw.beta1,
                 opt.adamw.beta2, opt.adamw.eps, opt.adamw.weight_decay, task.decay_note());
  if (r.opt.schedule != LrShape::Cosine)
    monitor.sayf("schedule %s: warmup %lld steps, then linear decay to %g x lr at step %lld\n",
                 lr_shape_name(r.opt.schedule), (long long)opt.warmup, opt.min_lr_frac, (long long)opt.steps);
  if (r.world > 1)
    monitor.sayf("data parallel: %d ranks (%s, launched by %s), %s, gradients reduced %s\n", r.world,
                 r.on_cuda && !r.nccl ? "mpi through host copies" : r.dp->comm().backend(),
                 r.comm->topology().launcher.c_str(),
                 r.dp->zero() == ZeroStage::Two   ? "ZeRO-2: gradients and optimizer state sharded"
                 : r.dp->zero() == ZeroStage::One ? "ZeRO-1: optimizer state sharded"
                                                  : "optimizer state replicated",
                 !r.dp->overlaps() ? "after the backward"
                 : opt.graphs      ? "range by range after each graph replay"
                                   : "during the backward");
  if (r.world > 1 && r.dp->zero() == ZeroStage::Two) describe_zero2_gradients(monitor, r);
  if (!r.resume_dir.empty())
    monitor.sayf("resumed from %s at step %lld\n", r.resume_dir.c_str(), (long long)r.state.step);
  if (!r.init_dir.empty())
    monitor.sayf("initialised from the weights of %s; starting at step 0\n", r.init_dir.c_str());
  if (!r.resume_dir.empty() && r.precision != r.ckpt_precision)
    monitor.sayf(
        "precision %s given; the checkpoint trained in %s (weights and optimizer state are fp32 in both)\n",
        precision_name(r.precision), precision_name(r.ckpt_precision));
  if (r.scaler)
    monitor.sayf(
        "precision fp16: dynamic loss scaling, scale %g (x2 after %d clean steps, x0.5 and skip on "
        "inf/NaN)%s\n",
        r.scaler->scale(), opt.loss_scale_growth_interval,
        r.resumed.has_loss_scaler ? ", restored from the checkpoint" : "");
  else
    monitor.sayf("precision %s\n", precision_name(r.precision));
  if (opt.policy_of == PolicyOf::Cuda)
    monitor.say(
        "plan: the GPU's (--policy-of cuda): 16-bit residual stream, logits, gradients and small weights, "
        "widened around this CPU's fp32 kernels (a check of the GPU's plan, not a fast path)");
}

// (3) The loop: a step, its record, validation, samples, checkpoints; the numeric guard's
// rollbacks and a signal's clean stop.
TrainSummary run_loop(Run& r, RunMonitor& monitor) {
  const TrainOptions& opt = r.opt;
  TrainTask& task = r.task;
  Communicator& comm = *r.comm;
  DataParallel& dp = *r.dp;
  RunState& state = r.state;
  const LrSchedule schedule{opt.lr, opt.min_lr_frac, opt.warmup, opt.steps, r.opt.schedule};
  int rollbacks = 0;  // in this invocation (--nan-max-rollbacks)
  const StepModel step_model = task.step_model();
  if (r.on_cuda)
    monitor.sayf("device cuda: the model and the step (forward, backward, %s) run on GPU %d: %s",
                 r.optimizer->name(), r.gpu, cuda_device_name(r.gpu).c_str());
  TrainSummary summary;
  for (int64_t step = state.step; step < opt.steps; ++step) {
    const double t0 = now_seconds();
    const float lr = schedule.at(step) * state.lr_scale;  // lr_scale < 1 after a NaN rollback
    task.begin_step();
    const StepStats stats =
        train_step(step_model, *r.optimizer, r.accum, lr, opt.grad_clip, step + 1, r.scaler.get(), &dp,
                   std::find(opt.fault_inf_grad_steps.begin(), opt.fault_inf_grad_steps.end(), step + 1) !=
                       opt.fault_inf_grad_steps.end());
    if (stats.non_finite) {
      // Numeric guard (train/numeric_guard.h): the weights are untouched; stop (throws), or
      // reload the last checkpoint and continue from it with a lower learning rate.
      const HostMirror<float> grads(task.grads());
      const std::string what = non_finite_step_message(step + 1, stats.loss, stats.grad_norm, task.table(),
                                                       grads.data(), dp.begin(), dp.end());
      const std::string ckpt = rollback_target(r.nan_guard, what, opt.run_dir, r.resume_dir, rollbacks++);
      state = rollback_to_checkpoint(ckpt, r.nan_guard.lr_factor, state, task, *r.optimizer, dp, r.make_opt);
      monitor.sayf("%s; rolled back to %s (rollback %d of at most %d), learning rate x%g from now on",
                   what.c_str(), ckpt.c_str(), rollbacks, r.nan_guard.max_rollbacks, state.lr_scale);
      step = state.step - 1;  // the loop's ++step resumes at the checkpoint's step
      continue;
    }
    const StepExtras extras = task.step_extras(comm);  // collective: before anything rank 0 alone does
    const float loss = stats.loss;
    const double norm = stats.grad_norm;
    const double dt = now_seconds() - t0;
    const int64_t done = step + 1;
    state.step = done;
    if (r.scaler) {
      state.has_loss_scaler = true;
      state.loss_scale = r.scaler->scale();
      state.growth_tracker = r.scaler->growth_tracker();
      state.skipped_steps = r.scaler->skipped_steps();
    }
    summary.final_train_loss = loss;
    summary.steps_done = done;

    const bool last = done == opt.steps;
    if (monitor.log_due(done)) {
      // Sophia's Hessian steps add the win rate: the fraction of unclipped coordinates.
      char curvature[64] = "";
      if (stats.curvature) std::snprintf(curvature, sizeof(curvature), " | win rate %.3f", stats.win_rate);
      // fp16: the scale this step used and the skipped steps so far.
      char scaling[64] = "";
      if (r.scaler)
        std::snprintf(scaling, sizeof(scaling), " | scale %g skipped %lld", stats.loss_scale,
                      (long long)r.scaler->skipped_steps());
      monitor.log(monitor.step_line(done, loss, lr, norm, dt, extras.tokens) + extras.log + scaling +
                  curvature);
    }
    // metrics.jsonl: the standard fields, then the model's and each feature's own (train/metrics.h).
    MetricsRecord record = monitor.record(done, loss, lr, norm, dt, extras.tokens);
    for (const auto& [key, value] : extras.metrics) record.add(key, value);
    // Data parallelism: time in gradient/parameter collectives, waits for slower ranks included.
    if (r.world > 1) record.add("comm_ms", dp.take_comm_seconds() * 1e3);
    // fp16: the scale this step's loss was multiplied by, whether the step was skipped, the total.
    if (r.scaler)
      record.add("loss_scale", stats.loss_scale)
          .add("skipped", stats.skipped)
          .add("skipped_steps", r.scaler->skipped_steps());
    if (stats.curvature)
      record.add("win_rate", stats.win_rate)
          .add("hessian_loss", stats.curvature_loss)
          .add("hessian_grad_norm", stats.curvature_norm);
    if (task.has_validation() && ((opt.val_every > 0 && done % opt.val_every == 0) || last)) {
      const ValResult val = task.validate(comm, done);
      monitor.say(val.line);
      summary.final_val_loss = val.loss;
      for (const auto& [key, value] : val.metrics) record.add(key, value);
    }
    monitor.step_done(done, loss, dt, record, extras.tokens);
    if ((opt.sample_every > 0 && done % opt.sample_every == 0) || last) {
      if (comm.is_root()) {
        const std::string text = task.sample(state.sample_counter);
        if (!text.empty()) monitor.say(text);
      }
    }
    // SIGINT/SIGTERM: this step is complete; checkpoint it and stop (a signal during the last step changes
    // nothing).
    int stop = last ? 0 : monitor.stop_requested();
    // Every rank stops after the same step (mpirun forwards signals, but not at the same instant).
    if (r.world > 1 && !last && comm.any(stop != 0) && !stop) stop = SIGTERM;
    if ((opt.save_every > 0 && done % opt.save_every == 0) || last || stop) {
      // Rank 0 writes the checkpoint, with the optimizer state gathered whole under ZeRO-1.
      std::unique_ptr<Optimizer> whole = dp.gather_optimizer(*r.optimizer, r.make_opt);
      if (comm.is_root()) task.save(opt.run_dir, whole ? *whole : *r.optimizer, state, opt.keep_last);
      summary.last_checkpoint = opt.run_dir + "/" + checkpoint_name(done);
      monitor.sayf("saved checkpoint %s", summary.last_checkpoint.c_str());
    }
    if (stop) {
      summary.stopped_by_signal = stop;
      break;
    }
  }
  if (r.scaler)
    monitor.sayf("loss scaling: scale %g, %lld skipped step(s) in the run\n", r.scaler->scale(),
                 (long long)r.scaler->skipped_steps());
  monitor.finish(summary);
  return summary;
}

}  // namespace

TrainSummary run_training(const TrainOptions& options, TrainTask& task) {
  // The run's options with its precision and device resolved: config.json, state.json and the
  // log show what actually ran.
  TrainOptions opt = options;
  const std::unique_ptr<Run> run = build_run(opt, task);
  if (run->complete) return *run->complete;
  const double flops_per_step = task.flops_per_token() * run->tokens_per_step;
  // Progress, metrics.jsonl, config.json, command.txt, MFU, SIGINT/SIGTERM: train/run_monitor.h.
  RunMonitor monitor(opt, task.model_json(),
                     {task.table().total(), run->tokens_per_step, flops_per_step, omp_get_max_threads(),
                      run->state.step, run->resume_dir, run->comm->rank(), run->world, run->precision});
  describe_run(monitor, *run);
  monitor.start();
  if (!run->device_note.empty()) monitor.say(run->device_note);
  return run_loop(*run, monitor);
}

}  // namespace mptrain
