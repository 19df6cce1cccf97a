// `mptrain fill-mask`: a BERT checkpoint's top-k predictions for each [MASK] in a text, with
// their probabilities (Hugging Face's fill-mask pipeline: [CLS] text [SEP], one segment, the
// softmax over the vocabulary at each masked position).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "cli/device_options.h"
#include "cli/validators.h"
#include "precision/precision.h"
#include "cli/subcommands.h"
#include "data/wordpiece.h"
#include "io/checkpoint_dir.h"
#include "model/bert.h"
#include "train/bert_checkpoint.h"

namespace mptrain {

namespace {

struct FillMaskOptions {
  std::string checkpoint;
  std::string text;
  std::string vocab;  // default: the checkpoint's vocab.txt
  int top_k = 5;
  Precision precision = Precision::Fp32;
  DeviceOptions device;
};

void run_fill_mask(const FillMaskOptions& o) {
  MPT_CHECK(o.top_k > 0, "--top-k must be positive");
  const std::string dir = resolve_checkpoint(o.checkpoint);
  const BertConfig config = load_bert_checkpoint_config(dir);
  BasicTokenizerOptions basic;
  basic.lower_case = bert_checkpoint_lower_case(dir);
  const WordpieceTokenizer tok =
      WordpieceTokenizer::load(o.vocab.empty() ? bert_checkpoint_vocab(dir) : o.vocab, basic);
  MPT_CHECK(tok.vocab_size() <= config.vocab_size,
            "the vocabulary has " + std::to_string(tok.vocab_size()) + " tokens, more than the model's " +
                std::to_string(config.vocab_size));
  const BertSpecialIds sp = tok.special();

  std::vector<int> ids{sp.cls};
  tok.encode(o.text, ids, BertSpecialText::kRecognize);
  ids.push_back(sp.sep);
  const int T = static_cast<int>(ids.size());
  MPT_CHECK(T <= config.max_position, "the text is " + std::to_string(T) + " tokens with [CLS] and [SEP], more than the "
                                          "model's " + std::to_string(config.max_position) + " positions");
  // The label at a masked position only marks it for the head (any valid id will do).
  std::vector<int> labels(T, -1);
  for (int t = 0; t < T; ++t)
    if (ids[t] == sp.mask) labels[t] = 0;
  MPT_CHECK(std::count(ids.begin(), ids.end(), sp.mask) > 0, "no [MASK] in the text: write [MASK] where a word is missing");

  ModelBackend on = model_backend(o.device, o.precision, "fill-mask");
  Bert model(config, std::move(on.backend), on.policy);
  load_bert_checkpoint_model(dir, model);
  model.plan(1, T);
  const BertInputs in{ids.data(), nullptr, nullptr, labels.data(), nullptr};
  const BertStats st = model.forward(in, 1, T);
  const int V = config.vocab_size, Vp = config.padded_vocab_size, k = std::min(o.top_k, tok.vocab_size());

  std::printf("%s\n", o.text.c_str());
  for (int m = 0; m < st.mlm_count; ++m) {
    const float* logits = model.mlm_logits() + static_cast<size_t>(m) * Vp;
    // softmax over the real vocabulary, in double for the printed probabilities
    const float mx = *std::max_element(logits, logits + V);
    double sum = 0.0;
    for (int v = 0; v < V; ++v) sum += std::exp(static_cast<double>(logits[v] - mx));
    // Candidates are the ids the vocabulary can spell: an imported model may have more rows
    // than its vocab.txt has tokens (those rows still count in the softmax's denominator).
    std::vector<int> order(tok.vocab_size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    if (st.mlm_count > 1) std::printf("[MASK] %d of %d:\n", m + 1, st.mlm_count);
    for (int r = 0; r < k; ++r) {
      const int id = order[r];
      const double p = std::exp(static_cast<double>(logits[id] - mx)) / sum;
      std::vector<int> filled(ids.begin() + 1, ids.end() - 1);
      filled[model.mlm_positions()[m] - 1] = id;
      std::printf("  %2d  %-16s %.4f  %s\n", r + 1, tok.vocab().token(id).c_str(), p, tok.decode(filled).c_str());
    }
  }
}

}  // namespace

void register_fill_mask(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand("fill-mask", "Predict the words behind [MASK] with a BERT checkpoint");
  auto opt = std::make_shared<FillMaskOptions>();
  cmd->add_option("--checkpoint", opt->checkpoint, "BERT checkpoint or run directory")->required();
  cmd->add_option("text", opt->text, "Text with one or more [MASK], e.g. \"the [MASK] of the land\"")->required();
  cmd->add_option("-k,--top-k", opt->top_k, "Predictions per [MASK]")->capture_default_str();
  cmd->add_option("--vocab", opt->vocab, "WordPiece vocab.txt (default: the checkpoint's)");
  cli::add_precision_option(cmd, &opt->precision, "Forward precision: fp32, tf32, bf16 or fp16");
  add_device_options(cmd, &opt->device);
  cmd->callback([opt, &exit_code]() {
    run_fill_mask(*opt);
    exit_code = 0;
  });
}

}  // namespace mptrain
