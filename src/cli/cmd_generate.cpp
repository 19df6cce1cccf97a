// `mptrain generate`: sample text from a checkpoint.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/device_options.h"
#include "cli/subcommands.h"
#include "cli/validators.h"
#include "cli/vocab.h"
#include "eval/sampler.h"
#include "io/checkpoint_dir.h"
#include "precision/precision.h"
#include "train/causal_lm_checkpoint.h"

namespace mptrain {

namespace {
struct GenerateOptions {
  std::string checkpoint;
  std::string prompt;
  std::string vocab_dir;
  SampleOptions sample;
  int num_samples = 1;
  Precision precision = Precision::Fp32;
  DeviceOptions device;
};

void run_generate(const GenerateOptions& o) {
  const Precision precision = o.precision;
  MPT_CHECK(o.sample.max_new_tokens > 0, "--max-new-tokens must be positive");
  MPT_CHECK(o.sample.top_k >= 0, "--top-k must be >= 0");
  MPT_CHECK(o.sample.temperature >= 0.0f, "--temperature must be >= 0");
  const CausalLmCheckpoint ckpt = read_causal_lm_checkpoint(resolve_checkpoint(o.checkpoint));
  const auto tokenizer = load_gpt2_tokenizer(vocab_dir_for_checkpoint(o.vocab_dir, ckpt.dir));
  MPT_CHECK(tokenizer->vocab_size() <= ckpt.vocab_size(),
            "the checkpoint's vocabulary (" + std::to_string(ckpt.vocab_size()) +
                ") is smaller than GPT-2's; it was not trained on GPT-2 tokens");
  ModelBackend on = model_backend(o.device, precision, "generate");
  const std::unique_ptr<CausalLm> loaded = ckpt.load(std::move(on.backend), on.policy);
  CausalLm& model = *loaded;
  // The prompt's special tokens are tokens, as transformers' tokenizers read them (an instruct
  // model's chat template: "<|im_start|>user ...").
  std::vector<int> prompt = o.prompt.empty() ? std::vector<int>{tokenizer->eot()}
                                             : tokenizer->encode(o.prompt, SpecialTokens::kAllowSpecial);
  model.plan(1, std::min<int>(ckpt.block_size(), static_cast<int>(prompt.size()) + o.sample.max_new_tokens));
  uint64_t counter = 0;
  for (int i = 0; i < o.num_samples; ++i) {
    std::vector<int> out = sample_tokens(model, prompt, o.sample, counter);
    std::printf("%s%s\n", o.prompt.c_str(), tokenizer->decode(out).c_str());
    if (i + 1 < o.num_samples) std::printf("----\n");
  }
}
}  // namespace

void register_generate(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("generate", "Generate text from a GPT-2 or Llama checkpoint");
  auto o = std::make_shared<GenerateOptions>();
  cmd->add_option("--checkpoint", o->checkpoint, "Checkpoint or run directory")->required();
  cmd->add_option("--prompt", o->prompt, "Text to continue (default: start of a document)");
  cmd->add_option("--max-new-tokens", o->sample.max_new_tokens)->capture_default_str();
  cmd->add_option("--temperature", o->sample.temperature, "Softmax temperature (0 = greedy)")
      ->capture_default_str();
  cmd->add_option("--top-k", o->sample.top_k, "Sample among the k most likely tokens (0 = all)")
      ->capture_default_str();
  cmd->add_option("--seed", o->sample.seed)->capture_default_str();
  cmd->add_option("--num-samples", o->num_samples)->capture_default_str()->check(cli::at_least(1));
  cmd->add_option("--vocab-dir", o->vocab_dir, "Folder with GPT-2's encoder.json and vocab.bpe");
  cli::add_precision_option(cmd, &o->precision, "Forward precision: fp32, tf32, bf16 or fp16");
  add_device_options(cmd, &o->device);
  cmd->callback([o, &exit_code]() {
    run_generate(*o);
    exit_code = 0;
  });
}

}  // namespace mptrain
