// Validation and serialisation of training options.
#include "train/options.h"

#include "core/error.h"

namespace mptrain {

int TrainOptions::grad_accum_steps(int world) const {
  const int64_t micro = static_cast<int64_t>(batch) * seq * world;
  if (total_batch_tokens == 0) return 1;
  MPT_CHECK(total_batch_tokens > 0 && total_batch_tokens % micro == 0,
            "--total-batch " + std::to_string(total_batch_tokens) +
                " is not a positive multiple of batch x seq" +
                (world > 1 ? " x ranks = " + std::to_string(batch) + " x " + std::to_string(seq) + " x " +
                                 std::to_string(world) + " = "
                           : " = ") +
                std::to_string(micro));
  return static_cast<int>(total_batch_tokens / micro);
}

nlohmann::json TrainOptions::to_json() const {
  return {{"preset", preset},
          {"init_from", init_from},
          {"vocab_multiple", vocab_multiple},
          {"vocab_size", vocab_size},
          {"train_data", train_data},
          {"val_data", val_data},
          {"batch", batch},
          {"batch_auto", batch_auto},
          {"seq", seq},
          {"total_batch_tokens", total_batch_tokens},
          {"shuffle", shuffle},
          {"steps", steps},
          {"lr", lr},
          {"min_lr_frac", min_lr_frac},
          {"warmup", warmup},
          {"schedule", lr_shape_name(schedule)},
          {"beta1", adamw.beta1},
          {"beta2", adamw.beta2},
          {"eps", adamw.eps},
          {"weight_decay", adamw.weight_decay},
          {"optimizer", optimizer_name(optimizer)},
          {"recipe", recipe},
          {"sophia",
           {{"beta1", sophia.beta1},
            {"beta2", sophia.beta2},
            {"rho", sophia.rho},
            {"weight_decay", sophia.weight_decay},
            {"k", sophia.k}}},
          {"muon",
           {{"momentum", muon.momentum},
            {"nesterov", muon.nesterov},
            {"ns_steps", muon.ns_steps},
            {"adjust_lr", muon_adjust_name(muon.adjust)},
            {"qkv", muon_qkv_name(muon.qkv)},
            {"adamw_lr", muon_adamw_lr > 0.0f ? muon_adamw_lr : lr}}},
          {"grad_clip", grad_clip},
          {"precision", precision_name(precision.value_or(Precision::Fp32))},
          {"device", device_name(device)},
          {"policy_of", policy_of == PolicyOf::Own ? device_name(device) : name_in(kPolicyOfNames, policy_of)},
          {"loss_scale_init", loss_scale_init},
          {"loss_scale_growth_interval", loss_scale_growth_interval},
          {"val_every", val_every},
          {"val_steps", val_steps},
          {"save_every", save_every},
          {"seed", seed},
          {"deterministic", deterministic},
          {"threads", threads},
          {"zero", zero},
          {"collective_timeout", collective_timeout},
          {"dist_backend", dist_backend_name(dist_backend)},
          {"overlap_grad_reduce", toggle_name(overlap_grad_reduce)},
          {"graphs", graphs ? "on" : "off"},
          {"recompute", recompute_name(recompute)},
          {"on_nan", nan_policy_name(on_nan)},
          {"nan_lr_factor", nan_lr_factor},
          {"nan_max_rollbacks", nan_max_rollbacks},
          {"memory_limit", memory_limit}};
}

TaskSpec TrainOptions::task_spec() const {
  TaskSpec s;
  s.preset = preset;
  s.vocab_multiple = vocab_multiple;
  s.vocab_size = vocab_size;
  s.llama_block = llama_block;
  s.train_data = train_data;
  s.val_data = val_data;
  s.batch = batch;
  s.seq = seq;
  s.shuffle = shuffle;
  s.graphs = graphs;
  s.recompute = recompute;
  s.val_steps = val_steps;
  s.sample_tokens = sample_tokens;
  s.seed = seed;
  s.run_dir = run_dir;
  s.vocab_dir = vocab_dir;
  return s;
}

void apply_recipe(TrainOptions& o, const std::string& recipe,
                  const std::function<bool(const std::string& flag)>& given) {
  if (recipe != "sophia-gpt2") throw Error("unknown recipe '" + recipe + "' (known: sophia-gpt2)");
  MPT_CHECK(!given("--optimizer") || o.optimizer == OptimizerKind::Sophia,
            std::string("--recipe sophia-gpt2 is a Sophia recipe; it cannot be used with --optimizer ") +
                optimizer_name(o.optimizer));
  o.recipe = recipe;
  o.optimizer = OptimizerKind::Sophia;
  const SophiaHyper defaults;
  if (!given("--lr")) o.lr = 6e-4f;
  if (!given("--min-lr-frac")) o.min_lr_frac = 1.5e-5f / 6e-4f;
  if (!given("--warmup")) o.warmup = 2000;
  if (!given("--grad-clip")) o.grad_clip = 1.0f;
  if (!given("--sophia-rho")) o.sophia.rho = 0.05f;
  if (!given("--sophia-k")) o.sophia.k = defaults.k;
  if (!given("--weight-decay")) o.sophia.weight_decay = 0.2f;
  if (!given("--beta1")) o.sophia.beta1 = defaults.beta1;
  if (!given("--beta2")) o.sophia.beta2 = defaults.beta2;
}

}  // namespace mptrain
