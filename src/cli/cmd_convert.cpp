// `mptrain convert`: Hugging Face model folders ⇄ mptrain checkpoints, GPT-2, Llama and BERT
// (hf/hf_convert.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/subcommands.h"
#include "cli/validators.h"
#include "hf/hf_convert.h"
#include "train/bert_checkpoint.h"
#include "train/causal_lm_checkpoint.h"

namespace mptrain {

namespace {
struct ConvertOptions {
  std::string from_hf, to_hf, out;
  int vocab_multiple = 0;  // 0: the family's (GPT-2 128, BERT 64), as train pads
  std::string vocab_dir;
  std::string vocab;  // BERT's vocab.txt
};

void print_tensor_report(const HfImportResult& r) {
  std::string dtypes;
  for (const auto& [name, count] : r.dtypes)
    dtypes += (dtypes.empty() ? "" : ", ") + std::to_string(count) + " " + name;
  std::printf("tensors: %s", dtypes.c_str());
  if (!r.ignored.empty())
    std::printf(r.model_type == "gpt2" ? "; %zu mask buffer(s) ignored" : "; %zu buffer(s) ignored",
                r.ignored.size());
  for (const auto& t : r.tied_copies) std::printf("; %s checked equal to its tied source", t.c_str());
  for (const auto& t : r.stand_ins) std::printf("; %s read as the tensor it is tied to", t.c_str());
  std::printf("\n");
}

void run_convert(const ConvertOptions& o) {
  MPT_CHECK(o.from_hf.empty() != o.to_hf.empty(), "give exactly one of --from-hf DIR and --to-hf CHECKPOINT");
  if (!o.from_hf.empty()) {
    const HfImportResult r = import_hf_folder(o.from_hf, o.out, o.vocab_multiple, o.vocab);
    if (r.model_type == "bert") {
      const BertConfig& c = r.bert;
      std::printf(
          "imported bert: %zu parameters (%s; %d layers, %d heads, %d wide, FFN %d, vocab %d "
          "padded to %d, %d positions, %d token types)\n",
          r.num_params, bert_hf_architecture(c), c.n_layer, c.n_head, c.hidden, c.intermediate, c.vocab_size,
          c.padded_vocab_size, c.max_position, c.type_vocab_size);
      print_tensor_report(r);
      if (!r.vocab_source.empty())
        std::printf(
            "vocabulary: %s (%d tokens, %s)%s\n", r.vocab_source.c_str(), r.vocab_tokens,
            r.lower_case ? "lower-cased" : "cased",
            r.vocab_tokens < c.vocab_size ? "; fewer than vocab_size: the ids above have no text" : "");
      else
        std::printf(
            "vocabulary: none (no vocab.txt in %s): fill-mask will need --vocab, or convert again with "
            "--vocab\n",
            o.from_hf.c_str());
      std::printf(
          "wrote %s (weights only, step 0): use it with fill-mask, eval or train --model bert --init-from\n",
          o.out.c_str());
    } else if (r.model_type == "llama") {
      const LlamaConfig& c = r.llama;
      std::printf("imported llama: %zu parameters (%s, vocab %d padded to %d, context %d)\n", r.num_params,
                  model_shape(c).c_str(), c.vocab_size, c.padded_vocab_size, c.block_size);
      print_tensor_report(r);
      std::printf("wrote %s (weights only, step 0): use it with generate, eval or train --model llama --init-from\n",
                  o.out.c_str());
    } else {
      std::printf(
          "imported %s: %zu parameters (%d layers, %d heads, %d wide, vocab %d padded to %d, context %d)\n",
          r.model_type.c_str(), r.num_params, r.config.n_layer, r.config.n_head, r.config.n_embd,
          r.config.vocab_size, r.config.padded_vocab_size, r.config.block_size);
      print_tensor_report(r);
      std::printf("wrote %s (weights only, step 0): use it with generate, eval or train --init-from\n",
                  o.out.c_str());
    }
  } else {
    const HfExportResult r = export_hf_folder(o.to_hf, o.out, o.vocab_dir, o.vocab);
    if (r.model_type == "bert") {
      std::printf("exported %s: %zu parameters (%s, vocab %d)\n", r.checkpoint.c_str(), r.num_params,
                  bert_hf_architecture(r.bert), r.bert.vocab_size);
      std::printf("wrote %s: config.json, model.safetensors%s\n", o.out.c_str(),
                  r.tokenizer_files
                      ? ", vocab.txt, tokenizer_config.json"
                      : " (no vocab.txt in the checkpoint: no tokenizer files; give one with --vocab)");
    } else {
      const bool llama = r.model_type == "llama";
      std::printf("exported %s: %zu parameters (%s, vocab %d)\n", r.checkpoint.c_str(), r.num_params,
                  llama ? "LlamaForCausalLM" : "GPT2LMHeadModel", llama ? r.llama.vocab_size : r.config.vocab_size);
      std::printf("wrote %s: config.json, model.safetensors%s\n", o.out.c_str(),
                  r.tokenizer_files ? ", vocab.json, merges.txt" : "");
    }
  }
}
}  // namespace

void register_convert(CLI::App& app, int& exit_code) {
  auto* cmd =
      app.add_subcommand("convert", "Convert between Hugging Face model folders and mptrain checkpoints");
  auto o = std::make_shared<ConvertOptions>();
  cmd->add_option("--from-hf", o->from_hf,
                  "Hugging Face model folder (config.json + model.safetensors) to import");
  cmd->add_option("--to-hf", o->to_hf, "mptrain checkpoint or run directory to export");
  cmd->add_option("-o,--out", o->out, "Output folder (must not exist, or be empty)")->required();
  cmd->add_option("--vocab-multiple", o->vocab_multiple,
                  "--from-hf: pad the vocabulary in memory to a multiple of this (1 = off; default: as train "
                  "pads, 128 for GPT-2, 64 for BERT)")
      ->check(cli::at_least(1));
  cmd->add_option(
      "--vocab-dir", o->vocab_dir,
      "--to-hf: folder with GPT-2's encoder.json and vocab.bpe, written as vocab.json and merges.txt "
      "(default: the installed vocabulary, when there is one)");
  cmd->add_option("--vocab", o->vocab,
                  "BERT: WordPiece vocab.txt to store with the model (default: the folder's or checkpoint's "
                  "vocab.txt; without one the model converts without tokenizer files)");
  cmd->callback([o, &exit_code]() {
    run_convert(*o);
    exit_code = 0;
  });
}

}  // namespace mptrain
