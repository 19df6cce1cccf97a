// `mptrain convert`: Hugging Face model folders ⇄ mptrain checkpoints (io/hf_convert.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/subcommands.h"
#include "io/hf_convert.h"

namespace mptrain {

namespace {
struct ConvertOptions {
  std::string from_hf, to_hf, out;
  int vocab_multiple = 128;
  std::string vocab_dir;
};

void run_convert(const ConvertOptions& o) {
  MPT_CHECK(o.from_hf.empty() != o.to_hf.empty(), "give exactly one of --from-hf DIR and --to-hf CHECKPOINT");
  if (!o.from_hf.empty()) {
    const HfImportResult r = import_hf_folder(o.from_hf, o.out, o.vocab_multiple);
    std::string dtypes;
    for (const auto& [name, count] : r.dtypes)
      dtypes += (dtypes.empty() ? "" : ", ") + std::to_string(count) + " " + name;
    std::printf(
        "imported %s: %zu parameters (%d layers, %d heads, %d wide, vocab %d padded to %d, context %d)\n",
        r.model_type.c_str(), r.num_params, r.config.n_layer, r.config.n_head, r.config.n_embd,
        r.config.vocab_size, r.config.padded_vocab_size, r.config.block_size);
    std::printf("tensors: %s", dtypes.c_str());
    if (!r.ignored.empty()) std::printf("; %zu mask buffer(s) ignored", r.ignored.size());
    for (const auto& t : r.tied_copies) std::printf("; %s checked equal to its tied source", t.c_str());
    std::printf("\nwrote %s (weights only, step 0): use it with generate, eval or train --init-from\n",
                o.out.c_str());
  } else {
    const HfExportResult r = export_hf_folder(o.to_hf, o.out, o.vocab_dir);
    std::printf("exported %s: %zu parameters (GPT2LMHeadModel, vocab %d)\n", r.checkpoint.c_str(),
                r.num_params, r.config.vocab_size);
    std::printf("wrote %s: config.json, model.safetensors%s\n", o.out.c_str(),
                r.tokenizer_files ? ", vocab.json, merges.txt" : "");
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
                  "--from-hf: pad the vocabulary in memory to a multiple of this (1 = off)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option(
      "--vocab-dir", o->vocab_dir,
      "--to-hf: folder with GPT-2's encoder.json and vocab.bpe, written as vocab.json and merges.txt "
      "(default: the installed vocabulary, when there is one)");
  cmd->callback([o, &exit_code]() {
    run_convert(*o);
    exit_code = 0;
  });
}

}  // namespace mptrain
