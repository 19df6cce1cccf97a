// `mptrain tokenizer`: BERT's WordPiece tokenizer from the command line.
//   train-wordpiece  build a vocab.txt from a corpus (data/wordpiece_trainer.h)
//   encode           ids (or tokens, --tokens) of text, one line per document or --text
//   decode           text of ids
// (`mptrain tokenize` is GPT-2's byte-level BPE.)
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <sstream>

#include "cli/subcommands.h"
#include "data/prepare.h"
#include "data/wordpiece.h"
#include "data/wordpiece_trainer.h"
#include "io/fileutil.h"

namespace mptrain {

namespace {

std::vector<int> parse_ids(const std::string& text) {
  std::string spaced = text;
  for (char& c : spaced)
    if (c == ',') c = ' ';
  std::istringstream in(spaced);
  std::vector<int> ids;
  std::string word;
  while (in >> word) {
    size_t used = 0;
    int id = -1;
    try {
      id = std::stoi(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size()) throw Error("tokenizer decode: '" + word + "' is not a token id");
    ids.push_back(id);
  }
  return ids;
}

}  // namespace

void register_tokenizer(CLI::App& app, int& exit_code) {
  struct Args {
    std::vector<std::string> inputs, excludes;
    std::string doc_delimiter, out, vocab, text;
    WordpieceTrainOptions train;
    bool cased = false, no_unused = false, tokens = false, special = false, skip_special = false;
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
      ->check(CLI::Range(5, 65536));
  tw->add_option("--min-frequency", a->train.min_frequency, "Never merge a pair seen fewer times")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
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
    std::puts(tok.decode(parse_ids(a->text), a->skip_special).c_str());
    exit_code = 0;
  });
}

}  // namespace mptrain
