// Options of a training run (filled by `mptrain train`'s flags).
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "backend/make_backend.h"
#include "model/recompute.h"
#include "core/named.h"
#include "core/progress.h"
#include "dist/communicator.h"
#include "model/llama_config.h"
#include "optim/adamw.h"
#include "optim/muon.h"
#include "optim/optimizer.h"
#include "optim/schedule.h"
#include "optim/sophia.h"
#include "precision/precision.h"
#include "train/nan_policy.h"
#include "train/task_spec.h"

namespace mptrain {

struct TrainOptions {
  // model
  std::string preset = "d6";
  int vocab_multiple = 128;
  int vocab_size = 0;  // --vocab-size: a model from scratch over this many tokens; 0 = GPT-2's 50,257
  LlamaBlockOptions llama_block;  // --mlp, --qk-norm (Llama)
  // data
  std::string train_data;          // glob of train shards
  std::string val_data;            // glob of val shards (optional)
  int batch = 4;                   // B, sequences per micro-batch
  bool batch_auto = false;         // --batch auto: B (and the recompute set) chosen to fit (trainer)
  int seq = 256;                   // T
  int64_t total_batch_tokens = 0;  // tokens per optimizer step; 0 = B·T (no accumulation)
  bool shuffle = false;            // --shuffle: token streams in a new order each epoch (data/loader.h)
  // optimisation
  int64_t steps = 100;
  float lr = 6e-4f;
  float min_lr_frac = 0.1f;
  int64_t warmup = 0;
  // Typed where they are parsed (the CLI, the recipe): a bad name fails there, before a run starts.
  LrShape schedule = LrShape::Cosine;              // --schedule: the decay after warmup
  OptimizerKind optimizer = OptimizerKind::AdamW;  // --optimizer
  AdamWHyper adamw;
  SophiaHyper sophia;
  MuonHyper muon;              // ns_math and adamw_lr_ratio are set by the trainer (policy, lr)
  float muon_adamw_lr = 0.0f;  // Muon's AdamW group's peak lr (0: --lr)
  std::string recipe;          // the --recipe applied, if any (informational)
  float grad_clip = 1.0f;      // 0 = off
  // --precision. Not given: fp32 for a new run (also with --init-from), the checkpoint's
  // precision on --resume. A value given on --resume wins over the checkpoint's (the trajectory
  // then differs from the original run). The trainer sets it to the precision the run takes.
  std::optional<Precision> precision;
  // Where the model and the step run: cpu, or cuda (the same model and step on the rank's GPU,
  // the CUDA backend; the CPU keeps the data loading), or auto (cuda where the run can use a GPU,
  // else cpu: backend/device.h's resolve_device, once, in the trainer), the default since the GPU
  // path ran on an H200 (2026-11-28, docs/BENCHMARKS.md).
  Device device = Device::Auto;
  // Whose precision plan the CPU runs: its own (on --resume, the checkpoint's), cpu, or cuda (the
  // 16-bit stream, logits and gradients a GPU keeps: CI's check of the GPU's plan).
  PolicyOf policy_of = PolicyOf::Own;
  // fp16's dynamic loss scaling (precision/loss_scaler.h): GradScaler's init_scale and
  // growth_interval. On --resume the checkpoint's scale and counter are restored instead.
  float loss_scale_init = 65536.0f;
  int loss_scale_growth_interval = 2000;
  // Testing only (hidden flag --fault-inf-grad): after backward on these optimizer steps one
  // gradient element is set to +inf, as an fp16 overflow would; requires fp16.
  std::vector<int64_t> fault_inf_grad_steps;
  // evaluation, sampling, checkpoints
  int64_t val_every = 0;  // 0 = only at the end
  int val_steps = 20;
  int64_t sample_every = 0;  // 0 = only at the end
  int sample_tokens = 64;
  int64_t save_every = 0;  // 0 = only at the end
  int keep_last = 0;       // 0 = keep all
  std::string run_dir = "runs/latest";
  std::string resume;     // checkpoint or run dir
  std::string init_from;  // checkpoint or run dir whose weights start a fresh run (step 0)
  // run
  uint64_t seed = 1337;
  bool deterministic = false;
  int threads = 0;     // 0 = OpenMP's default
  int log_every = 10;  // a log line every N steps (terminal or not); the bar in between on a terminal
  ProgressMode progress = ProgressMode::kAuto;  // kAuto: a bar on a terminal, plain lines otherwise
  bool quiet = false;                           // only errors and the final summary
  double peak_tflops = 0.0;                     // MFU's peak; 0 = estimate for this CPU (train/peak_flops.h)
  std::string vocab_dir;
  // numeric guards (train/numeric_guard.h) and resource limits (train/memory_estimate.h)
  NanPolicy on_nan = NanPolicy::Stop;  // --on-nan: what a non-finite loss or gradient does
  float nan_lr_factor = 0.5f;          // rollback: the learning rate is multiplied by this each time
  int nan_max_rollbacks = 3;           // rollbacks in one invocation before the run gives up
  std::string memory_limit;            // "2G", "512M", ...; empty = MemAvailable or the cgroup limit

  // data parallelism (dist/): the world size comes from the launcher (mpirun, srun)
  int zero = 0;                     // ZeRO stage: 0 off, 1 optimizer state sharded over ranks
  double collective_timeout = 300;  // seconds a collective may wait for the other ranks (0 = forever)
  // Collectives between ranks: mpi, nccl (GPU ranks), or auto: NCCL for several GPU ranks, else MPI.
  DistBackend dist_backend = DistBackend::Auto;
  // Reduce each range of gradients as the backward finishes it: on, off, or auto (on with NCCL,
  // whose reductions run beside the GPU's compute).
  Toggle overlap_grad_reduce = Toggle::Auto;
  // --graphs on: capture each micro-batch's forward and backward in a graph once and replay it
  // (model/gpt2.h's set_graphs; GPT-2 only).
  bool graphs = false;
  // --recompute: what the backward recomputes instead of keeping (model/recompute.h; GPT-2).
  RecomputeSet recompute;

  // total_batch_tokens / (B·T·world), validated: --total-batch is the global figure, the
  // same whatever the number of ranks (0: one micro-batch per rank per step).
  int grad_accum_steps(int world = 1) const;
  nlohmann::json to_json() const;
  // What the model family's task reads of the run (train/task_spec.h).
  TaskSpec task_spec() const;
};

// Named hyperparameter recipes (--recipe). "sophia-gpt2": the Sophia authors' GPT-2 124M
// recipe (optimizer sophia, lr 6e-4, rho 0.05, weight decay 0.2, k 10, betas 0.965/0.99,
// warmup 2000, cosine to 1.5e-5, clip 1.0; batch size is left to the user: theirs is
// 480x1024 tokens per step). Fields whose flag the user gave (`given("--lr")`) keep the
// user's value. Throws Error for an unknown recipe.
void apply_recipe(TrainOptions& options, const std::string& recipe,
                  const std::function<bool(const std::string& flag)>& given);

}  // namespace mptrain
