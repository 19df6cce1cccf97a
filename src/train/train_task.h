// What differs between the model families the trainer trains (GPT-2, BERT): one TrainTask per
// family, and ONE loop over it (train/trainer.cpp: resume/init, precision and the fp16 loss
// scaler, data parallelism and ZeRO-1, the numeric guard and --on-nan rollback, the memory
// check, the schedule, logging, validation, checkpoints, signals).
//
// A task is built once from the run's description (train/task_spec.h, from the options'
// task_spec()) and keeps it: no method takes the options. It owns its model, its data loaders and
// its data position; the loop owns the run state that every family records alike
// (train/checkpoint.h's RunState). The order the loop calls in:
//   configure → (read_state on --resume) → footprint → build → init_weights | load_weights →
//   open_data → per step: begin_step, step_model().micro_step × accum (+ curvature), step_extras
//   → validate, sample, save.
// Implementations: train/causal_lm_task.h, train/bert_task.h.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/buffer.h"
#include "core/param_table.h"
#include "model/model_core.h"
#include "optim/optimizer.h"
#include "precision/policy.h"
#include "precision/precision.h"
#include "train/checkpoint.h"
#include "train/memory_estimate.h"
#include "train/task_spec.h"
#include "train/step.h"

namespace mptrain {

class Communicator;
class RunMonitor;


// What a step adds to the log line and to its metrics.jsonl record (BERT: MLM/NSP loss, NSP
// accuracy), already combined over ranks.
struct StepExtras {
  std::string log;  // appended to the step line, e.g. " | mlm 6.1 | nsp 0.69 | nsp acc 0.52"
  std::vector<std::pair<std::string, double>> metrics;
  // The step's tokens over all ranks when the task counts them (BERT: real tokens, padding not),
  // for tok/s and MFU; 0 = the run's shape, B·T·accumulation·ranks.
  double tokens = 0.0;
};

// One validation pass: the loss the summary reports, the line printed, the record's fields.
struct ValResult {
  float loss = 0.0f;
  std::string line;
  std::vector<std::pair<std::string, double>> metrics;
};

class TrainTask {
 public:
  virtual ~TrainTask() = default;

  // --- before anything large is allocated ---
  // Resolves the model config: ckpt_dir's (--resume or --init-from; "" = none), else the
  // preset; resolves T (BERT: the instance file's unless --seq was given) and checks it against
  // the model's positions (Error).
  virtual void configure(const std::string& ckpt_dir) = 0;
  // The run's sequence length T, after configure.
  int seq() const { return spec_.seq; }
  // The run state in ckpt_dir's state.json (Error for another family's or a malformed one).
  // The task keeps the data position it records for the next open_data or seek_to_checkpoint.
  virtual RunState read_state(const std::string& ckpt_dir) = 0;
  // For the memory estimate: parameter count, weight copies, activation bytes per (B, T), under
  // the run's precision policy, the attention's share as the backend `sizing` keeps it.
  virtual ModelFootprint footprint(const Policy& policy, std::shared_ptr<const Backend> sizing) const = 0;
  // What --recompute may choose for this family (GPT-2: every set; the others keep everything),
  // and the micro-batch and set the run takes (--batch auto's choice; before build).
  virtual std::vector<RecomputeSet> recompute_choices() const { return {RecomputeSet{}}; }
  virtual void set_memory_plan(int batch, RecomputeSet recompute) {
    spec_.batch = batch;
    spec_.recompute = recompute;
  }
  // Training FLOPs per token at the run's T (the TFLOP/s and MFU columns).
  virtual double flops_per_token() const = 0;
  // config.json's "model" object (train/run_files.h).
  virtual nlohmann::json model_json() const = 0;
  // The optimizer line's note on weight decay ("" or e.g. " (not on biases and LayerNorm)").
  virtual const char* decay_note() const { return ""; }

  // --- the model ---
  // The model on `be` (the CPU's, or a GPU's with --device cuda: the same model and step code).
  virtual void build(std::unique_ptr<Backend> be, const Policy& policy) = 0;
  // The built model: its table, parameters (non-const access marks its weight copies stale),
  // gradients and backend (the optimizer's too).
  virtual ModelCore& core() const = 0;
  const ParamTable& table() const { return core().table(); }
  FloatBuffer& params() { return core().params(); }
  FloatBuffer& grads() { return core().grads(); }
  Backend& backend() { return core().backend(); }
  virtual void init_weights(uint64_t seed) = 0;
  virtual void load_weights(const std::string& ckpt_dir) = 0;

  // --- data ---
  // Plans the activations for the run's micro-batch and opens the loaders (this rank's slice
  // of the training data), at the position read_state kept, if any. state: the run's (its seed
  // seeds BERT's masking, so that a resumed run draws the same masks).
  virtual void open_data(const RunState& state, int rank, int world) = 0;
  // Moves the training loader to the position the last read_state kept (--on-nan rollback).
  virtual void seek_to_checkpoint() = 0;
  // The start-of-run lines about the model and the data (after open_data).
  virtual void describe(RunMonitor& monitor, bool from_checkpoint, int accum, double tokens_per_step) const = 0;

  // --- a step ---
  // The model as train_step sees it: micro_step takes the next micro-batch of the training
  // loader through forward and backward; curvature (Sophia) reuses the step's last one.
  virtual StepModel step_model() = 0;
  virtual void begin_step() {}
  // After a completed step: what it adds to the log line and record (collective under data
  // parallelism: every rank calls it).
  virtual StepExtras step_extras(Communicator& comm) = 0;

  // --- validation, samples, checkpoints ---
  virtual bool has_validation() const = 0;
  virtual ValResult validate(Communicator& comm, int64_t step) = 0;
  // A sample of the model's text ("" = this family prints none); counter is the run's sampler counter.
  virtual std::string sample(uint64_t& /*counter*/) { return {}; }
  // Rank 0 writes the checkpoint of `state` at the training loader's current position.
  virtual void save(const std::string& run_dir, const Optimizer& optimizer, const RunState& state,
                    int keep_last) = 0;

 protected:
  explicit TrainTask(TaskSpec spec) : spec_(std::move(spec)) {}
  TaskSpec spec_;
};

}  // namespace mptrain
