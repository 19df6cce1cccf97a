// `mptrain predict`: a fine-tuned classifier's label for each example of a TSV or JSONL file
// (labelled or not), with its probability, one line each in the file's order.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <memory>

#include "cli/classify_options.h"
#include "cli/subcommands.h"
#include "cli/validators.h"
#include "eval/classify_eval.h"
#include "io/checkpoint_dir.h"
#include "precision/precision.h"

namespace mptrain {

namespace {

struct PredictOptions {
  std::string checkpoint, data, output;
  ClassifyColumns columns{.text = "sentence", .text_b = "", .label = ""};
  bool header = true;
  int batch = 32, seq = 128;
  Precision precision = Precision::Fp32;
  DeviceOptions device;
};

void run_predict(const PredictOptions& o) {
  const std::string dir = resolve_checkpoint(o.checkpoint);
  LoadedClassifier c = load_classifier(dir, o.batch, o.seq, o.device, o.precision, "predict");
  ClassifyReadOptions read{o.columns, o.header, c.model->config().num_labels, c.labels, o.seq};
  const std::vector<ClassifyExample> examples = read_classify_file(o.data, *c.tokenizer, read);
  const ClassifyEval e = evaluate_classifier(*c.model, examples, o.batch, o.seq);
  std::ofstream file;
  if (!o.output.empty()) {
    file.open(o.output);
    MPT_CHECK(file.good(), "cannot write '" + o.output + "'");
  }
  std::string text = "prediction\tprobability\n";
  for (size_t i = 0; i < e.predicted.size(); ++i)
    text += c.labels[static_cast<size_t>(e.predicted[i])] + "\t" + std::to_string(e.probability[i]) + "\n";
  if (file.is_open()) {
    file << text;
    MPT_CHECK(file.good(), "writing '" + o.output + "' failed");
  } else {
    std::fputs(text.c_str(), stdout);
  }
  if (!o.columns.label.empty())
    std::fprintf(o.output.empty() ? stderr : stdout, "%zu examples | accuracy %.4f | macro-F1 %.4f\n",
                 examples.size(), e.scores.accuracy, e.scores.macro_f1);
}

}  // namespace

void register_predict(CLI::App& app, int& exit_code) {
  auto* cmd = app.add_subcommand(
      "predict", "A fine-tuned BERT classifier's label and probability for each example of a TSV/JSONL file");
  auto o = std::make_shared<PredictOptions>();
  cmd->add_option("--checkpoint", o->checkpoint,
                  "A classifier's checkpoint or run directory (e.g. runs/x/best)")
      ->required();
  cmd->add_option("--data", o->data, "Examples: TSV (a header names the columns) or .jsonl")->required();
  add_classify_columns(cmd, &o->columns, &o->header,
                       "The label's column, to score the predictions too (default: none, unlabelled)");
  cmd->add_option("-o,--output", o->output, "Write the predictions here (default: standard output)");
  cmd->add_option("-b,--batch", o->batch, "Examples per batch")
      ->capture_default_str()
      ->check(cli::at_least(1));
  cmd->add_option("-t,--seq", o->seq,
                  "Tokens per example at most ([CLS] and [SEP] included; longer ones truncated)")
      ->capture_default_str()
      ->check(cli::at_least(3));
  cli::add_precision_option(cmd, &o->precision, "Forward precision: fp32, tf32, bf16 or fp16");
  add_device_options(cmd, &o->device);
  cmd->callback([o, &exit_code]() {
    run_predict(*o);
    exit_code = 0;
  });
}

}  // namespace mptrain
