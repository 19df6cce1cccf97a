// `mptrain explain`: the precision plan of a model, as a table — for every kind of op the dtype
// it reads, computes in, accumulates in and writes, and the bytes it keeps for backward — and
// the memory totals (parameters, gradients, optimizer state, weight copies, activations), for this
// CPU or (--device cuda) for a GPU's plan and device memory.
//
// Every number comes from the objects training uses: the policy table (precision/policy.h), the
// activation plan the model allocates (gpt2_activation_plan, or for a bert-* preset
// bert_activation_plan, for a llama-* one llama_activation_plan, built here without allocating)
// and the weight-copy layout. Nothing is recomputed by a separate formula.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "backend/device.h"
#include "backend/make_backend.h"
#include "cli/llama_options.h"
#include "cli/subcommands.h"
#include "cli/validators.h"
#include "core/error.h"
#include "model/bert.h"
#include "model/gpt2.h"
#include "model/llama.h"
#include "precision/policy.h"
#include "train/bert_task.h"
#include "train/memory_estimate.h"
#include "train/options.h"

namespace mptrain {

namespace {

struct ExplainOptions {
  std::string preset = "gpt2";
  int vocab_multiple = 128;
  Precision precision = Precision::Fp32;
  std::vector<std::string> op_precision;
  int batch = 4;
  bool batch_auto = false;     // --batch auto: chosen as `mptrain train` chooses it (below)
  int64_t total_batch = 0;     // --total-batch, which --batch auto splits
  std::string memory_limit;    // --memory-limit ("" = this machine's MemAvailable)
  int seq = 256;
  int max_predictions = 20;  // BERT: masked positions per sequence at most (as mptrain train)
  PolicyOf policy_of = PolicyOf::Own;  // cuda: the GPU's plan, as `mptrain train --policy-of cuda` runs it here
  Device device = Device::Cpu;         // cuda: the plan and device memory of `mptrain train --device cuda`
  LlamaBlockOptions llama_block;  // --mlp, --qk-norm (Llama)
  RecomputeSet recompute;         // --recompute
  int ranks = 1;                  // --ranks: data-parallel ranks, each one's memory
  int zero = 0;                   // --zero: the ZeRO stage over them
};

// The rows a family's plan prints: the roles its pass uses (precision/op_role.h), in the roles' order.
// GPT-2 and BERT: LayerNorm and GELU; Llama: RMSNorm, rotary embeddings and its MLP's activation.
std::vector<OpRole> family_roles(LlamaMlp mlp, bool llama) {
  const OpRole norm = llama ? OpRole::RmsNorm : OpRole::LayerNorm;
  const OpRole act = !llama ? OpRole::Gelu : mlp == LlamaMlp::SwiGlu ? OpRole::Swiglu : OpRole::Relu2;
  std::vector<OpRole> rows;
  for (int i = 0; i < kNumOpRoles; ++i) {
    const OpRole r = static_cast<OpRole>(i);
    const bool is_norm = r == OpRole::LayerNorm || r == OpRole::RmsNorm;
    const bool is_act = r == OpRole::Gelu || r == OpRole::Swiglu || r == OpRole::Relu2;
    if ((is_norm && r != norm) || (is_act && r != act) || (r == OpRole::Rope && !llama) || r == OpRole::Copy)
      continue;
    rows.push_back(r);
  }
  return rows;
}

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

// The memory section: each role of the estimate, then the planned total, and on the host the
// process's own resident set and the whole (lines marked "(measured)": they vary from run to run).
void print_memory(const MemoryEstimate& e, const ActivationPlan& plan, const Policy& policy, bool on_gpu,
                  const ExplainOptions& o) {
  const auto row = [](const std::string& what, const std::string& value) {
    std::printf("  %-34s %12s\n", what.c_str(), value.c_str());
  };
  const auto mib_of = [](size_t bytes) { return mib(static_cast<double>(bytes)); };
  const bool sharded = o.ranks > 1 && o.zero > 0;
  if (o.ranks > 1)
    std::printf(
        on_gpu ? "\ndevice memory of rank 0 of %d (ZeRO-%d):\n" : "\nmemory of rank 0 of %d (ZeRO-%d):\n",
        o.ranks, o.zero);
  else
    std::printf(on_gpu ? "\ndevice memory:\n" : "\nmemory:\n");
  row("parameters (fp32 master)", mib_of(e.params));
  row(o.zero == 2 && o.ranks > 1 ? "gradients (fp32, shard + open)" : "gradients (fp32)", mib_of(e.grads));
  if (e.lowp_grads > 0)
    row(std::string("micro-batch gradients (") + storage_name(policy.weight_grads) + ")",
        mib_of(e.lowp_grads));
  row(sharded ? "optimizer state (shard + gathered)" : "optimizer state (AdamW, 2 x fp32)",
      mib_of(e.optimizer));
  // A GPU's plan copies the non-GEMM weights too (LayerNorm gains, biases, position tables).
  row(policy.small_weights == StorageType::F32 ? "GEMM weight copies" : "weight copies (every weight)",
      e.weight_copies > 0 ? mib_of(e.weight_copies) : "none (fp32 GEMMs)");
  row("activations saved for backward", mib_of(plan.bytes(ActivationPlan::Role::Saved)));
  row("activation scratch (reused)", mib_of(plan.bytes(ActivationPlan::Role::Scratch)));
  row("activation allocation (aligned)", mib_of(e.activations));
  row("token buffers", mib_of(e.tokens));
  row("runtime allowance", mib_of(e.runtime));
  row(on_gpu ? "total" : "total the run allocates", mib_of(e.to_allocate()));
  if (!on_gpu) {
    row("this process (measured)", mib_of(e.process));
    row("peak resident (measured)", mib_of(e.total()));
  }
}

// The presets explain reads, with --recompute (and Llama's --mlp, --qk-norm).
Gpt2Config explained_gpt2(const ExplainOptions& o, RecomputeSet recompute) {
  Gpt2Config c = gpt2_preset(o.preset, o.vocab_multiple);
  c.recompute = recompute;
  return c;
}
LlamaConfig explained_llama(const ExplainOptions& o, RecomputeSet recompute) {
  LlamaConfig c = llama_preset(o.preset, o.vocab_multiple, o.llama_block);
  c.recompute = recompute;
  return c;
}

BertConfig explained_bert(const ExplainOptions& o, RecomputeSet recompute) {
  BertConfig c = bert_preset(o.preset);
  c.recompute = recompute;
  return c;
}

RecomputeFamily family_of(bool bert, bool llama) {
  return bert ? RecomputeFamily::Bert : llama ? RecomputeFamily::Llama : RecomputeFamily::Gpt2;
}

// The family's footprint (train/memory_estimate.h) under `recompute`: what `mptrain
// train` estimates from, with the attention's share as `be` keeps it.
ModelFootprint explained_footprint(const ExplainOptions& o, const Policy& policy, const Backend& be,
                                   bool bert, bool llama, RecomputeSet recompute) {
  const std::shared_ptr<const Backend> sizing(std::shared_ptr<const Backend>(), &be);
  if (bert) return bert_footprint(explained_bert(o, recompute), policy, o.max_predictions, sizing);
  if (llama) return llama_footprint(explained_llama(o, recompute), policy, sizing);
  return gpt2_footprint(explained_gpt2(o, recompute), policy, sizing);
}

// The FLOPs per token of a training step of the explained model, with what `recompute` adds to it.
struct StepFlops {
  double model = 0.0, added = 0.0;
};
StepFlops explained_flops(const ExplainOptions& o, bool bert, bool llama, RecomputeSet recompute) {
  if (bert) {
    const BertConfig c = explained_bert(o, recompute);
    return {bert_flops_per_token(c, o.seq, static_cast<double>(o.max_predictions) / o.seq),
            bert_recompute_flops_per_token(c, o.seq, recompute)};
  }
  if (llama) {
    const LlamaConfig c = explained_llama(o, recompute);
    return {llama_flops_per_token(c, o.seq), llama_recompute_flops_per_token(c, o.seq, recompute)};
  }
  const Gpt2Config c = explained_gpt2(o, recompute);
  return {gpt2_flops_per_token(c, o.seq), gpt2_recompute_flops_per_token(c, o.seq, recompute)};
}

// --recompute's choices side by side, those the family refills: each one's activation allocation
// (the footprint's, as `train` plans it), what it saves against keeping everything, and the FLOPs
// the backward adds (per step of B x T tokens, and against the step's model FLOPs, which MFU counts
// without them).
void print_recompute_choices(const ExplainOptions& o, const Policy& policy, const Backend& be, bool bert,
                             bool llama) {
  const auto bytes = [&](RecomputeSet s) {
    return explained_footprint(o, policy, be, bert, llama, s).activation_bytes(o.batch, o.seq);
  };
  const double tokens = static_cast<double>(o.batch) * o.seq;
  const double step_flops = explained_flops(o, bert, llama, {}).model * tokens;
  const size_t keep_all = bytes({});
  std::printf("\nrecompute (--recompute; the same gradients, bit for bit):\n");
  std::printf("  %-10s %14s %14s %22s\n", "choice", "activations", "saved", "FLOPs added a step");
  std::vector<RecomputeSet> choices = recompute_singles(family_of(bert, llama));
  if (std::find(choices.begin(), choices.end(), o.recompute) == choices.end()) choices.push_back(o.recompute);
  for (const RecomputeSet c : choices) {
    const size_t b = bytes(c);
    const double added = explained_flops(o, bert, llama, c).added * tokens;
    char text[48];
    if (c.none())
      std::snprintf(text, sizeof(text), "-");
    else if (added == 0.0)
      std::snprintf(text, sizeof(text), "elementwise only");
    else
      std::snprintf(text, sizeof(text), "%.2f GFLOP (+%.1f%%)", added * 1e-9, 100.0 * added / step_flops);
    std::printf("  %-10s %14s %14s %22s%s\n", recompute_name(c).c_str(), mib(static_cast<double>(b)).c_str(),
                c.none() ? "-" : mib(static_cast<double>(keep_all) - static_cast<double>(b)).c_str(), text,
                c == o.recompute ? "  <- this plan" : "");
  }
}

// --batch auto as the trainer runs it (train/memory_estimate.h choose_batch): the micro-batch and
// recompute set for the plan below, and the trainer's line saying so. The budget is --memory-limit,
// or this machine's MemAvailable (a GPU's plan needs --memory-limit: its free memory is read where
// it runs); the process in the estimate is explain's own.
void choose_explained_batch(ExplainOptions& o, const Policy& policy, const Backend& be, bool bert, bool llama) {
  MPT_CHECK(o.device != Device::Cuda || !o.memory_limit.empty(),
            "--batch auto --device cuda: give --memory-limit (a GPU's free memory is read where the run starts)");
  const MemoryBudget budget = available_memory(o.memory_limit);
  TrainOptions run;
  run.seq = o.seq;
  run.total_batch_tokens = o.total_batch;
  run.device = o.device;
  run.zero = o.zero;
  const std::vector<RecomputeSet> choices = !o.recompute.none()
                                                ? std::vector<RecomputeSet>{o.recompute}
                                                : recompute_sets_by_cost(family_of(bert, llama));
  const BatchChoice c = choose_batch(
      run, choices, [&](RecomputeSet s) { return explained_footprint(o, policy, be, bert, llama, s); },
      o.ranks, budget);
  o.batch = c.batch;
  o.recompute = c.recompute;
  std::printf("%s\n", describe_batch_choice(c, run, o.ranks, budget).c_str());
}

void run_explain(const ExplainOptions& options) {
  ExplainOptions o = options;  // --batch auto fills batch and recompute
  const Precision precision = o.precision;
  const bool on_gpu = o.device == Device::Cuda;
  MPT_CHECK(!on_gpu || o.policy_of != PolicyOf::Cuda,
            "--policy-of runs another device's plan on the CPU: it needs --device cpu");
  // The backend the plan is sized for: this CPU's, or the CUDA backend's answers (no GPU needed).
  const std::unique_ptr<const Backend> sizing = on_gpu ? make_cuda_sizing_backend() : make_backend(Device::Cpu);
  const Backend& be = *sizing;
  const bool gpu_plan = on_gpu || o.policy_of == PolicyOf::Cuda;
  const Policy policy = plan_policy(precision, o.policy_of, be, parse_op_precision(o.op_precision));
  const BackendCaps& caps = policy.caps;
  // The model family from the preset's name: bert-* presets are BERT (bert-base's vocabulary),
  // llama-* Llama (GPT-2's), everything else GPT-2.
  const bool bert = o.preset.rfind("bert", 0) == 0, llama = o.preset.rfind("llama", 0) == 0;
  check_recompute(o.recompute, family_of(bert, llama));
  if (o.batch_auto) choose_explained_batch(o, policy, be, bert, llama);
  ActivationPlan plan;
  size_t n_params = 0;
  if (bert) {
    const BertConfig config = explained_bert(o, o.recompute);
    plan = bert_activation_plan(config, policy, be, o.batch, o.seq, o.batch * o.max_predictions);
    n_params = bert_param_table(config).total();
  } else if (llama) {
    const LlamaConfig config = explained_llama(o, o.recompute);
    plan = llama_activation_plan(config, policy, be, o.batch, o.seq);
    n_params = llama_param_table(config).total();
  } else {
    const Gpt2Config config = explained_gpt2(o, o.recompute);
    plan = gpt2_activation_plan(config, policy, be, o.batch, o.seq);
    n_params = gpt2_param_table(config).total();
  }

  std::printf("precision plan: %s, preset %s (%zu parameters), batch %d x seq %d", precision_name(precision),
              o.preset.c_str(), n_params, o.batch, o.seq);
  if (bert) std::printf(", at most %d masked positions per sequence", o.max_predictions);
  std::printf("\n");
  if (on_gpu)
    std::printf(
        "the plan of `mptrain train --device cuda`: one storage type per kernel launch; the attention "
        "is the CUDA backend's (flash where the shape allows: it keeps the row log-sum-exps); the "
        "memory below is the GPU's\n");
  else if (gpu_plan)
    std::printf(
        "the GPU's plan (--policy-of cuda), as this CPU runs it: 16-bit tensors its kernels do not take "
        "are widened to fp32 around them and rounded once; the attention's memory is this CPU's\n");
  std::printf("%-13s %-6s %-7s %-6s %-6s %-13s %s\n", "op", "input", "compute", "accum", "output",
              "saved-for-bwd", "what backward keeps");
  std::vector<size_t> saved(kNumOpRoles, 0);
  for (const ActivationPlan::Entry& e : plan.entries())
    if (e.role == ActivationPlan::Role::Saved) saved[static_cast<size_t>(e.op)] += e.bytes();
  const std::vector<OpRole> rows =
      family_roles(llama ? llama_preset(o.preset, o.vocab_multiple, o.llama_block).mlp : LlamaMlp{}, llama);
  for (const OpRole role : rows) {
    const OpRule& r = policy.rule(role);
    const size_t b = saved[static_cast<size_t>(r.op)];
    std::printf(
        "%-13s %-6s %-7s %-6s %-6s %-13s %s\n", role_name(r.op), storage_name(r.input), compute_name(r.compute),
        storage_name(r.accumulate), storage_name(r.output), b ? mib(static_cast<double>(b)).c_str() : "-",
        *r.saves ? (std::string(r.saves) + (b ? std::string(" [") + storage_name(r.saved) + "]" : "")).c_str()
                 : "-");
  }
  std::printf("\nnotes:\n");
  if (bert)
    std::printf("  %-13s %s\n", "bert",
                "linear = query|key|value, attention.output.dense, intermediate.dense, output.dense, pooler, "
                "MLM transform, NSP; lm_head = the MLM decoder (tied word embeddings) on the masked rows; "
                "post-LN: the LayerNorm outputs are the fp32 residual stream, saved in the GEMM's dtype; "
                "GELU is the exact erf form");
  if (llama)
    std::printf("  %-13s %s\n", "llama",
                "embedding = the token rows alone (no position table); linear = q|k|v, o_proj, gate|up, "
                "down_proj (no biases); lm_head = lm_head, or the embeddings when tied");
  for (const OpRole role : rows) std::printf("  %-13s %s\n", role_name(role), policy.rule(role).note.c_str());
  if (policy.uses_fp16() && !gpu_plan)
    std::printf("  %-13s %s\n", "this CPU",
                caps.fp16_gemm
                    ? "oneDNN has fp16 GEMM kernels here (AVX512-FP16): fp16 operands are multiplied natively"
                    : "no fp16 GEMM in oneDNN here (no AVX512-FP16): fp16 GEMMs are EMULATED exactly "
                      "(operands widened to fp32, fp32 GEMM); weight copies and converted gradients are "
                      "held as fp16 values in fp32 storage");

  // The estimate `mptrain train` checks before it allocates (train/memory_estimate.h), from the
  // family's footprint: one sum for both commands.
  TrainOptions run;
  run.batch = o.batch;
  run.seq = o.seq;
  run.device = o.device;
  run.zero = o.zero;
  const ModelFootprint footprint = explained_footprint(o, policy, be, bert, llama, o.recompute);
  print_memory(estimate_training_memory(run, footprint, o.ranks, 0), plan, policy, on_gpu, o);
  // The other ranks hold no gathered optimizer state, and under ZeRO-2 other gradients.
  for (int rank = 1; rank < o.ranks; ++rank) {
    const MemoryEstimate e = estimate_training_memory(run, footprint, o.ranks, rank);
    std::printf("  rank %d: gradients %s, optimizer state %s, total the run allocates %s", rank,
                mib(static_cast<double>(e.grads)).c_str(), mib(static_cast<double>(e.optimizer)).c_str(),
                mib(static_cast<double>(e.to_allocate())).c_str());
    if (!on_gpu) std::printf(", peak resident (measured) %s", mib(static_cast<double>(e.total())).c_str());
    std::printf("\n");
  }
  std::printf("loss scaling: %s\n", policy.uses_fp16() ? "dynamic (fp16 in the plan)" : "none");
  print_recompute_choices(o, policy, be, bert, llama);
}

}  // namespace

void register_explain(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("explain", "Print the per-op precision plan and the memory it implies");
  auto o = std::make_shared<ExplainOptions>();
  cmd->add_option("--preset", o->preset,
                  "A GPT-2 preset, a BERT one (bert-tiny ... bert-large) or a Llama one (llama-tiny, "
                  "llama-mini, llama-d6, llama-135m)")
      ->capture_default_str();
  cmd->add_option("--vocab-multiple", o->vocab_multiple)->capture_default_str()->check(cli::at_least(1));
  cli::add_precision_option(cmd, &o->precision, "fp32, tf32, bf16 or fp16");
  cmd->add_option("--op-precision", o->op_precision,
                  "Override one op's dtype, e.g. gelu=bf16 or linear=fp32 (repeat or comma-separate)");
  cli::add_named_option(cmd, "--policy-of", &o->policy_of, parse_policy_of, "{cpu,cuda}",
                        "cuda: the plan a GPU runs (16-bit residual stream, logits, gradients, small weights), "
                        "as `mptrain train --policy-of cuda` runs it on this CPU");
  cli::add_named_option(
      cmd, "--device", &o->device,
      [](const std::string& s) { return parse_named_device(s, "the plan of either, GPU or not"); },
      "{cpu,cuda}", "cuda: the plan and device memory of `mptrain train --device cuda` (no GPU needed)",
      device_name(o->device));
  cli::add_batch_option(cmd, &o->batch, &o->batch_auto,
                        "Sequences per micro-batch, or auto: what `mptrain train --batch auto` would choose "
                        "under --memory-limit (or this machine's MemAvailable), splitting --total-batch");
  cmd->add_option("--total-batch", o->total_batch, "Tokens per optimizer step, which --batch auto splits")
      ->check(cli::at_least(1));
  cmd->add_option("--memory-limit", o->memory_limit, "--batch auto's budget, e.g. 20G (default: MemAvailable)");
  cmd->add_option("-t,--seq", o->seq)->capture_default_str()->check(cli::at_least(1));
  cmd->add_option("--max-predictions", o->max_predictions, "BERT: masked positions per sequence at most")
      ->capture_default_str()
      ->check(cli::at_least(1));
  add_llama_block_options(cmd, &o->llama_block);
  cli::add_named_option(cmd, "--recompute", &o->recompute, parse_recompute, kRecomputeOptionText,
                        "The plan with what the backward recomputes (none, or a comma list of gelu, norm, "
                        "attention, mlp, block); every choice is listed side by side either way (GPT-2; "
                        "Llama without gelu; BERT gelu, attention, mlp)",
                        "none");
  cmd->add_option("--ranks", o->ranks, "Data-parallel ranks (mpirun -np): each rank's memory under --zero")
      ->capture_default_str()
      ->check(cli::at_least(1));
  cmd->add_option("--zero", o->zero, "The ZeRO stage over --ranks, as `mptrain train --zero`")
      ->capture_default_str()
      ->check(cli::between(0, 2));
  cmd->callback([cmd, o, &exit_code]() {
    check_llama_block_options(cmd, o->preset.rfind("llama", 0) == 0 ? "llama" : "gpt2");
    MPT_CHECK(o->zero != 2 || o->ranks > 1,
              "--zero 2 shards the gradients over ranks: give --ranks 2 or more");
    run_explain(*o);
    exit_code = 0;
  });
}

}  // namespace mptrain
