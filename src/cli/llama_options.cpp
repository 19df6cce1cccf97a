// Llama's block options (cli/llama_options.h).
#include "cli/llama_options.h"

#include "core/error.h"

namespace mptrain {

void add_llama_block_options(CLI::App* cmd, LlamaBlockOptions* o) {
  cmd->add_option_function<std::string>(
         "--mlp", [o](const std::string& v) { o->mlp = v == "relu2" ? LlamaMlp::Relu2 : LlamaMlp::SwiGlu; },
         "Llama: the MLP, swiglu (default: silu(gate)·up, 3 matrices) or relu2 (modded-nanogpt's un-gated "
         "relu(up)², 2 matrices of the same width; saved as model_type mptrain_llama, which has no Hugging "
         "Face class)")
      ->check(CLI::IsMember({"swiglu", "relu2"}));
  cmd->add_flag("--qk-norm", o->qk_norm,
                "Llama: RMSNorm over each query and key head before the rotation (Qwen3's q_norm / k_norm; "
                "exported as Qwen3ForCausalLM)");
}

void check_llama_block_options(const CLI::App* cmd, const std::string& model) {
  MPT_CHECK(model == "llama" || (cmd->count("--mlp") == 0 && cmd->count("--qk-norm") == 0),
            "--mlp and --qk-norm are Llama's block options: --model llama");
}

}  // namespace mptrain
