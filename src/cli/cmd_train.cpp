// `mptrain train`: GPT-2 training from token shards, or BERT pretraining from an instance file;
// one loop for both (train/trainer.h, train/train_task.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/classify_options.h"
#include "cli/llama_options.h"
#include "cli/subcommands.h"
#include "cli/validators.h"
#include "core/error.h"
#include "hf/hf_convert.h"
#include "io/checkpoint_dir.h"
#include "model/presets.h"
#include "train/bert_checkpoint.h"
#include "train/bert_task.h"
#include "train/causal_lm_task.h"
#include "train/classify_task.h"
#include "train/interrupt.h"
#include "train/trainer.h"

namespace mptrain {

namespace {

// --init-from a Hugging Face folder (config.json and weights, no mptrain state.json), e.g. a hub
// BertForPreTraining or a SmolLM-style LlamaForCausalLM: imported as `convert --from-hf` does into
// run_dir/init-from-hf, which the run then starts from, when the folder holds `family`'s model
// (else one Error: `other` says what to do; empty: train it with its own --model). Anything else
// is returned as given.
std::string import_if_hf_folder(const std::string& dir, const std::string& run_dir, const std::string& family,
                                const std::string& other) {
  namespace fs = std::filesystem;
  if (dir.empty() || !fs::exists(dir + "/config.json") || fs::exists(dir + "/state.json") ||
      fs::exists(dir + "/latest"))
    return dir;
  const std::string out = run_dir + "/init-from-hf";
  fs::create_directories(run_dir);
  fs::remove_all(out);
  const HfImportResult r = import_hf_folder(dir, out, 0, "");
  MPT_CHECK(r.model_type == family, "--init-from '" + dir + "' is a Hugging Face " + r.model_type +
                                        " folder; " +
                                        (other.empty() ? "train it with --model " + r.model_type : other));
  const std::string architecture = family == "bert"    ? bert_hf_architecture(r.bert)
                                   : family == "llama" ? "LlamaForCausalLM"
                                                       : "GPT2LMHeadModel";
  std::printf("imported the Hugging Face folder %s (%s) into %s\n", dir.c_str(), architecture.c_str(),
              out.c_str());
  return out;
}

// --task: what a run trains.
enum class TrainTaskKind { Pretrain, Classify };
constexpr NameTable<TrainTaskKind, 2> kTrainTaskNames{
    {{TrainTaskKind::Pretrain, "pretrain"}, {TrainTaskKind::Classify, "classify"}}};

// Everything `train` reads: the run's options, the family and task, and each task's own.
struct TrainCommand {
  TrainOptions opt;
  ModelFamily model = ModelFamily::Gpt2;
  TrainTaskKind task = TrainTaskKind::Pretrain;
  ClassifyTrainOptions classify;
  BertTrainOptions bert;
  std::string recipe;
};

// --model, --task and the model's shape: the preset, its vocabulary and Llama's block options.
void add_model_options(CLI::App* cmd, TrainCommand* c) {
  cli::add_named_option(
      cmd, "--model", &c->model, parse_model_family, "{gpt2,llama,bert}",
      "Model family: gpt2 (token shards), llama (token shards; RMSNorm, rotary embeddings, grouped-query "
      "attention, SwiGLU; presets llama-tiny, llama-mini (default), llama-d6, llama-135m) or bert (an instance "
      "file of 'prepare --task bert'; presets bert-tiny, bert-mini (default), bert-small, bert-medium, "
      "bert-base, bert-large)",
      model_family_name(c->model));
  add_llama_block_options(cmd, &c->opt.llama_block);
  cli::add_named_option(
      cmd, "--task", &c->task,
      [](const std::string& s) { return parse_in(kTrainTaskNames, s, "--task"); }, "{pretrain,classify}",
      "What to train: pretrain (GPT-2's LM, or BERT's MLM/NSP) or classify (fine-tune BERT for sequence "
      "classification on labelled TSV/JSONL files: Hugging Face's BertForSequenceClassification; --init-from a "
      "BERT checkpoint, else the preset from random weights; defaults then Hugging Face Trainer's: lr 5e-5, "
      "linear decay to 0, no weight decay, beta2 0.999; and T 128)",
      "pretrain");
  cmd->add_option("--preset", c->opt.preset,
                  "Model preset (gpt2, gpt2-medium, gpt2-large, gpt2-xl, d2, d4, d6, d8, d12)")
      ->capture_default_str();
  cmd->add_option("--vocab-multiple", c->opt.vocab_multiple,
                  "Pad the vocabulary to a multiple of this (1 = off)")
      ->capture_default_str()
      ->check(cli::at_least(1));
  cmd->add_option(
         "--vocab-size", c->opt.vocab_size,
         "GPT-2/Llama from scratch: tokens in the model's vocabulary, that of the tokenizer the shards "
         "were prepared with (default: GPT-2's 50257; Llama 3's tokenizer: 128256)")
      ->check(cli::between(1, INT32_MAX));
}

// --task classify's files: the label column, the class names and the WordPiece vocabulary.
void add_classify_options(CLI::App* cmd, TrainCommand* c) {
  add_classify_columns(cmd, &c->classify.columns, &c->classify.header, "classify: the label's column");
  cmd->add_option(
      "--labels", c->classify.labels_path,
      "classify: the class names, one a line by class id (labels.txt of 'prepare --task topics')");
  cmd->add_option("--num-labels", c->classify.num_labels,
                  "classify: the classes, for integer labels without names")
      ->check(cli::at_least(1));
  cmd->add_option("--vocab", c->classify.vocab_path,
                  "classify: the WordPiece vocab.txt (default: the --init-from / --resume checkpoint's)");
  cmd->add_flag(
      "--cased", [c](std::int64_t) { c->classify.lower_case = false; },
      "classify: with --vocab, a cased vocabulary (no lower-casing)");
}

// BERT pretraining's masking, objective and batch layout.
void add_bert_options(CLI::App* cmd, TrainCommand* c) {
  cmd->add_option("--max-predictions", c->bert.max_predictions,
                  "BERT: masked positions per sequence at most (default: max(20, ceil(mask rate x T)))")
      ->check(cli::at_least(1));
  cmd->add_option("--mask-rate", c->bert.mask_rate,
                  "BERT: fraction of each sequence's tokens masked for MLM (0.15 the original recipe, 0.30 "
                  "MosaicBERT's); of them 80% [MASK], 10% random, 10% unchanged")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0).description("in (0, 1)"));
  cmd->add_flag(
      "--no-nsp", [c](std::int64_t) { c->bert.nsp = false; },
      "BERT: MLM-only pretraining (RoBERTa, MosaicBERT, ModernBERT): no next-sentence loss, and a "
      "model without pooler and NSP head (Hugging Face's BertForMaskedLM)");
  cmd->add_option_function<std::string>(
         "--batch-layout", [c](const std::string& v) { c->bert.unpadded = v == "unpadded"; },
         "BERT: unpadded (default: the instances packed back to back, no work on padding) or padded (B rows "
         "of T under an attention mask)")
      ->check(CLI::IsMember({"unpadded", "padded"}));
}

// The data and the batch: shards or instance files, B, T and the tokens per optimizer step.
void add_data_options(CLI::App* cmd, TrainCommand* c) {
  cmd->add_option("--train-data,--data", c->opt.train_data,
                  "Glob of training shards, e.g. 'data/fortunes/*_train_*.bin'")
      ->required();
  cmd->add_option("--val-data", c->opt.val_data, "Glob of validation shards");
  cmd->add_flag(
      "--shuffle", c->opt.shuffle,
      "GPT-2/Llama: read the training data as sequences of seq+1 tokens in a new random order each "
      "epoch (from --seed), and validate on a fixed random sample of the held-out sequences, instead "
      "of both in order (BERT's instances are always shuffled)");
  cli::add_batch_option(cmd, &c->opt.batch, &c->opt.batch_auto,
                        "Sequences per micro-batch (B), or auto: the largest that fits the memory limit and "
                        "divides --total-batch, with the cheapest --recompute that reaches it (one line says "
                        "what and why)");
  cmd->add_option("-t,--seq", c->opt.seq, "Sequence length (T)")
      ->capture_default_str()
      ->check(cli::at_least(1));
  cmd->add_option(
         "--total-batch", c->opt.total_batch_tokens,
         "Tokens per optimizer step (a multiple of B*T; gradient accumulation makes up the rest). 0 = B*T")
      ->capture_default_str();
}

// The schedule, the optimizer and its hyperparameters, a recipe of them, clipping.
void add_optimizer_options(CLI::App* cmd, TrainCommand* c) {
  cmd->add_option("--steps", c->opt.steps, "Optimizer steps (the schedule's length)")
      ->capture_default_str()
      ->check(cli::at_least(1));
  cmd->add_option("--lr", c->opt.lr, "Peak learning rate")->capture_default_str();
  cmd->add_option("--min-lr-frac", c->opt.min_lr_frac, "Final learning rate as a fraction of --lr")
      ->capture_default_str();
  cmd->add_option("--warmup", c->opt.warmup, "Linear warmup steps")
      ->capture_default_str()
      ->check(cli::at_least(0));
  cli::add_named_option(cmd, "--schedule", &c->opt.schedule, parse_lr_shape, "{cosine,linear}",
                        "Learning-rate decay after warmup, down to --min-lr-frac x --lr at --steps: cosine "
                        "(GPT-2's default, and BERT's) or linear (the original BERT recipe)",
                        lr_shape_name(c->opt.schedule));
  cli::add_named_option(
      cmd, "--optimizer", &c->opt.optimizer, parse_optimizer_kind, "{adamw,sophia,muon}",
      "Optimizer: adamw, sophia (Sophia-G), or muon (Muon for the hidden matrices, AdamW for the rest)",
      optimizer_name(c->opt.optimizer));
  // --weight-decay, --beta1, --beta2 set the chosen optimizer's value (parsed into adamw's
  // fields, copied to Sophia's in the callback when given).
  cmd->add_option("--weight-decay", c->opt.adamw.weight_decay,
                  "Weight decay, 2-D weights only (AdamW and Sophia: 0.1)");
  cmd->add_option("--beta1", c->opt.adamw.beta1, "Momentum decay (AdamW 0.9, Sophia 0.965)");
  cmd->add_option("--beta2", c->opt.adamw.beta2, "Second-moment / Hessian EMA decay (AdamW 0.95, Sophia 0.99)");
  cmd->add_option("--adam-eps", c->opt.adamw.eps)->capture_default_str();
  cmd->add_option("--sophia-rho", c->opt.sophia.rho,
                  "Sophia: rho, scale of the clipped update min(|m|/(rho*b*h), 1)")
      ->capture_default_str();
  cmd->add_option("--sophia-k", c->opt.sophia.k, "Sophia: steps between Hessian estimates")
      ->capture_default_str()
      ->check(cli::at_least(1));
  cmd->add_option("--muon-momentum", c->opt.muon.momentum, "Muon: momentum mu")->capture_default_str();
  cmd->add_flag("!--no-muon-nesterov", c->opt.muon.nesterov, "Muon: plain momentum instead of Nesterov's");
  cmd->add_option("--muon-ns-steps", c->opt.muon.ns_steps, "Muon: Newton-Schulz iterations")
      ->capture_default_str();
  cli::add_named_option(
      cmd, "--muon-adjust-lr", &c->opt.muon.adjust, parse_muon_adjust, "{match_rms_adamw,original}",
      "Muon: the update's scale per matrix: match_rms_adamw (0.2*sqrt(max(out, in)): AdamW's "
      "lr and weight decay carry over) or original (max(1, out/in)^0.5, lr ~0.02)",
      muon_adjust_name(c->opt.muon.adjust));
  cli::add_named_option(cmd, "--muon-qkv", &c->opt.muon.qkv, parse_muon_qkv, "{three,one}",
                        "Muon: attention's q, k, v weights orthogonalised as three matrices or one",
                        muon_qkv_name(c->opt.muon.qkv));
  cmd->add_option(
         "--muon-adamw-lr", c->opt.muon_adamw_lr,
         "Muon: peak lr of the parameters AdamW updates (embeddings, heads, biases, LayerNorm); default --lr")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--recipe", c->recipe,
                  "Hyperparameter recipe: sophia-gpt2 (the Sophia authors' GPT-2 124M settings; flags given "
                  "explicitly win)");
}

// Precision, where the step runs, whose plan it follows, fp16's loss scaling.
void add_precision_options(CLI::App* cmd, TrainCommand* c) {
  cli::add_named_option(
      cmd, "--precision", &c->opt.precision, [](const std::string& s) { return parse_precision(s); },
      "{fp32,tf32,bf16,fp16}",
      "Training precision: fp32, tf32, bf16 (autocast-style, fp32 master weights) or fp16 (with dynamic "
      "loss scaling). Default fp32; on --resume, the checkpoint's");
  cli::add_named_option(
      cmd, "--device", &c->opt.device, parse_device, "{auto,cpu,cuda}",
      "Where the model and the training step run: cpu; cuda (the same GPT-2 or BERT and step on the "
      "CUDA backend, any precision under the GPU's plan, AdamW, Sophia or Muon, one GPU per rank; data "
      "loading stays on the CPU); or auto, the default (cuda when this build has CUDA, a GPU is "
      "visible and the run can use it, else cpu). The CUDA path ran on an H200 on 2026-11-28, equal to "
      "the CPU in every precision and optimizer (docs/BENCHMARKS.md)",
      device_name(c->opt.device));
  cli::add_named_option(
      cmd, "--policy-of", &c->opt.policy_of, parse_policy_of, "{cpu,cuda}",
      "Run another device's precision plan on this CPU: cuda (the residual stream, logits, gradients "
      "and small weights in the 16-bit type, as the GPU keeps them), to check that plan without a "
      "GPU; see mptrain explain --policy-of cuda. Default: this device's own");
  cmd->add_option("--loss-scale-init", c->opt.loss_scale_init,
                  "fp16: initial loss scale (GradScaler's init_scale)")
      ->capture_default_str();
  cmd->add_option("--loss-scale-growth-interval", c->opt.loss_scale_growth_interval,
                  "fp16: clean steps in a row before the loss scale doubles")
      ->capture_default_str()
      ->check(cli::at_least(1));
  // Testing only (not in --help): inject an inf gradient on these steps to exercise fp16's skip path.
  cmd->add_option("--fault-inf-grad", c->opt.fault_inf_grad_steps)->group("")->delimiter(',');
}

// Validation, samples, checkpoints, resuming and seeds.
void add_run_options(CLI::App* cmd, TrainCommand* c) {
  cmd->add_option("--grad-clip", c->opt.grad_clip, "Clip the global gradient norm to this (0 = off)")
      ->capture_default_str()
      ->check(cli::at_least(0));
  cmd->add_option("--val-every", c->opt.val_every, "Validate every N steps (0 = at the end)")
      ->capture_default_str()
      ->check(cli::at_least(0));
  cmd->add_option("--val-steps", c->opt.val_steps, "Batches per validation")
      ->capture_default_str()
      ->check(cli::at_least(1));
  cmd->add_option("--sample-every", c->opt.sample_every, "Print a sample every N steps (0 = at the end)")
      ->capture_default_str()
      ->check(cli::at_least(0));
  cmd->add_option("--sample-tokens", c->opt.sample_tokens, "Tokens per sample")
      ->capture_default_str()
      ->check(cli::at_least(0));
  cmd->add_option("--save-every", c->opt.save_every, "Checkpoint every N steps (0 = at the end)")
      ->capture_default_str()
      ->check(cli::at_least(0));
  cmd->add_option("--keep-last", c->opt.keep_last, "Keep only the newest N checkpoints (0 = all)")
      ->capture_default_str()
      ->check(cli::at_least(0));
  cmd->add_option("--run-dir", c->opt.run_dir, "Directory for checkpoints and metrics.jsonl")
      ->capture_default_str();
  cmd->add_option("--resume", c->opt.resume, "Resume from a checkpoint or run directory");
  cmd->add_option(
      "--init-from", c->opt.init_from,
      "Start a fresh run (step 0, new optimizer state) from the weights of a checkpoint, e.g. one "
      "imported with 'mptrain convert --from-hf'");
  cmd->add_option("--seed", c->opt.seed, "Random seed (initialisation and sampling)")->capture_default_str();
  cmd->add_flag("--deterministic", c->opt.deterministic,
                "Bit-reproducible runs (fixed thread count; resume continues the same trajectory)");
  cmd->add_option("--threads", c->opt.threads, "CPU threads (0 = all)")
      ->capture_default_str()
      ->check(cli::at_least(0));
}

// Data parallelism under mpirun/srun, and CUDA graphs.
void add_dist_options(CLI::App* cmd, TrainCommand* c) {
  cmd->add_option(
         "--zero", c->opt.zero,
         "ZeRO stage under mpirun/srun: 0 = every rank holds the optimizer state, 1 = sharded over ranks, "
         "2 = the gradients sharded too")
      ->capture_default_str()
      ->check(cli::between(0, 2));
  cli::add_named_option(
      cmd, "--dist-backend", &c->opt.dist_backend, parse_dist_backend, "{auto,mpi,nccl}",
      "Collectives between ranks: mpi, nccl (GPU ranks), or auto = nccl for several GPU ranks, else mpi",
      dist_backend_name(c->opt.dist_backend));
  cli::add_named_option(
      cmd, "--overlap-grad-reduce", &c->opt.overlap_grad_reduce,
      [](const std::string& s) { return parse_in(kToggleNames, s, "--overlap-grad-reduce"); }, "{auto,on,off}",
      "Reduce each block's gradients over ranks as the backward finishes it: on, off, or auto = on "
      "with nccl",
      toggle_name(c->opt.overlap_grad_reduce));
  cli::add_on_off_option(cmd, "--graphs", &c->opt.graphs,
                         "Capture each micro-batch's forward and backward once and replay it (CUDA graphs; on "
                         "the CPU the recorded calls, no faster): on or off; GPT-2 only");
  cmd->add_option("--collective-timeout", c->opt.collective_timeout,
                  "Seconds a rank waits in a collective for the others before stopping the job (0 = forever)")
      ->capture_default_str()
      ->check(cli::at_least(0));
}

// The log, the progress display and MFU's peak.
void add_log_options(CLI::App* cmd, TrainCommand* c) {
  cmd->add_option("--log-every", c->opt.log_every,
                  "Print a log line every N steps (on a terminal the progress bar redraws in between)")
      ->capture_default_str()
      ->check(cli::at_least(1));
  cli::add_named_option(cmd, "--progress", &c->opt.progress, parse_progress_mode, "{auto,bar,lines,none}",
                        "Progress display: auto (a bar on a terminal, lines otherwise), bar, lines or none (no "
                        "bar or step lines; other messages stay)",
                        "auto");
  cmd->add_flag("-q,--quiet", c->opt.quiet, "Print only errors and the final summary");
  cmd->add_option(
         "--peak-tflops", c->opt.peak_tflops,
         "Peak TFLOP/s that MFU is measured against (default: an estimate for this CPU, printed at start)")
      ->check(cli::at_least(0));
  cmd->add_option("--vocab-dir", c->opt.vocab_dir,
                  "Folder with GPT-2's encoder.json and vocab.bpe (for samples)");
}

// Numeric guards and resource limits (docs/HARDENING.md).
void add_guard_options(CLI::App* cmd, TrainCommand* c) {
  cli::add_named_option(
      cmd, "--on-nan", &c->opt.on_nan, parse_nan_policy, "{stop,rollback}",
      "A non-finite loss or gradient (fp32/tf32/bf16): stop the run, or rollback to the last "
      "checkpoint with a lower learning rate",
      nan_policy_name(c->opt.on_nan));
  cmd->add_option("--nan-lr-factor", c->opt.nan_lr_factor,
                  "--on-nan rollback: multiply the learning rate by this")
      ->capture_default_str();
  cmd->add_option("--nan-max-rollbacks", c->opt.nan_max_rollbacks, "--on-nan rollback: give up after this many")
      ->capture_default_str();
  cmd->add_option(
      "--memory-limit", c->opt.memory_limit,
      "Memory the run may use, e.g. 8G (default: MemAvailable, or the cgroup limit when lower); a "
      "configuration whose estimate exceeds it is refused before allocating");
  cli::add_named_option(
      cmd, "--recompute", &c->opt.recompute, parse_recompute, kRecomputeOptionText,
      "What the backward recomputes instead of keeping: none, or a comma list of gelu "
      "(GELU outputs), norm (norm outputs), attention (what it keeps: the probabilities on a CPU), "
      "mlp (the MLP's input product and activation), "
      "block (each block's whole forward); the same gradients, less memory, more time "
      "(mptrain explain prints each choice); GPT-2; Llama without gelu; BERT gelu, attention and mlp",
      "none");
}

// The optimizer's flags together: a recipe under the flags given, --beta1/--beta2/--weight-decay
// carried to Sophia's, and the flags of an optimizer the run does not use refused.
void finish_optimizer_options(const CLI::App* cmd, TrainCommand& c) {
  TrainOptions& opt = c.opt;
  auto given = [cmd](const std::string& flag) { return cmd->count(flag) > 0; };
  if (!c.recipe.empty()) apply_recipe(opt, c.recipe, given);
  if (given("--beta1")) opt.sophia.beta1 = opt.adamw.beta1;
  if (given("--beta2")) opt.sophia.beta2 = opt.adamw.beta2;
  if (given("--weight-decay")) opt.sophia.weight_decay = opt.adamw.weight_decay;
  MPT_CHECK(opt.optimizer == OptimizerKind::Sophia || (!given("--sophia-rho") && !given("--sophia-k")),
            "--sophia-rho and --sophia-k only apply with --optimizer sophia");
  for (const char* flag : {"--muon-momentum", "--no-muon-nesterov", "--muon-ns-steps", "--muon-adjust-lr",
                           "--muon-qkv", "--muon-adamw-lr"})
    MPT_CHECK(opt.optimizer == OptimizerKind::Muon || !given(flag),
              std::string(flag) + " only applies with --optimizer muon");
}

// The family's task, built once from the run's description (train/task_spec.h) after its
// family's defaults fill what the flags left silent.
std::unique_ptr<TrainTask> make_task(const CLI::App* cmd, TrainCommand& c) {
  TrainOptions& opt = c.opt;
  auto given = [cmd](const std::string& flag) { return cmd->count(flag) > 0; };
  const bool bert = c.task == TrainTaskKind::Classify || c.model == ModelFamily::Bert;
  MPT_CHECK(!given("--vocab-size") || !bert,
            "--vocab-size sizes GPT-2's and Llama's vocabulary; BERT's is its vocab.txt's");
  MPT_CHECK(!opt.shuffle || !bert,
            "--shuffle orders GPT-2's and Llama's token streams; BERT's loader shuffles its instances every "
            "epoch already");
  if (c.task == TrainTaskKind::Classify) {
    MPT_CHECK(!given("--model") || c.model == ModelFamily::Bert, "--task classify fine-tunes BERT: --model bert");
    // Hugging Face Trainer's defaults for fine-tuning where the flags are silent.
    if (!given("--lr")) opt.lr = 5e-5f;
    if (!given("--schedule")) opt.schedule = LrShape::Linear;
    if (!given("--min-lr-frac")) opt.min_lr_frac = 0.0f;
    if (!given("--seq")) opt.seq = 128;
    if (!given("--preset")) opt.preset = "bert-mini";
    if (!given("--weight-decay")) opt.adamw.weight_decay = 0.0f;
    if (!given("--beta2")) opt.adamw.beta2 = 0.999f;
    opt.init_from = import_if_hf_folder(opt.init_from, opt.run_dir, "bert", "--task classify fine-tunes BERT");
    return make_classify_task(opt.task_spec(), c.classify);
  }
  if (c.model == ModelFamily::Bert) {
    c.bert.seq_given = given("--seq");
    if (!given("--preset")) opt.preset = "bert-mini";
    return make_bert_task(opt.task_spec(), c.bert);
  }
  const std::string family = model_family_name(c.model);
  if (c.model == ModelFamily::Llama && !given("--preset")) opt.preset = "llama-mini";
  check_llama_block_options(cmd, family);
  opt.init_from = import_if_hf_folder(opt.init_from, opt.run_dir, family, "");
  return c.model == ModelFamily::Llama ? make_llama_task(opt.task_spec()) : make_gpt2_task(opt.task_spec());
}

}  // namespace

void register_train(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("train",
                                 "Train a GPT-2 or Llama model on token shards, or BERT on an instance file");
  auto c = std::make_shared<TrainCommand>();
  add_model_options(cmd, c.get());
  add_classify_options(cmd, c.get());
  add_bert_options(cmd, c.get());
  add_data_options(cmd, c.get());
  add_optimizer_options(cmd, c.get());
  add_precision_options(cmd, c.get());
  add_run_options(cmd, c.get());
  add_dist_options(cmd, c.get());
  add_log_options(cmd, c.get());
  add_guard_options(cmd, c.get());
  cmd->callback([cmd, c, &exit_code]() {
    finish_optimizer_options(cmd, *c);
    const std::unique_ptr<TrainTask> task = make_task(cmd, *c);
    // A run stopped by SIGINT/SIGTERM has checkpointed; its status is 128 + the signal (130, 143).
    const TrainSummary summary = run_training(c->opt, *task);
    exit_code = summary.stopped_by_signal ? exit_status_for_signal(summary.stopped_by_signal) : 0;
  });
}

}  // namespace mptrain
