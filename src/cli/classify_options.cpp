// The classification files' columns and a checkpoint's classifier (cli/classify_options.h).
#include "cli/classify_options.h"

#include "core/error.h"
#include "train/bert_checkpoint.h"

namespace mptrain {

void add_classify_columns(CLI::App* cmd, ClassifyColumns* columns, bool* header,
                          const std::string& label_help) {
  cmd->add_option("--text-column", columns->text, "The text's column (TSV header or JSON key)")
      ->capture_default_str();
  cmd->add_option("--text-b-column", columns->text_b,
                  "The second text's column for sentence pairs (MRPC, QNLI); empty: single sentences");
  cmd->add_option("--label-column", columns->label, label_help)->capture_default_str();
  cmd->add_flag(
      "--no-header", [header](std::int64_t) { *header = false; },
      "TSV files without a header line (columns named 0, 1, ...)");
}

LoadedClassifier load_classifier(const std::string& dir, int B, int T, const DeviceOptions& device,
                                 Precision precision, std::string_view command) {
  const BertConfig config = load_bert_checkpoint_config(dir);
  MPT_CHECK(config.num_labels > 0, "checkpoint '" + dir + "' is a " + bert_hf_architecture(config) +
                                       ", not a classifier: fine-tune it with train --task classify");
  MPT_CHECK(T <= config.max_position, "--seq " + std::to_string(T) + " is longer than the BERT model's " +
                                          std::to_string(config.max_position) + " positions");
  LoadedClassifier c;
  c.tokenizer = std::make_unique<WordpieceTokenizer>(WordpieceTokenizer::load(
      bert_checkpoint_vocab(dir), BasicTokenizerOptions{.lower_case = bert_checkpoint_lower_case(dir)}));
  c.labels = bert_checkpoint_labels(dir);
  for (int i = static_cast<int>(c.labels.size()); i < config.num_labels; ++i)
    c.labels.push_back(std::to_string(i));
  ModelBackend on = model_backend(device, precision, command);
  c.model = std::make_unique<Bert>(config, std::move(on.backend), on.policy);
  load_bert_checkpoint_model(dir, *c.model);
  c.model->plan(B, T);
  return c;
}

}  // namespace mptrain
