// `mptrain tokenize`: GPT-2 token ids of text (one line of ids per document), the
// text of ids (--decode), or the tokenizer benchmark against the npm encoder (--bench).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/subcommands.h"
#include "cli/token_ids.h"
#include "cli/validators.h"
#include "data/gpt2_tokenizer.h"
#include "data/prepare.h"
#include "data/tokenizer_bench.h"

namespace mptrain {

void register_tokenize(CLI::App& app, int& exit_code) {
  struct Args {
    std::vector<std::string> inputs, excludes;
    std::string text, doc_delimiter, vocab_dir, npm_script;
    bool decode = false, bench = false, no_npm = false, allow_eot = false;
    int threads = 0, rounds = 3;
  };
  auto a = std::make_shared<Args>();
  auto* cmd = app.add_subcommand("tokenize",
                                 "GPT-2 token ids of text, text of ids (--decode), or the tokenizer "
                                 "benchmark against the npm encoder (--bench)");
  cmd->add_option("inputs", a->inputs, "Text files, folders or glob patterns");
  cmd->add_option("--text", a->text, "Text to encode (with --decode: ids separated by spaces or commas)");
  cmd->add_flag("--decode", a->decode, "Decode the ids given with --text and write their bytes to stdout");
  cmd->add_flag(
      "--allow-special,--allow-eot", a->allow_eot,
      "Treat the tokenizer's special tokens in the text (\"<|endoftext|>\", 50256; a tokenizer.json's "
      "added tokens) as those tokens");
  cmd->add_option("--doc-delimiter", a->doc_delimiter,
                  "Documents are separated by lines holding exactly this text");
  cmd->add_option("--exclude", a->excludes, "Skip files whose name matches this glob (repeatable)")
      ->allow_extra_args(false);
  cmd->add_option("--vocab-dir", a->vocab_dir, "Folder with GPT-2's encoder.json and vocab.bpe");
  cmd->add_flag(
      "--bench", a->bench,
      "Measure encode MB/s on 1 thread and on every core, and the npm encoder's on the same documents");
  cmd->add_option("--threads", a->threads, "Threads for the benchmark's all-cores row (0: every core)")
      ->check(cli::at_least(0));
  cmd->add_option(
         "--rounds,--repeat", a->rounds,
         "Benchmark rounds, alternated (mptrain 1 thread, every core, npm); each side's median counts")
      ->capture_default_str()
      ->check(cli::at_least(1));
  cmd->add_flag("--no-npm", a->no_npm, "Benchmark without the npm encoder");
  cmd->add_option("--npm-script", a->npm_script, "The node driver (default: bench/npm_encode.js)");
  cmd->callback([a, &exit_code]() {
    const std::string vocab_dir = find_vocab_dir(a->vocab_dir, nullptr);
    const Gpt2Tokenizer tok = Gpt2Tokenizer::load(vocab_dir);
    if (a->bench) {
      if (a->inputs.empty()) throw Error("tokenize --bench: name the files of text to encode");
      TokenizerBenchOptions o;
      o.inputs = a->inputs;
      o.excludes = a->excludes;
      o.doc_delimiter = a->doc_delimiter;
      o.threads = a->threads;
      o.rounds = a->rounds;
      o.npm = !a->no_npm;
      o.npm_script = a->npm_script;
      o.npm_package = vocab_dir;
      run_tokenizer_bench(tok, o, stdout);
      exit_code = 0;
      return;
    }
    if (a->decode) {
      const std::vector<int> ids = parse_token_ids(a->text, "tokenize --decode");
      std::string bytes = tok.decode(ids);
      std::fwrite(bytes.data(), 1, bytes.size(), stdout);
      exit_code = 0;
      return;
    }
    if (a->inputs.empty() && a->text.empty()) throw Error("tokenize: give --text or files of text");
    const SpecialTokens special = a->allow_eot ? SpecialTokens::kAllowSpecial : SpecialTokens::kAsText;
    Gpt2Encoder enc(tok);
    auto print = [&](std::string_view text) {
      std::vector<int> ids;
      enc.encode(text, ids, special);
      std::string line;
      for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
      std::puts(line.c_str());
    };
    if (!a->text.empty()) print(a->text);
    if (!a->inputs.empty()) {
      for (const auto& f : expand_inputs(a->inputs, a->excludes)) {
        const std::string text = read_text_file(f.path);
        for (std::string_view d : split_documents(text, a->doc_delimiter)) print(d);
      }
    }
    exit_code = 0;
  });
}

}  // namespace mptrain
