// `mptrain tokenizer`: BERT's WordPiece tokenizer from the command line.
//   train-wordpiece  build a vocab.txt from a corpus (data/wordpiece_trainer.h)
//   encode           ids (or tokens, --tokens) of text, one line per document or --text
//   decode           text of ids
//   show-instances   a BERT instance file's header and first instances, as the loader
//                    masks them (a look at what prepare --task bert made)
// (`mptrain tokenize` is GPT-2's byte-level BPE.)
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "cli/subcommands.h"
#include "cli/token_ids.h"
#include "cli/validators.h"
#include "data/bert_loader.h"
#include "data/prepare.h"
#include "data/wordpiece.h"
#include "data/wordpiece_trainer.h"
#include "io/fileutil.h"

namespace mptrain {

void register_tokenizer(CLI::App& app, int& exit_code) {
  struct Args {
    std::vector<std::string> inputs, excludes;
    std::string doc_delimiter, out, vocab, text;
    WordpieceTrainOptions train;
    bool cased = false, no_unused = false, tokens = false, special = false, skip_special = false;
    std::string instances;
    int count = 3, seq = 0;
    uint64_t seed = 1234;
  };
  auto a = std::make_shared<Args>();
  auto* tk = app.add_subcommand("tokenizer", "BERT's WordPiece tokenizer: train a vocab.txt, encode, decode");
  tk->require_subcommand(1);

  auto* tw =
      tk->add_subcommand("train-wordpiece", "Build a WordPiece vocab.txt from text (BPE-style merges)");
  tw->add_option("--input,inputs", a->inputs, "Text files, folders (searched recursively) or glob patterns")
      ->required();
  tw->add_option("--out,-o", a->out, "The vocab.txt to write")->required();
  tw->add_option("--vocab-size", a->train.vocab_size, "Tokens in the vocabulary, special tokens included")
      ->capture_default_str()
      ->check(cli::between(5, 65536));
  tw->add_option("--min-frequency", a->train.min_frequency, "Never merge a pair seen fewer times")
      ->capture_default_str()
      ->check(cli::at_least(1));
  tw->add_option("--doc-delimiter", a->doc_delimiter,
                 "Lines holding exactly this text are not text (e.g. '%')");
  tw->add_option("--exclude", a->excludes, "Skip files whose name matches this glob (repeatable)")
      ->allow_extra_args(false);
  tw->add_flag("--cased", a->cased, "Keep case and accents (a cased vocabulary)");
  tw->add_flag(
      "--no-unused", a->no_unused,
      "No [unused0..98] slots: [PAD] 0 [UNK] 1 [CLS] 2 [SEP] 3 [MASK] 4 (default: bert-base-uncased's "
      "layout, [PAD] 0 [UNK] 100 [CLS] 101 [SEP] 102 [MASK] 103)");
  tw->callback([a, &exit_code]() {
    a->train.basic.lower_case = !a->cased;
    if (a->no_unused) a->train.unused_tokens = 0;
    std::vector<std::string> texts;
    std::vector<std::string_view> docs;
    for (const auto& f : expand_inputs(a->inputs, a->excludes)) texts.push_back(read_text_file(f.path));
    for (const auto& t : texts)
      for (std::string_view d : split_documents(t, a->doc_delimiter)) docs.push_back(d);
    WordpieceTrainSummary sum;
    const WordpieceVocab vocab = train_wordpiece(docs, a->train, &sum);
    write_file_atomic(a->out, vocab.to_text());
    std::printf("%s\nwrote %s ([PAD] %d, [UNK] %d, [CLS] %d, [SEP] %d, [MASK] %d)\n", describe(sum).c_str(),
                a->out.c_str(), vocab.special().pad, vocab.special().unk, vocab.special().cls,
                vocab.special().sep, vocab.special().mask);
    exit_code = 0;
  });

  auto* te = tk->add_subcommand("encode", "WordPiece ids of text: --text, or one line per document of files");
  te->add_option("--vocab", a->vocab, "The vocab.txt")->required();
  te->add_option("inputs", a->inputs, "Text files, folders or glob patterns");
  te->add_option("--text", a->text, "Text to encode");
  te->add_option("--doc-delimiter", a->doc_delimiter,
                 "Documents are separated by lines holding exactly this text");
  te->add_flag("--tokens", a->tokens, "Print the tokens instead of their ids");
  te->add_flag("--special", a->special,
               "Treat [PAD] [UNK] [CLS] [SEP] [MASK] in the text as the special tokens");
  te->add_flag("--cased", a->cased, "A cased vocabulary: keep case and accents");
  te->callback([a, &exit_code]() {
    if (a->inputs.empty() && a->text.empty()) throw Error("tokenizer encode: give --text or files of text");
    BasicTokenizerOptions basic;
    basic.lower_case = !a->cased;
    const WordpieceTokenizer tok = WordpieceTokenizer::load(a->vocab, basic);
    auto print = [&](std::string_view text) {
      const auto ids = tok.encode(text, a->special ? BertSpecialText::kRecognize : BertSpecialText::kAsText);
      std::string line;
      for (size_t i = 0; i < ids.size(); ++i)
        line += (i ? " " : "") + (a->tokens ? tok.vocab().token(ids[i]) : std::to_string(ids[i]));
      std::puts(line.c_str());
    };
    if (!a->text.empty()) print(a->text);
    for (const auto& f : a->inputs.empty() ? std::vector<TextFile>{} : expand_inputs(a->inputs, {})) {
      const std::string text = read_text_file(f.path);
      for (std::string_view d : split_documents(text, a->doc_delimiter)) print(d);
    }
    exit_code = 0;
  });

  auto* td = tk->add_subcommand("decode", "Text of WordPiece ids (## pieces joined to the token before)");
  td->add_option("--vocab", a->vocab, "The vocab.txt")->required();
  td->add_option("--text", a->text, "Ids separated by spaces or commas")->required();
  td->add_flag("--skip-special", a->skip_special, "Drop [PAD] [CLS] [SEP] [MASK] and [unusedN]");
  td->callback([a, &exit_code]() {
    const WordpieceTokenizer tok = WordpieceTokenizer::load(a->vocab);
    std::puts(tok.decode(parse_token_ids(a->text, "tokenizer decode"), a->skip_special).c_str());
    exit_code = 0;
  });

  auto* ts =
      tk->add_subcommand("show-instances", "Header and first instances of a BERT instance file, masked");
  ts->add_option("file", a->instances, "An instance file (mptrain prepare --task bert)")->required();
  ts->add_option("-n,--count", a->count, "Instances to show")
      ->capture_default_str()
      ->check(cli::at_least(0));
  ts->add_option("--seq", a->seq,
                 "Check against this model sequence length (default: the file's max_seq_len)")
      ->check(cli::at_least(1));
  ts->add_option("--seed", a->seed, "Masking seed")->capture_default_str();
  ts->callback([a, &exit_code]() {
    const BertInstanceFile file(a->instances);
    const int T = a->seq > 0 ? a->seq : file.max_seq_len();
    BertMaskingOptions mask;
    mask.seed = a->seed;
    mask.shuffle = false;
    BertLoader loader(a->instances, 1, T, file.vocab().size(), mask);
    const auto& h = file.header();
    size_t not_next = 0, tokens = 0;
    for (size_t i = 0; i < file.size(); ++i) {
      not_next += static_cast<size_t>(file.nsp_label(i));
      tokens += file.tokens(i).size();
    }
    std::printf(
        "%s: %zu instances (%zu tokens, %.1f per instance, NotNext %.1f%%), max_seq_len %u, vocabulary %u "
        "(%s), from %u documents x dupe_factor %u, seed %llu\n",
        a->instances.c_str(), file.size(), tokens, file.size() ? double(tokens) / file.size() : 0.0,
        file.size() ? 100.0 * not_next / file.size() : 0.0, h.max_seq_len, h.vocab_size,
        file.lower_case() ? "uncased" : "cased", h.num_documents, h.dupe_factor,
        static_cast<unsigned long long>(h.seed));
    const WordpieceTokenizer tok(file.vocab());
    BertBatch batch;
    for (int i = 0; i < a->count && static_cast<size_t>(i) < file.size(); ++i) {
      loader.next(batch);
      const auto t = file.tokens(static_cast<size_t>(i));
      const std::vector<int> orig(t.begin(), t.end());
      const std::vector<int> masked(batch.input_ids.begin(), batch.input_ids.begin() + batch.lengths[0]);
      std::printf("[%d] %s\n    text:   %s\n    masked: %s\n", i, batch.nsp_labels[0] ? "NotNext" : "IsNext",
                  tok.decode(orig).c_str(), tok.decode(masked).c_str());
    }
    exit_code = 0;
  });
}

}  // namespace mptrain
