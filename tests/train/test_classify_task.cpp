// `mptrain train --task classify` (train/classify_task.h) through the CLI: a small labelled task
// (which of three words a line holds) fine-tuned from a BERT body pretrained a few steps on a
// fortune file, from random weights, and from its own best checkpoint; the best weights and the
// confusion matrix kept; --resume continuing the run exactly; bad input one clear error.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/test_util.h"
#include "eval/classify_eval.h"
#include "train/train_test_util.h"

namespace mptrain {
namespace {

using testing::expect_clear_error;
using testing::run_mptrain;

TEST(ClassifyScores, AccuracyMacroF1AndConfusionAsScikitLearnCountsThem) {
  // F1 per class: 0 -> 2/4, 1 -> 4/5, 2 -> 0 (in the labels, never predicted); 3 appears in
  // neither and is left out of the mean, as f1_score(average="macro") leaves it out.
  const ClassifyScores s = classify_scores({0, 0, 1, 1, 2}, {0, 1, 1, 1, 0}, 4);
  EXPECT_DOUBLE_EQ(s.accuracy, 0.6);
  EXPECT_NEAR(s.macro_f1, (0.5 + 0.8 + 0.0) / 3, 1e-12);
  EXPECT_EQ(s.confusion[0][1], 1);
  EXPECT_EQ(s.confusion[2][0], 1);
  EXPECT_EQ(s.confusion[1][1], 2);
}

class ClassifyTask : public testing::BertDataSuite {
 protected:
  static void SetUpTestSuite() {
    BertDataSuite::SetUpTestSuite();
    if (!tmp_) return;
    // The body: bert-tiny after a few pretraining steps on the fortune file.
    const auto pre = run_mptrain("train --model bert --preset bert-tiny --data " + data() +
                                 " --batch 8 --steps 3 --progress none --run-dir " + run_dir("pre"));
    ASSERT_EQ(pre.exit_code, 0) << pre.output;
    // Which of three words a line holds, among words of the fortune file's own vocabulary.
    const char* words[] = {"computer", "program", "system"};
    const char* filler[] = {"the", "a", "is", "of", "and", "to", "it", "in", "you", "that"};
    for (const char* split : {"train", "validation"}) {
      std::ofstream out(*tmp_ / (std::string(split) + ".tsv"));
      out << "sentence\tlabel\n";
      const int n = split == std::string("train") ? 300 : 60, salt = split == std::string("train") ? 0 : 7;
      for (int i = 0; i < n; ++i) {
        const int label = (i * 7 + salt) % 3;
        std::string text;
        for (int w = 0; w < 6; ++w) {
          if (w == (i + salt) % 6) text += std::string(words[label]) + " ";
          text += std::string(filler[(i * 3 + w * 5 + salt) % 10]) + " ";
        }
        out << text << "\t" << words[label] << "\n";
      }
    }
    std::ofstream(*tmp_ / "labels.txt") << "computer\nprogram\nsystem\n";
  }
  static std::string task_args() {
    return "train --task classify --data " + (*tmp_ / "train.tsv") + " --val-data " +
           (*tmp_ / "validation.tsv") + " --labels " + (*tmp_ / "labels.txt") +
           " --batch 16 --seq 32 --lr 1e-3 --warmup 5 --progress none";
  }
  static nlohmann::json last_record(const std::string& run) {
    std::ifstream in(run + "/metrics.jsonl");
    std::string line, last;
    while (std::getline(in, line)) last = line;
    return nlohmann::json::parse(last);
  }
};

TEST_F(ClassifyTask, FineTunesABodyAndKeepsTheBestWeights) {
  const std::string run = run_dir("from-body");
  const auto r = run_mptrain(task_args() + " --init-from " + run_dir("pre") +
                             " --steps 60 --val-every 20 --run-dir " + run);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("BertForSequenceClassification, 3 classes"), std::string::npos) << r.output;
  EXPECT_NE(
      r.output.find("newly initialised (not in the checkpoint's body): classifier.weight, classifier.bias"),
      std::string::npos)
      << "the MLM-and-NSP body has a pooler: only the classifier is new\n"
      << r.output;
  const nlohmann::json rec = last_record(run);
  std::printf("[classify from a body] val acc %.3f, macro-F1 %.3f\n", rec["val_acc"].get<double>(),
              rec["val_macro_f1"].get<double>());
  EXPECT_GT(rec["val_acc"].get<double>(), 0.8) << rec.dump();
  // The best weights: a Hugging Face BertForSequenceClassification folder with the names.
  std::ifstream cfg(run + "/best/config.json");
  const nlohmann::json c = nlohmann::json::parse(cfg);
  EXPECT_EQ(c["architectures"][0], "BertForSequenceClassification");
  EXPECT_EQ(c["id2label"]["1"], "program");
  EXPECT_EQ(c["label2id"]["system"], 2);
  std::ifstream conf(run + "/confusion.json");
  const nlohmann::json m = nlohmann::json::parse(conf);
  EXPECT_EQ(m["labels"][0], "computer");
  int64_t total = 0;
  for (const auto& row : m["confusion"])
    for (const auto& v : row) total += v.get<int64_t>();
  EXPECT_EQ(total, 60);
  // eval scores the best weights as validation did; predict writes a label per example.
  const auto ev =
      run_mptrain("eval --checkpoint " + run + "/best --data " + (*tmp_ / "validation.tsv") + " --seq 32");
  ASSERT_EQ(ev.exit_code, 0) << ev.output;
  char acc[32];
  std::snprintf(acc, sizeof(acc), "accuracy %.4f", m["accuracy"].get<double>());
  EXPECT_NE(ev.output.find(std::string("60 examples | loss ")), std::string::npos) << ev.output;
  EXPECT_NE(ev.output.find(acc), std::string::npos) << acc << "\n" << ev.output;
  EXPECT_NE(ev.output.find("confusion (rows: true label"), std::string::npos) << ev.output;
  const auto pr = run_mptrain("predict --checkpoint " + run + "/best --data " + (*tmp_ / "validation.tsv") +
                              " --seq 32 --label-column label -o " + (*tmp_ / "predictions.tsv"));
  ASSERT_EQ(pr.exit_code, 0) << pr.output;
  EXPECT_NE(pr.output.find("60 examples | " + std::string(acc)), std::string::npos) << pr.output;
  std::ifstream preds(*tmp_ / "predictions.tsv");
  std::vector<std::string> lines;
  for (std::string line; std::getline(preds, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 61u);
  EXPECT_EQ(lines[0], "prediction\tprobability");
  EXPECT_TRUE(lines[1].starts_with("computer\t") || lines[1].starts_with("program\t") ||
              lines[1].starts_with("system\t"))
      << lines[1];
  // The best weights go on as a classifier (its classes kept), and a task of other classes is refused.
  const auto more =
      run_mptrain(task_args() + " --init-from " + run + "/best --steps 2 --run-dir " + run_dir("more"));
  EXPECT_EQ(more.exit_code, 0) << more.output;
  EXPECT_EQ(more.output.find("newly initialised"), std::string::npos) << more.output;
  expect_clear_error(
      run_mptrain("train --task classify --data " + (*tmp_ / "train.tsv") + " --num-labels 4 --init-from " +
                  run + "/best --steps 2 --progress none --run-dir " + run_dir("four")),
      "classifies into 3 classes, this task 4");
}

// A Hugging Face BertForPreTraining folder (the body exported) is a starting point as it is.
TEST_F(ClassifyTask, StartsFromAHuggingFaceFolder) {
  const auto hf = run_mptrain("convert --to-hf " + run_dir("pre") + " -o " + run_dir("hf"));
  ASSERT_EQ(hf.exit_code, 0) << hf.output;
  const auto r = run_mptrain(task_args() + " --init-from " + run_dir("hf") + " --steps 2 --run-dir " +
                             run_dir("from-hf"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("imported the Hugging Face folder"), std::string::npos) << r.output;
  EXPECT_NE(
      r.output.find("newly initialised (not in the checkpoint's body): classifier.weight, classifier.bias"),
      std::string::npos)
      << r.output;
}

TEST_F(ClassifyTask, RandomWeightsNeedAVocabularyAndRunInBf16) {
  expect_clear_error(run_mptrain(task_args() + " --steps 2 --run-dir " + run_dir("novocab")),
                     "no vocabulary");
  const auto r = run_mptrain(task_args() + " --preset bert-tiny --vocab " + (*tmp_ / "data/b_vocab.txt") +
                             " --precision bf16 --steps 4 --val-every 2 --run-dir " + run_dir("random"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("model bert-tiny"), std::string::npos) << r.output;
}

TEST_F(ClassifyTask, ResumeContinuesTheRunExactly) {
  const std::string args = task_args() + " --init-from " + run_dir("pre") +
                           " --steps 12 --save-every 6 --threads 1 --deterministic";
  const auto whole = run_mptrain(args + " --run-dir " + run_dir("whole"));
  ASSERT_EQ(whole.exit_code, 0) << whole.output;
  const auto resumed = run_mptrain(
      task_args() + " --resume " + run_dir("whole") +
      "/step_00000006 --steps 12 --save-every 6 --threads 1 --deterministic --run-dir " + run_dir("resumed"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  const auto a = testing::read_losses(run_dir("whole")), b = testing::read_losses(run_dir("resumed"));
  ASSERT_EQ(a.size(), 12u);
  ASSERT_EQ(b.size(), 6u);
  for (size_t i = 0; i < b.size(); ++i) {
    EXPECT_EQ(b[i].first, a[i + 6].first);
    EXPECT_EQ(b[i].second, a[i + 6].second) << "step " << b[i].first;
  }
}

TEST_F(ClassifyTask, BadLabelsAndOptionsAreOneClearError) {
  std::ofstream(*tmp_ / "bad.tsv") << "sentence\tlabel\nthe computer\tcomputer\nthe printer\tprinter\n";
  expect_clear_error(run_mptrain("train --task classify --data " + (*tmp_ / "bad.tsv") + " --labels " +
                                 (*tmp_ / "labels.txt") + " --init-from " + run_dir("pre") +
                                 " --steps 1 --progress none --run-dir " + run_dir("bad")),
                     "printer");
  expect_clear_error(run_mptrain("train --task classify --data " + (*tmp_ / "train.tsv") + " --labels " +
                                 (*tmp_ / "labels.txt") + " --num-labels 3 --init-from " + run_dir("pre") +
                                 " --steps 1 --progress none --run-dir " + run_dir("both")),
                     "give --labels or --num-labels, not both");
  expect_clear_error(run_mptrain("train --task classify --model gpt2 --data " + (*tmp_ / "train.tsv") +
                                 " --steps 1 --progress none --run-dir " + run_dir("gpt2")),
                     "--task classify fine-tunes BERT");
}

}  // namespace
}  // namespace mptrain
