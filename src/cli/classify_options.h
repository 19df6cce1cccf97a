// The columns of a labelled classification file (data/classify_data.h), as train --task
// classify, eval and predict read them, and the classifier a checkpoint holds for eval and
// predict: its model on the device, its tokenizer and label names.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cli/device_options.h"
#include "data/classify_data.h"
#include "data/wordpiece.h"
#include "model/bert.h"

namespace mptrain {

// --text-column, --text-b-column, --label-column (`label_help` says what it is for) and --no-header.
void add_classify_columns(CLI::App* cmd, ClassifyColumns* columns, bool* header,
                          const std::string& label_help);

// A fine-tuned checkpoint's classifier on `device`, planned for B examples of at most T tokens.
struct LoadedClassifier {
  std::unique_ptr<Bert> model;
  std::unique_ptr<WordpieceTokenizer> tokenizer;
  std::vector<std::string> labels;  // by class id; "0", "1", ... when the checkpoint names none
};
LoadedClassifier load_classifier(const std::string& dir, int B, int T, const DeviceOptions& device,
                                 Precision precision, std::string_view command);

}  // namespace mptrain
